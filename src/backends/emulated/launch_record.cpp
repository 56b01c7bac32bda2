#include "backends/emulated/launch_record.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

namespace ember::detail::emulated {
namespace {

// KernelCall less its operands and payload.
struct Arguments {
  OpArgs args;  // trivially copyable (Note [Typed kernel arguments])
  uint64_t seed;
  uint64_t offset;
  const int64_t* philox_seed_ptr;
  const int64_t* philox_offset_ptr;
  int device;
  uint32_t outputs, inputs;
  OpKind op;
};
// One operand; its sizes, then its strides, follow (ndim each).
struct Operand {
  void* data;
  uint32_t ndim;
  DType dtype;
};
static_assert(std::is_trivially_copyable_v<Arguments> && std::is_trivially_copyable_v<Operand>);
static_assert(sizeof(Arguments) % alignof(int64_t) == 0 && sizeof(Operand) % alignof(int64_t) == 0);

// A field added to KernelCall must be added to Arguments, pack and unpack: update this
// size with them (Note [Emulated launch record]).
static_assert(sizeof(KernelCall) == 1144, "KernelCall changed: update LaunchRecord's pack and unpack");

size_t operand_bytes(const TensorArg& arg) { return sizeof(Operand) + 2 * arg.sizes.size() * sizeof(int64_t); }

std::byte* pack_operand(std::byte* out, const TensorArg& arg) {
  const size_t ndim = arg.sizes.size();
  Operand head{arg.data, static_cast<uint32_t>(ndim), arg.dtype};
  std::memcpy(out, &head, sizeof head);
  out += sizeof head;
  std::memcpy(out, arg.sizes.data(), ndim * sizeof(int64_t));
  out += ndim * sizeof(int64_t);
  std::memcpy(out, arg.strides.data(), ndim * sizeof(int64_t));
  return out + ndim * sizeof(int64_t);
}

const std::byte* unpack_operand(const std::byte* in, TensorArg& arg) {
  Operand head;
  std::memcpy(&head, in, sizeof head);
  in += sizeof head;
  arg.data = head.data;
  arg.dtype = head.dtype;
  arg.sizes.resize(head.ndim);
  std::memcpy(arg.sizes.data(), in, head.ndim * sizeof(int64_t));
  in += head.ndim * sizeof(int64_t);
  arg.strides.resize(head.ndim);
  std::memcpy(arg.strides.data(), in, head.ndim * sizeof(int64_t));
  return in + head.ndim * sizeof(int64_t);
}

}  // namespace

std::byte* LaunchRecord::reserve(size_t bytes) {
  if (bytes > capacity_) {
    // Wider than any launch this entry has held: a buffer kept from now on.
    size_t capacity = std::max(bytes, 2 * capacity_);
    heap_.reset(new std::byte[capacity]);
    data_ = heap_.get();
    capacity_ = capacity;
  }
  return data_;
}

void LaunchRecord::prefetch_for_write() const noexcept {
  constexpr size_t kLine = 64, kLines = 4;  // a small op's record: its arguments and three operands
  for (size_t i = 0; i < kLines && i * kLine < capacity_; ++i) emulated::prefetch_for_write(data_ + i * kLine);
}

void LaunchRecord::pack(const KernelCall& call) {
  size_t bytes = sizeof(Arguments);
  for (const TensorArg& arg : call.outputs) bytes += operand_bytes(arg);
  for (const TensorArg& arg : call.inputs) bytes += operand_bytes(arg);
  std::byte* out = reserve(bytes);
  const Arguments args{call.args,
                       call.seed,
                       call.offset,
                       call.philox_seed_ptr,
                       call.philox_offset_ptr,
                       call.device,
                       static_cast<uint32_t>(call.outputs.size()),
                       static_cast<uint32_t>(call.inputs.size()),
                       call.op};
  std::memcpy(out, &args, sizeof args);
  out += sizeof args;
  for (const TensorArg& arg : call.outputs) out = pack_operand(out, arg);
  for (const TensorArg& arg : call.inputs) out = pack_operand(out, arg);
  // Most launches have none: then the entry's (released when it was recycled) is left unwritten.
  if (call.payload || payload_) payload_ = call.payload;
}

void LaunchRecord::unpack(KernelCall& call) {
  Arguments args;
  std::memcpy(&args, data_, sizeof args);
  call.op = args.op;
  call.args = args.args;
  call.seed = args.seed;
  call.offset = args.offset;
  call.device = args.device;
  call.philox_seed_ptr = args.philox_seed_ptr;
  call.philox_offset_ptr = args.philox_offset_ptr;
  const std::byte* in = data_ + sizeof args;
  call.outputs.resize(args.outputs);
  for (TensorArg& arg : call.outputs) in = unpack_operand(in, arg);
  call.inputs.resize(args.inputs);
  for (TensorArg& arg : call.inputs) in = unpack_operand(in, arg);
  if (payload_) std::swap(call.payload, payload_);
}

void LaunchRecord::give_back(KernelCall& call) noexcept {
  if (call.payload) std::swap(call.payload, payload_);
}

}  // namespace ember::detail::emulated
