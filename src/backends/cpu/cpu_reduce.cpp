// Reductions over one dim, several dims or all elements: sum, mean, max, min, all.
//
// The input is split into kept dims (one output element each) and reduced dims, both
// dropped of size-1 dims and coalesced; reduced dims may be reordered by stride since
// the result does not depend on their order. Two strategies:
//  - rows: the innermost reduced dim is dense (inner reductions, full reductions of a
//    permuted-contiguous tensor). Each output reduces its rows with reduce_dense (16
//    lanes, vectorised). A single large output is cut into fixed blocks whose partial
//    results combine in block order, so results do not depend on the thread count.
//  - columns: otherwise (e.g. reducing dim 0 of a contiguous matrix). Outputs along the
//    kept dim with the smallest input stride are computed a block at a time, adding
//    input rows into narrow lanes (a dense, vectorisable loop) that are widened into
//    the Acc every kRowsPerLane rows. Few outputs over many rows cut the rows into fixed
//    chunks too, whose partial results combine in chunk order.
#include <algorithm>
#include <complex>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/op_name.h"
#include "kernels/reducers.h"

namespace ember::detail::cpu {
namespace {

constexpr int kLanes = 16;
constexpr int64_t kLaneBlock = 1024;  // float lanes sum at most 64 values before widening
constexpr int64_t kColumns = 256;
constexpr int64_t kMaxColumns = 4096;
constexpr int64_t kRowsPerLane = 64;
constexpr int64_t kChunkRows = 1024;  // rows of one task when the columns path cuts rows (a multiple of kRowsPerLane)
constexpr int64_t kMaxPartials = int64_t{1} << 17;  // the chunks' partial results it may keep (1 MiB of double)

struct Dim {
  int64_t size, in_stride, out_stride;  // strides in elements
};

struct Geometry {
  std::vector<Dim> kept;     // outermost first
  std::vector<Dim> reduced;  // sorted by decreasing |stride|, coalesced
  int64_t num_outputs = 1, reduce_size = 1;
};

void coalesce(std::vector<Dim>& dims) {
  std::vector<Dim> out;
  for (const Dim& d : dims) {
    if (d.size == 1) continue;
    if (!out.empty() && out.back().in_stride == d.in_stride * d.size &&
        out.back().out_stride == d.out_stride * d.size) {
      out.back().size *= d.size;
      out.back().in_stride = d.in_stride;
      out.back().out_stride = d.out_stride;
    } else {
      out.push_back(d);
    }
  }
  dims = std::move(out);
}

Geometry make_geometry(const KernelCall& call, const TensorArg& out, const TensorArg& in) {
  const int64_t nd = static_cast<int64_t>(in.sizes.size());
  const int64_t dim = call.arg<kargs::Dim>().dim;
  const uint64_t more = call.arg<kargs::Dim>().more;
  EMBER_CHECK(dim >= -1 && dim < std::max<int64_t>(nd, 1), IndexError,
              "Dimension out of range (expected to be in range of [", -std::max<int64_t>(nd, 1), ", ",
              std::max<int64_t>(nd, 1) - 1, "], but got ", dim, ")");
  EMBER_CHECK(nd >= 64 || (more >> nd) == 0, IndexError, "reduction over dims ", more, " of a ", nd, "-dim tensor");
  const bool keepdim = static_cast<int64_t>(out.sizes.size()) == nd && dim != -1;
  Geometry g;
  int64_t out_dim = 0;
  for (int64_t d = 0; d < nd; ++d) {
    bool reduce = dim == -1 || d == dim || (d < 64 && ((more >> d) & 1) != 0);
    if (reduce) {
      g.reduced.push_back({in.sizes[d], in.strides[d], 0});
      g.reduce_size *= in.sizes[d];
      if (keepdim) ++out_dim;
    } else {
      EMBER_ASSERT(out_dim < static_cast<int64_t>(out.sizes.size()) && out.sizes[out_dim] == in.sizes[d]);
      g.kept.push_back({in.sizes[d], in.strides[d], out.strides[out_dim++]});
      g.num_outputs *= in.sizes[d];
    }
  }
  std::stable_sort(g.reduced.begin(), g.reduced.end(),
                   [](const Dim& a, const Dim& b) { return std::abs(a.in_stride) > std::abs(b.in_stride); });
  coalesce(g.kept);
  coalesce(g.reduced);
  return g;
}

// Sets in/out element offsets of output number `index` (row-major over kept dims).
void output_offsets(const std::vector<Dim>& kept, int64_t index, int64_t& in_off, int64_t& out_off) {
  in_off = out_off = 0;
  for (size_t d = kept.size(); d-- > 0;) {
    int64_t c = index % kept[d].size;
    index /= kept[d].size;
    in_off += c * kept[d].in_stride;
    out_off += c * kept[d].out_stride;
  }
}

template <typename R, typename T>
typename R::Acc reduce_dense(const T* p, int64_t n) {
  using Lane = typename R::Lane;
  typename R::Acc total = R::acc_identity();
  for (int64_t start = 0; start < n; start += kLaneBlock) {
    const int64_t m = std::min(kLaneBlock, n - start);
    const T* q = p + start;
    Lane lanes[kLanes];
    for (int j = 0; j < kLanes; ++j) lanes[j] = R::lane_identity();
    int64_t i = 0;
    for (; i + kLanes <= m; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lanes[j] = R::step(lanes[j], q[i + j]);
    }
    for (; i < m; ++i) lanes[0] = R::step(lanes[0], q[i]);
    for (int width = kLanes / 2; width > 0; width /= 2) {  // pairwise
      for (int j = 0; j < width; ++j) lanes[j] = R::lane_combine(lanes[j], lanes[j + width]);
    }
    total = R::merge(total, lanes[0]);
  }
  return total;
}

template <typename R, typename T>
typename R::Acc reduce_strided(const T* p, int64_t stride, int64_t n) {
  typename R::Acc total = R::acc_identity();
  for (int64_t start = 0; start < n; start += kLaneBlock) {
    const int64_t m = std::min(kLaneBlock, n - start);
    typename R::Lane lane = R::lane_identity();
    for (int64_t i = 0; i < m; ++i) lane = R::step(lane, p[(start + i) * stride]);
    total = R::merge(total, lane);
  }
  return total;
}

// A LoopShape over the reduced dims of one input, so for_each_row can walk any range.
LoopShape reduced_shape(const Geometry& g, int64_t element_bytes) {
  LoopShape s;
  s.num_operands = 1;
  s.numel = g.reduce_size;
  for (const Dim& d : g.reduced) {
    s.sizes.push_back(d.size);
    s.strides.push_back({d.in_stride * element_bytes});
  }
  if (s.sizes.empty()) {
    s.sizes.push_back(g.reduce_size);  // 1 (nothing to reduce) or 0 (an empty dim)
    s.strides.push_back({element_bytes});
  }
  return s;
}

// Reduces linear elements [begin, end) of the reduced dims starting at `base`.
template <typename R, typename T>
typename R::Acc reduce_range(const LoopShape& s, const T* base, int64_t begin, int64_t end) {
  typename R::Acc acc = R::acc_identity();
  char* ptrs[] = {reinterpret_cast<char*>(const_cast<T*>(base))};
  auto body = [&](char* const* p, const int64_t* st, int64_t n) {
    const T* q = reinterpret_cast<const T*>(p[0]);
    acc = R::combine(acc, st[0] == static_cast<int64_t>(sizeof(T))
                              ? reduce_dense<R>(q, n)
                              : reduce_strided<R>(q, st[0] / static_cast<int64_t>(sizeof(T)), n));
  };
  for_each_row(s, ptrs, begin, end, body);
  return acc;
}

template <typename Acc>
void store(const TensorArg& out, int64_t offset, Acc value) {
  dispatch(out.dtype, [&]<typename Out>(TypeTag<Out>) { static_cast<Out*>(out.data)[offset] = convert<Out>(value); });
}

template <typename R, typename T>
void reduce_rows(const Geometry& g, const TensorArg& out, const T* in) {
  const LoopShape s = reduced_shape(g, sizeof(T));
  if (g.num_outputs == 1 && g.reduce_size > kGrainSize) {
    const int64_t blocks = (g.reduce_size + kGrainSize - 1) / kGrainSize;
    // One slot per block, written by different threads: a std::unique_ptr array, not a
    // vector, which for bool would pack the slots into shared words (a data race).
    std::unique_ptr<typename R::Acc[]> partial(new typename R::Acc[static_cast<size_t>(blocks)]);
    parallel_for(0, blocks, 1, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        partial[k] = reduce_range<R>(s, in, k * kGrainSize, std::min(g.reduce_size, (k + 1) * kGrainSize));
      }
    });
    typename R::Acc acc = R::acc_identity();
    for (int64_t k = 0; k < blocks; ++k) acc = R::combine(acc, partial[k]);
    int64_t in_off, out_off;
    output_offsets(g.kept, 0, in_off, out_off);
    store(out, out_off, R::finish(acc, g.reduce_size));
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(g.reduce_size, 1));
  parallel_for(0, g.num_outputs, grain, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      int64_t in_off, out_off;
      output_offsets(g.kept, o, in_off, out_off);
      store(out, out_off, R::finish(reduce_range<R>(s, in + in_off, 0, g.reduce_size), g.reduce_size));
    }
  });
}

