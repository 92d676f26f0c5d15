#pragma once
// The kernels of a segmented reduction (docs/decisions/0022). Three launches, each a grid that
// strides over its work, since only the device knows how the segments divide:
//   segments_by_size_kernel  reads every segment's bounds once. A lane reduces a segment of at
//                            most VW elements itself; a group of lanes one of at most
//                            warp_threads * VW (several such segments per warp at once, or
//                            each lane its own where their sizes differ); the
//                            warp one of at most block_threads * VW. Longer ones go to two
//                            lists in the scratch: one-tile segments and long ones, with the
//                            sizes of the first long segments
//   listed_segments_kernel   one block numbers the chains of the long segments (the plan's
//                            fold of tile partials is block_threads chains, each computable
//                            apart), so that the next launch can give each chain a block; the
//                            other blocks reduce the one-tile segments, a warp each
//   long_segments_kernel     each block a run of consecutive chains of the split segments, and
//                            the long segments beyond those that fall to it (whole, their chains
//                            in shared memory)
//   split_segments_kernel    a block per split segment folds its chains (a launch of its own:
//                            the last block of a segment's chains folding them instead, after
//                            a fence and a count, measured slower for segments of 8-128 tiles)
// Every route evaluates the segment's own plan (tile/segment_replay.cuh), so the bits are
// tally::reduce's over that segment, whichever route it took. An operator that is not
// commutative takes ordered_segments_kernel alone: a block per segment in the ordered plan.
// Segments of one size known on the host, of at most one tile, take one launch of a kernel for
// their size class instead (decision 0036): lane_segments_kernel (at most warp_threads * VW
// elements), warp_segments_kernel (at most block_threads * VW), one_tile_segments_kernel.
// Few segments counted on the host (at most a block's threads) take two launches instead
// (decision 0045): few_segments_chains_kernel, every chain of every segment, and
// few_segments_fold_kernel, a block per segment.

#include "tally/detail/kernels/block_counts.cuh"
#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/loads/loads.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/scratch_layout.cuh"
#include "tally/detail/segment_bounds.cuh"
#include "tally/detail/tile/segment_replay.cuh"
#include "tally/detail/tuning.cuh"
#include "tally/warp/reduce.cuh"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <type_traits>

namespace tally::detail {

// Scratch for the chains of split segments (block_threads accumulators each): the first
// segmented_chain_bytes / (block_threads * sizeof(Acc)) long segments (2048 of floats) are split
// chain by chain over blocks, the rest reduced a block each, which is as fast once they are that
// many.
inline constexpr std::uint64_t segmented_chain_bytes = std::uint64_t(2) << 20;
template <class Acc>
inline constexpr std::uint64_t segment_split_capacity =
    segmented_chain_bytes / (std::uint64_t(block_threads) * sizeof(Acc));

// Where the first kernel leaves the segments it does not reduce: ids of one-tile segments from
// the front of `ids`, of long ones from the back (together at most all S), counted in two words
// of the control block, and the sizes of the split ones (the first split_max long ones). No block
// of it waits for the others: every block of the launch after it reads the counts (its block 0
// moving the long count into `taken`, numbering the chains of the split segments (chain_starts)
// and mapping each chain to its segment), and the long segments' launch zeroes the words for the
// next call (a call whose launches failed has its control block zeroed by its lease).
struct segment_lists {
  unsigned int* ids = nullptr;  // room for S ids
  unsigned long long* block_count = nullptr;
  unsigned long long* long_count = nullptr;
  std::uint64_t* taken = nullptr;         // [0] long segments, [1] the split ones' chains
  std::uint64_t* chain_starts = nullptr;  // split_max entries
  std::uint64_t* split_sizes = nullptr;   // split_max entries: split segment m's size
  unsigned int* chain_segment = nullptr;  // split_max * block_threads entries: chain -> split segment
  std::uint64_t split_max = 0;            // long segments split chain by chain, at most
  std::uint64_t segments = 0;             // S, or where the device counts them, at most S
  std::uint64_t id_room = 0;              // places in ids: at most S segments are longer than a warp's
  // Where only the device knows S (reduce_by_key's runs): the word it counted them in.
  const unsigned long long* segments_on_device = nullptr;


