// Contracts of the grid-sampling KernelCalls (built by src/ops/nn/grid_sample.cpp; run by
// cpu_grid_sample.cpp and the driver's cuda_grid_sample.cu), and their bodies, written once for
// host and device. PyTorch's grid_sampler_2d / grid_sampler_3d and their backward, with
// PyTorch's unnormalize, clip and reflect rules (aten/src/ATen/native/cuda/GridSampler.cuh).
//
// Every operand is contiguous; the floating ones share one dtype T, float32 or float64.
// `dims` is 2 (input {N, C, H, W}, grid {N, Ho, Wo, 2}) or 3 (input {N, C, D, H, W}, grid
// {N, Do, Ho, Wo, 3}); grid[..., 0] is x (along W), [..., 1] y, [..., 2] z. P is the number
// of grid points of a batch entry, S the number of input points of a channel, K the taps of a
// point (GridGeometry::taps: bilinear 2^dims, nearest 1, bicubic 16). The arguments
// (kargs::GridSample) hold the interpolation and padding modes and align_corners.
//
// GridSample
//   inputs[0] input, inputs[1] grid; outputs[0] {N, C, grid's spatial sizes}
// GridSampleBackward
//   inputs[0] the output's gradient, inputs[1] input, inputs[2] grid
//   outputs[0] the grid's gradient (grid's sizes), or a null data pointer: not wanted
//   outputs[1] the input's gradient (input's sizes), or a null data pointer: not wanted (then
//              outputs[2..5] are not touched either); the rest is scratch the op layer allocates:
//   outputs[2] {N, P*K} int64: tap k of point p is entry p*K + k: its input point, -1 for none
//   outputs[3] {N, P*K} T: its weight
//   outputs[4] {N, S + 1} int64: where input point s's taps start in outputs[5]
//   outputs[5] {N, P*K} int64: the taps (entries) ordered by input point, then by entry; -1 after
//              the last (for the taps outside)
//
// Note [Deterministic grid_sample backward]
// PyTorch's CUDA backward scatters each tap's contribution into the input's gradient with an
// atomic add, so the order of the additions, and the rounding, changes from run to run. Here
// the backward has three phases: (1) per grid point, its taps and weights (and the grid's
// gradient, which has a single writer anyway); (2) per batch entry, a counting sort of the taps
// by input point, stable, so each input point's taps stay in entry order; (3) per element of
// the input's gradient, the sum of its taps' weight * output gradient in that order: a gather
// with one writer per element. Every backend runs the same bodies in the same order, so the
// result is the same bits run after run, and on the cpu and emulated devices alike.
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>

#include "kernels/kernel_call.h"

namespace ember::detail {

enum class GridInterpolation : uint8_t { Bilinear, Nearest, Bicubic };
enum class GridPadding : uint8_t { Zeros, Border, Reflection };

/// The arguments of a GridSample or GridSampleBackward launch.
constexpr kargs::GridSample grid_args(GridInterpolation interpolation, GridPadding padding, bool align_corners) {
  return {static_cast<uint8_t>(interpolation), static_cast<uint8_t>(padding), align_corners};
}

/// What the bodies need of a launch: sizes along x, y, z (an absent z is 1) and the modes.
struct GridGeometry {
  int dims = 2;
  int64_t batch = 0, channels = 0;
  int64_t in_size[3] = {1, 1, 1};  // W, H, D
  int64_t points = 0;              // P
  GridInterpolation interpolation = GridInterpolation::Bilinear;
  GridPadding padding = GridPadding::Zeros;
  bool align_corners = false;

