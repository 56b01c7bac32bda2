// Stand-in for cuBLAS's header in the host execution layer (see ../cuda_host.h): the
// status type cuda_check.h names. cuBLAS itself stays GPU-only.
#pragma once

enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0 };
const char* cublasGetStatusString(cublasStatus_t status);