  // Reserves `add` places in a list; returns the first.
  __device__ std::uint64_t take(unsigned long long* word, unsigned add) const { return atomicAdd(word, add); }
  __device__ unsigned int long_id(std::uint64_t m) const { return ids[id_room - 1 - m]; }
  __device__ std::uint64_t long_segments() const { return taken[0]; }
  __device__ std::uint64_t split_count() const {
    const std::uint64_t longs = long_segments();
    return longs < split_max ? longs : split_max;
  }
  __device__ std::uint64_t split_chains() const { return taken[1]; }
};

// Chains of the plan's fold of a segment's tile partials that hold any partial.
__host__ __device__ inline std::uint64_t chains_of(const reduction_plan& plan) {
  return plan.tiles < block_threads ? plan.tiles : block_threads;
}

// Chains first_chain .. end_chain - 1 of a segment's plan, each handed to keep(t, chain) by thread
// 0 (the long segments' and the few segments' kernels). Chains of one tile each (at most
// block_threads tiles): the run's tiles in one pass, the next in flight; else a chain at a time,
// its tiles t, t + block_threads, ... folded in order.
template <class Acc, int VW, class Loader, class Op, class Keep>
__device__ __forceinline__ void reduce_chain_run(const Loader& load, const reduction_plan& plan, Op& op,
                                                 std::uint32_t first_chain, std::uint32_t end_chain, const Keep& keep) {
  const bool tile_chains = plan.tiles <= block_threads;
  for (std::uint32_t t = first_chain; t < end_chain; t = tile_chains ? end_chain : t + 1) {
    Acc chain{};
    reduce_tile_range<Acc, VW>(load, plan, op, t, tile_chains ? end_chain : plan.tiles,
                               tile_chains ? 1 : block_threads, [&](std::uint64_t tile, const Acc& partial) {
                                 if (tile_chains) {
                                   if (threadIdx.x == 0) keep(std::uint32_t(tile), partial);
                                 } else {
                                   chain = tile == t ? partial : static_cast<Acc>(op(chain, partial));
                                 }
                               });
    if (!tile_chains && threadIdx.x == 0) keep(t, chain);
  }
}

// The largest of the warp's values, in every lane.
__device__ __forceinline__ unsigned warp_max(unsigned value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_max_sync(tally::warp::full_mask, value);
#else
  for (int delta = 16; delta > 0; delta /= 2) {
    const unsigned other = __shfl_xor_sync(tally::warp::full_mask, value, delta);
    value = other > value ? other : value;
  }
  return value;
#endif
}

// How the kernels read a segment: a raw pointer to 16-byte chunks in 16-byte reads wherever a
// chunk is aligned, anything else element by element.
template <class It, class V, int VW, class = void>
struct segment_loader_of {
  using type = iterator_loader<It, V, VW>;
};
template <class It, class V, int VW>
struct segment_loader_of<It, V, VW,
                         std::enable_if_t<std::is_pointer_v<It> &&
                                          std::is_same_v<std::remove_cv_t<std::remove_pointer_t<It>>, V> &&
                                          sizeof(V) * VW == 16>> {
  using type = aligned_where_possible_loader<V, VW>;
};

template <class It>
__device__ __forceinline__ It advance_to(It first, std::uint64_t offset) {
  return first + static_cast<typename std::iterator_traits<It>::difference_type>(offset);
}

// The OR of the warp's values, in every lane.
__device__ __forceinline__ unsigned warp_or(unsigned value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_or_sync(tally::warp::full_mask, value);
#else
  for (int delta = 16; delta > 0; delta /= 2) value |= __shfl_xor_sync(tally::warp::full_mask, value, delta);
  return value;
#endif
}

// The warp's segments of VW < size <= warp_threads * VW elements (mask: their lanes; `width`:
// lanes_covering the calling lane's chunks; `widest`: the warp's largest width), packed into
// passes of the warp: each segment a group of `width` consecutive lanes, the widest first, so
// that no group straddles the end of a pass (every earlier group's end is a multiple of the next
// width, and so of warp_threads where it reaches a pass's end). A pass thus reduces as many
// segments as fit in its lanes, and the warp takes as many passes as the segments' lanes fill,
// not as many as the widest needs for every one of them (a warp of one 32-lane segment and a few
// narrow ones took a pass each).
// Results go to out[first_segment + lane of the segment].
template <class Acc, int VW, class It, class V, class Bounds, class Op, class OutIt>
__device__ __forceinline__ void reduce_by_packed_lanes(It first, const Bounds& bounds, unsigned mask, unsigned width,
                                                       unsigned widest, const segment_extent& mine,
                                                       std::uint64_t first_segment, const Acc& init, Op& op,
                                                       OutIt out) {
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  const unsigned lane = threadIdx.x % warp_threads;
  const unsigned below = (1u << lane) - 1u;
  const bool owner = ((mask >> lane) & 1u) != 0;
  // Each segment's place in the packing: its rank (widest first, then by lane) and its group's
  // first lane, counted over all passes.
  unsigned ranked = 0, packed = 0, rank = 0, start = 0;
#pragma unroll
  for (unsigned w = warp_threads; w >= 2; w /= 2) {
    const unsigned of_width = __ballot_sync(tally::warp::full_mask, owner && width == w);
    const unsigned before = unsigned(__popc(of_width & below));
    if (owner && width == w) {
      rank = ranked + before;
      start = packed + before * w;
    }
    ranked += unsigned(__popc(of_width));
    packed += unsigned(__popc(of_width)) * w;
  }
  // Lane e holds the lane of the segment of rank e: the one owner whose rank has e's bits.
  unsigned source_of_rank = mask;
#pragma unroll
  for (unsigned bit = 0; bit < 5; ++bit) {
    const unsigned with_bit = __ballot_sync(tally::warp::full_mask, owner && ((rank >> bit) & 1u) != 0);
    source_of_rank &= ((lane >> bit) & 1u) != 0 ? with_bit : ~with_bit;
  }
  source_of_rank = source_of_rank != 0 ? unsigned(__ffs(int(source_of_rank))) - 1u : lane;
  unsigned ranks_before = 0;  // groups of the earlier passes
  // Segments of one width (most warps of segments of one size) lie at its multiples, every pass
  // alike, which takes none of the search below.
  const bool one_width = packed == ranked * widest;
  const unsigned widest_shift = unsigned(__ffs(int(widest))) - 1u;
  for (unsigned pass_begin = 0; pass_begin < packed; pass_begin += warp_threads) {
    unsigned group_first = 0, group_rank = 0, pass_width = widest;
    if (one_width) {
      group_first = lane & ~(widest - 1u);
      group_rank = ranks_before + (lane >> widest_shift);
      ranks_before += warp_threads >> widest_shift;
    } else {
      // The pass's groups by their first lanes; the calling lane's group is the last that starts
      // at or below it, and its rank follows those of the earlier passes.
      const bool starts_here = owner && start / warp_threads == pass_begin / warp_threads;
      const unsigned starts = warp_or(starts_here ? 1u << (start % warp_threads) : 0u);
      const unsigned at_or_below = starts & (0xffffffffu >> (warp_threads - 1 - lane));
      group_first = warp_threads - 1u - unsigned(__clz(int(at_or_below)));
      group_rank = ranks_before + unsigned(__popc(at_or_below)) - 1u;
      ranks_before += unsigned(__popc(starts));
      // The pass's widest group is its first: as wide as up to the second's start, or the pass.
      const unsigned later = starts & (starts - 1u);
      const unsigned rest = packed - pass_begin < warp_threads ? packed - pass_begin : warp_threads;
      pass_width = later != 0 ? (later & (0u - later)) : rest;
    }
    const unsigned source = __shfl_sync(tally::warp::full_mask, source_of_rank, int(group_rank % warp_threads));
    const std::uint64_t begin = __shfl_sync(tally::warp::full_mask, mine.begin, int(source));
    const auto own_size = static_cast<unsigned>(mine.size);  // an owner's is at most warp_threads * VW
    const unsigned shuffled_size = __shfl_sync(tally::warp::full_mask, own_size, int(source));
    const bool has = pass_begin + lane < packed;
    const unsigned size = has ? shuffled_size : 0u;
    const bool is_first = has && lane == group_first;
    const Acc own_init = is_first ? init_for(bounds, first_segment + source, init) : init;
    const Acc result = segment_by_lane_group<Acc, VW>(iterator_loader<It, V, VW>{advance_to(first, begin)}, size,
                                                      lane - group_first, pass_width, own_init, op);
    if (is_first) out[static_cast<out_diff>(first_segment + source)] = result;
  }
}

// The warp's segments of more than VW elements: those of at most lane_max elements packed into
// passes of lane groups (reduce_by_packed_lanes), then the others one after another, the whole
// warp replaying the plan's block.
template <class Acc, int VW, class It, class V, class Bounds, class Op, class OutIt>
__device__ __forceinline__ void reduce_wide_segments(It first, const Bounds& bounds, segment_extent mine, bool by_lanes,
                                                     bool by_warp, std::uint64_t first_segment, Acc init, Op op,
                                                     OutIt out) {
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  const unsigned lane = threadIdx.x % warp_threads;
  using loader = iterator_loader<It, V, VW>;
  const unsigned lanes_mask = __ballot_sync(tally::warp::full_mask, by_lanes);
  if (lanes_mask != 0) {
    const unsigned needed = by_lanes ? tally::warp::detail::lanes_covering(unsigned((mine.size + VW - 1) / VW)) : 1u;
    reduce_by_packed_lanes<Acc, VW, It, V>(first, bounds, lanes_mask, needed, warp_max(needed), mine, first_segment,
                                           init, op, out);
  }
  // Segments of more: the whole warp replays the plan's block, one segment after another.
  for (unsigned lanes = __ballot_sync(tally::warp::full_mask, by_warp); lanes != 0; lanes &= lanes - 1) {
    const unsigned source = unsigned(__ffs(lanes)) - 1u;
    const std::uint64_t begin = __shfl_sync(tally::warp::full_mask, mine.begin, source);
    const std::uint64_t size = __shfl_sync(tally::warp::full_mask, mine.size, source);
    const Acc result =
        segment_by_warp<Acc, VW>(loader{advance_to(first, begin)}, size, init_for(bounds, first_segment + source, init), op);
    if (lane == 0) out[static_cast<out_diff>(first_segment + source)] = result;
  }
}

// A segment's size in 32 bits, for choosing its route: every route's bound is far below 2^32.
__device__ __forceinline__ unsigned route_size_of(const segment_extent& e) {
  return e.size < 0xffffffffu ? unsigned(e.size) : 0xffffffffu;
}

// The first launch's loop is a chain of dependent reads (bounds, then values); its speed is the
// number of warps that wait at once, so it is held to 32 registers a thread: every warp slot of
// an SM filled.
inline constexpr int segments_by_size_min_blocks = 8;

// Segments per warp and pass: `group` (a power of two, at most warp_threads), so that a call of
// few segments still spreads them over every warp of the grid (launch: segment_group_for). The
// grid is slices of slice_blocks blocks, each striding over its own slice_segments segments, in
// order (launch: tuning::segments_by_size_slices); where only the device knows S, one slice
// whose slice_segments bounds S.
template <class Acc, int VW, class It, class V, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads, segments_by_size_min_blocks)
    segments_by_size_kernel(It first, Bounds bounds, Acc init, Op op, OutIt out, segment_lists lists,
                            unsigned group, std::uint64_t slice_segments, unsigned slice_blocks) {
  wait_for_prior_grid();
  using loader = iterator_loader<It, V, VW>;
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  constexpr std::uint64_t lane_max = std::uint64_t(warp_threads) * VW;
  const unsigned lane = threadIdx.x % warp_threads;
  const std::uint64_t warps = std::uint64_t(slice_blocks) * (block_threads / warp_threads);  // a slice's
  // The host's S is read from the parameters where it is needed (this loop runs in 32 registers);
  // where only the device knows S, the host passed a warp's lanes, fewer here where the segments
  // are few for the grid (as the host chooses otherwise: segmented_dispatch.cuh).
  std::uint64_t segments = lists.segments;
  if constexpr (counted_on_device_v<Bounds>) {
    segments = *lists.segments_on_device;
    while (group > 1 && segments < warps * group * 2) group /= 2;
  }
  // The slice's groups, as segments: from slice_first up to slice_end. Segment ids are below
  // 2^32 (the dispatch refuses more), so the loop counts in 32 bits; it counts the segments left
  // to the slice rather than the next group's id, which could pass 2^32.
  const std::uint64_t slice_first = (blockIdx.x / slice_blocks) * slice_segments;
  const std::uint64_t slice_end = slice_first + slice_segments < segments ? slice_first + slice_segments : segments;
  const auto stride = static_cast<std::uint32_t>(warps * group);
  const std::uint64_t warp_first =
      slice_first +
      std::uint64_t((blockIdx.x % slice_blocks) * (block_threads / warp_threads) + threadIdx.x / warp_threads) * group;
  if (warp_first >= slice_end) return;
  auto first_segment = static_cast<std::uint32_t>(warp_first);
  auto left = static_cast<std::uint32_t>(slice_end - warp_first);  // segments from first_segment to slice_end
  using fetch = fetched_bounds<Bounds>;
  for (;; first_segment += stride, left -= stride) {
    std::uint32_t s = first_segment + lane;
    bool has = lane < group && lane < left;
    typename fetch::words words{};
    if (has) words = fetch::fetch(bounds, s);
    segment_extent mine = has ? fetch::extent(words) : segment_extent{};
    unsigned route_size = route_size_of(mine);
    // A run of groups whose segments all hold at most VW elements has nothing to list and no
    // lanes to group: it loops here, without the ballots below (decision 0041), and reads each
    // group's values while the next group's bounds are read (the loop is a chain of dependent
    // reads; this keeps two of its links in flight). Its own loop, so that the other groups'
    // code carries no read ahead: fetching ahead there too cost the segments of other sizes.
    while (__all_sync(tally::warp::full_mask, route_size <= unsigned(VW))) {
      const bool warp_has_next = stride < left;  // the same in every lane
      if (warp_has_next && lane < group && lane < left - stride) words = fetch::fetch(bounds, s + stride);
      if (has)
        out[static_cast<out_diff>(s)] = segment_by_thread<Acc, VW>(loader{advance_to(first, mine.begin)}, route_size,
                                                                   init_for(bounds, s, init), op);
      if (!warp_has_next) return;
      first_segment += stride;
      left -= stride;
      s += stride;
      has = lane < group && lane < left;
      mine = has ? fetch::extent(words) : segment_extent{};
      route_size = route_size_of(mine);
    }
    if (has && route_size <= unsigned(VW))
      out[static_cast<out_diff>(s)] =
          segment_by_thread<Acc, VW>(loader{advance_to(first, mine.begin)}, route_size, init_for(bounds, s, init), op);
    const bool by_lanes = has && route_size > unsigned(VW) && route_size <= unsigned(lane_max);
    const bool by_warp = has && route_size > unsigned(lane_max) && route_size <= unsigned(warp_segment_max<VW>);
    const bool by_block =
        has && route_size > unsigned(warp_segment_max<VW>) && route_size <= unsigned(block_segment_max<VW>);
    const bool is_long = has && route_size > unsigned(block_segment_max<VW>);
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
    const std::uint64_t long_place = long_base + __popc(long_lanes & below);
    if (is_long) {
      lists.ids[lists.id_room - 1 - long_place] = static_cast<unsigned int>(s);
      if (long_place < lists.split_max) lists.split_sizes[long_place] = mine.size;
    }
    const unsigned wide_lanes = __ballot_sync(tally::warp::full_mask, by_lanes || by_warp);
    if (wide_lanes != 0)
      reduce_wide_segments<Acc, VW, It, V>(first, bounds, mine, by_lanes, by_warp, first_segment, init, op, out);
    if (stride >= left) break;
  }
}

