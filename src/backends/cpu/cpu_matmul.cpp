// Batched matmul: out[b] = in0[b] @ in1[b] on 3-D operands with any strides.
//
// float, double and complex go to OpenBLAS. An operand that is a row-major or
// column-major matrix (a transposed contiguous one included) is passed as is with the
// matching transpose flag; anything else is first copied dense. With allow_tf32 a
// float32 product rounds both inputs to TF32 (10 mantissa bits, nearest even), as
// tensor cores do, so the precision trade-off is observable on every backend.
// float16 and bfloat16 go to sgemm through float32 copies of their operands: float32
// accumulation and one rounding of the result, as cuBLAS's 32F compute type and oneDNN's
// half GEMMs (the copies cost O(MK + KN) beside the product's O(MNK)). A launch from a cuda
// device may carry cuBLAS's reduced-precision choices (Note [Matmul math] in
// kernels/matmul_math.h), which the emulation follows beside TF32's: float16 accumulation
// (a scalar loop rounding the running sum to float16 after every multiply-add: each product
// of two float16 values is exact in float32, so the float32 sum is rounded once, to float32,
// then to float16) and split-k reductions in the output dtype (one sgemm per block of
// kSplitKBlock products, the running sum rounded to the output dtype after each block).
// Integers use a plain loop accumulating in int64 (which wraps exactly like arithmetic in the
// narrow type).
#include <cblas.h>

#include <algorithm>
#include <complex>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "core/storage.h"
#include "kernels/matmul_math.h"

namespace ember::detail::cpu {
namespace {

struct Matrix {
  char* data;                                                // element (0, 0) of batch 0
  int64_t rows, cols, batch_stride, row_stride, col_stride;  // strides in elements
};

Matrix matrix_of(const TensorArg& t, int64_t batch) {
  EMBER_CHECK(t.sizes.size() == 3 && t.strides.size() == 3, ValueError, "matmul: expected 3-D operands, got ",
              t.sizes.size(), "-D");
  EMBER_CHECK(t.sizes[0] == batch || t.sizes[0] == 1, ValueError, "matmul: batch size ", t.sizes[0], " does not match ",
              batch);
  return {static_cast<char*>(t.data),         t.sizes[1],   t.sizes[2],
          t.sizes[0] == 1 ? 0 : t.strides[0], t.strides[1], t.strides[2]};
}

// How BLAS can read a matrix in place: row-major (ld = row stride) or column-major.
struct BlasView {
  bool ok = false, row_major = true;
  int ld = 1;
};

BlasView blas_view(const Matrix& m) {
  BlasView v;
  const int64_t big = int64_t{1} << 31;
  if ((m.cols == 1 || m.col_stride == 1) && (m.rows == 1 || m.row_stride >= std::max<int64_t>(1, m.cols))) {
    v = {true, true, static_cast<int>(m.rows == 1 ? std::max<int64_t>(1, m.cols) : m.row_stride)};
  } else if ((m.rows == 1 || m.row_stride == 1) && (m.cols == 1 || m.col_stride >= std::max<int64_t>(1, m.rows))) {
    v = {true, false, static_cast<int>(m.cols == 1 ? std::max<int64_t>(1, m.rows) : m.col_stride)};
  }
  if (m.rows >= big || m.cols >= big || v.ld >= big) v.ok = false;
  return v;
}

// Dense copies of GEMM operands, in host memory from the cpu allocator (Note [Cpu block cache]
// in memory/cpu_allocator.cpp), so that a product's large copies (a convolution's columns,
// 100 MB and more) are served from its cache again each step instead of faulting in fresh
// zeroed pages. Each thread also keeps its buffers between products (an emulated device's
// worker runs product after product, a pool thread batch item after item), up to
// kKeptScratchBytes each, which spares a small product the allocator's lock; a larger one
// goes back to the allocator's cache when its product is done, so a thread holds at most
// three such buffers per element type between products.
constexpr size_t kKeptScratchBytes = size_t{1} << 20;

template <typename T>
class Scratch {
 public:
  /// Room for n elements, left uninitialised (the caller writes every one it reads).
  T* resize(size_t n) {
    if (n > capacity_) {
      storage_.reset();
      storage_ = make_storage(n * sizeof(T), Device(kCPU));
      capacity_ = n;
    }
    return data();
  }
  T* data() const { return storage_ ? static_cast<T*>(storage_->data()) : nullptr; }
  void trim() {
    if (capacity_ * sizeof(T) > kKeptScratchBytes) {
      storage_.reset();
      capacity_ = 0;
    }
  }

