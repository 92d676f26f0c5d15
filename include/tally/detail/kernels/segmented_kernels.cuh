#pragma once
// The kernels of a segmented reduction (docs/decisions/0022). Three launches, each a grid
// that strides over its work, since only the device knows how the segments divide:
//   segments_by_size_kernel  reads every segment's bounds once; a lane reduces a segment of
//                            at most VW elements itself, the warp one of at most
//                            warp_segment_max; longer ones go to two lists in the scratch
//   long_segments_kernel     a block per unit of work from those lists: a one-tile segment;
//                            a long segment whole (its chains in shared memory); or one
//                            chain of a long segment split over block_threads units
//   split_segments_kernel    a block per split segment folds its chains
// Every route evaluates the segment's own plan (tile/segment_replay.cuh), so the bits are
// tally::reduce's over that segment, whichever route it took.

#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/loads/loads.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/scratch_layout.cuh"
#include "tally/detail/segment_bounds.cuh"
#include "tally/detail/tile/segment_replay.cuh"
#include "tally/warp/reduce.cuh"

#include <cstdint>
#include <iterator>

namespace tally::detail {

// Where the first kernel leaves the segments it does not reduce: ids of one-tile segments
// from the front of `ids`, of longer ones from the back (together at most all S), with
// their counts in the control block, tagged with the call's epoch.
struct segment_lists {
  unsigned int* ids = nullptr;  // room for S ids
  unsigned long long* block_count = nullptr;
  unsigned long long* long_count = nullptr;
  unsigned int epoch = 0;
  std::uint64_t segments = 0;

