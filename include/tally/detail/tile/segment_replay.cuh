#pragma once
// The per-segment work of a segmented reduction (docs/decisions/0022): each segment of n
// elements gets exactly the bits tally::reduce gives it alone, because every routine here
// evaluates the expression tree of that segment's own plan, make_plan(n, VW) (plan.cuh), only
// with fewer threads where the plan's threads would be mostly idle:
//   n <= VW           one thread: the plan's thread 0 holds the only chunk, and every tree
//                     above it combines that value with nothing
//   n <= 32 VW        a group of lanes: only the plan's warp 0 holds chunks, and only its first
//                     lanes (segment_by_lane_group); or, for the column kernels, one thread
//                     evaluating that lanes' tree depth first (segment_by_thread_tree)
//   one tile          one warp replays the plan's block: on pass w its lanes are the plan's
//                     warp w, the warp tree with validity flags gives warp w's result, and the
//                     8 results go through the tree the block's warp 0 runs over them
//                     (replayed_block; segment_by_warp, segment_by_warp_step)
//   more tiles        tile partials by tally::reduce's tile code; the plan's fold of them is
//                     thread t's chain over partials t, t + block_threads, ... then the block
//                     tree, and a chain can be computed apart from the others (segment_chain)
//   not commutative   one block in the ordered plan (ordered_segment_by_block)
// Only the order of combination decides the bits, so how a chunk is read (one 16-byte load or
// element by element) is the loader's choice: segments start anywhere.

#include "tally/block/reduce.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tile/commutative_fold.cuh"
#include "tally/detail/tile/commutative_tile.cuh"
#include "tally/detail/tile/ordered_tile.cuh"
#include "tally/warp/reduce.cuh"

#include <cstdint>
#include <cstring>

namespace tally::detail {

// Segments up to this many elements are reduced by one warp (segment_by_warp); up to a tile
// of one step by one block; longer ones by several blocks.
template <int VW>
inline constexpr std::uint64_t warp_segment_max = std::uint64_t(block_threads) * VW;
template <int VW>
inline constexpr std::uint64_t block_segment_max = std::uint64_t(block_threads) * loads_per_step * VW;

// The plan's fold of the elements of one chunk (VW of them from `begin`) below n, element by
// element: the small-segment routines below run in few registers, so a chunk is not held whole.
// valid: whether any element lies below n.
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc fold_chunk(const Loader& load, std::uint64_t begin, std::uint64_t n, Op& op,
                                          bool& valid) {
  Acc acc{};
  valid = begin < n;
  if (valid) {
    acc = static_cast<Acc>(load.element(begin));
#pragma unroll
    for (int j = 1; j < VW; ++j)
      if (begin + j < n) fold_into(acc, load.element(begin + j), op);
  }
  return acc;
}

// A segment of n <= VW elements, by one thread: op(init, the fold of its elements in order).
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc segment_by_thread(const Loader& load, std::uint64_t n, const Acc& init, Op& op) {
  if (n == 0) return init;
  bool valid = false;
  return static_cast<Acc>(op(init, fold_chunk<Acc, VW>(load, 0, n, op, valid)));
}

// A value of any type whose copy is its bytes (as the trees move them) through a shuffle of
// its 32-bit words: shuffle(word) is __shfl_sync or a variant of it.
template <class T, class Shuffle>
__device__ __forceinline__ T shuffle_words(const T& value, Shuffle shuffle) {
  constexpr int words = int((sizeof(T) + 3) / 4);
  int buffer[words] = {};
  std::memcpy(buffer, static_cast<const void*>(&value), sizeof(T));
#pragma unroll
  for (int w = 0; w < words; ++w) buffer[w] = shuffle(buffer[w]);
  T out;
  std::memcpy(static_cast<void*>(&out), buffer, sizeof(T));
  return out;
}

// Every lane gets lane `source`'s value.
template <class T>
__device__ __forceinline__ T shuffle_from(const T& value, unsigned source) {
  return shuffle_words(value, [source](int word) { return __shfl_sync(tally::warp::full_mask, word, int(source)); });
}

// The plan's block tree replayed by one warp: add_warp(w, ...) takes this warp's lanes as the
// plan's warp w (each lane's fold and whether it has one) and keeps that warp's tree result in
// lane w; result() is warp 0's flagged tree over the 8 warps' results (block/reduce.cuh,
// fold_warps; with every warp holding a value it is the same tree unflagged), then op(init, .),
// in lane 0.
template <class Acc>
struct replayed_block {
  Acc warp_result{};
  bool warp_valid = false;

