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
// subtree: a warp can take a quarter of a plan warp's lanes, and the quarters' results are
// leaves of the same tree one level up. The lanes that hold values are a prefix of the plan's
// threads (t holds a fold exactly when its first row t * VW lies in the tile), so a right
// subtree holds a value only when its left one does, and skipping empty leaves gives the
// flagged trees' results.

#include "tally/detail/plan.cuh"
#include "tally/detail/tile/commutative_tile.cuh"
#include "tally/detail/tile/segment_replay.cuh"

#include <cstdint>
#include <iterator>

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
// complete; after 2^(Levels - 1) pushes, root() is the tree's value.
template <class Acc, unsigned Levels>
struct flat_tree {
  Acc value[Levels];
  bool valid[Levels];
  unsigned pushed = 0;

  template <class Op>
  __device__ __forceinline__ void push(Acc leaf, bool leaf_valid, Op& op) {
    unsigned carries = pushed++;
    unsigned level = 0;
    while (carries & 1u) {
      combine_flagged(value[level], valid[level], leaf, leaf_valid, op);
      leaf = value[level];
      leaf_valid = valid[level];
      carries >>= 1;
      ++level;
    }
    value[level] = leaf;
    valid[level] = leaf_valid;
  }
  __device__ __forceinline__ const Acc& root() const { return value[Levels - 1]; }
  __device__ __forceinline__ bool root_valid() const { return valid[Levels - 1]; }
};

// Where a column reduction reads: a row-major matrix with a leading dimension, its columns'
// plan, and the groups of 32 neighbouring columns that a warp's lanes take.
struct column_shape {
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
  std::uint64_t ld = 0;
  std::uint64_t groups = 0;  // ceil(cols / warp_threads)
  reduction_plan plan;       // the plan of one column: make_plan(rows, VW)
};

// The plan's thread t's fold of column `col` over the tile [tile_begin, tile_begin + len);
// valid says whether t holds any row of it.
template <class Acc, int VW, class It, class Op>
__device__ __forceinline__ Acc fold_column_thread(It matrix, const column_shape& shape, std::uint64_t col,
                                                  std::uint64_t tile_begin, std::uint64_t len, unsigned t, Op& op,
                                                  bool& valid) {
  using value_t = typename std::iterator_traits<It>::value_type;
  using diff_t = typename std::iterator_traits<It>::difference_type;
  Acc acc{};
  valid = std::uint64_t(t) * VW < len;
  if (!valid) return acc;
  const std::uint64_t step_items = shape.plan.step_items;
  // Row r of the tile at first[r * ld]: one 64-bit product per step, the rest offsets.
  const diff_t ld = static_cast<diff_t>(shape.ld);
  const diff_t load_stride = ld * (block_threads * VW);
  for (std::uint64_t step = 0; step < len; step += step_items) {
    const std::uint64_t thread_first = step + std::uint64_t(t) * VW;  // the thread's first row of the step
    if (thread_first >= len) break;                                  // and of every later step
    const It first = matrix + static_cast<diff_t>((tile_begin + thread_first) * shape.ld + col);
    // A whole step holds every row of the thread's chunks; in the tile's last, partial step the
    // rows below len are a prefix of the thread's rows.
    const bool whole = len - step >= step_items;
    const std::uint64_t below = len - thread_first;
    value_t x[loads_per_step][VW];
#pragma unroll
    for (int u = 0; u < loads_per_step; ++u)
#pragma unroll
      for (int k = 0; k < VW; ++k)
        if (whole || unsigned(u * block_threads * VW + k) < below) x[u][k] = first[u * load_stride + k * ld];
#pragma unroll
    for (int u = 0; u < loads_per_step; ++u)
#pragma unroll
      for (int k = 0; k < VW; ++k)
        if (whole || unsigned(u * block_threads * VW + k) < below) {
          if (step == 0 && u == 0 && k == 0) {
            acc = static_cast<Acc>(x[0][0]);
          } else {
            fold_into(acc, x[u][k], op);
          }
        }
  }
  return acc;
}

// How many warps play one plan warp in a column tile: each takes an aligned quarter of its
// lanes in bit-reversed order, so that a block of 8 * 4 warps holds a whole tile of 32
// columns, with four times the loads in flight of one warp per plan warp.
inline constexpr unsigned column_quarters = 4;
inline constexpr unsigned column_tile_threads = block_threads * column_quarters;