// Between the first launch and the long segments' launch, once every block of the first has
// listed its segments. Block 0 takes the counts (segment_lists) and numbers the chains of the
// split segments: chain_starts[m] is the number of chains of split segments 0 .. m - 1 (each
// thread a run of consecutive segments, then a block scan of the runs' sums), and chain_segment
// maps each chain back to its segment, so that a block of the next launch finds its work in one
// read. The other blocks reduce the listed segments of at most one tile, a warp each replaying
// the plan's block (segment_by_warp_step), with more warps resident than the long segments'
// launch keeps (decision 0041). A launch of its own: the first launch's last block numbering
// the chains, after a ticket and a fence, held every call back, and the code cost the first
// launch's loop registers (decision 0040). The count words are left for the next launch to zero,
// since every block here reads them.
inline constexpr int listed_segments_min_blocks = 3;

template <class Acc, int VW, class It, class V, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads, listed_segments_min_blocks)
    listed_segments_kernel(It first, Bounds bounds, Acc init, Op op, OutIt out, segment_lists lists) {
  wait_for_prior_grid();
  if (blockIdx.x != 0) {
    using loader = typename segment_loader_of<It, V, VW>::type;
    using out_diff = typename std::iterator_traits<OutIt>::difference_type;
    constexpr unsigned warps_per_block = block_threads / warp_threads;
    const std::uint64_t listed = __ldcg(lists.block_count);
    const std::uint64_t warps = std::uint64_t(gridDim.x - 1) * warps_per_block;
    for (std::uint64_t k = std::uint64_t(blockIdx.x - 1) * warps_per_block + threadIdx.x / warp_threads; k < listed;
         k += warps) {
      const unsigned int s = lists.ids[k];
      const segment_extent e = bounds(s);
      const Acc result =
          segment_by_warp_step<Acc, VW>(loader{advance_to(first, e.begin)}, e.size, init_for(bounds, s, init), op);
      if (threadIdx.x % warp_threads == 0) out[static_cast<out_diff>(s)] = result;
    }
    return;
  }
  __shared__ std::uint32_t chain_start[segment_split_capacity<Acc>];  // each split segment's chains
  __shared__ std::uint64_t long_count;
  __shared__ std::uint64_t warp_sums[block_threads / warp_threads];
  if (threadIdx.x == 0) {
    long_count = __ldcg(lists.long_count);
    lists.taken[0] = long_count;
  }
  __syncthreads();
  const std::uint64_t split = long_count < lists.split_max ? long_count : lists.split_max;
  const std::uint64_t per_thread = (split + block_threads - 1) / block_threads;
  const std::uint64_t from = threadIdx.x * per_thread;
  const std::uint64_t to = from + per_thread < split ? from + per_thread : split;
  std::uint64_t mine = 0;
  for (std::uint64_t m = from; m < to; ++m) {
    const std::uint64_t size = __ldcg(lists.split_sizes + m);
    const auto chains = static_cast<std::uint32_t>(chains_of(make_plan(size, VW, plan_max_tiles_for<Op>)));
    chain_start[m] = chains;
    mine += chains;
  }
  std::uint64_t total = 0;
  auto running = static_cast<std::uint32_t>(block_exclusive_sum(mine, warp_sums, total));  // at most 2^21
  // The map: each thread writes the chains of its own segments, and a warp together those of a
  // segment of more than warp_threads chains (one segment's 256 chains would take one thread
  // 256 stores). The trip count is the block's, so that every lane takes part in the ballots.
  const unsigned lane = threadIdx.x % warp_threads;
  for (std::uint64_t k = 0; k < per_thread; ++k) {
    const std::uint64_t m = from + k;
    const bool has = m < to;
    const std::uint32_t chains = has ? chain_start[m] : 0u;
    const std::uint32_t start = running;
    running += chains;
    if (has) lists.chain_starts[m] = start;
    const bool wide = chains > warp_threads;
    if (has && !wide)
      for (std::uint32_t c = 0; c < chains; ++c) lists.chain_segment[start + c] = static_cast<unsigned int>(m);
    for (unsigned mask = __ballot_sync(tally::warp::full_mask, wide); mask != 0; mask &= mask - 1) {
      const unsigned source = unsigned(__ffs(int(mask))) - 1u;
      const std::uint32_t first_chain = __shfl_sync(tally::warp::full_mask, start, source);
      const std::uint32_t count = __shfl_sync(tally::warp::full_mask, chains, source);
      const auto place = static_cast<unsigned int>(__shfl_sync(tally::warp::full_mask, m, source));
      for (std::uint32_t c = lane; c < count; c += warp_threads) lists.chain_segment[first_chain + c] = place;
    }
  }
  if (threadIdx.x == 0) lists.taken[1] = total;
}