 private:
  std::shared_ptr<StorageImpl> storage_;
  size_t capacity_ = 0;
};

template <typename T>
struct ScratchSet {
  Scratch<T> a, b, c;
  bool busy = false;
};

// The calling thread's buffers for one product (or one batch range), trimmed when it ends; a
// thread whose buffers are already in use (a product inside a product) gets fresh ones.
template <typename T>
class ScratchLease {
 public:
  ScratchLease() {
    thread_local ScratchSet<T> mine;
    if (!mine.busy) {
      mine.busy = true;
      set_ = &mine;
    } else {
      own_ = std::make_unique<ScratchSet<T>>();
      set_ = own_.get();
    }
  }
  ~ScratchLease() {
    if (own_) return;
    set_->a.trim();
    set_->b.trim();
    set_->c.trim();
    set_->busy = false;
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  ScratchSet<T>* operator->() const { return set_; }

 private:
  ScratchSet<T>* set_ = nullptr;
  std::unique_ptr<ScratchSet<T>> own_;
};

// Rounds a float to TF32: keep sign, exponent and 10 mantissa bits, nearest even. Written
// as a select, not a branch, so that a loop of it vectorizes.
inline float round_tf32(float x) {
  const uint32_t u = detail::float_bits(x);
  const uint32_t rounded = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
  return detail::bits_float((u & 0x7f800000u) == 0x7f800000u ? u : rounded);  // inf, NaN as they are
}

// Copies batch b of m (elements of type T) into a dense row-major buffer of Out (float16 and
// bfloat16 widen to float exactly), optionally rounding float to TF32.
template <typename T, typename Out = T>
void pack(const Matrix& m, int64_t b, bool tf32, Scratch<Out>& scratch) {
  Out* buf = scratch.resize(static_cast<size_t>(m.rows * m.cols));
  const T* src = reinterpret_cast<const T*>(m.data) + b * m.batch_stride;
  for (int64_t i = 0; i < m.rows; ++i) {
    for (int64_t j = 0; j < m.cols; ++j) {
      Out v = convert<Out>(src[i * m.row_stride + j * m.col_stride]);
      if constexpr (std::is_same_v<Out, float>) {
        if (tf32) v = round_tf32(v);
      }
      buf[i * m.cols + j] = v;
    }
  }
}

// Copies batch b of m (elements of type T), which BLAS reads as `v`, into a dense float buffer
// of the same layout (rows for a row-major matrix, columns for a column-major one), widening
// float16/bfloat16 or rounding float to TF32. Each row (or column) is a contiguous run, so
// the loop vectorizes; no transpose through the cache as `pack` would make of a column-major
// operand. Returns how BLAS reads the buffer.
template <typename T>
BlasView pack_in_layout(const Matrix& m, int64_t b, BlasView v, bool tf32, Scratch<float>& scratch) {
  const int64_t runs = v.row_major ? m.rows : m.cols, length = v.row_major ? m.cols : m.rows;
  // A run of length 1 may have any stride: it is read at index 0 only.
  const int64_t step = length == 1 ? 0 : (v.row_major ? m.col_stride : m.row_stride);
  float* buf = scratch.resize(static_cast<size_t>(runs * length));
  const T* src = reinterpret_cast<const T*>(m.data) + b * m.batch_stride;
  auto value = [tf32](T x) {
    const float f = convert<float>(x);
    if constexpr (std::is_same_v<T, float>) return tf32 ? round_tf32(f) : f;
    else return f;
  };
  // Over the pool (an operand can be a convolution's columns, 100 MB and more).
  parallel_for(0, runs, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, length)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* run = src + r * static_cast<int64_t>(v.ld);
      float* dst = buf + r * length;
      if (step == 1) {
        for (int64_t j = 0; j < length; ++j) dst[j] = value(run[j]);
      } else {
        for (int64_t j = 0; j < length; ++j) dst[j] = value(run[j * step]);
      }
    }
  });
  return {true, v.row_major, static_cast<int>(std::max<int64_t>(1, length))};
}

