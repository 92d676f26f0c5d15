#pragma once
// The reduction kernels. Blocks reduce the plan's tiles into partials and one block folds
// the partials in the plan's fixed order, then writes op(init, total):
//   single pass  block 0 folds each partial as soon as it is published (a cell tagged with
//                the call's epoch, never cleared: partials.cuh), not after a last block's
//                ticket (docs/decisions/0003-single-pass-fold-in-block-0.md). Where the
//                tiles are few for the grid, block 0 reduces none of them and polls from the
//                start; otherwise it first reduces the smallest share of them (fold_block_role)
//   two pass     a second launch folds them
// The atomic strategies (atomic_reduce_kernel) combine block or warp results with atomics
// instead; their order is not fixed, so they are reproducible only for exact integer ops.

#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/kernels/publish_result.cuh"
#include "tally/detail/loads/loads.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/scratch_layout.cuh"
#include "tally/detail/tile/commutative_fold.cuh"
#include "tally/detail/tile/commutative_tile.cuh"
#include "tally/detail/tile/partials.cuh"
#include "tally/detail/tuning.cuh"

#include <cstdint>
#include <type_traits>

namespace tally::detail {

// A plan of one tile (N up to one step): one block reduces it and writes the result, no
// partials. A kernel of its own, so that the smallest calls run only this code with the
// registers it needs. Where n is block_threads * VW * Loads for a Loads of 1, 2, 4, ...
// below loads_per_step (2^10, 2^11 and 2^12 floats; 2^13 is a whole step), the kernel of
// Loads loads per thread reduces it as a full tile: no predicates, no loads to spare. That
// is still the plan's order: thread t's chunk u starts at (u * block_threads + t) * VW, so
// its chunks u >= Loads start at n and the plan folds nothing from them. Without it those
// sizes paid for a partial step's predicates and idle loads, and fell behind CUB. Any other
// n takes the kernel of loads_per_step loads, full or partial: partial tiles in the smaller
// kernels too made much more code to compile, for gains only where tally was faster than
// CUB (docs/decisions/0006-one-tile-kernels.md).
template <class Acc, int VW, int Loads, class Loader, class Op, class Out>
__global__ void __launch_bounds__(block_threads)
    single_tile_reduce_kernel(Loader load, std::uint64_t n, Acc init, Op op, Out* out, host_handoff* handoff) {
  wait_for_prior_grid();
  constexpr std::uint64_t tile_items = std::uint64_t(block_threads) * Loads * VW;
  Acc total;
  if (Loads < loads_per_step || n == tile_items) {  // the host launches Loads < loads_per_step only then
    step_chunks<VW, Loader, Loads> step;
    step.fetch(load, 0);
    total = reduce_full_tile_folds<Acc>(load, fold_fetched_full_tile<Acc, VW>(load, 0, 1, op, step), 0, op);
  } else {
    total = reduce_partial_tile_of_block<Acc, VW>(load, 0, n, op);
  }
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), handoff);
}

// A plan of two tiles (2^13 < N <= 2^14 floats, 2^12 < N <= 2^13 doubles) in one block of
// two runs of block_threads threads: run r reduces tile r exactly as a tile block of the
// single pass would, and thread 0 then folds the two partials as the tree fold_partials_of
// takes for at most 32 of them does: op(p0, p1). So the bits are the single pass's, without
// publishing the partials through the L2 to a block that polls for them: a combine across
// blocks costs more than one block's reading a second tile. Plans of 3 and 4 tiles gained
// next to nothing with a run per tile (64 registers a thread) and lost with two tiles per
// run, so they keep the single pass (docs/decisions/0007-tile-pair-kernel.md).
inline constexpr unsigned tile_pair_runs = 2;