// Segments of one size, known on the host, of one tile (warp_segment_max < size <=
// block_segment_max): a block each, as tally::reduce's one-tile kernel reduces such a range
// (kernels/reduce_kernels.cuh), so no lists and a single launch. A warp replaying the plan's
// block (long_segments_kernel) keeps a quarter of the bytes in flight that the whole block
// does (docs/decisions/0036-segments-of-one-known-size.md).
template <class Acc, int VW, class It, class V, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    one_tile_segments_kernel(It first, Bounds bounds, Acc init, Op op, OutIt out, std::uint64_t segments) {
  wait_for_prior_grid();
  using loader = typename segment_loader_of<It, V, VW>::type;
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  constexpr std::uint64_t tile_items = block_segment_max<VW>;
  for (std::uint64_t s = blockIdx.x; s < segments; s += gridDim.x) {
    const segment_extent e = bounds(s);
    const loader load{advance_to(first, e.begin)};
    Acc total;
    if (e.size == tile_items) {
      step_chunks<VW, loader> step;
      step.fetch(load, 0);
      total = reduce_full_tile_folds<Acc>(load, fold_fetched_full_tile<Acc, VW>(load, 0, 1, op, step), 0, op);
    } else {
      total = reduce_partial_tile_of_block<Acc, VW>(load, 0, e.size, op);
    }
    if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = static_cast<Acc>(op(init_for(bounds, s, init), total));
    __syncthreads();  // the block tree's shared memory is read before the next segment's writes it
  }
}

