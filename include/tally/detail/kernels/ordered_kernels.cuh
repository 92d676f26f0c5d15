#pragma once
// The order-preserving kernels, for operators that are associative but not commutative:
// the result is the left-to-right fold whatever N. They follow the plan's ordered variant
// (plan.cuh, ordered_tile): lanes own contiguous runs, warps contiguous regions of the tile,
// trees combine neighbours with the lower one on the left, and tile partials are folded in
// tile order. The single pass and the two pass reuse the flagged partial cells of the
// commutative kernels (partials.cuh), so the scratch protocol is the same; plans of one or
// two tiles take one block of their own (ordered_small_reduce_kernel) and no scratch.

#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/kernels/publish_result.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/scratch_layout.cuh"
#include "tally/detail/tile/ordered_fold.cuh"
#include "tally/detail/tile/ordered_tile.cuh"
#include "tally/detail/tile/partials.cuh"

#include <cstdint>

namespace tally::detail {

// Block 0 of an ordered single pass whose wait ran out: as reduce_unpublished_tiles
// (reduce_kernels.cuh), each tile not published yet is reduced by ordered_reduce_my_tiles for
// that tile alone, so to its tile block's bits.
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ void ordered_reduce_unpublished_tiles(const Loader& load, const reduction_plan& plan, Op& op,
                                                              partial_cell<Acc>* cells, fold_sync sync) {
  for (std::uint64_t tile = 0; tile < plan.tiles; ++tile) {
    if (__syncthreads_or(threadIdx.x == 0 && !cells[tile].is_published(sync.epoch)) == 0) continue;
    ordered_reduce_my_tiles<Acc, VW>(load, plan, op, cells, sync.epoch, tile, plan.tiles);
  }
  __syncthreads();  // thread 0's cell stores come before every thread's fold reads them
  if (threadIdx.x == 0) atomicAdd(sync.control + control_word::fallback_folds, 1u);
}

// Out of line for the reason refold_after_wait_ran_out is (reduce_kernels.cuh): the cold
// path's registers stay off the hot path's.
template <class Acc, int VW, class Loader, class Op>
__device__ __noinline__ Acc ordered_refold_after_wait_ran_out(Loader load, reduction_plan plan, Op op,
                                                               partial_cell<Acc>* cells, fold_sync sync) {
  ordered_reduce_unpublished_tiles<Acc, VW>(load, plan, op, cells, sync);
  bool gave_up = false;
  return ordered_fold_published_partials(cells, plan.tiles, op, sync, false, gave_up);
}

// Plans of one or two tiles (N up to two steps: 2^14 floats, 2^13 doubles) in one block,
// without partials in the scratch and without a block waiting on another. A tile of one
// step holds one piece per warp region, so piece p of the input is region p % 8 of tile
// p / 8: warp w folds pieces w and w + 8 (the second one's loads in flight while it folds
// the first), and only the warps whose first piece holds an element are launched. The
// warps' folds then go through fold_warp_leaders's tree, per tile (slots past the launched
// warps are empty, as such warps' are there), and two tiles' folds combine as the ordered
// fold of two partials does: op(p0, p1). So the bits are the single pass's. A single piece
// (N up to 1024 floats) is one warp's fold, with no block stage at all. The smallest
// ordered calls thus pay neither a combine across blocks nor a scratch lease
// (docs/decisions/0012-ordered-plan.md).
template <class Acc, int VW, class Loader, class Op, class Out>
__global__ void __launch_bounds__(block_threads)
    ordered_small_reduce_kernel(Loader load, std::uint64_t n, Acc init, Op op, Out* out, host_handoff* handoff) {
  wait_for_prior_grid();
  constexpr int tile_warps = block_threads / warp_threads;
  constexpr std::uint64_t piece_items = ordered_piece_items<VW>;
  const int warp = int(threadIdx.x / warp_threads);
  const int lane = int(threadIdx.x % warp_threads);
  const std::uint64_t first = std::uint64_t(warp) * piece_items;
  const std::uint64_t second = first + std::uint64_t(tile_warps) * piece_items;
  Acc folds[2] = {};
  bool valid[2] = {false, false};
  bool first_done = false;
  if constexpr (ordered_stages_chunks<VW, Loader>) {
    if (first + piece_items <= n) {  // a full piece: no checks
      piece_chunks<VW, Loader> fetched;
      fetched.fetch(load, first);
      const bool second_full = second + piece_items <= n;
      folds[0] = fold_fetched_full_piece<Acc, VW>(load, first, fetched, second_full, second, op);
      valid[0] = first_done = true;
      if (second_full) {
        folds[1] = fold_fetched_full_piece<Acc, VW>(load, second, fetched, false, 0, op);
        valid[1] = true;
      } else if (second < n) {
        folds[1] = fold_checked_piece<Acc, VW>(load, second, n, op, valid[1]);
      }
    }
  }
  if (!first_done) {  // the first piece is the last one, and partial (or chunks are not staged)
    folds[0] = fold_checked_piece<Acc, VW>(load, first, n, op, valid[0]);
    if (second < n) folds[1] = fold_checked_piece<Acc, VW>(load, second, n, op, valid[1]);
  }
  if (n <= piece_items) {  // one warp, one piece
    if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, folds[0]))), handoff);
    return;
  }

  __shared__ tally::block::detail::reduce_storage<Acc, 2 * tile_warps> storage;
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      storage.slots()[k * tile_warps + warp] = folds[k];
      storage.valid[k * tile_warps + warp] = valid[k];
    }
  }
  __syncthreads();
  if (warp != 0) return;
  // Lanes 0-7 hold tile 0's warps' folds, lanes 8-15 tile 1's; each group runs
  // fold_warp_leaders's tree, so lane 0 gets tile 0's fold and lane 8 tile 1's.
  const int launched = int(blockDim.x / warp_threads);
  const int region = lane % tile_warps;
  bool ok = lane < 2 * tile_warps && region < launched && storage.valid[lane];
  Acc value = folds[0];
  if (ok) value = storage.slots()[lane];
