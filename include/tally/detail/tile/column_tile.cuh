#pragma once
// The per-tile work of a column reduction of a row-major matrix (reduce_columns; kernels/
// column_kernels.cuh). Column j must get exactly the bits of tally::reduce over a contiguous
// copy of it, so its plan is make_plan(rows, VW): thread t of a tile folds the rows
//     tile_begin + s * step_items + (u * block_threads + t) * VW + k      (s, u, k in order)
// and the trees above combine those folds. Here a lane holds one column and plays one of the
// plan's threads at a time: the 32 lanes of a warp read one row of 32 neighbouring columns in
// one 128-byte access, where the column-major view read one element per row.
//
// The plan's trees (warp/reduce.cuh) are shuffle-down trees: at the level of distance d, lane
// i takes op(value of i, value of i + d). Depth first, that is a perfect binary tree whose
// leaves, left to right, are the lanes in bit-reversed order, so a thread that visits the
// lanes in that order and combines as a binary counter carries (flat_tree) evaluates the same
// combines with the same operands in the same order. Any aligned run of that order is a
// subtree: a warp can take an aligned run of a plan warp's lanes (column_subtree), and the
// runs' results are leaves of the same tree higher up (plan_warp_over_subtrees). The lanes
// that hold values are a prefix of the plan's threads (t holds a fold exactly when its first row t * VW lies in the tile), so a right
// subtree holds a value only when its left one does, and skipping empty leaves gives the
// flagged trees' results.

#include "tally/detail/plan.cuh"
#include "tally/detail/tile/commutative_tile.cuh"
#include "tally/detail/tile/segment_replay.cuh"
#include "tally/detail/tuning.cuh"

#include <cstdint>
#include <iterator>
#include <type_traits>

namespace tally::detail {

// op(left, right) where both hold a value; otherwise whichever does (the flagged trees' rule).
template <class Acc, class Op>
__device__ __forceinline__ void combine_flagged(Acc& left, bool& left_valid, const Acc& right, bool right_valid,
                                                Op& op) {
  if (right_valid) left = left_valid ? static_cast<Acc>(op(left, right)) : right;
  left_valid = left_valid || right_valid;
}

// k's lowest `bits` bits in reverse order.
__device__ __forceinline__ unsigned reverse_bits(unsigned k, unsigned bits) {
  return bits == 0 ? 0u : __brev(k) >> (32u - bits);
}

// A perfect binary tree over leaves pushed left to right, combined as soon as a subtree is
// complete; after 2^(Levels - 1) pushes, root() is the tree's value, and after 2^l pushes
// (l < Levels) root_of(2^l) is. Every level is named by an unrolled index, never a computed
// one, so the levels stay in registers also where the pushes are counted at run time.
template <class Acc, unsigned Levels>
struct flat_tree {
  Acc value[Levels];
  bool valid[Levels];
  unsigned pushed = 0;