// Two blocks per SM, as tally::reduce's single pass: three (80 registers a thread) measured no
// faster, four spilled.
inline constexpr int long_segments_min_blocks = 2;

// Segments of one size, known on the host, longer than a tile: the plan's chains of every segment
// are units of work numbered s * chains + t (chains_of its plan, the same for all), a block each,
// as long_segments_kernel computes a split segment's chains; equal_size_fold_kernel then folds
// each segment's chains. The units follow from the size, so no lists and no launch to make them.
template <class Acc, int VW, class It, class V, class Bounds, class Op>
__global__ void __launch_bounds__(block_threads, long_segments_min_blocks)
    equal_size_chains_kernel(It first, Bounds bounds, Op op, std::uint64_t segments, unsigned chains, Acc* out_chains) {
  wait_for_prior_grid();
  using loader = typename segment_loader_of<It, V, VW>::type;
  const std::uint64_t units = segments * chains;
  for (std::uint64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const std::uint64_t s = unit / chains;
    const segment_extent e = bounds(s);
    const reduction_plan plan = make_plan(e.size, VW, plan_max_tiles_for<Op>);
    bool valid = false;
    const Acc chain = segment_chain<Acc, VW>(loader{advance_to(first, e.begin)}, plan, unsigned(unit % chains), op, valid);
    if (threadIdx.x == 0) out_chains[unit] = chain;
  }
}

// A block per segment folds the chains equal_size_chains_kernel left, as split_segments_kernel
// folds a split segment's.
template <class Acc, int VW, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    equal_size_fold_kernel(Bounds bounds, Acc init, Op op, OutIt out, std::uint64_t segments, unsigned chains,
                           const Acc* in_chains) {
  wait_for_prior_grid();
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  for (std::uint64_t s = blockIdx.x; s < segments; s += gridDim.x) {
    const reduction_plan plan = make_plan(bounds(s).size, VW, plan_max_tiles_for<Op>);
    const bool valid = threadIdx.x < chains;
    Acc chain{};
    if (valid) chain = in_chains[s * chains + threadIdx.x];
    const Acc result = segment_fold_chains<Acc>(chain, valid, plan.tiles, init_for(bounds, s, init), op);
    if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = result;
    __syncthreads();  // the block tree's shared memory is read before the next segment's writes it
  }
}