template <typename T>
void gemm(bool c_row_major, bool a_trans, bool b_trans, int M, int N, int K, const T* A, int lda, const T* B, int ldb,
          T* C, int ldc) {
  const CBLAS_ORDER order = c_row_major ? CblasRowMajor : CblasColMajor;
  const CBLAS_TRANSPOSE ta = a_trans ? CblasTrans : CblasNoTrans, tb = b_trans ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(order, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(order, ta, tb, M, N, K, 1.0, A, lda, B, ldb, 0.0, C, ldc);
  } else {
    const T one(1), zero(0);
    if constexpr (std::is_same_v<T, std::complex<float>>) {
      cblas_cgemm(order, ta, tb, M, N, K, &one, A, lda, B, ldb, &zero, C, ldc);
    } else {
      cblas_zgemm(order, ta, tb, M, N, K, &one, A, lda, B, ldb, &zero, C, ldc);
    }
  }
}

// Batch items [begin, end) of out = a @ b through BLAS, each operand as `va`/`vb`/`vc` say
// or packed dense.
template <typename T>
void matmul_blas_items(const Matrix& a, const Matrix& b, const Matrix& c, BlasView va, BlasView vb, BlasView vc,
                       int64_t begin, int64_t end, bool tf32) {
  const int M = static_cast<int>(c.rows), N = static_cast<int>(c.cols), K = static_cast<int>(a.cols);
  ScratchLease<T> scratch;
  Scratch<T>&abuf = scratch->a, &bbuf = scratch->b, &cbuf = scratch->c;
  BlasView rounded_a, rounded_b;  // how BLAS reads abuf and bbuf once TF32 has filled them
  for (int64_t i = begin; i < end; ++i) {
    const T* A = reinterpret_cast<const T*>(a.data) + i * a.batch_stride;
    const T* B = reinterpret_cast<const T*>(b.data) + i * b.batch_stride;
    T* C = reinterpret_cast<T*>(c.data) + i * c.batch_stride;
    BlasView ua = va, ub = vb;
    if constexpr (std::is_same_v<T, float>) {
      // TF32 rounds both inputs into private copies, each kept in the layout BLAS reads it in
      // (a broadcast batch once); an operand BLAS cannot read is packed below, rounded too.
      if (tf32 && va.ok) {
        if (i == begin || a.batch_stride != 0) rounded_a = pack_in_layout<float>(a, i, va, true, abuf);
        A = abuf.data();
        ua = rounded_a;
      }
      if (tf32 && vb.ok) {
        if (i == begin || b.batch_stride != 0) rounded_b = pack_in_layout<float>(b, i, vb, true, bbuf);
        B = bbuf.data();
        ub = rounded_b;
      }
    }
    if (!va.ok) {
      // A broadcast batch is packed once.
      if (i == begin || a.batch_stride != 0) pack<T>(a, i, tf32, abuf);
      A = abuf.data();
      ua = {true, true, std::max(1, K)};
    }
    if (!vb.ok) {
      if (i == begin || b.batch_stride != 0) pack<T>(b, i, tf32, bbuf);
      B = bbuf.data();
      ub = {true, true, std::max(1, N)};
    }
    T* target = C;
    BlasView uc = vc;
    if (!vc.ok) {
      target = cbuf.resize(static_cast<size_t>(M) * N);
      uc = {true, true, std::max(1, N)};
    }
    // In C's order an operand stored the other way round is transposed.
    gemm<T>(uc.row_major, ua.row_major != uc.row_major, ub.row_major != uc.row_major, M, N, K, A, ua.ld, B, ub.ld,
            target, uc.ld);
    if (!vc.ok) {
      for (int64_t r = 0; r < M; ++r) {
        for (int64_t col = 0; col < N; ++col) C[r * c.row_stride + col * c.col_stride] = target[r * N + col];
      }
    }
  }
}

// OpenBLAS computes a product of fewer multiply-adds than this on the calling thread
// (0.3's SMP threshold, 65536 * GEMM_MULTITHREAD_THRESHOLD 4); a batch of such products is
// spread over the thread pool instead, as LibTorch spreads per-sample gemms over its threads.
constexpr double kSingleThreadedGemm = 262144;

// Runs items(begin, end) over the batch: spread over the pool when each product is small.
template <typename Items>
void over_batch(const Matrix& a, const Matrix& c, int64_t batch, Items&& items) {
  const double work = static_cast<double>(c.rows) * c.cols * a.cols;
  if (batch > 1 && work < kSingleThreadedGemm) {
    const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(16 * kGrainSize / std::max(work, 1.0)));
    parallel_for(0, batch, grain, items);
  } else {
    items(int64_t{0}, batch);
  }
}