template <class Acc, int VW, class Loader, class Op, class Out>
__global__ void __launch_bounds__(block_threads * tile_pair_runs, 1)
    tile_pair_reduce_kernel(Loader load, reduction_plan plan, Acc init, Op op, Out* out, host_handoff* handoff) {
  wait_for_prior_grid();
  constexpr int runs = int(tile_pair_runs);
  __shared__ alignas(Acc) unsigned char partial_bytes[runs * sizeof(Acc)];
  Acc* const partials = reinterpret_cast<Acc*>(partial_bytes);
  const unsigned tile = threadIdx.x / block_threads;
  Acc partial;
  if (plan.tile_is_full(tile)) {
    step_chunks<VW, Loader> step;
    step.fetch(load, plan.tile_begin(tile));
    const auto mine = fold_fetched_full_tile<Acc, VW>(load, plan.tile_begin(tile), plan.steps_per_tile, op, step);
    partial = reduce_full_tile_folds<Acc, runs>(load, mine, plan.tile_begin(tile), op);
  } else {
    partial = reduce_partial_tile_of_block<Acc, VW, runs>(load, plan.tile_begin(tile), plan.n, op);
  }
  if (tile_thread() == 0) partials[tile] = partial;
  __syncthreads();
  // The fold's tree over two partials (lanes 0 and 1 valid, the rest empty) is op(p0, p1).
  static_assert(runs == 2, "the fold below is the tree's for exactly two partials");
  if (threadIdx.x == 0)
    publish(out, static_cast<Out>(static_cast<Acc>(op(init, static_cast<Acc>(op(partials[0], partials[1]))))), handoff);
}

// Block 0 of a single pass whose wait for partials ran out (partials.cuh, fold_sync): the
// whole block reduces each tile whose cell this call has not published yet,
// by reduce_my_tiles for that tile alone, so to the bits its tile block would publish, and
// publishes it. Counted in the control block's fallback_folds (for the tests).
template <class Acc, int VW, class Loader, class Op, class Codec>
__device__ __forceinline__ void reduce_unpublished_tiles(const Loader& load, const reduction_plan& plan, Op& op,
                                                         const Codec& codec,
                                                         partial_cell<typename Codec::partial_type>* cells,
                                                         fold_sync sync) {
  for (std::uint64_t tile = 0; tile < plan.tiles; ++tile) {
    if (__syncthreads_or(threadIdx.x == 0 && !cells[tile].is_published(sync.epoch)) == 0) continue;
    reduce_my_tiles<Acc, VW>(load, plan, op, codec, cells, sync.epoch, tile, plan.tiles);
  }
  __syncthreads();  // thread 0's cell stores come before every thread's fold reads them
  if (threadIdx.x == 0) atomicAdd(sync.control + control_word::fallback_folds, 1u);
}

// What block 0 of a single pass does after a wait ran out: it reduces the unpublished tiles,
// then folds every cell without a bound.
template <class Acc, int VW, class Loader, class Op, class Codec>
__device__ __forceinline__ Acc refold_unpublished(const Loader& load, const reduction_plan& plan, Op& op,
                                                  const Codec& codec, partial_cell<typename Codec::partial_type>* cells,
                                                  fold_sync sync) {
  reduce_unpublished_tiles<Acc, VW>(load, plan, op, codec, cells, sync);
  bool gave_up = false;
  return fold_published_partials<Acc>(codec, cells, plan.tiles, plan.tile_items, op, sync, false, gave_up);
}

// The same, out of line. For loaders of plain elements, inlined, this cold path's second copy
// of the tile code and of the fold made ptxas spill on the hot path of the single pass of
// float, int and double sums (none spilled before the fallback existed), and every tile block
// paid for it; called, it costs only the path that runs it. For the views the call measured
// slower than the spills (docs/decisions/0043-fallback-inlined-for-views.md), so they inline it.
template <class Acc, int VW, class Loader, class Op, class Codec>
__device__ __noinline__ Acc refold_after_wait_ran_out(Loader load, reduction_plan plan, Op op, Codec codec,
                                                       partial_cell<typename Codec::partial_type>* cells,
                                                       fold_sync sync) {
  return refold_unpublished<Acc, VW>(load, plan, op, codec, cells, sync);
}

// Loaders of plain elements: contiguous data of the element type, aligned or not.
template <class Loader>
struct loads_plain_elements : std::false_type {};
template <class V, int VW>
struct loads_plain_elements<vector_loader<V, VW>> : std::true_type {};
template <class V, int VW>
struct loads_plain_elements<aligned_where_possible_loader<V, VW>> : std::true_type {};
template <class V, int VW>
struct loads_plain_elements<iterator_loader<const V*, V, VW>> : std::true_type {};
template <class V, int VW>
struct loads_plain_elements<iterator_loader<V*, V, VW>> : std::true_type {};

