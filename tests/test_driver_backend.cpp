// The driver backend (real GPUs through the CUDA runtime), tested through the Backend
// interface. On a machine without a GPU or driver, make_driver_backend() must return
// nullptr silently and the GPU tests skip; on a GPU they run a few launches of each
// kernel family and compare with host-computed values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ember/cuda.h"
#include "ember/ember.h"
#include "ember/errors.h"
#include "kernels/kernel_call.h"
#include "kernels/op_name.h"
#include "kernels/random.h"
#include "runtime/backend.h"
#include "runtime/driver_probe.h"

namespace ember::detail {
namespace {

#define SKIP_WITHOUT_GPU(backend) \
  if (!(backend)) GTEST_SKIP() << "no CUDA GPU/driver on this machine"

TEST(DriverFactory, WithoutGpuReturnsNullSilently) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  auto backend = make_driver_backend();
  std::string out = testing::internal::GetCapturedStdout();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "");
  if (backend) {
    EXPECT_GT(backend->device_count(), 0);
    EXPECT_STREQ(backend->name(), "driver");
  }
}

// True when the process has mapped libcublas (read from /proc/self/maps).
bool cublas_is_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/libcublas.so") != std::string::npos) return true;
  return false;
}

// Note [cuBLAS opened on first use]: a process whose matmuls run on the cpu or on emulated
// devices never maps cuBLAS (its start-up costs ~0.4 s); the first matmul on an NVIDIA GPU
// opens it.
TEST(DriverFactory, CublasIsOpenedByTheFirstMatmulOnAGpuOnly) {
  const bool gpu = make_driver_backend() != nullptr;
  Tensor a = ones({4, 3}), b = ones({3, 2});
  EXPECT_EQ(matmul(a, b).sum().item<float>(), 24.0f);
  if (cuda::is_available()) {
    Device device("cuda:0");
    EXPECT_EQ(matmul(a.to(device), b.to(device)).sum().item<float>(), 24.0f);
  }
  EXPECT_EQ(cublas_is_mapped(), gpu && cuda::is_available());
}

// The reason completes "No CUDA device is available: ...", which ember-info and the errors
// of cuda calls print: a build without CUDA, no driver, a driver too old for the runtime,
// no GPU, or the runtime's own error.
TEST(DriverFactory, WithoutGpuSaysWhy) {
  std::string why;
  if (make_driver_backend(why)) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_THAT(why, ::testing::MatchesRegex("ember was built without the CUDA driver backend|"
                                           "no NVIDIA driver is installed \\(libcuda.so.1 was not found\\)|"
                                           "the NVIDIA driver is too old: it supports CUDA up to [0-9.]+, ember was "
                                           "built with CUDA [0-9.]+ \\(update the driver\\)|"
                                           "no NVIDIA GPU was found|the driver reports no visible GPU|"
                                           "the CUDA runtime could not start \\(cudaError[A-Za-z]+: .+\\)"));
  if (std::getenv("EMBER_EMULATED_DEVICES") != nullptr) return;  // cuda calls go to emulated devices
  try {
    (void)cuda::get_device_properties(0);
    ADD_FAILURE() << "a cuda call without a device did not throw";
  } catch (const CudaError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("No CUDA device is available: " + why + ". "));
  }
}

TEST(DriverFactory, IsAvailableFollowsTheDriver) {
  if (std::getenv("EMBER_EMULATED_DEVICES") != nullptr) GTEST_SKIP() << "emulated devices requested";
  bool have_gpu = make_driver_backend() != nullptr;
  EXPECT_EQ(cuda::is_available(), have_gpu);
  if (!have_gpu) {
    EXPECT_EQ(cuda::device_count(), 0);
  }
}