// Segments of one size, known on the host, of at most warp_threads * VW elements: only the plan's
// warp 0 holds chunks, and only its first `lanes` lanes (lanes_covering the size's chunks, 1 for
// at most VW elements). A group of `lanes` lanes replays that warp's tree for a segment, as
// segment_by_lane_group does, warp_threads / lanes segments a pass; a warp reads the chunks of
// segment_batch passes first, so that each lane has that many loads in flight, where the first
// launch of the lists has one.
inline constexpr unsigned segment_batch = 4;  // eight passes' chunks measured slower: more registers, fewer warps

template <class Acc, int VW, class It, class V, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    lane_segments_kernel(It first, Bounds bounds, Acc init, Op op, OutIt out, std::uint64_t segments, unsigned lanes) {
  wait_for_prior_grid();
  using loader = typename segment_loader_of<It, V, VW>::type;
  using value_t = typename loader::value_type;
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  constexpr unsigned warps_per_block = block_threads / warp_threads;
  const unsigned lane = threadIdx.x % warp_threads;
  const unsigned member = lane % lanes;  // lanes: a power of two, at most warp_threads
  const unsigned per_pass = warp_threads / lanes;
  const std::uint64_t per_warp = std::uint64_t(per_pass) * segment_batch;
  const std::uint64_t stride = std::uint64_t(gridDim.x) * warps_per_block * per_warp;
  const std::uint64_t chunk_begin = std::uint64_t(member) * VW;
  for (std::uint64_t base = (std::uint64_t(blockIdx.x) * warps_per_block + threadIdx.x / warp_threads) * per_warp;
       base < segments; base += stride) {
    value_t chunks[segment_batch][VW];
    std::uint64_t sizes[segment_batch];
#pragma unroll
    for (unsigned b = 0; b < segment_batch; ++b) {
      const std::uint64_t s = base + b * per_pass + lane / lanes;
      sizes[b] = 0;
      if (s < segments) {
        const segment_extent e = bounds(s);
        sizes[b] = e.size;
        const loader load{advance_to(first, e.begin)};
        if (chunk_begin + VW <= e.size) {
          load.chunk(chunk_begin, chunks[b]);
        } else {  // the chunk that straddles n: its elements below n, read here too
#pragma unroll
          for (int j = 0; j < VW; ++j)
            if (chunk_begin + j < e.size) chunks[b][j] = load.element(chunk_begin + j);
        }
      }
    }
#pragma unroll
    for (unsigned b = 0; b < segment_batch; ++b) {
      const std::uint64_t s = base + b * per_pass + lane / lanes;
      const std::uint64_t n = sizes[b];
      // The plan's thread `member` folds its chunk 0, elements in order (fold_chunk).
      Acc acc{};
      bool valid = false;
      if (chunk_begin < n) {
        acc = static_cast<Acc>(chunks[b][0]);
#pragma unroll
        for (int j = 1; j < VW; ++j)
          if (chunk_begin + j < n) fold_into(acc, chunks[b][j], op);
        valid = true;
      }
      // The flagged shuffle-down tree over the group's lanes (segment_by_lane_group).
      for (unsigned delta = lanes / 2; delta > 0; delta /= 2) {
        const Acc other = shuffle_words(
            acc, [delta, lanes](int word) { return __shfl_down_sync(tally::warp::full_mask, word, delta, int(lanes)); });
        const bool other_valid =
            __shfl_down_sync(tally::warp::full_mask, valid, delta, int(lanes)) && member + delta < lanes;
        if (other_valid) acc = valid ? static_cast<Acc>(op(acc, other)) : other;
        valid = valid || other_valid;
      }
      if (s < segments && member == 0) {
        const Acc own_init = init_for(bounds, s, init);
        out[static_cast<out_diff>(s)] = valid ? static_cast<Acc>(op(own_init, acc)) : own_init;
      }
    }
  }
}

// Segments of one size, known on the host, that one warp reduces in at most Passes of the
// plan's warps (warp_threads * VW < size <= Passes * warp_threads * VW): a warp each, as
// segment_by_warp replays the plan's block, but with the chunks of every pass read first, so
// that a lane has all its loads in flight together. The first launch of the lists reads one
// chunk a lane at a time, in 32 registers. Passes (2, 4 or 8) is the fewest that cover the size:
// the registers that hold the chunks decide how many warps an SM runs
// (docs/decisions/0036-segments-of-one-known-size.md).
template <unsigned Passes, class Acc, int VW, class It, class V, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    warp_segments_kernel(It first, Bounds bounds, Acc init, Op op, OutIt out, std::uint64_t segments) {
  wait_for_prior_grid();
  using loader = typename segment_loader_of<It, V, VW>::type;
  using value_t = typename loader::value_type;
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  constexpr unsigned warps_per_block = block_threads / warp_threads;
  const unsigned lane = threadIdx.x % warp_threads;
  const std::uint64_t warps = std::uint64_t(gridDim.x) * warps_per_block;
  for (std::uint64_t s = std::uint64_t(blockIdx.x) * warps_per_block + threadIdx.x / warp_threads; s < segments;
       s += warps) {
    const segment_extent e = bounds(s);
    const loader load{advance_to(first, e.begin)};
    const std::uint64_t n = e.size;
    value_t chunks[Passes][VW];
#pragma unroll
    for (unsigned w = 0; w < Passes; ++w) {
      const std::uint64_t begin = (std::uint64_t(w) * warp_threads + lane) * VW;
      if (begin + VW <= n) load.chunk(begin, chunks[w]);
    }
    replayed_block<Acc> block;
#pragma unroll
    for (unsigned w = 0; w < Passes; ++w) {
      // The plan's thread 32w + lane holds its chunk 0 only (n <= block_threads * VW), elements in order.
      const std::uint64_t begin = (std::uint64_t(w) * warp_threads + lane) * VW;
      Acc acc{};
      bool valid = false;
      if (begin + VW <= n) {
        acc = static_cast<Acc>(chunks[w][0]);
#pragma unroll
        for (int j = 1; j < VW; ++j) fold_into(acc, chunks[w][j], op);
        valid = true;
      } else if (begin < n) {  // the chunk that straddles n
        acc = static_cast<Acc>(load.element(begin));
        for (std::uint64_t i = begin + 1; i < n; ++i) fold_into(acc, load.element(i), op);
        valid = true;
      }
      block.add_warp(w, acc, valid, op);
    }
    const Acc result = block.result(init_for(bounds, s, init), op);
    if (lane == 0) out[static_cast<out_diff>(s)] = result;
  }
}

