#pragma once
// The order-preserving plan's fold of the tile partials by one block, in tile order.

#include "tally/detail/plan.cuh"
#include "tally/detail/tile/ordered_tile.cuh"
#include "tally/detail/tile/partials.cuh"
#include "tally/detail/tuning.cuh"

#include <cstdint>

namespace tally::detail {

// The ordered fold of the tile partials by one block: thread t waits for and folds its
// contiguous range of partials, then the ordered block tree. Every thread runs the same
// per_thread rounds, whether or not its range has a partial in them, so that each warp
// polls converged (poll_converged). Cells are read, never cleared (partials.cuh). With
// `bounded`, as fold_published_partials (commutative_fold.cuh).
template <class Acc, class Op>
__device__ __forceinline__ Acc ordered_fold_published_partials(partial_cell<Acc>* cells, std::uint64_t tiles, Op& op,
                                                               fold_sync sync, bool bounded, bool& gave_up) {
  const unsigned int epoch = sync.epoch;
  const std::uint64_t per_thread = ordered_partials_per_thread(tiles);
  const std::uint64_t from = std::uint64_t(threadIdx.x) * per_thread;
  const std::uint64_t to = from + per_thread < tiles ? from + per_thread : tiles;
  Acc acc{};
  bool valid = false;
  bool warp_gave_up = false;
  for (std::uint64_t round = 0; round < per_thread; ++round) {
    const std::uint64_t k = from + round;
    Acc value;
    bool ready = k >= to;
    poll_converged(cells, k, ready, value, epoch, sync, bounded, warp_gave_up);
    if (k < to && !warp_gave_up) {
      acc = valid ? static_cast<Acc>(op(acc, value)) : value;
      valid = true;
    }
  }
  // At most warp_threads partials: only warp 0 holds any (one each), and the block tree's
  // answer is warp 0's ordered tree, the other warps' being empty (as fold_partials_of).
  const bool warp_only = tuning::ordered_fold_few_partials_by_warp && tiles <= warp_threads;
  // Every thread of block 0 takes part in what follows a wait that ran out. (Warp 0 telling
  // the other warps through shared memory and a named barrier it only arrived at measured
  // slower than this barrier, and compute-sanitizer's racecheck took it for a race:
  // docs/decisions/0002-bounded-fold-wait.md.)
  if (bounded) gave_up = __syncthreads_or(warp_gave_up) != 0;
  if (warp_only) {
    if (threadIdx.x < warp_threads) acc = tally::warp::reduce_ordered(acc, valid, op);
    return acc;
  }
  return tally::block::reduce_ordered<block_threads>(acc, valid, op);
}

}  // namespace tally::detail