template <typename R, typename T>
void reduce_columns(Geometry g, const TensorArg& out, const T* in) {
  using Acc = typename R::Acc;
  using Lane = typename R::Lane;
  // The column dim: the kept dim with the smallest input stride, moved innermost.
  auto col = std::min_element(g.kept.begin(), g.kept.end(),
                              [](const Dim& a, const Dim& b) { return std::abs(a.in_stride) < std::abs(b.in_stride); });
  const Dim column = *col;
  g.kept.erase(col);
  const bool dense = column.in_stride == 1;
  const int64_t outer = g.num_outputs / column.size;
  // Few outputs over many rows ({8192, 512}.sum(0), a bias gradient): the rows are cut into
  // chunks of kChunkRows, each chunk a task of its own over wide column blocks, and the chunks'
  // partial results are added in chunk order afterwards. Whether and how rows are cut depends on
  // the shape only, so the thread count changes no result.
  const int64_t chunks = (g.reduce_size + kChunkRows - 1) / kChunkRows;
  const bool split = chunks > 1 && g.num_outputs * chunks <= kMaxPartials;
  const int64_t row_chunks = split ? chunks : 1;
  // Wide blocks stream long runs of each input row (the hardware prefetcher stops at page
  // boundaries), narrow enough to give every thread a task (a block's width changes no result).
  const int64_t threads = num_threads();
  const int64_t per_thread =
      split ? (column.size * row_chunks * outer + threads - 1) / threads : (column.size + threads - 1) / threads;
  const int64_t block = std::clamp((per_thread + kColumns - 1) / kColumns * kColumns, kColumns, kMaxColumns);
  const int64_t blocks_per_outer = (column.size + block - 1) / block;
  const LoopShape s = reduced_shape(g, sizeof(T));
  const int64_t rows_per_task = split ? kChunkRows : g.reduce_size;
  const int64_t work_per_task = rows_per_task * std::min(column.size, block);
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(work_per_task, 1));
  // Partial results of the chunks, [chunk][output] (outputs numbered outer-major, then column).
  std::unique_ptr<Acc[]> partial(split ? new Acc[static_cast<size_t>(g.num_outputs * row_chunks)] : nullptr);
  parallel_for(0, outer * blocks_per_outer * row_chunks, grain, [&](int64_t b, int64_t e) {
    // Arrays, not std::vector: Lane and Acc may be bool.
    auto acc = std::make_unique<Acc[]>(static_cast<size_t>(block));
    auto lanes = std::make_unique<Lane[]>(static_cast<size_t>(block));
    for (int64_t task = b; task < e; ++task) {
      const int64_t chunk = task % row_chunks, column_task = task / row_chunks;
      const int64_t o = column_task / blocks_per_outer;
      int64_t in_off, out_off;
      output_offsets(g.kept, o, in_off, out_off);
      const int64_t j0 = (column_task % blocks_per_outer) * block;
      const int64_t width = std::min(block, column.size - j0);
      in_off += j0 * column.in_stride;
      out_off += j0 * column.out_stride;
      Lane* lane = lanes.get();
      std::fill_n(acc.get(), width, R::acc_identity());
      std::fill_n(lane, width, R::lane_identity());
      int64_t rows_in_lane = 0;
      char* ptrs[] = {reinterpret_cast<char*>(const_cast<T*>(in + in_off))};
      auto body = [&](char* const* p, const int64_t* st, int64_t n) {
        for (int64_t r = 0; r < n; ++r) {
          const T* row = reinterpret_cast<const T*>(p[0] + r * st[0]);
          int64_t j = 0;
          if (dense) {
            for (; j + kColumns <= width; j += kColumns) {
              // Constant trip count and no aliasing (lanes are private): vectorises at -O2.
#pragma GCC ivdep
              for (int64_t k = 0; k < kColumns; ++k) lane[j + k] = R::step(lane[j + k], row[j + k]);
            }
          }
          for (; j < width; ++j) lane[j] = R::step(lane[j], row[j * column.in_stride]);
          if (++rows_in_lane == kRowsPerLane) {  // widen before narrow lanes lose precision
            for (int64_t k = 0; k < width; ++k) acc[k] = R::merge(acc[k], lane[k]), lane[k] = R::lane_identity();
            rows_in_lane = 0;
          }
        }
      };
      const int64_t row0 = chunk * rows_per_task;
      for_each_row(s, ptrs, row0, std::min(g.reduce_size, row0 + rows_per_task), body);
      for (int64_t k = 0; k < width; ++k) acc[k] = R::merge(acc[k], lane[k]);
      if (split) {
        std::copy_n(acc.get(), width, partial.get() + chunk * g.num_outputs + o * column.size + j0);
        continue;
      }
      dispatch(out.dtype, [&]<typename Out>(TypeTag<Out>) {
        Out* dst = static_cast<Out*>(out.data) + out_off;
        for (int64_t k = 0; k < width; ++k) dst[k * column.out_stride] = convert<Out>(R::finish(acc[k], g.reduce_size));
      });
    }
  });
  if (!split) return;
  // The chunks' partial results, added in chunk order.
  const int64_t out_grain = std::max<int64_t>(1, kGrainSize / row_chunks);
  parallel_for(0, g.num_outputs, out_grain, [&](int64_t b, int64_t e) {
    dispatch(out.dtype, [&]<typename Out>(TypeTag<Out>) {
      for (int64_t i = b; i < e; ++i) {
        Acc total = partial[static_cast<size_t>(i)];
        for (int64_t c = 1; c < row_chunks; ++c)
          total = R::combine(total, partial[static_cast<size_t>(c * g.num_outputs + i)]);
        int64_t in_off, out_off;
        output_offsets(g.kept, i / column.size, in_off, out_off);
        out_off += (i % column.size) * column.out_stride;
        static_cast<Out*>(out.data)[out_off] = convert<Out>(R::finish(total, g.reduce_size));
      }
    });
  });
}