template <class Loader>
inline constexpr bool refolds_out_of_line = !tuning::fallback_inlined_for_views || loads_plain_elements<Loader>::value;

// What block 0 of a single pass does besides the fold, chosen by the host (launch_single_pass).
//   folds_only     it reduces no tile: from the kernel's start it folds each partial as soon
//                  as it is published, so when the last one lands only its fold and the
//                  block tree are left. Blocks 1, 2, ... reduce the tiles. Taken while the
//                  tiles are few for the grid (at most fold_block_gate per tile block).
//   reduces_first  with many tiles (2^24 floats: 2048 on 264 blocks) a block of its own
//                  costs a share of the read, so block 0 reduces tiles too, and takes the
//                  share that ends soonest (block gridDim.x - 1's, the smallest where the
//                  tiles do not divide evenly), then folds.
// Either way block 0 waits only on blocks that need nothing from it, and boundedly, so every
// block finishes whatever the order in which the GPU schedules them (partials.cuh,
// fold_sync). docs/decisions/0008-block-0-roles.md has the measurements behind the roles.
enum class fold_block_role : unsigned { reduces_first = 0, folds_only = 1 };
inline constexpr unsigned fold_block_gate = tuning::fold_block_gate;

template <class Acc, int VW, class Loader, class Op, class Out, class Codec,
          int MinBlocks = min_resident_blocks<VW, Loader>>
__global__ void __launch_bounds__(block_threads, MinBlocks)
    single_pass_reduce_kernel(Loader load, reduction_plan plan, Acc init, Op op, Codec codec,
                              partial_cell<typename Codec::partial_type>* cells, fold_sync sync, Out* out,
                              host_handoff* handoff, fold_block_role role) {
  wait_for_prior_grid();
  const unsigned fold_blocks = role == fold_block_role::folds_only ? 1u : 0u;
  if (blockIdx.x >= fold_blocks) {
    std::uint64_t first = blockIdx.x - fold_blocks;
    if (tuning::fold_block_takes_last_share && fold_blocks == 0) first = (blockIdx.x + gridDim.x - 1) % gridDim.x;
    reduce_my_tiles<Acc, VW>(load, plan, op, codec, cells, sync.epoch, first, gridDim.x - fold_blocks);
  }
  if (blockIdx.x != 0) return;
  // Block 0's first fold waits boundedly; if a wait ran out, block 0 reduces the tiles it has
  // not seen published and folds again, every cell filled (partials.cuh, fold_sync).
  bool gave_up = false;
  Acc total = fold_published_partials<Acc>(codec, cells, plan.tiles, plan.tile_items, op, sync, true, gave_up);
  if (gave_up) {
    if constexpr (refolds_out_of_line<Loader>) {
      total = refold_after_wait_ran_out<Acc, VW>(load, plan, op, codec, cells, sync);
    } else {
      total = refold_unpublished<Acc, VW>(load, plan, op, codec, cells, sync);
    }
  }
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), handoff);
}

// Two pass: the first launch publishes the partials, the second folds them (same bits as
// the single pass).
template <class Acc, int VW, class Loader, class Op, class Codec>
__global__ void __launch_bounds__(block_threads, (min_resident_blocks<VW, Loader>))
    tile_partials_kernel(Loader load, reduction_plan plan, Op op, Codec codec,
                         partial_cell<typename Codec::partial_type>* cells, fold_sync sync) {
  wait_for_prior_grid();
  reduce_my_tiles<Acc, VW>(load, plan, op, codec, cells, sync.epoch, blockIdx.x, gridDim.x);
}

template <class Acc, class Op, class Out, class Codec>
__global__ void __launch_bounds__(block_threads)
    fold_partials_kernel(std::uint64_t tiles, std::uint64_t tile_items, Acc init, Op op, Codec codec,
                         partial_cell<typename Codec::partial_type>* cells, unsigned int epoch, Out* out,
                         host_handoff* handoff) {
  wait_for_prior_grid();
  bool gave_up = false;
  const Acc total = fold_published_partials<Acc>(codec, cells, tiles, tile_items, op, fold_sync{nullptr, epoch, 0},
                                                 false, gave_up);
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), handoff);
}

}  // namespace tally::detail