// A tile of at most block_threads * VW rows gives each of the plan's threads at most one chunk:
// a quarter then reads its 8 threads' chunks at once (8 * VW loads in flight, where one thread
// at a time would have VW), and folds them after.
template <class Acc, int VW, class It, class Op>
__device__ __forceinline__ void push_short_quarter(It matrix, const column_shape& shape, std::uint64_t col,
                                                   std::uint64_t tile_begin, std::uint64_t len, unsigned w, unsigned q,
                                                   Op& op, flat_tree<Acc, 4>& tree) {
  using value_t = typename std::iterator_traits<It>::value_type;
  using diff_t = typename std::iterator_traits<It>::difference_type;
  constexpr unsigned leaves = warp_threads / column_quarters;
  const diff_t ld = static_cast<diff_t>(shape.ld);
  const It column = matrix + static_cast<diff_t>(tile_begin * shape.ld + col);
  value_t x[leaves][VW];
#pragma unroll
  for (unsigned k = 0; k < leaves; ++k) {
    const std::uint64_t first_row = std::uint64_t(w * warp_threads + reverse_bits(q * leaves + k, 5)) * VW;
#pragma unroll
    for (int e = 0; e < VW; ++e)
      if (first_row + e < len) x[k][e] = column[static_cast<diff_t>(first_row + e) * ld];
  }
#pragma unroll
  for (unsigned k = 0; k < leaves; ++k) {
    const std::uint64_t first_row = std::uint64_t(w * warp_threads + reverse_bits(q * leaves + k, 5)) * VW;
    const bool valid = first_row < len;
    Acc acc{};
    if (valid) {
      acc = static_cast<Acc>(x[k][0]);
#pragma unroll
      for (int e = 1; e < VW; ++e)
        if (first_row + e < len) fold_into(acc, x[k][e], op);
    }
    tree.push(acc, valid, op);
  }
}

// This warp's subtree of a column tile: quarter q of plan warp w, for the lane's column.
template <class Acc, int VW, class It, class Op>
__device__ __forceinline__ Acc column_quarter(It matrix, const column_shape& shape, std::uint64_t col,
                                              std::uint64_t tile_begin, std::uint64_t len, unsigned w, unsigned q,
                                              Op& op, bool& valid) {
  constexpr unsigned leaves = warp_threads / column_quarters;
  flat_tree<Acc, 4> tree;
  static_assert(leaves == 8, "a quarter of a warp's 32 lanes: a tree of 8 leaves, 4 levels");
  if (len <= std::uint64_t(block_threads) * VW) {
    push_short_quarter<Acc, VW>(matrix, shape, col, tile_begin, len, w, q, op, tree);
  } else {
#pragma unroll 1
    for (unsigned k = 0; k < leaves; ++k) {
      const unsigned t = w * warp_threads + reverse_bits(q * leaves + k, 5);
      bool folded = false;
      const Acc a = fold_column_thread<Acc, VW>(matrix, shape, col, tile_begin, len, t, op, folded);
      tree.push(a, folded, op);
    }
  }
  valid = tree.root_valid();
  return tree.root();
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

// The tile's partial from its 32 quarters (quarter q of plan warp w in slots[w * 4 + q]): the
// block tree is warp 0's tree over the 8 warps' results, whose leaves in bit-reversed order
// are warps 0, 4, 2, 6, 1, 5, 3, 7, each the subtree of its 4 quarters in order.
template <class Acc, class Slot, class Op>
__device__ __forceinline__ Acc column_tile_partial(Slot slot, Op& op, bool& valid) {
  constexpr unsigned warps = block_threads / warp_threads;
  static_assert(warps == 8 && column_quarters == 4, "a tree of 8 warps of 4 quarters: 32 leaves, 6 levels");
  flat_tree<Acc, 6> tree;
#pragma unroll
  for (unsigned m = 0; m < warps; ++m) {
    const unsigned w = reverse_bits(m, 3);
#pragma unroll
    for (unsigned q = 0; q < column_quarters; ++q) {
      bool ok = false;
      const Acc a = slot(w * column_quarters + q, ok);
      tree.push(a, ok, op);
    }
  }
  valid = tree.root_valid();
  return tree.root();
}

}  // namespace tally::detail