  EMBER_HOST_DEVICE int taps() const {
    if (interpolation == GridInterpolation::Nearest) return 1;
    if (interpolation == GridInterpolation::Bicubic) return 16;
    return dims == 2 ? 4 : 8;
  }
  EMBER_HOST_DEVICE int64_t in_points() const { return in_size[0] * in_size[1] * in_size[2]; }
};

/// The geometry of a GridSample or GridSampleBackward launch.
inline GridGeometry grid_geometry(const KernelCall& call) {
  const bool backward = call.op == OpKind::GridSampleBackward;
  const TensorArg& input = call.inputs.at(backward ? 1 : 0);
  const TensorArg& grid = call.inputs.at(backward ? 2 : 1);
  GridGeometry g;
  g.dims = static_cast<int>(input.sizes.size()) - 2;
  g.batch = input.sizes.at(0);
  g.channels = input.sizes.at(1);
  for (int d = 0; d < g.dims; ++d) g.in_size[d] = input.sizes.at(input.sizes.size() - 1 - d);
  g.points = 1;
  for (size_t d = 1; d + 1 < grid.sizes.size(); ++d) g.points *= grid.sizes[d];
  const auto& args = call.arg<kargs::GridSample>();
  g.interpolation = static_cast<GridInterpolation>(args.interpolation);
  g.padding = static_cast<GridPadding>(args.padding);
  g.align_corners = args.align_corners;
  return g;
}

// ---- PyTorch's coordinate rules ---------------------------------------------------------
// The forward's clip is fmin/fmax, as CUDA's ::min/::max on floating values: a NaN coordinate
// clips to 0. The backward's clip compares (clip_set_grad), so a NaN stays NaN there and the
// int-range guard sends it out of bounds: both as PyTorch's CUDA kernels.

template <typename T>
EMBER_HOST_DEVICE inline T grid_unnormalize(T coord, int64_t size, bool align_corners, T* grad) {
  if (align_corners) {
    *grad = static_cast<T>(size - 1) / 2;
    return ((coord + T(1)) / 2) * static_cast<T>(size - 1);
  }
  *grad = static_cast<T>(size) / 2;
  return ((coord + T(1)) * static_cast<T>(size) - 1) / 2;
}

template <typename T>
EMBER_HOST_DEVICE inline T grid_clip(T in, int64_t size) {
  return std::fmin(static_cast<T>(size - 1), std::fmax(in, T(0)));
}

template <typename T>
EMBER_HOST_DEVICE inline T grid_clip_set_grad(T in, int64_t size, T* grad) {
  // Borders count as outside, for the gradient.
  if (in <= T(0)) {
    *grad = T(0);
    return T(0);
  }
  const T max = static_cast<T>(size - 1);
  if (in >= max) {
    *grad = T(0);
    return max;
  }
  *grad = T(1);
  return in;
}

/// Reflects `in` into [twice_low / 2, twice_high / 2]; *grad gets the derivative's sign. The
/// number of flips' parity is taken with fmod rather than an int conversion (PyTorch's), which
/// agrees wherever that conversion is defined and stays defined for far coordinates.
template <typename T>
EMBER_HOST_DEVICE inline T grid_reflect(T in, int64_t twice_low, int64_t twice_high, T* grad) {
  if (twice_low == twice_high) {
    *grad = T(0);
    return T(0);
  }
  const T min = static_cast<T>(twice_low) / 2;
  const T span = static_cast<T>(twice_high - twice_low) / 2;
  in = in - min;
  T sign = T(1);
  if (in < T(0)) {
    sign = T(-1);
    in = -in;
  }
  const T extra = std::fmod(in, span);
  const bool odd = std::fmod(std::floor(in / span), T(2)) == T(1);
  *grad = odd ? -sign : sign;
  return odd ? span - extra + min : extra + min;
}

/// A coordinate outside int's range or not finite becomes -100: out of bounds, and safe to
/// convert (PyTorch's safe_downgrade_to_int_range).
template <typename T>
EMBER_HOST_DEVICE inline T grid_int_range(T x) {
  if (x > static_cast<T>(INT_MAX - 1) || x < static_cast<T>(INT_MIN) || !std::isfinite(x)) return T(-100);
  return x;
}

/// The padding applied to a pixel coordinate (PyTorch's compute_coordinates).
template <typename T>
EMBER_HOST_DEVICE inline T grid_pad(T x, int64_t size, GridPadding padding, bool align_corners) {
  T unused;
  if (padding == GridPadding::Border) {
    x = grid_clip(x, size);
  } else if (padding == GridPadding::Reflection) {
    x = align_corners ? grid_reflect(x, 0, 2 * (size - 1), &unused) : grid_reflect(x, -1, 2 * size - 1, &unused);
    x = grid_clip(x, size);
  }
  return grid_int_range(x);
}

/// The source pixel coordinate of a grid coordinate; with `grad`, PyTorch's _set_grad variant
/// (the backward's), which also gives d(pixel)/d(grid).
template <typename T>
EMBER_HOST_DEVICE inline T grid_source_index(T coord, int64_t size, GridPadding padding, bool align_corners, T* grad) {
  T unnormalize_grad;
  T x = grid_unnormalize(coord, size, align_corners, &unnormalize_grad);
  if (grad == nullptr) return grid_pad(x, size, padding, align_corners);
  *grad = unnormalize_grad;
  if (padding == GridPadding::Border) {
    T clip_grad;
    x = grid_clip_set_grad(x, size, &clip_grad);
    *grad = *grad * clip_grad;
  } else if (padding == GridPadding::Reflection) {
    T reflect_grad, clip_grad;
    x = align_corners ? grid_reflect(x, 0, 2 * (size - 1), &reflect_grad)
                      : grid_reflect(x, -1, 2 * size - 1, &reflect_grad);
    x = grid_clip_set_grad(x, size, &clip_grad);
    *grad = *grad * reflect_grad * clip_grad;
  }
  return grid_int_range(x);
}

/// Cubic convolution coefficients (A = -0.75) of the four taps at offsets -1, 0, 1, 2 from
/// floor(x), t = x - floor(x) (PyTorch's get_cubic_upsample_coefficients).
template <typename T>
EMBER_HOST_DEVICE inline void grid_cubic_coefficients(T coeffs[4], T t) {
  const T A = T(-0.75);
  auto conv1 = [A](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto conv2 = [A](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  coeffs[0] = conv2(t + T(1));
  coeffs[1] = conv1(t);
  coeffs[2] = conv1(T(1) - t);
  coeffs[3] = conv2(T(1) - t + T(1));
}

/// Their derivatives with respect to the tap distance (PyTorch's get_cubic_coefficients_grad):
/// d/dt is the negative of these.
template <typename T>
EMBER_HOST_DEVICE inline void grid_cubic_coefficients_grad(T coeffs[4], T t) {
  const T A = T(-0.75);
  T x = -T(1) - t;
  coeffs[0] = (-3 * A * x - 10 * A) * x - 8 * A;
  x = -t;
  coeffs[1] = (-3 * (A + 2) * x - 2 * (A + 3)) * x;
  x = T(1) - t;
  coeffs[2] = (3 * (A + 2) * x - 2 * (A + 3)) * x;
  x = T(2) - t;
  coeffs[3] = (3 * A * x - 10 * A) * x + 8 * A;
}

// ---- One grid point -----------------------------------------------------------------------

/// A grid point's taps: input point (z * H + y) * W + x, or -1 outside (zeros padding), and
/// weight; for bilinear, each dim's two factors (factor[d][0] = upper corner - coordinate,
/// factor[d][1] = coordinate - lower corner); for bicubic, the coefficients; and
/// d(pixel)/d(grid) per dim (the backward's).
template <typename T>
struct GridPoint {
  int64_t index[16];
  T weight[16];
  T factor[3][2];
  T coeff[2][4], coeff_grad[2][4];
  T grad_mult[3];
};

/// The taps of grid point p of batch entry n; `backward` takes PyTorch's backward coordinate
/// rules (grid_source_index's _set_grad variant) and fills grad_mult.
template <typename T>
EMBER_HOST_DEVICE inline void grid_point_taps(const GridGeometry& g, const T* grid, int64_t n, int64_t p, bool backward,
                                              GridPoint<T>& pt) {
  const T* coord = grid + (n * g.points + p) * g.dims;
  const int64_t W = g.in_size[0], H = g.in_size[1];
  if (g.interpolation == GridInterpolation::Bicubic) {  // 2-D only; padding per tap
    T ix = grid_unnormalize(coord[0], W, g.align_corners, &pt.grad_mult[0]);
    T iy = grid_unnormalize(coord[1], H, g.align_corners, &pt.grad_mult[1]);
    const T ix_nw = std::floor(ix), iy_nw = std::floor(iy);
    const T t[2] = {ix - ix_nw, iy - iy_nw};
    for (int d = 0; d < 2; ++d) {
      grid_cubic_coefficients(pt.coeff[d], t[d]);
      grid_cubic_coefficients_grad(pt.coeff_grad[d], t[d]);
    }
    for (int j = 0; j < 4; ++j) {
      for (int i = 0; i < 4; ++i) {
        const T x = grid_pad(ix_nw - 1 + i, W, g.padding, g.align_corners);
        const T y = grid_pad(iy_nw - 1 + j, H, g.padding, g.align_corners);
        const auto xi = static_cast<int64_t>(x), yi = static_cast<int64_t>(y);  // truncation, as PyTorch
        const bool inside = xi >= 0 && xi < W && yi >= 0 && yi < H;
        pt.index[j * 4 + i] = inside ? yi * W + xi : -1;
        pt.weight[j * 4 + i] = pt.coeff[0][i] * pt.coeff[1][j];
      }
    }
    return;
  }
  T pixel[3] = {T(0), T(0), T(0)};
  for (int d = 0; d < g.dims; ++d) {
    pixel[d] =
        grid_source_index(coord[d], g.in_size[d], g.padding, g.align_corners, backward ? &pt.grad_mult[d] : nullptr);
  }
  if (g.interpolation == GridInterpolation::Nearest) {
    int64_t at[3] = {0, 0, 0};
    bool inside = true;
    for (int d = 0; d < g.dims; ++d) {
      at[d] = static_cast<int64_t>(std::nearbyint(pixel[d]));  // half to even
      inside = inside && at[d] >= 0 && at[d] < g.in_size[d];
    }
    pt.index[0] = inside ? (at[2] * H + at[1]) * W + at[0] : -1;
    pt.weight[0] = T(1);
    return;
  }
  int64_t lower[3] = {0, 0, 0};
  for (int d = 0; d < g.dims; ++d) {
    lower[d] = static_cast<int64_t>(std::floor(pixel[d]));
    pt.factor[d][0] = static_cast<T>(lower[d] + 1) - pixel[d];
    pt.factor[d][1] = pixel[d] - static_cast<T>(lower[d]);
  }
  // Corner k: bit d set takes the upper neighbour along dim d (x fastest: PyTorch's nw, ne,
  // sw, se, then the bottom layer's).
  const int corners = 1 << g.dims;
  for (int k = 0; k < corners; ++k) {
    int64_t at[3] = {0, 0, 0};
    bool inside = true;
    T w = T(1);
    for (int d = 0; d < g.dims; ++d) {
      const int b = (k >> d) & 1;
      at[d] = lower[d] + b;
      inside = inside && at[d] >= 0 && at[d] < g.in_size[d];
      w = d == 0 ? pt.factor[0][b] : w * pt.factor[d][b];
    }
    pt.index[k] = inside ? (at[2] * H + at[1]) * W + at[0] : -1;
    pt.weight[k] = w;
  }
}

/// GridSample at grid point p of batch entry n, every channel.
template <typename T>
EMBER_HOST_DEVICE inline void grid_sample_point(const GridGeometry& g, const T* input, const T* grid, T* out, int64_t n,
                                                int64_t p) {
  GridPoint<T> pt;
  grid_point_taps(g, grid, n, p, /*backward=*/false, pt);
  const int64_t S = g.in_points();
  const int K = g.taps();
  for (int64_t c = 0; c < g.channels; ++c) {
    const T* plane = input + (n * g.channels + c) * S;
    T value = T(0);
    if (g.interpolation == GridInterpolation::Bicubic) {
      // Along x for each of the four rows, then along y, as PyTorch's cubic_interp1d.
      for (int j = 0; j < 4; ++j) {
        T row = T(0);
        for (int i = 0; i < 4; ++i) {
          const int64_t at = pt.index[j * 4 + i];
          row = i == 0 ? (at >= 0 ? plane[at] : T(0)) * pt.coeff[0][0]
                       : row + (at >= 0 ? plane[at] : T(0)) * pt.coeff[0][i];
        }
        value = j == 0 ? row * pt.coeff[1][0] : value + row * pt.coeff[1][j];
      }
    } else if (g.interpolation == GridInterpolation::Nearest) {
      value = pt.index[0] >= 0 ? plane[pt.index[0]] : T(0);
    } else {
      for (int k = 0; k < K; ++k) {
        if (pt.index[k] >= 0) value += plane[pt.index[k]] * pt.weight[k];
      }
    }
    out[(n * g.channels + c) * g.points + p] = value;
  }
}

/// Phase 1 of GridSampleBackward at grid point p of batch entry n: the grid's gradient there
/// (grad_grid may be null) and the point's taps (tap_index, tap_weight may be null).
template <typename T>
EMBER_HOST_DEVICE inline void grid_sample_backward_point(const GridGeometry& g, const T* grad_out, const T* input,
                                                         const T* grid, T* grad_grid, int64_t* tap_index, T* tap_weight,
                                                         int64_t n, int64_t p) {
  GridPoint<T> pt;
  grid_point_taps(g, grid, n, p, /*backward=*/true, pt);
  const int K = g.taps();
  if (tap_index != nullptr) {
    for (int k = 0; k < K; ++k) {
      tap_index[(n * g.points + p) * K + k] = pt.index[k];
      tap_weight[(n * g.points + p) * K + k] = pt.weight[k];
    }
  }
  if (grad_grid == nullptr) return;
  T* gg = grad_grid + (n * g.points + p) * g.dims;
  T acc[3] = {T(0), T(0), T(0)};
  if (g.interpolation != GridInterpolation::Nearest) {  // nearest: a zero gradient
    const int64_t S = g.in_points();
    for (int64_t c = 0; c < g.channels; ++c) {
      const T* plane = input + (n * g.channels + c) * S;
      const T go = grad_out[(n * g.channels + c) * g.points + p];
      if (g.interpolation == GridInterpolation::Bicubic) {
        for (int i = 0; i < 4; ++i) {
          for (int j = 0; j < 4; ++j) {
            const int64_t at = pt.index[j * 4 + i];
            const T v = at >= 0 ? plane[at] : T(0);
            acc[0] -= v * pt.coeff_grad[0][i] * pt.coeff[1][j] * go;
            acc[1] -= v * pt.coeff_grad[1][j] * pt.coeff[0][i] * go;
          }
        }
        continue;
      }
      for (int k = 0; k < K; ++k) {
        if (pt.index[k] < 0) continue;
        const T v = plane[pt.index[k]];
        for (int d = 0; d < g.dims; ++d) {
          T term = v;
          for (int e = 0; e < g.dims; ++e) {
            if (e != d) term = term * pt.factor[e][(k >> e) & 1];
          }
          term = term * go;
          if ((k >> d) & 1) acc[d] += term;
          else acc[d] -= term;
        }
      }
    }
  }
  const bool nearest = g.interpolation == GridInterpolation::Nearest;
  for (int d = 0; d < g.dims; ++d) gg[d] = nearest ? T(0) : pt.grad_mult[d] * acc[d];
}

/// Phase 2 for batch entry n: a stable counting sort of its taps by input point.
EMBER_HOST_DEVICE inline void grid_sample_sort_taps(const GridGeometry& g, const int64_t* tap_index, int64_t* starts,
                                                    int64_t* order, int64_t n) {
  const int64_t S = g.in_points(), entries = g.points * g.taps();
  const int64_t* taps = tap_index + n * entries;
  int64_t* start = starts + n * (S + 1);
  int64_t* ordered = order + n * entries;
  for (int64_t s = 0; s <= S; ++s) start[s] = 0;
  for (int64_t e = 0; e < entries; ++e) {
    if (taps[e] >= 0) ++start[taps[e] + 1];
  }
  for (int64_t s = 0; s < S; ++s) start[s + 1] += start[s];
  // Placing entry e advances start[its point] to the next point's start; shifted back below.
  for (int64_t e = 0; e < entries; ++e) {
    if (taps[e] >= 0) ordered[start[taps[e]]++] = e;
  }
  for (int64_t s = S; s > 0; --s) start[s] = start[s - 1];
  start[0] = 0;
  for (int64_t j = start[S]; j < entries; ++j) ordered[j] = -1;  // the taps outside: every entry written
}

/// Phase 3 at input element (n, c, s): the sum of its taps' contributions, in entry order.
template <typename T>
EMBER_HOST_DEVICE inline void grid_sample_gather_input(const GridGeometry& g, const T* grad_out, const T* tap_weight,
                                                       const int64_t* starts, const int64_t* order, T* grad_input,
                                                       int64_t n, int64_t c, int64_t s) {
  const int64_t S = g.in_points(), entries = g.points * g.taps();
  const int K = g.taps();
  const int64_t* start = starts + n * (S + 1);
  const int64_t* ordered = order + n * entries;
  const T* go = grad_out + (n * g.channels + c) * g.points;
  T acc = T(0);
  for (int64_t j = start[s]; j < start[s + 1]; ++j) {
    const int64_t e = ordered[j];
    acc += tap_weight[n * entries + e] * go[e / K];
  }
  grad_input[(n * g.channels + c) * S + s] = acc;
}

}  // namespace ember::detail