  template <class Op>
  __device__ __forceinline__ void push(Acc leaf, bool leaf_valid, Op& op) {
    unsigned carries = pushed++;
    bool placed = false;
#pragma unroll
    for (unsigned level = 0; level < Levels; ++level) {
      if (placed) continue;
      if (carries & 1u) {
        combine_flagged(value[level], valid[level], leaf, leaf_valid, op);
        leaf = value[level];
        leaf_valid = valid[level];
        carries >>= 1;
      } else {
        value[level] = leaf;
        valid[level] = leaf_valid;
        placed = true;
      }
    }
  }
  __device__ __forceinline__ const Acc& root() const { return value[Levels - 1]; }
  __device__ __forceinline__ bool root_valid() const { return valid[Levels - 1]; }
  // The tree of the first `leaves` pushes (a power of two, at most 2^(Levels - 1)).
  __device__ __forceinline__ Acc root_of(unsigned leaves, bool& root_is_valid) const {
    Acc result = value[0];
    root_is_valid = valid[0];
#pragma unroll
    for (unsigned level = 1; level < Levels; ++level)
      if (leaves == (1u << level)) {
        result = value[level];
        root_is_valid = valid[level];
      }
    return result;
  }
};

// Where a column reduction reads: a row-major matrix with a leading dimension, its columns'
// plan, and the groups of 32 neighbouring columns that a warp's lanes take.
struct column_shape {
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
  std::uint64_t ld = 0;
  std::uint64_t groups = 0;  // ceil(cols / warp_threads)
  reduction_plan plan;       // the plan of one column: make_plan(rows, VW)
  unsigned plan_warps = 0;   // the plan's warps that hold rows of its first (longest) tile
  unsigned subtree = 1;      // leaves of a plan warp's tree per task: 1, 2, 4 or 8
  unsigned subtree_shift = 0;  // log2(subtree)
  std::uint64_t task_groups = 0;  // groups of the subtrees kernel: warp_threads runs of columns
};

// The values of C neighbouring columns of one row: a lane of the subtrees kernel holds C
// columns, and where C > 1 reads them in one load (the matrix a pointer to plain values, each
// run's address a multiple of its size: column_run_fits). Each column keeps its own fold and
// trees, so its bits do not depend on C.
template <class T, int C>
struct alignas(C > 1 ? sizeof(T) * C : alignof(T)) column_run {
  T v[C];
};

// The run of C columns at p (one value where C == 1, any iterator).
template <int C, class It>
__device__ __forceinline__ column_run<typename std::iterator_traits<It>::value_type, C> read_run(It p) {
  using value_t = typename std::iterator_traits<It>::value_type;
  if constexpr (C == 1) {
    column_run<value_t, 1> run;
    run.v[0] = *p;
    return run;
  } else {
    static_assert(std::is_pointer_v<It>, "a run of several columns is read through a pointer");
    return *reinterpret_cast<const column_run<value_t, C>*>(p);
  }
}

// op column by column, for the trees over runs.
template <class Op>
struct columnwise {
  Op& op;
  template <class T, int C>
  __device__ __forceinline__ column_run<T, C> operator()(const column_run<T, C>& a, const column_run<T, C>& b) const {
    column_run<T, C> r;
#pragma unroll
    for (int c = 0; c < C; ++c) r.v[c] = static_cast<T>(op(a.v[c], b.v[c]));
    return r;
  }
};

// acc = the fold of x into acc, column by column; `start`: acc holds nothing yet, x is first.
template <class Acc, class T, int C, class Op>
__device__ __forceinline__ void fold_run(column_run<Acc, C>& acc, const column_run<T, C>& x, bool start, Op& op) {
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (start) {
      acc.v[c] = static_cast<Acc>(x.v[c]);
    } else {
      fold_into(acc.v[c], x.v[c], op);
    }
  }
}

// Folds one step of the plan's thread into acc: its chunk u's row k lies u * block_threads *
// VW + k rows below `first`, and only the rows less than `below` below it are read. The chunks
// are read Batch at a time, each batch's loads in flight together, then folded in order; each
// address is walked from the one before. `empty`: acc holds nothing yet.
template <int VW, int Batch, int C, class Acc, class It, class Diff, class Op>
__device__ __forceinline__ void fold_column_step(It first, Diff ld, Diff load_stride, std::uint64_t below, bool empty,
                                                 column_run<Acc, C>& acc, Op& op) {
  using value_t = typename std::iterator_traits<It>::value_type;
  static_assert(loads_per_step % Batch == 0, "a step's chunks split into whole batches");
  It chunk = first;
#pragma unroll
  for (int b = 0; b < loads_per_step; b += Batch) {
    column_run<value_t, C> x[Batch][VW];
#pragma unroll
    for (int u = 0; u < Batch; ++u) {
      It row = chunk;
#pragma unroll
      for (int k = 0; k < VW; ++k) {
        if (std::uint64_t(b + u) * block_threads * VW + k < below) x[u][k] = read_run<C>(row);
        row += ld;
      }
      chunk += load_stride;
    }
#pragma unroll
    for (int u = 0; u < Batch; ++u)
#pragma unroll
      for (int k = 0; k < VW; ++k)
        if (std::uint64_t(b + u) * block_threads * VW + k < below)
          fold_run(acc, x[u][k], b == 0 && u == 0 && k == 0 && empty, op);
  }
}

// Chunks a thread reads at once: fewer where each load brings several columns.
template <int C>
inline constexpr int column_batch = tuning::column_chunks_at_once / C > 0 ? tuning::column_chunks_at_once / C : 1;