// Segments under an operator that is not commutative: a block each, in the ordered plan
// (ordered_segment_by_block). One launch, no lists: each block reads its segments' bounds.
template <class Acc, int VW, class It, class V, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    ordered_segments_kernel(It first, Bounds bounds, Acc init, Op op, OutIt out, std::uint64_t segments,
                            const unsigned long long* segments_on_device) {
  wait_for_prior_grid();
  using loader = typename segment_loader_of<It, V, VW>::type;
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  __shared__ alignas(Acc) unsigned char slot_bytes[block_threads * sizeof(Acc)];
  Acc* const slots = reinterpret_cast<Acc*>(slot_bytes);
  if constexpr (counted_on_device_v<Bounds>) {
    segments = *segments_on_device;
  } else {
    (void)segments_on_device;
  }
  for (std::uint64_t s = blockIdx.x; s < segments; s += gridDim.x) {
    const segment_extent e = bounds(s);
    const Acc result =
        ordered_segment_by_block<Acc, VW>(loader{advance_to(first, e.begin)}, e.size, init_for(bounds, s, init), op, slots);
    if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = result;
  }
}

template <class Acc, int VW, class It, class V, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads, long_segments_min_blocks)
    long_segments_kernel(It first, Bounds bounds, Acc init, Op op, OutIt out, segment_lists lists, Acc* chains_out) {
  wait_for_prior_grid();
  using loader = typename segment_loader_of<It, V, VW>::type;
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  __shared__ alignas(Acc) unsigned char chain_bytes[block_threads * sizeof(Acc)];
  Acc* const block_chains = reinterpret_cast<Acc*>(chain_bytes);
  // The lists' count words, read by every block of the launch before, zeroed for the next call.
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *lists.block_count = 0;
    *lists.long_count = 0;
  }
  const std::uint64_t split = lists.split_count();
  const auto whole = static_cast<std::uint32_t>(lists.long_segments() - split);
  // A block's work: first the long segments beyond the split ones that fall to it (every
  // gridDim.x-th), each whole: all its chains into shared memory, then their fold; then a run of
  // consecutive chains of the split segments (decision 0042). The block finds its run's first
  // chain's segment in the map and walks on from there, so only a new segment costs it reads of
  // the lists and bounds. A segment of at most block_threads tiles has a chain per tile, and the
  // block reduces its tiles of such a segment in a row, the next one in flight. Both kinds of
  // work go through one copy of the tile code (the kernel has no registers to spare for two).
  // Chain numbers, segment places and unit numbers fit 32 bits (split_max * block_threads
  // chains, ids of unsigned int), which leaves the tile code its registers.
  const auto chain_count = static_cast<std::uint32_t>(lists.split_chains());
  const std::uint32_t per_block = (chain_count + gridDim.x - 1) / gridDim.x;
  std::uint32_t q = blockIdx.x * per_block;
  const std::uint32_t q_end = q + per_block < chain_count ? q + per_block : chain_count;
  std::uint32_t unit = blockIdx.x;  // the next whole segment's place beyond the split ones
  std::uint32_t m = 0, start = 0;   // the split segment of chain q, and its first chain
  if (q < q_end) {
    m = lists.chain_segment[q];
    start = static_cast<std::uint32_t>(lists.chain_starts[m]);
  }
  for (;;) {
    const bool is_whole = unit < whole;
    if (!is_whole && q >= q_end) break;
    const unsigned int s = lists.long_id(is_whole ? split + unit : m);
    const segment_extent e = bounds(s);
    const loader load{advance_to(first, e.begin)};
    const reduction_plan plan = make_plan(e.size, VW, plan_max_tiles_for<Op>);
    const auto chains = static_cast<std::uint32_t>(chains_of(plan));
    const std::uint32_t first_chain = is_whole ? 0u : q - start;
    const std::uint32_t end_chain = is_whole || q_end - start >= chains ? chains : q_end - start;
    // Chain t goes to shared memory for a whole segment, to the scratch for a split one (a
    // store under either branch: a pointer to either would take two more registers).
    const auto keep = [&](std::uint32_t t, const Acc& chain) {
      if (is_whole) {
        block_chains[t] = chain;
      } else {
        chains_out[start + t] = chain;
      }
    };
    reduce_chain_run<Acc, VW>(load, plan, op, first_chain, end_chain, keep);
    if (is_whole) {
      __syncthreads();
      const bool valid = threadIdx.x < chains;
      Acc chain{};
      if (valid) chain = block_chains[threadIdx.x];
      const Acc result = segment_fold_chains<Acc>(chain, valid, plan.tiles, init_for(bounds, s, init), op);
      if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = result;
      __syncthreads();  // the chains are read before the block's next segment writes them
      unit += gridDim.x;
    } else {
      q = start + end_chain;
      start += chains;
      ++m;
    }
  }
}