  template <class Op>
  __device__ __forceinline__ void add_warp(unsigned w, Acc acc, bool valid, Op& op) {
    acc = tally::warp::detail::reduce_lanes<warp_threads>(acc, valid, op);
    const Acc result = shuffle_from(acc, 0);
    const bool result_valid = __shfl_sync(tally::warp::full_mask, valid, 0);
    if (threadIdx.x % warp_threads == w) {
      warp_result = result;
      warp_valid = result_valid;
    }
  }
  template <class Op>
  __device__ __forceinline__ Acc result(const Acc& init, Op& op) {
    constexpr unsigned warps = block_threads / warp_threads;
    const Acc total = tally::warp::detail::reduce_lanes<warps>(warp_result, warp_valid, op);
    return static_cast<Acc>(op(init, total));
  }
};

// A segment of VW < n <= warp_segment_max<VW> elements, by one whole warp (every lane calls
// it with the same n); lane 0 returns op(init, total). The plan's threads hold one chunk each
// here, so a lane holds one chunk at a time: the first launch, which calls it, runs in 32
// registers a thread (segment_by_warp_step holds a whole step).
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc segment_by_warp(const Loader& load, std::uint64_t n, const Acc& init, Op& op) {
  const unsigned lane = threadIdx.x % warp_threads;
  const unsigned passes = unsigned((n + std::uint64_t(warp_threads) * VW - 1) / (std::uint64_t(warp_threads) * VW));
  replayed_block<Acc> block;
  for (unsigned w = 0; w < passes; ++w) {
    // The plan's thread 32w + lane: its chunk 0 (its only one below n), elements in order.
    bool valid = false;
    Acc acc = fold_chunk<Acc, VW>(load, (std::uint64_t(w) * warp_threads + lane) * VW, n, op, valid);
    block.add_warp(w, acc, valid, op);
  }
  return block.result(init, op);
}

// A segment of at most one step (block_segment_max<VW> elements: the plan's one tile of one
// step), by one whole warp; lane 0 returns op(init, total). On pass w the lanes are the plan's
// warp w: each folds its chunks u = 0, 1, ... (at (u * block_threads + thread) * VW) below n in
// order. A plan thread holds `held` chunks at most (a power of two): where that is fewer than a
// step's loads_per_step, the chunks of loads_per_step / held passes are read together, so that
// a lane has loads_per_step loads in flight whatever the segment's size (a segment of half a
// step takes four rounds of reads, not eight).
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc segment_by_warp_step(const Loader& load, std::uint64_t n, const Acc& init, Op& op) {
  constexpr unsigned warps = block_threads / warp_threads;
  using value_t = typename Loader::value_type;
  const unsigned lane = threadIdx.x % warp_threads;
  if (n == 0) return init;
  const unsigned passes = n >= std::uint64_t(block_threads) * VW
                              ? warps
                              : unsigned((n + std::uint64_t(warp_threads) * VW - 1) / (std::uint64_t(warp_threads) * VW));
  // Positions within a step fit in 32 bits: fewer registers for the eight slots' offsets.
  const unsigned size = unsigned(n);
  unsigned held = 1;
  while (held < unsigned(loads_per_step) && held * unsigned(block_threads * VW) < size) held *= 2;
  // Slot k of a round of reads: pass w0 + k / held, chunk k % held.
  const unsigned shift = unsigned(__ffs(int(held))) - 1u;
  const auto slot_begin = [&](unsigned w0, int k) {
    const unsigned thread = (w0 + (unsigned(k) >> shift)) * warp_threads + lane;
    return ((unsigned(k) & (held - 1)) * block_threads + thread) * unsigned(VW);
  };
  replayed_block<Acc> block;
  for (unsigned w0 = 0; w0 < passes; w0 += unsigned(loads_per_step) / held) {
    value_t chunks[loads_per_step][VW];
#pragma unroll
    for (int k = 0; k < loads_per_step; ++k) {
      const unsigned begin = slot_begin(w0, k);
      if (begin + VW <= size) load.chunk(begin, chunks[k]);
    }
    Acc acc{};
    bool valid = false;
#pragma unroll
    for (int k = 0; k < loads_per_step; ++k) {
      const unsigned begin = slot_begin(w0, k);
      if (begin + VW <= size) {
#pragma unroll
        for (int j = 0; j < VW; ++j) {
          if (!valid && j == 0) {
            acc = static_cast<Acc>(chunks[k][0]);
            valid = true;
          } else {
            fold_into(acc, chunks[k][j], op);
          }
        }
      } else if (begin < size) {  // the chunk that straddles n: the thread's last
        for (unsigned i = begin; i < size; ++i) {
          if (!valid) {
            acc = static_cast<Acc>(load.element(i));
            valid = true;
          } else {
            fold_into(acc, load.element(i), op);
          }
        }
      }
      if ((unsigned(k) & (held - 1)) == held - 1) {  // pass w's last chunk: its warp is done
        const unsigned w = w0 + (unsigned(k) >> shift);
        if (w < passes) block.add_warp(w, acc, valid, op);
        acc = Acc{};
        valid = false;
      }
    }
  }
  return block.result(init, op);
}

// Segments of VW < n <= warp_threads * VW elements need only the plan's warp 0, and only its
// first c = ceil(n / VW) lanes: the levels of the warp tree whose partners lie beyond those
// lanes combine nothing into lane 0, and the other warps of the plan are empty. So a group of
// consecutive lanes, at least lanes_covering(c) of them, replays it; a warp runs groups of
// several segments side by side. The tree's lane i takes lane i + d's value at distance d
// exactly where lane i + d holds a chunk (the chunks below n are a prefix, so lane i then holds
// one too), so `member` (the lane's place in its group) and c decide each combine, and a
// shuffle down the whole warp reaches the partner without leaving the group. Every lane of the
// warp calls this together (n = 0 for a lane without a segment), levels from the widest group's
// (pass_width, a power of two, at most warp_threads) down; the group's first lane returns
// op(init, total).
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc segment_by_lane_group(const Loader& load, std::uint64_t n, unsigned member,
                                                     unsigned pass_width, const Acc& init, Op& op) {
  bool valid = false;
  Acc acc = fold_chunk<Acc, VW>(load, std::uint64_t(member) * VW, n, op, valid);
  const auto chunks = static_cast<unsigned>((n + VW - 1) / VW);
#pragma unroll
  for (unsigned delta = warp_threads / 2; delta > 0; delta /= 2) {
    if (delta < pass_width) {
      const Acc other = shuffle_words(
          acc, [delta](int word) { return __shfl_down_sync(tally::warp::full_mask, word, delta); });
      if (member + delta < chunks) acc = static_cast<Acc>(op(acc, other));
    }
  }
  return static_cast<Acc>(op(init, acc));
}

// The same segment (VW < n <= warp_threads * VW elements) by one thread alone: the tree that
// segment_by_lane_group runs over P = lanes_covering(ceil(n / VW)) lanes, evaluated depth first.
// After its level of distance d, lane i of that tree holds op(its value, lane i + d's), where
// lane i + d holds a chunk below n (lane i then does too: the chunks below n are a prefix). So the
// root is a binary tree whose leaves, left to right, are the chunks in bit-reversed order of
// their lane: the thread folds chunk reverse(k) for k = 0, 1, ..., P - 1 and combines its stack
// as a binary counter carries, each combine with the same operands in the same order as the
// lanes' tree.
TALLY_HOST_DEVICE constexpr unsigned set_bits_of(unsigned k) { return k == 0 ? 0u : (k & 1u) + set_bits_of(k >> 1); }
TALLY_HOST_DEVICE constexpr unsigned trailing_zeros_of(unsigned k) {
  return (k & 1u) != 0 ? 0u : 1u + trailing_zeros_of(k >> 1);
}

inline constexpr unsigned thread_tree_depth = 6;  // log2(warp_threads) + 1 stack entries

// The stack's top `Carries` combines after a chunk was pushed at `Depth`: each puts
// op(left subtree, right subtree) in the left one's place, where the right one holds a chunk.
template <unsigned Depth, unsigned Carries, class Acc, class Op>
__device__ __forceinline__ void combine_carries(Op& op, Acc (&stack)[thread_tree_depth],
                                                const bool (&valid)[thread_tree_depth]) {
  if constexpr (Carries > 0) {
    if (valid[Depth]) stack[Depth - 1] = static_cast<Acc>(op(stack[Depth - 1], stack[Depth]));
    combine_carries<Depth - 1, Carries - 1>(op, stack, valid);
  }
}

// Step K of segment_by_thread_tree and the steps after it, each with its stack places fixed at
// compile time, so that the stack lives in registers.
template <unsigned K, class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ void thread_tree_steps(const Loader& load, std::uint64_t n, unsigned lanes, unsigned bits,
                                                  Op& op, Acc (&stack)[thread_tree_depth],
                                                  bool (&valid)[thread_tree_depth]) {
  if constexpr (K < warp_threads) {
    if (K >= lanes) return;
    constexpr unsigned depth = set_bits_of(K);
    constexpr unsigned carries = trailing_zeros_of(K + 1);  // the subtrees K's chunk completes
    const unsigned lane = bits == 0 ? 0u : __brev(K) >> (32u - bits);
    stack[depth] = fold_chunk<Acc, VW>(load, std::uint64_t(lane) * VW, n, op, valid[depth]);
    combine_carries<depth, carries>(op, stack, valid);
    thread_tree_steps<K + 1, Acc, VW>(load, n, lanes, bits, op, stack, valid);
  }
}

template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc segment_by_thread_tree(const Loader& load, std::uint64_t n, const Acc& init, Op& op) {
  const unsigned lanes = tally::warp::detail::lanes_covering(unsigned((n + VW - 1) / VW));
  const unsigned bits = unsigned(__ffs(int(lanes))) - 1u;
  Acc stack[thread_tree_depth];
  bool valid[thread_tree_depth];
  thread_tree_steps<0, Acc, VW>(load, n, lanes, bits, op, stack, valid);
  return static_cast<Acc>(op(init, stack[0]));
}

// The plan's chain of folding thread t: partials t, t + block_threads, ... folded in order,
// each by the whole block with tally::reduce's tile code, the next tile's first step in flight
// during the block reduction of the current one (reduce_tiles). Thread 0 returns it; valid says
// whether thread t has any partial.
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc segment_chain(const Loader& load, const reduction_plan& plan, unsigned t, Op& op,
                                             bool& valid) {
  Acc chain{};
  valid = t < plan.tiles;
  reduce_tiles<Acc, VW>(load, plan, op, t, block_threads, [&](std::uint64_t tile, const Acc& partial) {
    chain = tile == t ? partial : static_cast<Acc>(op(chain, partial));
  });
  return chain;
}

// The plan's last step over the chains (thread t holding chain t, valid or not): the block
// tree of fold_published_partials; thread 0 returns op(init, total).
template <class Acc, class Op>
__device__ __forceinline__ Acc segment_fold_chains(Acc chain, bool valid, std::uint64_t tiles, const Acc& init,
                                                   Op& op) {
  const Acc total = fold_partials_of<Acc>(chain, valid, tiles, op);
  return static_cast<Acc>(op(init, total));
}

// A segment under an operator that is not commutative, by one whole block, in the ordered
// plan (plan.cuh, ordered_tile): its tiles in order by tally::reduce's ordered tile code; thread
// t's contiguous range of tile partials folded in order (kept in `slots`, one per thread), then
// the ordered tree over the threads, as ordered_fold_published_partials does; thread 0 returns
// op(init, total). Every thread of the block calls it with the same n.
template <class Acc, int VW, class Op, class Loader>
__device__ __forceinline__ Acc ordered_segment_by_block(const Loader& load, std::uint64_t n, const Acc& init, Op& op,
                                                        Acc* slots) {
  if (n == 0) return init;
  const reduction_plan plan = make_plan(n, VW, plan_max_tiles_for<Op>);
  const std::uint64_t per_thread = ordered_partials_per_thread(plan.tiles);
  Acc range{};
  for (std::uint64_t tile = 0; tile < plan.tiles; ++tile) {
    const Acc partial = ordered_reduce_tile<Acc, VW>(load, plan, tile, op);
    if (threadIdx.x == 0) {
      range = tile % per_thread == 0 ? partial : static_cast<Acc>(op(range, partial));
      if (tile % per_thread == per_thread - 1 || tile + 1 == plan.tiles) slots[tile / per_thread] = range;
    }
  }
  __syncthreads();
  const bool valid = threadIdx.x * per_thread < plan.tiles;
  Acc acc{};
  if (valid) acc = slots[threadIdx.x];
  __syncthreads();  // the slots are read before the block's next segment writes them
  Acc total;
  if (tuning::ordered_fold_few_partials_by_warp && plan.tiles <= warp_threads) {
    bool v = valid;
    total = acc;
    if (threadIdx.x < warp_threads) total = tally::warp::reduce_ordered(acc, v, op);
  } else {
    bool v = valid;
    total = tally::block::reduce_ordered<block_threads>(acc, v, op);
  }
  return static_cast<Acc>(op(init, total));
}

}  // namespace tally::detail