  __device__ std::uint64_t count(const unsigned long long* word) const {
    const unsigned long long w = *const_cast<const volatile unsigned long long*>(word);
    return static_cast<unsigned int>(w >> 32) == epoch ? (w & 0xffffffffull) : 0;
  }
  // Adds `add` to the count in `word` and returns the count before: a count of an earlier call
  // (another epoch) reads as 0.
  __device__ std::uint64_t take(unsigned long long* word, unsigned add) const {
    unsigned long long seen = *const_cast<volatile unsigned long long*>(word);
    for (;;) {
      const unsigned long long before = static_cast<unsigned int>(seen >> 32) == epoch ? (seen & 0xffffffffull) : 0;
      const unsigned long long want = (static_cast<unsigned long long>(epoch) << 32) | (before + add);
      const unsigned long long got = atomicCAS(word, seen, want);
      if (got == seen) return before;
      seen = got;
    }
  }
  __device__ unsigned int long_id(std::uint64_t m) const { return ids[segments - 1 - m]; }
};

// How many long segments are split over block_threads blocks each; longer lists reduce the
// rest a block each. Their chains take segment_split_max * block_threads accumulators of scratch.
inline constexpr std::uint64_t segment_split_max = 128;

template <class It>
__device__ __forceinline__ It advance_to(It first, std::uint64_t offset) {
  return first + static_cast<typename std::iterator_traits<It>::difference_type>(offset);
}

template <class Acc, int VW, class It, class V, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    segments_by_size_kernel(It first, Bounds bounds, Acc init, Op op, OutIt out, segment_lists lists) {
  wait_for_prior_grid();
  using loader = iterator_loader<It, V, VW>;
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  const unsigned lane = threadIdx.x % warp_threads;
  const std::uint64_t warps = std::uint64_t(gridDim.x) * (block_threads / warp_threads);
  const std::uint64_t groups = (lists.segments + warp_threads - 1) / warp_threads;
  for (std::uint64_t group = blockIdx.x * (block_threads / warp_threads) + threadIdx.x / warp_threads; group < groups;
       group += warps) {
    const std::uint64_t s = group * warp_threads + lane;
    segment_extent mine{};
    if (s < lists.segments) mine = bounds(s);
    if (s < lists.segments && mine.size <= std::uint64_t(VW))
      out[static_cast<out_diff>(s)] = segment_by_thread<Acc>(loader{advance_to(first, mine.begin)}, mine.size, init, op);
    const bool by_warp = s < lists.segments && mine.size > std::uint64_t(VW) && mine.size <= warp_segment_max<VW>;
    const bool by_block = s < lists.segments && mine.size > warp_segment_max<VW> && mine.size <= block_segment_max<VW>;
    const bool is_long = s < lists.segments && mine.size > block_segment_max<VW>;
    // The lists: one atomic per warp and list.
    const unsigned block_lanes = __ballot_sync(tally::warp::full_mask, by_block);
    const unsigned long_lanes = __ballot_sync(tally::warp::full_mask, is_long);
    std::uint64_t block_base = 0, long_base = 0;
    if (lane == 0 && block_lanes) block_base = lists.take(lists.block_count, __popc(block_lanes));
    if (lane == 0 && long_lanes) long_base = lists.take(lists.long_count, __popc(long_lanes));
    block_base = __shfl_sync(tally::warp::full_mask, block_base, 0);
    long_base = __shfl_sync(tally::warp::full_mask, long_base, 0);
    const unsigned below = (1u << lane) - 1u;
    if (by_block) lists.ids[block_base + __popc(block_lanes & below)] = static_cast<unsigned int>(s);
    if (is_long) lists.ids[lists.segments - 1 - (long_base + __popc(long_lanes & below))] = static_cast<unsigned int>(s);
    // The warp's segments of more than VW elements, one after another.
    for (unsigned lanes = __ballot_sync(tally::warp::full_mask, by_warp); lanes != 0; lanes &= lanes - 1) {
      const unsigned source = unsigned(__ffs(lanes)) - 1u;
      const std::uint64_t begin = __shfl_sync(tally::warp::full_mask, mine.begin, source);
      const std::uint64_t size = __shfl_sync(tally::warp::full_mask, mine.size, source);
      const Acc result = segment_by_warp<Acc, VW>(loader{advance_to(first, begin)}, size, init, op);
      if (lane == 0) out[static_cast<out_diff>(group * warp_threads + source)] = result;
    }
  }
}

template <class Acc, int VW, class It, class V, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    long_segments_kernel(It first, Bounds bounds, Acc init, Op op, OutIt out, segment_lists lists, Acc* chains) {
  wait_for_prior_grid();
  using loader = iterator_loader<It, V, VW>;
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  __shared__ alignas(Acc) unsigned char chain_bytes[block_threads * sizeof(Acc)];
  Acc* const block_chains = reinterpret_cast<Acc*>(chain_bytes);
  const std::uint64_t block_segments = lists.count(lists.block_count);
  const std::uint64_t long_segments = lists.count(lists.long_count);
  const std::uint64_t split = long_segments < segment_split_max ? long_segments : segment_split_max;
  const std::uint64_t whole = long_segments - split;
  const std::uint64_t units = whole + split * block_threads + block_segments;
  for (std::uint64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    if (unit < whole) {  // a long segment, whole: its chains wait in shared memory for its fold
      const unsigned int s = lists.long_id(split + unit);
      const segment_extent e = bounds(s);
      const loader load{advance_to(first, e.begin)};
      const reduction_plan plan = make_plan(e.size, VW, plan_max_tiles_for<Op>);
      const unsigned chains_used = plan.tiles < block_threads ? unsigned(plan.tiles) : unsigned(block_threads);
      for (unsigned t = 0; t < chains_used; ++t) {
        bool valid = false;
        const Acc chain = segment_chain<Acc, VW>(load, plan, t, op, valid);
        if (threadIdx.x == 0) block_chains[t] = chain;
      }
      __syncthreads();
      const bool valid = threadIdx.x < chains_used;
      Acc chain{};
      if (valid) chain = block_chains[threadIdx.x];
      const Acc result = segment_fold_chains<Acc>(chain, valid, plan.tiles, init, op);
      if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = result;
      __syncthreads();  // the chains are read before the next unit writes them
    } else if (unit < whole + split * block_threads) {  // one chain of a split segment
      const std::uint64_t m = (unit - whole) / block_threads;
      const unsigned t = unsigned((unit - whole) % block_threads);
      const segment_extent e = bounds(lists.long_id(m));
      const reduction_plan plan = make_plan(e.size, VW, plan_max_tiles_for<Op>);
      if (t >= plan.tiles) continue;  // the same for the whole block
      bool valid = false;
      const Acc chain = segment_chain<Acc, VW>(loader{advance_to(first, e.begin)}, plan, t, op, valid);
      if (threadIdx.x == 0) chains[m * block_threads + t] = chain;
    } else {  // a segment of one tile
      const unsigned int s = lists.ids[unit - whole - split * block_threads];
      const segment_extent e = bounds(s);
      const Acc partial = reduce_partial_tile_of_block<Acc, VW>(loader{advance_to(first, e.begin)}, 0, e.size, op);
      if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = static_cast<Acc>(op(init, partial));
    }
  }
}

template <class Acc, int VW, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    split_segments_kernel(Bounds bounds, Acc init, Op op, OutIt out, segment_lists lists, const Acc* chains) {
  wait_for_prior_grid();
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  const std::uint64_t long_segments = lists.count(lists.long_count);
  const std::uint64_t split = long_segments < segment_split_max ? long_segments : segment_split_max;
  for (std::uint64_t m = blockIdx.x; m < split; m += gridDim.x) {
    const unsigned int s = lists.long_id(m);
    const reduction_plan plan = make_plan(bounds(s).size, VW, plan_max_tiles_for<Op>);
    const bool valid = threadIdx.x < plan.tiles;
    Acc chain{};
    if (valid) chain = chains[m * block_threads + threadIdx.x];
    const Acc result = segment_fold_chains<Acc>(chain, valid, plan.tiles, init, op);
    if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = result;
    __syncthreads();
  }
}

}  // namespace tally::detail
