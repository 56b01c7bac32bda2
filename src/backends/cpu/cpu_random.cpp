// Normal, Uniform and Arange: values depend only on each element's row-major index
// (kernels/random.h), so the loop keeps row-major order (no dim reordering) and
// passes each row's starting index to the body.
#include <algorithm>
#include <type_traits>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/cpu_vector.h"
#include "kernels/random.h"

namespace ember::detail::cpu {
namespace {

// Runs value(i) -> T for every element i of out, in row-major numbering.
template <typename T, typename ValueFn>
void generate(const TensorArg& out, ValueFn value) {
  LoopShape s = make_loop_shape({&out}, /*reorder=*/false);
  char* base[] = {static_cast<char*>(out.data)};
  parallel_for(0, s.numel, kGrainSize, [&](int64_t begin, int64_t end) {
    int64_t index = begin;
    auto body = [&](char* const* p, const int64_t* st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * st[0]) = value(index + i);
      index += n;
    };
    for_each_row(s, base, begin, end, body);
  });
}

// Note [Normal by Philox blocks]
// normal_at computes, for each element, the Philox block of each word it takes: four blocks
// per float element (two words, one block each, every block yielding four words of which one
// is used), eight per double. Elements 2j and 2j + 1 of a float draw take the four words of
// one block (when the offset is a multiple of 4, as the generators keep it), and a double
// element the four words of one block (offset even). normal_rows computes each block once,
// 16 blocks at a time with the rounds outermost so the lanes vectorize, then applies the
// same Box-Muller (normal_from_uniforms) to the same words: the values are normal_at's, bit
// for bit (tests/test_cpu_random.cpp compares every element). Other offsets take normal_at.
constexpr int kLanes = 16;

// The 4 * kLanes words of blocks first_block, first_block + 1, ..., in stream order.
EMBER_VECTOR_CLONES void philox_blocks(uint64_t seed, uint64_t first_block, uint32_t* words) {
  // philox4x32's state in 64-bit lanes holding 32-bit values: the products of zero-extended
  // 32-bit operands then vectorize as pmuludq, which the 32-bit form does not.
  uint64_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    const uint64_t counter = first_block + static_cast<uint64_t>(j);
    c0[j] = counter & 0xffffffffu;
    c1[j] = counter >> 32;
    c2[j] = 0;
    c3[j] = 0;
  }
  uint64_t k0 = seed & 0xffffffffu, k1 = seed >> 32;
  for (int round = 0; round < 10; ++round) {
#pragma GCC unroll 1
    for (int j = 0; j < kLanes; ++j) {  // philox4x32's round, lane by lane
      const uint64_t p0 = (c0[j] & 0xffffffffu) * uint64_t{0xD2511F53u};
      const uint64_t p1 = (c2[j] & 0xffffffffu) * uint64_t{0xCD9E8D57u};
      const uint64_t n0 = (p1 >> 32) ^ c1[j] ^ k0;
      const uint64_t n2 = (p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = p1 & 0xffffffffu;
      c3[j] = p0 & 0xffffffffu;
      c0[j] = n0;
      c2[j] = n2;
    }
    k0 = (k0 + 0x9E3779B9u) & 0xffffffffu;
    k1 = (k1 + 0xBB67AE85u) & 0xffffffffu;
  }
  for (int j = 0; j < kLanes; ++j) {
    words[4 * j] = static_cast<uint32_t>(c0[j]);
    words[4 * j + 1] = static_cast<uint32_t>(c1[j]);
    words[4 * j + 2] = static_cast<uint32_t>(c2[j]);
    words[4 * j + 3] = static_cast<uint32_t>(c3[j]);
  }
}

// count float normals from the word pairs w[0..2 count) (Note [Box-Muller in float]): one
// loop without calls, so it vectorizes.
EMBER_VECTOR_CLONES void box_muller_floats(const uint32_t* w, int64_t count, float mean, float std, float* values) {
  for (int64_t e = 0; e < count; ++e) {
    const float u1 = static_cast<float>(static_cast<int32_t>(w[2 * e] >> 8)) * (1.0f / 16777216.0f);
    const float u2 = static_cast<float>(static_cast<int32_t>(w[2 * e + 1] >> 8)) * (1.0f / 16777216.0f);
    values[e] = normal_from_uniforms<float>(u1, u2, mean, std);
  }
}

// Elements [first, first + n) of a normal draw in R (Note [Normal by Philox blocks]); the
// offset is a multiple of 4 (float) or even (double).
template <typename T, typename R>
void normal_rows(uint64_t seed, uint64_t offset, int64_t first, int64_t n, R mean, R std, char* out, int64_t stride) {
  constexpr int64_t kPerBatch = std::is_same_v<R, double> ? kLanes : 2 * kLanes;  // elements per 16 blocks
  uint32_t words[4 * kLanes];
  int64_t k = 0;
  while (k < n) {
    const int64_t i = first + k;
    // Float: element i's words start at stream index offset + 2i; double: at 2 (offset + 2i).
    const uint64_t word =
        std::is_same_v<R, double> ? 2 * (offset + 2 * static_cast<uint64_t>(i)) : offset + 2 * static_cast<uint64_t>(i);
    philox_blocks(seed, word / 4, words);
    const int64_t skip = static_cast<int64_t>(word % 4) / (std::is_same_v<R, double> ? 4 : 2);  // 0 or 1
    const int64_t count = std::min(n - k, kPerBatch - skip);
    if constexpr (std::is_same_v<R, float>) {
      float values[2 * kLanes];
      box_muller_floats(words + 2 * skip, count, mean, std, values);
      for (int64_t e = 0; e < count; ++e) *reinterpret_cast<T*>(out + (k + e) * stride) = T(values[e]);
      k += count;
      continue;
    }
    for (int64_t e = 0; e < count; ++e) {
      R u1, u2;
      const uint32_t* w = words + (std::is_same_v<R, double> ? 4 : 2) * (skip + e);
      if constexpr (std::is_same_v<R, double>) {
        u1 = static_cast<double>((uint64_t{w[0]} >> 5) * 67108864ull + (w[1] >> 6)) * (1.0 / 9007199254740992.0);
        u2 = static_cast<double>((uint64_t{w[2]} >> 5) * 67108864ull + (w[3] >> 6)) * (1.0 / 9007199254740992.0);
      } else {
        u1 = static_cast<float>(w[0] >> 8) * (1.0f / 16777216.0f);
        u2 = static_cast<float>(w[1] >> 8) * (1.0f / 16777216.0f);
      }
      *reinterpret_cast<T*>(out + (k + e) * stride) = T(normal_from_uniforms<R>(u1, u2, mean, std));
    }
    k += count;
  }
}

template <typename T, typename R>
void generate_normal(const TensorArg& out, uint64_t seed, uint64_t offset, R mean, R std) {
  if (offset % (std::is_same_v<R, double> ? 2 : 4) != 0) {
    return generate<T>(out, [=](int64_t i) { return T(normal_at<R>(seed, offset, i, mean, std)); });
  }
  LoopShape s = make_loop_shape({&out}, /*reorder=*/false);
  char* base[] = {static_cast<char*>(out.data)};
  parallel_for(0, s.numel, kGrainSize, [&](int64_t begin, int64_t end) {
    int64_t index = begin;
    auto body = [&](char* const* p, const int64_t* st, int64_t n) {
      normal_rows<T, R>(seed, offset, index, n, mean, std, p[0], st[0]);
      index += n;
    };
    for_each_row(s, base, begin, end, body);
  });
}

template <typename T>
void run_typed(const KernelCall& call, const TensorArg& out) {
  constexpr bool kFloating = is_floating_v<T>;
  using R = std::conditional_t<std::is_same_v<T, double>, double, float>;  // draw precision
  // A replayed graph's random op reads its seed and base offset now (Note [Graph-safe Philox]).
  const uint64_t seed = call.philox_seed_ptr ? static_cast<uint64_t>(*call.philox_seed_ptr) : call.seed;
  const uint64_t offset = call.offset + (call.philox_offset_ptr ? static_cast<uint64_t>(*call.philox_offset_ptr) : 0);
  switch (call.op) {
    case OpKind::Normal:
      if constexpr (!kFloating) {
        not_implemented("normal_kernel_cpu", out.dtype);
      } else {
        return generate_normal<T, R>(out, seed, offset, call.arg<kargs::Normal>().mean.to<R>(),
                                     call.arg<kargs::Normal>().std.to<R>());
      }
    case OpKind::Uniform:
      if constexpr (!kFloating) {
        not_implemented("uniform_kernel_cpu", out.dtype);
      } else {
        const auto& a = call.arg<kargs::Uniform>();
        const R from = a.from.to<R>(), to = a.to.to<R>();
        return generate<T>(out, [=](int64_t i) { return uniform_value<T, R>(seed, offset, i, from, to); });
      }
    case OpKind::Arange:
      if constexpr (is_complex_v<T> || std::is_same_v<T, bool>) {
        not_implemented("arange_cpu", out.dtype);
      } else if constexpr (kFloating) {
        // Computed in double like PyTorch's accumulate type, then rounded once.
        const auto& a = call.arg<kargs::Arange>();
        const double start = a.start.to<double>(), step = a.step.to<double>();
        return generate<T>(out, [=](int64_t i) { return convert<T>(start + static_cast<double>(i) * step); });
      } else {
        const auto& a = call.arg<kargs::Arange>();
        const int64_t start = a.start.to<int64_t>(), step = a.step.to<int64_t>();
        return generate<T>(out, [=](int64_t i) { return convert<T>(start + i * step); });
      }
    default: fail<ValueError>("cpu::run_random: not a random op: ", static_cast<int>(call.op));
  }
}

}  // namespace

void run_random(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1, ValueError, "random op: expected 1 output");
  const TensorArg& out = call.outputs[0];
  dispatch(out.dtype, [&]<typename T>(TypeTag<T>) { run_typed<T>(call, out); });
}

}  // namespace ember::detail::cpu
