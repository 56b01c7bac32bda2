// Included by rewrite_launches.py after <cassert> in a kernel file: assert() in device code
// is the device assert of the host execution layer (../cuda_host.h), active under NDEBUG too
// when the file asks for it by undefining NDEBUG, as cuda_index_select.cu does.
#pragma once

#include "cuda_host.h"

#undef assert
#define assert(e) \
  (static_cast<bool>(e) ? void(0) : ::ember_cuda_host::device_assert_fail(#e, __FILE__, __LINE__, __func__))
