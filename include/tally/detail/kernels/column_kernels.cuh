#pragma once
// The kernels of a column reduction of a row-major matrix (reduce_columns under a commutative
// operator; tile/column_tile.cuh has the per-tile work and why its bits are tally::reduce's):
//   column_tiles_kernel  a block of 32 warps per (tile, group of 32 columns): warp 4w + q plays
//                        quarter q of the plan's warp w, a lane per column (fewer warps where
//                        the plan's later warps hold no rows of a column); the block's warp 0
//                        folds the 32 quarters into the tile's partial. A one-tile plan writes
//                        op(init, partial) to out; a longer one leaves the partials in scratch,
//                        partials[tile * cols + column]
//   short_columns_kernel columns of at most warp_threads * VW rows, whose plan holds only warp
//                        0's first lanes: a thread per column evaluates that lane tree depth
//                        first (segment_by_thread_tree), the warp's loads of one row together
//   column_fold_kernel   a block per group of 32 columns folds the plan's tile partials: warp w
//                        the plan's chains 32w .. 32w + 31 (chain t is partials t, t + 256, ...
//                        in order), the warp tree over them, then warp 0's tree over the warps.

#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tile/column_tile.cuh"

#include <cstdint>
#include <iterator>

namespace tally::detail {

template <class Acc, int VW, class It, class Op, class OutIt>
__global__ void __launch_bounds__(column_tile_threads, 1)
    column_tiles_kernel(It matrix, column_shape shape, Acc init, Op op, OutIt out, Acc* partials) {
  wait_for_prior_grid();
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  constexpr unsigned quarters = column_tile_threads / warp_threads;
  __shared__ alignas(Acc) unsigned char slot_bytes[quarters * warp_threads * sizeof(Acc)];
  __shared__ bool slot_valid[quarters * warp_threads];
  Acc* const slots = reinterpret_cast<Acc*>(slot_bytes);
  const unsigned lane = threadIdx.x % warp_threads;
  const unsigned warp = threadIdx.x / warp_threads;
  // Neighbouring blocks take neighbouring groups of the same tile: the same rows of memory.
  const std::uint64_t group = blockIdx.x % shape.groups;
  const std::uint64_t tile = blockIdx.x / shape.groups;
  const std::uint64_t col = group * warp_threads + lane;
  const bool has_column = col < shape.cols;
  const std::uint64_t tile_begin = shape.plan.tile_begin(tile);
  const std::uint64_t len = shape.plan.tile_is_full(tile) ? shape.plan.tile_items : shape.rows - tile_begin;
  if (has_column) {
    bool valid = false;
    const Acc quarter = column_quarter<Acc, VW>(matrix, shape, col, tile_begin, len, warp / column_quarters,
                                                warp % column_quarters, op, valid);
    slots[warp * warp_threads + lane] = quarter;
    slot_valid[warp * warp_threads + lane] = valid;
  }
  __syncthreads();
  if (warp != 0 || !has_column) return;
  // A block of fewer warps (a short column, whose later plan warps hold no rows) has no slots
  // for them: they are empty leaves.
  const unsigned held = blockDim.x / warp_threads;
  bool valid = false;
  const Acc partial = column_tile_partial<Acc>(
      [&](unsigned slot, bool& ok) {
        ok = slot < held && slot_valid[slot * warp_threads + lane];
        return ok ? slots[slot * warp_threads + lane] : Acc{};
      },
      op, valid);
  if (shape.plan.tiles == 1) {
    out[static_cast<out_diff>(col)] = static_cast<Acc>(op(init, partial));
  } else {
    partials[tile * shape.cols + col] = partial;
  }
}

template <class Acc, int VW, class It, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    short_columns_kernel(It matrix, column_shape shape, Acc init, Op op, OutIt out) {
  wait_for_prior_grid();
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  using diff_t = typename std::iterator_traits<It>::difference_type;
  for (std::uint64_t col = std::uint64_t(blockIdx.x) * block_threads + threadIdx.x; col < shape.cols;
       col += std::uint64_t(gridDim.x) * block_threads) {
    const column_loader<It> load{matrix + static_cast<diff_t>(col), static_cast<diff_t>(shape.ld)};
    out[static_cast<out_diff>(col)] = shape.rows <= std::uint64_t(VW)
                                          ? segment_by_thread<Acc, VW>(load, shape.rows, init, op)
                                          : segment_by_thread_tree<Acc, VW>(load, shape.rows, init, op);
  }
}

template <class Acc, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    column_fold_kernel(column_shape shape, Acc init, Op op, OutIt out, const Acc* partials) {
  wait_for_prior_grid();
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  constexpr unsigned warps = block_threads / warp_threads;
  static_assert(warps == 8, "warp 0's tree over 8 warps: 4 levels");
  __shared__ alignas(Acc) unsigned char slot_bytes[warps * warp_threads * sizeof(Acc)];
  __shared__ bool slot_valid[warps * warp_threads];
  Acc* const slots = reinterpret_cast<Acc*>(slot_bytes);
  const unsigned lane = threadIdx.x % warp_threads;
  const unsigned warp = threadIdx.x / warp_threads;
  const std::uint64_t col = std::uint64_t(blockIdx.x) * warp_threads + lane;
  const bool has_column = col < shape.cols;
  const std::uint64_t tiles = shape.plan.tiles;
  if (has_column) {
    flat_tree<Acc, 6> tree;
#pragma unroll
    for (unsigned k = 0; k < warp_threads; ++k) {
      const std::uint64_t t = warp * warp_threads + reverse_bits(k, 5);
      Acc chain{};
      const bool valid = t < tiles;
      if (valid) {
        chain = partials[t * shape.cols + col];
        for (std::uint64_t i = t + block_threads; i < tiles; i += block_threads)
          chain = static_cast<Acc>(op(chain, partials[i * shape.cols + col]));
      }
      tree.push(chain, valid, op);
    }
    slots[warp * warp_threads + lane] = tree.root();
    slot_valid[warp * warp_threads + lane] = tree.root_valid();
  }
  __syncthreads();
  if (warp != 0 || !has_column) return;
  flat_tree<Acc, 4> tree;
#pragma unroll
  for (unsigned m = 0; m < warps; ++m) {
    const unsigned w = reverse_bits(m, 3);
    tree.push(slots[w * warp_threads + lane], slot_valid[w * warp_threads + lane], op);
  }
  out[static_cast<out_diff>(col)] = static_cast<Acc>(op(init, tree.root()));
}

}  // namespace tally::detail