// The plan's thread t's fold of the run of columns from `col` over the tile [tile_begin,
// tile_begin + len); valid says whether t holds any row of it.
template <class Acc, int VW, int C, class It, class Op>
__device__ __forceinline__ column_run<Acc, C> fold_column_thread(It matrix, const column_shape& shape,
                                                                 std::uint64_t col, std::uint64_t tile_begin,
                                                                 std::uint64_t len, unsigned t, Op& op, bool& valid) {
  using diff_t = typename std::iterator_traits<It>::difference_type;
  constexpr int batch = column_batch<C>;
  column_run<Acc, C> acc{};
  valid = std::uint64_t(t) * VW < len;
  if (!valid) return acc;
  const std::uint64_t step_items = shape.plan.step_items;
  const diff_t ld = static_cast<diff_t>(shape.ld);
  const diff_t load_stride = ld * (block_threads * VW);
  const diff_t step_stride = ld * static_cast<diff_t>(step_items);
  It first = matrix + static_cast<diff_t>((tile_begin + std::uint64_t(t) * VW) * shape.ld + col);
  // Whole steps hold every row of the thread's chunks: no row is checked. The strides pass
  // through an empty statement each step, so that the compiler does not hoist every load's
  // offset out of the loop and hold them all in registers.
  std::uint64_t step = 0;
  for (; len - step >= step_items; step += step_items, first += step_stride) {
    diff_t row_stride = ld, chunk_stride = load_stride;
    asm volatile("" : "+l"(row_stride), "+l"(chunk_stride));
    fold_column_step<VW, batch>(first, row_stride, chunk_stride, step_items, step == 0, acc, op);
  }
  // The tile's last, partial step: the rows below len are a prefix of the thread's rows.
  if (step < len && step + std::uint64_t(t) * VW < len)
    fold_column_step<VW, batch>(first, ld, load_stride, len - step - std::uint64_t(t) * VW, step == 0, acc, op);
  return acc;
}

// A column tile's leaves for the plan's warp trees are its plan threads' folds; a task of the
// column kernels takes an aligned run of `subtree` leaves of one plan warp in bit-reversed order
// (a subtree of that warp's tree, column_shape::subtree, a power of two up to
// column_subtree_max) and leaves the subtree's value for the tile's trees.
inline constexpr unsigned column_subtree_max = 8;
inline constexpr unsigned column_subtree_levels = 4;  // a flat_tree of column_subtree_max leaves

// Leaf `leaf` (0..31, in bit-reversed order) of plan warp w: the plan's thread.
__device__ __forceinline__ unsigned plan_thread_of_leaf(unsigned w, unsigned leaf) {
  return w * warp_threads + reverse_bits(leaf, 5);
}

// A tile of at most block_threads * VW rows gives each of the plan's threads at most one chunk:
// the subtree's chunks are read several leaves at once (up to column_batch * VW loads in
// flight, where one thread at a time would have VW), then folded and pushed in order.
template <class Acc, int VW, int C, class It, class Op>
__device__ __forceinline__ void push_short_subtree(It matrix, const column_shape& shape, std::uint64_t col,
                                                   std::uint64_t tile_begin, std::uint64_t len, unsigned w,
                                                   unsigned first_leaf, Op& op,
                                                   flat_tree<column_run<Acc, C>, column_subtree_levels>& tree) {
  using value_t = typename std::iterator_traits<It>::value_type;
  using diff_t = typename std::iterator_traits<It>::difference_type;
  constexpr unsigned batch = unsigned(column_batch<C>) < column_subtree_max ? unsigned(column_batch<C>)
                                                                            : column_subtree_max;
  columnwise<Op> by_column{op};
  const diff_t ld = static_cast<diff_t>(shape.ld);
  const It column = matrix + static_cast<diff_t>(tile_begin * shape.ld + col);
  // `batch` leaves' chunks at a time: their loads in flight together, then folded in order.
#pragma unroll
  for (unsigned b = 0; b < column_subtree_max; b += batch) {
    if (b >= shape.subtree) break;
    column_run<value_t, C> x[batch][VW];
#pragma unroll
    for (unsigned k = 0; k < batch; ++k) {
      const std::uint64_t first_row = std::uint64_t(plan_thread_of_leaf(w, first_leaf + b + k)) * VW;
      It row = column + static_cast<diff_t>(first_row) * ld;
#pragma unroll
      for (int e = 0; e < VW; ++e) {
        if (b + k < shape.subtree && first_row + e < len) x[k][e] = read_run<C>(row);
        row += ld;
      }
    }
#pragma unroll
    for (unsigned k = 0; k < batch; ++k) {
      if (b + k >= shape.subtree) break;
      const std::uint64_t first_row = std::uint64_t(plan_thread_of_leaf(w, first_leaf + b + k)) * VW;
      const bool valid = first_row < len;
      column_run<Acc, C> acc{};
#pragma unroll
      for (int e = 0; e < VW; ++e)
        if (first_row + e < len) fold_run(acc, x[k][e], e == 0, op);
      tree.push(acc, valid, by_column);
    }
  }
}