/// A contiguous device buffer of `n` elements of T with helpers to move it.
template <typename T>
struct DeviceBuffer {
  Backend& backend;
  int device;
  BackendStream* stream;
  size_t n;
  void* ptr;
  DeviceBuffer(Backend& b, int d, BackendStream* s, size_t count)
      : backend(b), device(d), stream(s), n(count), ptr(b.raw_alloc(d, count * sizeof(T))) {}
  ~DeviceBuffer() { backend.raw_free(device, ptr); }
  void upload(const std::vector<T>& host) {
    backend.copy(ptr, host.data(), n * sizeof(T), CopyKind::HostToDevice, false, stream);
  }
  std::vector<T> download() {
    std::vector<T> host(n);
    backend.copy(host.data(), ptr, n * sizeof(T), CopyKind::DeviceToHost, false, stream);
    backend.synchronize(stream);
    return host;
  }
  TensorArg arg(DType dtype, IntList sizes, IntList strides) const { return TensorArg{ptr, dtype, sizes, strides}; }
};

TEST(DriverBackend, DevicesAndErrors) {
  auto backend = make_driver_backend();
  SKIP_WITHOUT_GPU(backend);
  cuda::DeviceProperties props = backend->properties(0);
  EXPECT_FALSE(props.name.empty());
  EXPECT_GT(props.total_memory, 0u);
  EXPECT_GE(props.major, 1);
  auto [least, greatest] = backend->priority_range();
  EXPECT_LE(greatest, least);
  try {
    backend->set_device(backend->device_count());
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    EXPECT_STREQ(e.what(), "CUDA error: invalid device ordinal");
  }
  // Out of memory is not an error here: nullptr, and the next call is unaffected.
  EXPECT_EQ(backend->raw_alloc(0, size_t{1} << 52), nullptr);
  void* p = backend->raw_alloc(0, 1024);
  EXPECT_NE(p, nullptr);
  backend->raw_free(0, p);
  backend->check_error(0);
}

TEST(DriverBackend, ElementwiseReductionMatmulRandom) {
  auto backend = make_driver_backend();
  SKIP_WITHOUT_GPU(backend);
  auto [least, greatest] = backend->priority_range();
  BackendStream* stream = backend->create_stream(0, greatest);
  {
    DeviceBuffer<float> a(*backend, 0, stream, 6), b(*backend, 0, stream, 6), out(*backend, 0, stream, 6);
    a.upload({1, 2, 3, 4, 5, 6});
    b.upload({10, 20, 30, 40, 50, 60});
    KernelCall add{};
    add.op = OpKind::Add;
    add.device = 0;
    add.outputs = {out.arg(kFloat32, {2, 3}, {3, 1})};
    add.inputs = {a.arg(kFloat32, {2, 3}, {3, 1}), b.arg(kFloat32, {2, 3}, {1, 2})};  // b read transposed
    add.args = kargs::Alpha{2.0};
    backend->launch(stream, add);
    EXPECT_EQ(out.download(), (std::vector<float>{21, 62, 103, 44, 85, 126}));

    DeviceBuffer<float> sum(*backend, 0, stream, 2);
    KernelCall reduce{};
    reduce.op = OpKind::Sum;
    reduce.device = 0;
    reduce.args = kargs::Dim{1};
    reduce.inputs = {a.arg(kFloat32, {2, 3}, {3, 1})};
    reduce.outputs = {sum.arg(kFloat32, {2, 1}, {1, 1})};
    backend->launch(stream, reduce);
    EXPECT_EQ(sum.download(), (std::vector<float>{6, 15}));
    reduce.op = OpKind::Max;
    reduce.args = kargs::Dim{-1};
    reduce.outputs = {sum.arg(kFloat32, {}, {})};
    backend->launch(stream, reduce);
    EXPECT_EQ(sum.download()[0], 6.0f);

    KernelCall matmul{};  // [[1,2,3],[4,5,6]] @ [[1,2],[3,4],[5,6]] with tf32 off
    matmul.op = OpKind::Matmul;
    matmul.device = 0;
    matmul.args = kargs::Matmul{};
    matmul.inputs = {a.arg(kFloat32, {1, 2, 3}, {6, 3, 1}), a.arg(kFloat32, {1, 3, 2}, {6, 2, 1})};
    DeviceBuffer<float> product(*backend, 0, stream, 4);
    matmul.outputs = {product.arg(kFloat32, {1, 2, 2}, {4, 2, 1})};
    backend->launch(stream, matmul);
    EXPECT_EQ(product.download(), (std::vector<float>{22, 28, 49, 64}));

    KernelCall normal{};
    normal.op = OpKind::Normal;
    normal.device = 0;
    normal.seed = 42;
    normal.offset = 8;
    normal.args = kargs::Normal{1.0, 2.0};
    normal.outputs = {out.arg(kFloat32, {6}, {1})};
    backend->launch(stream, normal);
    std::vector<float> values = out.download();
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(values[i], normal_at<float>(42, 8, i, 1.0f, 2.0f), 1e-4) << i;
    }
  }
  backend->destroy_stream(stream);
}