template <typename R, typename T>
void reduce(const KernelCall& call, const TensorArg& out, const TensorArg& in) {
  Geometry g = make_geometry(call, out, in);
  if (g.num_outputs == 0) return;
  const T* data = static_cast<const T*>(in.data);
  const bool dense_rows = g.reduced.empty() || g.reduced.back().in_stride == 1;
  if (dense_rows || g.kept.empty()) {
    reduce_rows<R>(g, out, data);
  } else {
    reduce_columns<R>(std::move(g), out, data);
  }
}

}  // namespace

void run_reduce(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 1, ValueError, op_name(call.op),
              ": expected 1 output and 1 input");
  const TensorArg &out = call.outputs[0], &in = call.inputs[0];
  dispatch(in.dtype, [&]<typename T>(TypeTag<T>) {
    switch (call.op) {
      // EMBER_REDUCE_OPS (kernels/op_list.h): each reducer for the dtypes of its row's class.
#define EMBER_CPU_REDUCE(Kind, name, Reducer, Types)                  \
  case OpKind::Kind:                                                  \
    if constexpr (!Types<T>::value) not_implemented(#name, in.dtype); \
    else return reduce<Reducer<T>, T>(call, out, in);                 \
    break;
      EMBER_REDUCE_OPS(EMBER_CPU_REDUCE)
#undef EMBER_CPU_REDUCE
      default: fail<ValueError>("cpu::run_reduce: not a reduction: ", static_cast<int>(call.op));
    }
  });
}

}  // namespace ember::detail::cpu