template <class Acc, int VW, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    split_segments_kernel(Bounds bounds, Acc init, Op op, OutIt out, segment_lists lists, const Acc* chains) {
  wait_for_prior_grid();
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  const std::uint64_t split = lists.split_count();
  for (std::uint64_t m = blockIdx.x; m < split; m += gridDim.x) {
    const unsigned int s = lists.long_id(m);
    const reduction_plan plan = make_plan(bounds(s).size, VW, plan_max_tiles_for<Op>);
    const bool valid = threadIdx.x < chains_of(plan);
    Acc chain{};
    if (valid) chain = chains[lists.chain_starts[m] + threadIdx.x];
    const Acc result = segment_fold_chains<Acc>(chain, valid, plan.tiles, init_for(bounds, s, init), op);
    if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = result;
    __syncthreads();
  }
}

// Few segments, counted on the host: two launches instead of the lists' four (decision 0045). At
// most a block's threads of them, and at most as many as segment_split_capacity (all of them
// split, 256 chains each, in segmented_chain_bytes of scratch: fewer than 256 only for
// accumulators wider than 32 bytes).
template <class Acc>
inline constexpr std::uint64_t few_segments_max =
    segment_split_capacity<Acc> < block_threads ? segment_split_capacity<Acc> : block_threads;

// Each block of both launches numbers the segments' chains itself, a thread a segment and a
// block scan: chain_start[s] is the number of chains of segments 0 .. s - 1, and
// chain_start[segments] all of them. Returns that total.
template <int VW, class Op, class Bounds>
__device__ __forceinline__ std::uint32_t number_few_segments(const Bounds& bounds, std::uint64_t segments,
                                                             std::uint32_t* chain_start, std::uint64_t* warp_sums) {
  const bool has = threadIdx.x < segments;
  const std::uint64_t chains = has ? chains_of(make_plan(bounds(threadIdx.x).size, VW, plan_max_tiles_for<Op>)) : 0;
  std::uint64_t total = 0;
  const std::uint64_t before = block_exclusive_sum(chains, warp_sums, total);  // at most 2^21 chains
  if (has) chain_start[threadIdx.x] = static_cast<std::uint32_t>(before);
  if (threadIdx.x == 0) chain_start[segments] = static_cast<std::uint32_t>(total);
  __syncthreads();
  return static_cast<std::uint32_t>(total);
}

// Each block a run of consecutive chains of all the segments, as long_segments_kernel computes a
// split segment's, into chains_out[chain_start[s] + t]: a segment of one tile or less is one
// chain, its tile's partial.
template <class Acc, int VW, class It, class V, class Bounds, class Op>
__global__ void __launch_bounds__(block_threads, long_segments_min_blocks)
    few_segments_chains_kernel(It first, Bounds bounds, Op op, std::uint64_t segments, Acc* chains_out) {
  wait_for_prior_grid();
  using loader = typename segment_loader_of<It, V, VW>::type;
  __shared__ std::uint32_t chain_start[block_threads + 1];
  __shared__ std::uint64_t warp_sums[block_threads / warp_threads];
  __shared__ std::uint32_t first_segment;
  const std::uint32_t chain_count = number_few_segments<VW, Op>(bounds, segments, chain_start, warp_sums);
  const std::uint32_t per_block = (chain_count + gridDim.x - 1) / gridDim.x;
  std::uint32_t q = blockIdx.x * per_block;
  const std::uint32_t q_end = q + per_block < chain_count ? q + per_block : chain_count;
  if (q >= q_end) return;
  // The segment of chain q: the one thread whose segment holds it says so (a walk over the
  // starts by one thread would take a block with a late run hundreds of dependent steps).
  if (threadIdx.x < segments && chain_start[threadIdx.x] <= q && q < chain_start[threadIdx.x + 1])
    first_segment = threadIdx.x;
  __syncthreads();
  std::uint32_t s = first_segment;
  while (q < q_end) {
    const segment_extent e = bounds(s);
    const loader load{advance_to(first, e.begin)};
    const reduction_plan plan = make_plan(e.size, VW, plan_max_tiles_for<Op>);
    const std::uint32_t start = chain_start[s];
    const auto chains = static_cast<std::uint32_t>(chains_of(plan));
    const std::uint32_t end_chain = q_end - start >= chains ? chains : q_end - start;
    reduce_chain_run<Acc, VW>(load, plan, op, q - start, end_chain,
                              [&](std::uint32_t t, const Acc& chain) { chains_out[start + t] = chain; });
    q = start + end_chain;
    ++s;
  }
}

// A block per segment folds its chains (split_segments_kernel's fold); an empty segment is init.
template <class Acc, int VW, class Bounds, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    few_segments_fold_kernel(Bounds bounds, Acc init, Op op, OutIt out, std::uint64_t segments, const Acc* chains) {
  wait_for_prior_grid();
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  __shared__ std::uint32_t chain_start[block_threads + 1];
  __shared__ std::uint64_t warp_sums[block_threads / warp_threads];
  number_few_segments<VW, Op>(bounds, segments, chain_start, warp_sums);
  for (std::uint64_t s = blockIdx.x; s < segments; s += gridDim.x) {
    const reduction_plan plan = make_plan(bounds(s).size, VW, plan_max_tiles_for<Op>);
    const Acc own_init = init_for(bounds, s, init);
    if (plan.tiles == 0) {
      if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = own_init;
      continue;
    }
    const bool valid = threadIdx.x < chains_of(plan);
    Acc chain{};
    if (valid) chain = chains[chain_start[s] + threadIdx.x];
    const Acc result = segment_fold_chains<Acc>(chain, valid, plan.tiles, own_init, op);
    if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = result;
    __syncthreads();  // the block tree's shared memory is read before the next segment's writes it
  }
}

}  // namespace tally::detail