KernelCall make_call(OpKind op, std::vector<TensorArg> outputs, std::vector<TensorArg> inputs) {
  KernelCall call{};
  call.op = op;
  call.device = 0;
  call.outputs = std::move(outputs);
  call.inputs = std::move(inputs);
  call.args = default_args(op);
  return call;
}

TEST(DriverBackend, CopiesGeneratorsComparisonsIndexing) {
  auto backend = make_driver_backend();
  SKIP_WITHOUT_GPU(backend);
  BackendStream* stream = backend->default_stream(0);
  DeviceBuffer<float> a(*backend, 0, stream, 6), out(*backend, 0, stream, 6);
  a.upload({1.5f, -2.25f, 3, 4, 5, 6});

  DeviceBuffer<int32_t> ints(*backend, 0, stream, 6);  // float -> int32 truncates
  backend->launch(stream, make_call(OpKind::Copy, {ints.arg(kInt32, {6}, {1})}, {a.arg(kFloat32, {6}, {1})}));
  EXPECT_EQ(ints.download(), (std::vector<int32_t>{1, -2, 3, 4, 5, 6}));

  // Same dtype, transposed destination: out[i + 2j] = a[3i + j].
  backend->launch(stream,
                  make_call(OpKind::Copy, {out.arg(kFloat32, {2, 3}, {1, 2})}, {a.arg(kFloat32, {2, 3}, {3, 1})}));
  EXPECT_EQ(out.download(), (std::vector<float>{1.5f, 4, -2.25f, 5, 3, 6}));

  DeviceBuffer<int64_t> range(*backend, 0, stream, 4);
  KernelCall arange = make_call(OpKind::Arange, {range.arg(kInt64, {4}, {1})}, {});
  arange.args = kargs::Arange{3, 2};
  backend->launch(stream, arange);
  EXPECT_EQ(range.download(), (std::vector<int64_t>{3, 5, 7, 9}));

  DeviceBuffer<int64_t> m(*backend, 0, stream, 4), product(*backend, 0, stream, 4);
  m.upload({1, 2, 3, 4});
  backend->launch(stream, make_call(OpKind::Matmul, {product.arg(kInt64, {1, 2, 2}, {4, 2, 1})},
                                    {m.arg(kInt64, {1, 2, 2}, {4, 2, 1}), m.arg(kInt64, {1, 2, 2}, {4, 1, 2})}));
  EXPECT_EQ(product.download(), (std::vector<int64_t>{5, 11, 11, 25}));  // m @ m^T

  DeviceBuffer<float> bound(*backend, 0, stream, 3);
  DeviceBuffer<uint8_t> less(*backend, 0, stream, 3);  // bool storage
  bound.upload({2, -3, 3});
  backend->launch(stream, make_call(OpKind::Lt, {less.arg(kBool, {3}, {1})},
                                    {a.arg(kFloat32, {3}, {1}), bound.arg(kFloat32, {3}, {1})}));
  EXPECT_EQ(less.download(), (std::vector<uint8_t>{1, 0, 0}));

  DeviceBuffer<float> data(*backend, 0, stream, 4), picked(*backend, 0, stream, 3);
  DeviceBuffer<int32_t> index(*backend, 0, stream, 3);
  data.upload({10, 20, 30, 40});
  index.upload({3, 0, 3});
  KernelCall select = make_call(OpKind::IndexSelect, {picked.arg(kFloat32, {3}, {1})},
                                {data.arg(kFloat32, {4}, {1}), index.arg(kInt32, {3}, {1})});
  select.args = kargs::Dim{0};
  backend->launch(stream, select);
  EXPECT_EQ(picked.download(), (std::vector<float>{40, 10, 40}));

  DeviceBuffer<float> mean(*backend, 0, stream, 3);  // mean over dim 0 of a 2x3 matrix
  KernelCall reduce = make_call(OpKind::Mean, {mean.arg(kFloat32, {1, 3}, {3, 1})}, {a.arg(kFloat32, {2, 3}, {3, 1})});
  reduce.args = kargs::Dim{0};
  backend->launch(stream, reduce);
  EXPECT_EQ(mean.download(), (std::vector<float>{2.75f, 1.375f, 4.5f}));

  DeviceBuffer<double> uniform(*backend, 0, stream, 5);
  KernelCall draw = make_call(OpKind::Uniform, {uniform.arg(kFloat64, {5}, {1})}, {});
  draw.seed = 7;
  draw.offset = 100;
  draw.args = kargs::Uniform{-1.0, 1.0};
  backend->launch(stream, draw);
  std::vector<double> drawn = uniform.download();
  for (size_t i = 0; i < drawn.size(); ++i) EXPECT_NEAR(drawn[i], uniform_at<double>(7, 100, i, -1.0, 1.0), 1e-12);
}