template <typename T>
void matmul_blas(const Matrix& a, const Matrix& b, const Matrix& c, int64_t batch, bool tf32) {
  const BlasView va = blas_view(a), vb = blas_view(b), vc = blas_view(c);
  over_batch(a, c, batch,
             [&](int64_t begin, int64_t end) { matmul_blas_items<T>(a, b, c, va, vb, vc, begin, end, tf32); });
}

// c[M, N] = a[M, K] @ b[K, N] (dense row-major float copies of float16 values), accumulated in
// float16: the running sum of each output is rounded to float16 after every multiply-add, in k
// order (the emulation of CUBLAS_COMPUTE_16F).
void gemm_half_accumulated(int M, int N, int K, const float* A, const float* B, float* C) {
  for (int r = 0; r < M; ++r) {
    float* acc = C + static_cast<int64_t>(r) * N;
    std::fill_n(acc, N, 0.0f);
    for (int k = 0; k < K; ++k) {
      const float aik = A[static_cast<int64_t>(r) * K + k];
      const float* Bk = B + static_cast<int64_t>(k) * N;
      for (int col = 0; col < N; ++col) acc[col] = convert<float>(convert<Half>(acc[col] + aik * Bk[col]));
    }
  }
}

// c = a @ b (dense row-major float copies of T values) as a split-k GEMM that reduces in T:
// each block of kSplitKBlock products is summed in float32 (sgemm) and the running sum is
// rounded to T after each block (the emulation of a reduced-precision split-k reduction).
template <typename T>
void gemm_split_k_rounded(int M, int N, int K, const float* A, const float* B, float* C, std::vector<float>& part) {
  part.resize(static_cast<size_t>(M) * N);
  std::fill_n(C, static_cast<size_t>(M) * N, 0.0f);
  for (int k0 = 0; k0 < K; k0 += static_cast<int>(kSplitKBlock)) {
    const int depth = std::min(static_cast<int>(kSplitKBlock), K - k0);
    gemm<float>(true, false, false, M, N, depth, A + k0, std::max(1, K), B + static_cast<int64_t>(k0) * N,
                std::max(1, N), part.data(), std::max(1, N));
    for (size_t i = 0; i < part.size(); ++i) C[i] = convert<float>(convert<T>(C[i] + part[i]));
  }
}

template <typename T>
void matmul_widened_items(const Matrix& a, const Matrix& b, const Matrix& c, int64_t begin, int64_t end, int64_t math) {
  const int M = static_cast<int>(c.rows), N = static_cast<int>(c.cols), K = static_cast<int>(a.cols);
  const bool half_accumulation = std::is_same_v<T, Half> && (math & kMatmulHalfAccumulation) != 0;
  const bool split_k = (math & kMatmulReducedReduction) != 0 && K > kSplitKBlock;
  ScratchLease<float> scratch;
  Scratch<float>&abuf = scratch->a, &bbuf = scratch->b;
  float* const cdata = scratch->c.resize(static_cast<size_t>(M) * N);
  std::vector<float> part;
  // A plain float32-accumulated product reads each operand BLAS can read widened in its own
  // layout (pack_in_layout); the emulations of reduced-precision accumulation need dense
  // row-major copies.
  const bool plain = !half_accumulation && !split_k;
  const BlasView va = plain ? blas_view(a) : BlasView{}, vb = plain ? blas_view(b) : BlasView{};
  BlasView ua{true, true, std::max(1, K)}, ub{true, true, std::max(1, N)};
  for (int64_t i = begin; i < end; ++i) {
    if (i == begin || a.batch_stride != 0) {  // a broadcast batch once
      if (va.ok) ua = pack_in_layout<T>(a, i, va, false, abuf);
      else pack<T, float>(a, i, false, abuf);
    }
    if (i == begin || b.batch_stride != 0) {
      if (vb.ok) ub = pack_in_layout<T>(b, i, vb, false, bbuf);
      else pack<T, float>(b, i, false, bbuf);
    }
    if (half_accumulation) {
      gemm_half_accumulated(M, N, K, abuf.data(), bbuf.data(), cdata);
    } else if (split_k) {
      gemm_split_k_rounded<T>(M, N, K, abuf.data(), bbuf.data(), cdata, part);
    } else {
      gemm<float>(true, !ua.row_major, !ub.row_major, M, N, K, abuf.data(), ua.ld, bbuf.data(), ub.ld, cdata,
                  std::max(1, N));
    }
    T* C = reinterpret_cast<T*>(c.data) + i * c.batch_stride;
    parallel_for(0, M, std::max<int64_t>(1, kGrainSize / std::max(1, N)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* from = cdata + r * N;
        T* to = C + r * c.row_stride;
        if (c.col_stride == 1) {
          for (int64_t col = 0; col < N; ++col) to[col] = convert<T>(from[col]);
        } else {
          for (int64_t col = 0; col < N; ++col) to[col * c.col_stride] = convert<T>(from[col]);
        }
      }
    });
  }
}