#pragma unroll
  for (int delta = 1; delta < tile_warps; delta *= 2) {
    const Acc right = tally::warp::shuffle_down(value, unsigned(delta));
    const bool right_ok = __shfl_down_sync(tally::warp::full_mask, ok, unsigned(delta)) && region + delta < tile_warps;
    if ((lane & (2 * delta - 1)) == 0) {
      if (right_ok) value = ok ? static_cast<Acc>(op(value, right)) : right;
      ok = ok || right_ok;
    }
  }
  const Acc second_tile = tally::warp::shuffle_down(value, unsigned(tile_warps));
  const bool second_ok = __shfl_down_sync(tally::warp::full_mask, ok, unsigned(tile_warps));
  if (lane == 0) {
    const Acc total = second_ok ? static_cast<Acc>(op(value, second_tile)) : value;
    publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), handoff);
  }
}

// Two resident blocks per SM at least, as the commutative kernels: the prefetched piece
// takes registers that would otherwise cost occupancy. Block 0's wait for partials is bounded,
// and it reduces the tiles it waited for too long itself, as in single_pass_reduce_kernel.
template <class Acc, int VW, class Loader, class Op, class Out>
__global__ void __launch_bounds__(block_threads, 2)
    ordered_single_pass_kernel(Loader load, reduction_plan plan, Acc init, Op op, partial_cell<Acc>* cells,
                               fold_sync sync, Out* out, host_handoff* handoff) {
  wait_for_prior_grid();
  if (plan.tiles == 1) {
    const Acc total = ordered_reduce_tile<Acc, VW>(load, plan, 0, op);
    if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), handoff);
    return;
  }
  ordered_reduce_my_tiles<Acc, VW>(load, plan, op, cells, sync.epoch, blockIdx.x, gridDim.x);
  if (blockIdx.x != 0) return;
  // Block 0 reduces its own tiles first (folding only, as the commutative kernel does with
  // few tiles, measured slower here: docs/decisions/0012-ordered-plan.md), then folds, its
  // first wait bounded, as the commutative single pass's (reduce_kernels.cuh,
  // single_pass_reduce_kernel).
  bool gave_up = false;
  Acc total = ordered_fold_published_partials(cells, plan.tiles, op, sync, true, gave_up);
  if (gave_up) total = ordered_refold_after_wait_ran_out<Acc, VW>(load, plan, op, cells, sync);
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), handoff);
}

template <class Acc, int VW, class Loader, class Op>
__global__ void __launch_bounds__(block_threads, 2)
    ordered_tile_partials_kernel(Loader load, reduction_plan plan, Op op, partial_cell<Acc>* cells, fold_sync sync) {
  wait_for_prior_grid();
  ordered_reduce_my_tiles<Acc, VW>(load, plan, op, cells, sync.epoch, blockIdx.x, gridDim.x);
}

template <class Acc, class Op, class Out>
__global__ void __launch_bounds__(block_threads)
    ordered_fold_partials_kernel(std::uint64_t tiles, Acc init, Op op, partial_cell<Acc>* cells, unsigned int epoch,
                                 Out* out, host_handoff* handoff) {
  wait_for_prior_grid();
  bool gave_up = false;
  const Acc total = ordered_fold_published_partials(cells, tiles, op, fold_sync{nullptr, epoch, 0}, false, gave_up);
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), handoff);
}

}  // namespace tally::detail