// Subtree `subtree_index` of plan warp w of a column tile, for the lane's run of columns from
// `col`: the value of its leaves' tree; valid says whether any of its plan threads holds a row.
template <class Acc, int VW, int C, class It, class Op>
__device__ __forceinline__ column_run<Acc, C> column_subtree(It matrix, const column_shape& shape, std::uint64_t col,
                                                             std::uint64_t tile_begin, std::uint64_t len, unsigned w,
                                                             unsigned subtree_index, Op& op, bool& valid) {
  flat_tree<column_run<Acc, C>, column_subtree_levels> tree;
  columnwise<Op> by_column{op};
  const unsigned first_leaf = subtree_index * shape.subtree;
  if (len <= std::uint64_t(block_threads) * VW) {
    push_short_subtree<Acc, VW, C>(matrix, shape, col, tile_begin, len, w, first_leaf, op, tree);
  } else {
#pragma unroll 1
    for (unsigned k = 0; k < shape.subtree; ++k) {
      bool folded = false;
      const column_run<Acc, C> a = fold_column_thread<Acc, VW, C>(matrix, shape, col, tile_begin, len,
                                                                  plan_thread_of_leaf(w, first_leaf + k), op, folded);
      tree.push(a, folded, by_column);
    }
  }
  return tree.root_of(shape.subtree, valid);
}

// A column as a segment loader (tile/segment_replay.cuh): element i is row i.
template <class It>
struct column_loader {
  It column;  // the column's first element
  typename std::iterator_traits<It>::difference_type ld;
  __device__ __forceinline__ typename std::iterator_traits<It>::value_type element(std::uint64_t i) const {
    return column[static_cast<typename std::iterator_traits<It>::difference_type>(i) * ld];
  }
};

// Plan warp w's tree over its subtrees' values (subtree(s, ok) gives subtree s, of
// 2^subtree_shift leaves each): each value stands for the first leaf of its run and the run's
// other leaves hold nothing, so the warp's 32-leaf tree combines the values exactly where the
// subtrees' roots sit in it.
template <class Acc, class Subtree, class Op>
__device__ __forceinline__ Acc plan_warp_over_subtrees(unsigned subtree_shift, Subtree subtree, Op& op, bool& valid) {
  // The values are read a batch at a time before the batch's combines, so that the reads are
  // in flight together rather than one after another behind the tree; the batches run as a
  // loop, so that the kernels stay small (they run few warps each, and a long unrolled body
  // is fetched from memory as it runs).
  constexpr unsigned batch = 8;
  const unsigned subtree_leaves = 1u << subtree_shift;
  flat_tree<Acc, 6> tree;
#pragma unroll 1
  for (unsigned first = 0; first < warp_threads; first += batch) {
    Acc value[batch];
    bool ok[batch];
#pragma unroll
    for (unsigned j = 0; j < batch; ++j) {
      const unsigned leaf = first + j;
      ok[j] = false;
      value[j] = Acc{};
      if ((leaf & (subtree_leaves - 1)) == 0) value[j] = subtree(leaf >> subtree_shift, ok[j]);
    }
#pragma unroll
    for (unsigned j = 0; j < batch; ++j) tree.push(value[j], ok[j], op);
  }
  valid = tree.root_valid();
  return tree.root();
}

// The block tree over the plan's 8 warps' values (warp(w, ok) gives plan warp w's): warp 0's
// tree, whose leaves in bit-reversed order are warps 0, 4, 2, 6, 1, 5, 3, 7.
template <class Acc, class Warp, class Op>
__device__ __forceinline__ Acc block_tree_over_plan_warps(Warp warp, Op& op, bool& valid) {
  constexpr unsigned warps = block_threads / warp_threads;
  static_assert(warps == 8, "a tree of 8 warps: 4 levels");
  flat_tree<Acc, 4> tree;
#pragma unroll
  for (unsigned m = 0; m < warps; ++m) {
    const unsigned w = reverse_bits(m, 3);
    bool ok = false;
    const Acc a = warp(w, ok);
    tree.push(a, ok, op);
  }
  valid = tree.root_valid();
  return tree.root();
}

}  // namespace tally::detail