template <typename T>
void matmul_widened(const Matrix& a, const Matrix& b, const Matrix& c, int64_t batch, int64_t math) {
  over_batch(a, c, batch, [&](int64_t begin, int64_t end) { matmul_widened_items<T>(a, b, c, begin, end, math); });
}

template <typename T>
void matmul_loop(const Matrix& a, const Matrix& b, const Matrix& c, int64_t batch) {
  static_assert(std::is_integral_v<T>, "integer products only: floating types go to BLAS");
  using Acc = int64_t;
  const int64_t M = c.rows, N = c.cols, K = a.cols;
  constexpr int64_t kBlockN = 256;
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, N * K));
  parallel_for(0, batch * M, grain, [&](int64_t begin, int64_t end) {
    Acc acc[kBlockN];
    for (int64_t row = begin; row < end; ++row) {
      const int64_t bi = row / M, i = row % M;
      const T* A = reinterpret_cast<const T*>(a.data) + bi * a.batch_stride + i * a.row_stride;
      const T* B = reinterpret_cast<const T*>(b.data) + bi * b.batch_stride;
      T* C = reinterpret_cast<T*>(c.data) + bi * c.batch_stride + i * c.row_stride;
      for (int64_t j0 = 0; j0 < N; j0 += kBlockN) {
        const int64_t width = std::min(kBlockN, N - j0);
        std::fill_n(acc, width, Acc(0));
        for (int64_t k = 0; k < K; ++k) {
          const Acc aik = convert<Acc>(A[k * a.col_stride]);
          const T* Bk = B + k * b.row_stride + j0 * b.col_stride;
          for (int64_t j = 0; j < width; ++j) acc[j] += aik * convert<Acc>(Bk[j * b.col_stride]);
        }
        for (int64_t j = 0; j < width; ++j) C[(j0 + j) * c.col_stride] = convert<T>(acc[j]);
      }
    }
  });
}

}  // namespace

void run_matmul(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 2, ValueError,
              "matmul: expected 1 output and 2 inputs");
  const TensorArg &out = call.outputs[0], &in0 = call.inputs[0], &in1 = call.inputs[1];
  EMBER_CHECK(in0.dtype == in1.dtype && out.dtype == in0.dtype, TypeError,
              "expected m1 and m2 to have the same dtype, but got: ", scalar_type_name(in0.dtype),
              " != ", scalar_type_name(in1.dtype));
  const int64_t batch = out.sizes.at(0);
  const Matrix c = matrix_of(out, batch), a = matrix_of(in0, batch), b = matrix_of(in1, batch);
  EMBER_CHECK(a.cols == b.rows && c.rows == a.rows && c.cols == b.cols, ValueError,
              "mat1 and mat2 shapes cannot be multiplied (", a.rows, "x", a.cols, " and ", b.rows, "x", b.cols, ")");
  if (c.rows == 0 || c.cols == 0 || batch == 0) return;
  dispatch(out.dtype, [&]<typename T>(TypeTag<T>) {
    if (a.cols == 0) {  // empty inner dim: a sum of nothing
      for (int64_t i = 0; i < batch; ++i) {
        T* C = reinterpret_cast<T*>(c.data) + i * c.batch_stride;
        for (int64_t r = 0; r < c.rows; ++r) {
          for (int64_t col = 0; col < c.cols; ++col) C[r * c.row_stride + col * c.col_stride] = T(0);
        }
      }
      return;
    }
    if constexpr (std::is_floating_point_v<T> || is_complex_v<T>) {
      matmul_blas<T>(a, b, c, batch, call.arg<kargs::Matmul>().allow_tf32 && std::is_same_v<T, float>);
    } else if constexpr (is_reduced_float_v<T>) {
      matmul_widened<T>(a, b, c, batch, matmul_math(call));
    } else if constexpr (std::is_same_v<T, bool>) {
      not_implemented("addmm_impl_cpu_", out.dtype);
    } else {
      matmul_loop<T>(a, b, c, batch);
    }
  });
}

}  // namespace ember::detail::cpu
