#pragma once
// The commutative plan's fold of the tile partials by one block (block 0 of the single pass,
// or the second launch of the two pass): thread t folds partials t, t + block_threads, ...
// as they are published, then the block tree (plan.cuh).

#include "tally/block/reduce.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tile/partials.cuh"
#include "tally/detail/tuning.cuh"
#include "tally/warp/reduce.cuh"

#include <cstdint>

namespace tally::detail {

// The block tree over the folding block's threads' folds of the tile partials (thread t has
// folded partials t, t + block_threads, ...; valid says whether it had any); thread 0 gets it.
// With a partial for every thread the tree needs no validity flags: the same tree, with
// less on its critical path. With at most warp_threads partials only warp 0 holds any, and
// the block tree's answer is warp 0's tree: the other warps' results are empty, and
// combining with empty changes nothing. Warp 0's tree alone gives those bits without the
// block stage's two barriers, which sit at the end of every call of 2 to 32 tiles
// (docs/decisions/0009-fold-polling.md). Thread t holds a partial exactly when t < tiles
// (every caller folds partials t, t + block_threads, ... or holds chain t), so warp 0's tree
// knows its flags without exchanging them (warp::detail::reduce_prefix_lanes;
// docs/decisions/0029-shorter-trees-at-the-end-of-a-call.md).
//
// Exact 32-bit integer operators, which a warp folds by one redux.sync
// (warp::detail::folds_by_redux_v), have an identity: a thread without a partial takes it,
// so the block tree needs no flags whatever the count, and warp 0 needs no vote on them. Any
// order of their combines gives the same bits.
template <class Acc, class Op>
__device__ __forceinline__ Acc fold_partials_of(Acc acc, bool valid, std::uint64_t tiles, Op& op) {
  namespace lanes = tally::warp::detail;
  if constexpr (lanes::folds_by_redux_v<Acc, Op>) {
    if (!valid) acc = lanes::redux_identity<Acc, Op>();
    if (tiles > warp_threads) return tally::block::reduce<block_threads>(acc, op);
    if (threadIdx.x < warp_threads) acc = lanes::redux_all_lanes<Acc, Op>(acc);
    return acc;
  } else {
    if (tiles >= block_threads) return tally::block::reduce<block_threads>(acc, op);
    if (tuning::fold_few_partials_by_warp && tiles <= warp_threads) {
      if (threadIdx.x < warp_threads) acc = lanes::reduce_prefix_lanes<warp_threads>(acc, static_cast<unsigned>(tiles), op);
      return acc;
    }
    return tally::block::reduce<block_threads>(acc, valid, op);
  }
}

// The plan's fold of the tile partials, by one whole block: thread t folds partials t,
// t + block_threads, ... in order, then the block tree. A batch of cells is read at once,
// so the L2 latencies overlap; a cell not yet published is then polled alone until it is,
// and the next one after it. (Polling the rest of its batch as well kept so many loads in
// flight, from a block 0 that polls from the kernel's start, that the tile block beside it
// on its SM fell behind.) Every thread runs the same rounds of the same batch, whether or not
// it has cells in them, so that each warp polls converged (poll_converged). Cells are read,
// never cleared: the next call's epoch differs. docs/decisions/0009-fold-polling.md has the
// measurements behind the batch, the lone poll and the converged warps.
// With `bounded` (block 0's first fold in a single pass) each warp's wait is bounded
// (partials.cuh, fold_sync); gave_up then says, in every thread, that some wait ran out and
// the total is not to be used.
template <class Acc, class Op, class Codec>
__device__ __forceinline__ Acc fold_published_partials(const Codec& codec,
                                                       partial_cell<typename Codec::partial_type>* cells,
                                                       std::uint64_t tiles, std::uint64_t tile_items, Op& op,
                                                       fold_sync sync, bool bounded, bool& gave_up) {
  const unsigned int epoch = sync.epoch;
  using partial_t = typename Codec::partial_type;
  // The batch follows the accumulator's size, not the partial's: a compact 8-byte extremum
  // polled 16 at a time measured slower than 4 at a time (docs/decisions/0009-fold-polling.md).
  constexpr int batch = sizeof(Acc) <= 8 ? tuning::fold_batch : (sizeof(Acc) <= 32 ? 4 : 1);
  constexpr std::uint64_t round_items = std::uint64_t(batch) * block_threads;
  Acc acc{};
  bool valid = false;
  bool warp_gave_up = false;
  for (std::uint64_t round_begin = 0; round_begin < tiles; round_begin += round_items) {
    const std::uint64_t base = round_begin + threadIdx.x;
    partial_t value[batch];
    bool ready[batch];
#pragma unroll
    for (int j = 0; j < batch; ++j) {
      const std::uint64_t k = base + std::uint64_t(j) * block_threads;
      ready[j] = k >= tiles || cells[k].try_read(value[j], epoch);
    }
#pragma unroll
    for (int j = 0; j < batch; ++j) {
      if (round_begin + std::uint64_t(j) * block_threads >= tiles) break;  // the same for the whole block
      const std::uint64_t k = base + std::uint64_t(j) * block_threads;
      poll_converged(cells, k, ready[j], value[j], epoch, sync, bounded, warp_gave_up);
      if (k < tiles && !warp_gave_up) {
        const Acc partial = codec.decode(value[j], k * tile_items);
        acc = valid ? static_cast<Acc>(op(acc, partial)) : partial;
        valid = true;
      }
    }
  }
  // Every thread of block 0 takes part in what follows a wait that ran out. (Warp 0 telling
  // the other warps through shared memory and a named barrier it only arrived at measured
  // slower than this barrier, and compute-sanitizer's racecheck took it for a race:
  // docs/decisions/0002-bounded-fold-wait.md.)
  if (bounded) gave_up = __syncthreads_or(warp_gave_up) != 0;
  return fold_partials_of<Acc>(acc, valid, tiles, op);
}

}  // namespace tally::detail
