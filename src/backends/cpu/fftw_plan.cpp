// Host FFT plans over FFTW's guru64 interface (Note [FFTW and threads]).
#include "backends/cpu/fftw_plan.h"

#include <fftw3.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "ember/errors.h"

namespace ember::detail::fft {
namespace {

std::mutex& planner_mutex() {
  static std::mutex mutex;
  return mutex;
}

// The float and double halves of FFTW's API under one name, so plan code is written once.
template <typename Real>
struct Fftw;
template <>
struct Fftw<float> {
  using plan = fftwf_plan;
  using complex = fftwf_complex;
  using iodim = fftwf_iodim64;
  static void* malloc(size_t n) { return fftwf_malloc(n); }
  // As aligned as fftwf_malloc's memory, which the aligned plans were made on.
  static bool aligned(void* p) { return fftwf_alignment_of(static_cast<float*>(p)) == 0; }
  static void free(void* p) { fftwf_free(p); }
  static plan c2c(int r, const iodim* d, int hr, const iodim* h, complex* i, complex* o, int sign, unsigned f) {
    return fftwf_plan_guru64_dft(r, d, hr, h, i, o, sign, f);
  }
  static plan r2c(int r, const iodim* d, int hr, const iodim* h, float* i, complex* o, unsigned f) {
    return fftwf_plan_guru64_dft_r2c(r, d, hr, h, i, o, f);
  }
  static plan c2r(int r, const iodim* d, int hr, const iodim* h, complex* i, float* o, unsigned f) {
    return fftwf_plan_guru64_dft_c2r(r, d, hr, h, i, o, f);
  }
  static void exec_c2c(plan p, void* i, void* o) {
    fftwf_execute_dft(p, static_cast<complex*>(i), static_cast<complex*>(o));
  }
  static void exec_r2c(plan p, void* i, void* o) {
    fftwf_execute_dft_r2c(p, static_cast<float*>(i), static_cast<complex*>(o));
  }
  static void exec_c2r(plan p, void* i, void* o) {
    fftwf_execute_dft_c2r(p, static_cast<complex*>(i), static_cast<float*>(o));
  }
  static void destroy(plan p) { fftwf_destroy_plan(p); }
};
template <>
struct Fftw<double> {
  using plan = fftw_plan;
  using complex = fftw_complex;
  using iodim = fftw_iodim64;
  static void* malloc(size_t n) { return fftw_malloc(n); }
  static bool aligned(void* p) { return fftw_alignment_of(static_cast<double*>(p)) == 0; }
  static void free(void* p) { fftw_free(p); }
  static plan c2c(int r, const iodim* d, int hr, const iodim* h, complex* i, complex* o, int sign, unsigned f) {
    return fftw_plan_guru64_dft(r, d, hr, h, i, o, sign, f);
  }
  static plan r2c(int r, const iodim* d, int hr, const iodim* h, double* i, complex* o, unsigned f) {
    return fftw_plan_guru64_dft_r2c(r, d, hr, h, i, o, f);
  }
  static plan c2r(int r, const iodim* d, int hr, const iodim* h, complex* i, double* o, unsigned f) {
    return fftw_plan_guru64_dft_c2r(r, d, hr, h, i, o, f);
  }
  static void exec_c2c(plan p, void* i, void* o) {
    fftw_execute_dft(p, static_cast<complex*>(i), static_cast<complex*>(o));
  }
  static void exec_r2c(plan p, void* i, void* o) {
    fftw_execute_dft_r2c(p, static_cast<double*>(i), static_cast<complex*>(o));
  }
  static void exec_c2r(plan p, void* i, void* o) {
    fftw_execute_dft_c2r(p, static_cast<complex*>(i), static_cast<double*>(o));
  }
  static void destroy(plan p) { fftw_destroy_plan(p); }
};

// Elements an array with this layout spans (0 for an empty batch).
int64_t extent(const IntList& sizes, const IntList& strides, int64_t batch, int64_t dist) {
  if (batch == 0) return 0;
  int64_t last = (batch - 1) * dist;
  for (size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
  return last + 1;
}

// Scratch arrays FFTW plans against: FFTW_ESTIMATE never reads or writes them, but the
// planner needs real, distinct addresses to decide in- vs out-of-place.
template <typename Real>
struct ScratchArrays {
  ScratchArrays(size_t in_bytes, size_t out_bytes)
      : in(Fftw<Real>::malloc(std::max<size_t>(in_bytes, 16))),
        out(Fftw<Real>::malloc(std::max<size_t>(out_bytes, 16))) {}
  ~ScratchArrays() {
    Fftw<Real>::free(in);
    Fftw<Real>::free(out);
  }
  void* in;
  void* out;
};

template <typename Real>
void* make_plan(const PlanKey& key, bool unaligned) {
  using F = Fftw<Real>;
  const IntList in_sizes = key.in_sizes(), out_sizes = key.out_sizes();
  std::vector<typename F::iodim> dims(key.signal_sizes.size());
  for (size_t d = 0; d < dims.size(); ++d) dims[d] = {key.signal_sizes[d], key.in_strides[d], key.out_strides[d]};
  const typename F::iodim batch{key.batch, key.in_dist, key.out_dist};
  const int rank = static_cast<int>(dims.size());

  const size_t real_bytes = sizeof(Real), complex_bytes = 2 * sizeof(Real);
  const size_t in_elem = key.kind == TransformKind::R2C ? real_bytes : complex_bytes;
  const size_t out_elem = key.kind == TransformKind::C2R ? real_bytes : complex_bytes;
  ScratchArrays<Real> scratch(
      static_cast<size_t>(extent(in_sizes, key.in_strides, key.batch, key.in_dist)) * in_elem,
      static_cast<size_t>(extent(out_sizes, key.out_strides, key.batch, key.out_dist)) * out_elem);
  // C2R may destroy its input (FFTW's default for it, and the only choice for rank > 1).
  const unsigned flags =
      FFTW_ESTIMATE | (unaligned ? FFTW_UNALIGNED : 0u) | (key.kind == TransformKind::C2R ? FFTW_DESTROY_INPUT : 0u);

  typename F::plan plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(planner_mutex());
    switch (key.kind) {
      case TransformKind::C2C:
        plan =
            F::c2c(rank, dims.data(), 1, &batch, static_cast<typename F::complex*>(scratch.in),
                   static_cast<typename F::complex*>(scratch.out), key.forward ? FFTW_FORWARD : FFTW_BACKWARD, flags);
        break;
      case TransformKind::R2C:
        plan = F::r2c(rank, dims.data(), 1, &batch, static_cast<Real*>(scratch.in),
                      static_cast<typename F::complex*>(scratch.out), flags);
        break;
      case TransformKind::C2R:
        plan = F::c2r(rank, dims.data(), 1, &batch, static_cast<typename F::complex*>(scratch.in),
                      static_cast<Real*>(scratch.out), flags);
        break;
    }
  }
  EMBER_CHECK(plan != nullptr, ValueError, "fft: FFTW could not plan a ", rank, "-D transform with batch ", key.batch);
  return plan;
}

}  // namespace

HostPlan::HostPlan(PlanKey key) : Plan(std::move(key)) {
  aligned_plan_ =
      this->key().precision == kFloat64 ? make_plan<double>(this->key(), false) : make_plan<float>(this->key(), false);
}

HostPlan::~HostPlan() {
  std::lock_guard<std::mutex> lock(planner_mutex());
  for (void* plan : {aligned_plan_, unaligned_plan_}) {
    if (plan == nullptr) continue;
    if (key().precision == kFloat64) Fftw<double>::destroy(static_cast<fftw_plan>(plan));
    else Fftw<float>::destroy(static_cast<fftwf_plan>(plan));
  }
}

void HostPlan::execute(void* in, void* out) const {
  auto run = [&](auto real) {
    using Real = decltype(real);
    using F = Fftw<Real>;
    void* chosen = aligned_plan_;
    if (!F::aligned(in) || !F::aligned(out)) {
      std::call_once(unaligned_once_, [&] { unaligned_plan_ = make_plan<Real>(key(), true); });
      chosen = unaligned_plan_;
    }
    auto plan = static_cast<typename F::plan>(chosen);
    switch (key().kind) {
      case TransformKind::C2C: F::exec_c2c(plan, in, out); break;
      case TransformKind::R2C: F::exec_r2c(plan, in, out); break;
      case TransformKind::C2R: F::exec_c2r(plan, in, out); break;
    }
  };
  if (key().precision == kFloat64) run(double{});
  else run(float{});
}

}  // namespace ember::detail::fft

namespace ember::detail::cpu {

std::shared_ptr<const fft::Plan> create_fft_plan(const fft::PlanKey& key) {
  return std::make_shared<const fft::HostPlan>(key);
}

}  // namespace ember::detail::cpu