TEST(DriverBackend, EventsTimeASleep) {
  auto backend = make_driver_backend();
  SKIP_WITHOUT_GPU(backend);
  BackendStream* stream = backend->create_stream(0, 0);
  BackendEvent* start = backend->create_event(0, true);
  BackendEvent* end = backend->create_event(0, true);
  backend->record(start, stream);
  backend->sleep(stream, std::chrono::milliseconds(20));
  backend->record(end, stream);
  EXPECT_FALSE(backend->query(end));  // 20 ms of spinning cannot be over yet
  backend->synchronize(end);
  EXPECT_TRUE(backend->query(end));
  EXPECT_GT(backend->elapsed_ms(start, end), 10.0f);
  backend->destroy_event(start);
  backend->destroy_event(end);
  backend->destroy_stream(stream);
}

TEST(DriverBackend, IndexOutOfRangeIsAnAsynchronousKernelError) {
  auto backend = make_driver_backend();
  SKIP_WITHOUT_GPU(backend);
  BackendStream* stream = backend->default_stream(0);
  DeviceBuffer<float> data(*backend, 0, stream, 4), out(*backend, 0, stream, 1);
  DeviceBuffer<int64_t> index(*backend, 0, stream, 1);
  index.upload({7});
  KernelCall select{};
  select.op = OpKind::IndexSelect;
  select.device = 0;
  select.args = kargs::Dim{0};
  select.inputs = {data.arg(kFloat32, {4}, {1}), index.arg(kInt64, {1}, {1})};
  select.outputs = {out.arg(kFloat32, {1}, {1})};
  const char* blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
  bool launch_blocking = blocking != nullptr && std::atoi(blocking) != 0;
  try {
    backend->launch(stream, select);  // returns (unless blocking): the failure is reported later
    EXPECT_FALSE(launch_blocking) << "CUDA_LAUNCH_BLOCKING=1 raises at the launch";
    backend->synchronize_device(0);
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    std::string message = e.what();
    EXPECT_EQ(message.rfind("CUDA error: device-side assert triggered", 0), 0u) << message;
    // The asynchronous-report hint, only when reports are asynchronous.
    EXPECT_EQ(message.find("CUDA_LAUNCH_BLOCKING=1") != std::string::npos, !launch_blocking) << message;
  }
  backend->reset(0);  // cudaDeviceReset: the device works again
  void* p = backend->raw_alloc(0, 256);
  EXPECT_NE(p, nullptr);
  backend->raw_free(0, p);
}

}  // namespace
}  // namespace ember::detail
