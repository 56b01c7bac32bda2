// The driver backend's NCCL communicators (backends/cuda/nccl_communicator.h).
#include "backends/cuda/nccl_communicator.h"

#include <nccl.h>

#include <cstring>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "ember/errors.h"

namespace ember::detail::nccl {
namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(UniqueId));

void check_nccl(ncclResult_t result, const char* op) {
  if (result != ncclSuccess) [[unlikely]] {
    const char* last = ncclGetLastError(nullptr);
    fail<DistributedError>("NCCL error in ", op, ": ", ncclGetErrorString(result),
                           last && *last ? std::string(" (") + last + ")" : std::string());
  }
}

struct NcclType {
  ncclDataType_t type;
  size_t count_scale;  // complex: two reals per element
};

NcclType nccl_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8: return {ncclUint8, 1};
    case DType::Int8: return {ncclInt8, 1};
    case DType::Int32: return {ncclInt32, 1};
    case DType::Int64: return {ncclInt64, 1};
    case DType::Float16: return {ncclFloat16, 1};
    case DType::BFloat16: return {ncclBfloat16, 1};
    case DType::Float32: return {ncclFloat32, 1};
    case DType::Float64: return {ncclFloat64, 1};
    case DType::Complex64: return {ncclFloat32, 2};
    case DType::Complex128: return {ncclFloat64, 2};
    default: break;
  }
  fail<TypeError>(op, ": the nccl backend does not support ", dtype_name(dtype), " tensors");
}

ncclRedOp_t nccl_op(Reduction op) {
  switch (op) {
    case Reduction::Sum: return ncclSum;
    case Reduction::Avg: return ncclAvg;
    case Reduction::Product: return ncclProd;
    case Reduction::Min: return ncclMin;
    case Reduction::Max: return ncclMax;
  }
  return ncclSum;
}

ncclComm_t as_comm(void* comm) { return static_cast<ncclComm_t>(comm); }
cudaStream_t as_stream(BackendStream* stream) { return driver::as_driver(stream).handle; }

}  // namespace

void require_built() {}

UniqueId make_unique_id() {
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  UniqueId bytes;
  std::memcpy(bytes.data(), &id, sizeof(id));
  return bytes;
}

void check_dtype(DType dtype, const char* collective) { (void)nccl_type(dtype, collective); }

Communicator::Communicator(const UniqueId& id, int world_size, int rank, int device) : device_(device) {
  ncclUniqueId nccl_id;
  std::memcpy(&nccl_id, id.data(), sizeof(nccl_id));
  driver::DeviceScope scope(device);
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, world_size, nccl_id, rank), "init_process_group (ncclCommInitRank)");
  comm_ = comm;
}

Communicator::~Communicator() {
  if (!aborted_) ncclCommDestroy(as_comm(comm_));
}

void Communicator::abort() noexcept {
  aborted_ = true;
  ncclCommAbort(as_comm(comm_));
}

void Communicator::all_reduce(void* data, size_t count, DType dtype, Reduction op, BackendStream* stream,
                              const char* collective) {
  NcclType type = nccl_type(dtype, collective);
  driver::DeviceScope scope(device_);
  check_nccl(
      ncclAllReduce(data, data, count * type.count_scale, type.type, nccl_op(op), as_comm(comm_), as_stream(stream)),
      collective);
}

void Communicator::broadcast(const void* send, void* receive, size_t count, DType dtype, int root,
                             BackendStream* stream, const char* collective) {
  NcclType type = nccl_type(dtype, collective);
  driver::DeviceScope scope(device_);
  check_nccl(ncclBroadcast(send, receive, count * type.count_scale, type.type, root, as_comm(comm_), as_stream(stream)),
             collective);
}

void Communicator::reduce(const void* send, void* receive, size_t count, DType dtype, Reduction op, int root,
                          BackendStream* stream, const char* collective) {
  NcclType type = nccl_type(dtype, collective);
  driver::DeviceScope scope(device_);
  check_nccl(ncclReduce(send, receive, count * type.count_scale, type.type, nccl_op(op), root, as_comm(comm_),
                        as_stream(stream)),
             collective);
}

void Communicator::group_start(const char* collective) {
  driver::DeviceScope scope(device_);
  check_nccl(ncclGroupStart(), collective);
}

void Communicator::group_end(const char* collective) {
  driver::DeviceScope scope(device_);
  check_nccl(ncclGroupEnd(), collective);
}

}  // namespace ember::detail::nccl
