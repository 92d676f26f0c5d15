#pragma once
// The per-segment work of a segmented reduction (docs/decisions/0022): each segment of n
// elements gets exactly the bits tally::reduce gives it alone, because every routine here
// evaluates the expression tree of that segment's own plan, make_plan(n, VW) (plan.cuh), only
// with fewer threads where the plan's threads would be mostly idle:
//   n <= VW           one thread: the plan's thread 0 holds the only chunk, and every tree
//                     above it combines that value with nothing
//   n <= block*VW     one warp replays the plan's block: on pass w its lanes are the plan's
//                     warp w (each holding at most chunk u = 0), the warp tree with validity
//                     flags gives warp w's result, and the 8 results go through the tree the
//                     block's warp 0 runs over them
//   one tile          a block runs the tile code of tally::reduce itself
//   more tiles        tile partials by the tile code; the plan's fold of them is thread t's
//                     chain over partials t, t + block_threads, ... then the block tree, and a
//                     chain can be computed apart from the others (segment_chain)
// Only the order of combination decides the bits, so loads are element by element: segments
// start anywhere, and the plan's chunks are groups of indices, not aligned vectors.

#include "tally/block/reduce.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tile/commutative_fold.cuh"
#include "tally/detail/tile/commutative_tile.cuh"
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

// A segment of n <= VW elements, by one thread: op(init, the fold of its elements in order).
template <class Acc, class Loader, class Op>
__device__ __forceinline__ Acc segment_by_thread(const Loader& load, std::uint64_t n, const Acc& init, Op& op) {
  if (n == 0) return init;
  Acc acc = static_cast<Acc>(load.element(0));
  for (std::uint64_t i = 1; i < n; ++i) fold_into(acc, load.element(i), op);
  return static_cast<Acc>(op(init, acc));
}

// Every lane gets lane `source`'s value (a type whose copy is its bytes, as the trees move).
template <class T>
__device__ __forceinline__ T shuffle_from(const T& value, unsigned source) {
  constexpr int words = int((sizeof(T) + 3) / 4);
  int buffer[words] = {};
  std::memcpy(buffer, static_cast<const void*>(&value), sizeof(T));
#pragma unroll
  for (int w = 0; w < words; ++w) buffer[w] = __shfl_sync(tally::warp::full_mask, buffer[w], int(source));
  T out;
  std::memcpy(static_cast<void*>(&out), buffer, sizeof(T));
  return out;
}

// A segment of VW < n <= warp_segment_max<VW> elements, by one whole warp (every lane calls
// it with the same n); lane 0 returns op(init, total).
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc segment_by_warp(const Loader& load, std::uint64_t n, const Acc& init, Op& op) {
  constexpr unsigned warps = block_threads / warp_threads;
  const unsigned lane = threadIdx.x % warp_threads;
  const unsigned passes = unsigned((n + std::uint64_t(warp_threads) * VW - 1) / (std::uint64_t(warp_threads) * VW));
  Acc warp_result{};
  bool warp_valid = false;  // lane w holds the plan's warp w's result
  for (unsigned w = 0; w < passes; ++w) {
    // The plan's thread 32w + lane: its chunk 0 (its only one below n), elements in order.
    const std::uint64_t begin = (std::uint64_t(w) * warp_threads + lane) * VW;
    Acc acc{};
    bool valid = begin < n;
    if (valid) {
      acc = static_cast<Acc>(load.element(begin));
#pragma unroll
      for (int j = 1; j < VW; ++j)
        if (begin + j < n) fold_into(acc, load.element(begin + j), op);
    }
    acc = tally::warp::detail::reduce_lanes<warp_threads>(acc, valid, op);
    const Acc result = shuffle_from(acc, 0);
    const bool result_valid = __shfl_sync(tally::warp::full_mask, valid, 0);
    if (lane == w) {
      warp_result = result;
      warp_valid = result_valid;
    }
  }
  // The block's warp 0 folds the warps' results by the tree over `warps` lanes, flagged
  // (block/reduce.cuh, fold_warps); every warp holding a value gives the same tree unflagged.
  warp_result = tally::warp::detail::reduce_lanes<warps>(warp_result, warp_valid, op);
  return static_cast<Acc>(op(init, warp_result));
}

// Tile `tile` of the plan of a segment, by the whole block of block_threads threads, with the
// code a tile block of tally::reduce runs; thread 0 returns the tile's partial.
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc segment_tile_partial(const Loader& load, const reduction_plan& plan, std::uint64_t tile,
                                                    Op& op) {
  if (plan.tile_is_full(tile))
    return reduce_full_tile_folds<Acc>(load, reduce_full_tile<Acc, VW>(load, plan.tile_begin(tile), plan.steps_per_tile, op),
                                       plan.tile_begin(tile), op);
  return reduce_partial_tile_of_block<Acc, VW>(load, plan.tile_begin(tile), plan.n, op);
}

// The plan's chain of folding thread t: partials t, t + block_threads, ... folded in order,
// each by the whole block. Thread 0 returns it; valid says whether thread t has any partial.
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc segment_chain(const Loader& load, const reduction_plan& plan, unsigned t, Op& op,
                                             bool& valid) {
  Acc chain{};
  valid = t < plan.tiles;
  for (std::uint64_t tile = t; tile < plan.tiles; tile += block_threads) {
    const Acc partial = segment_tile_partial<Acc, VW>(load, plan, tile, op);
    chain = tile == t ? partial : static_cast<Acc>(op(chain, partial));
  }
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

}  // namespace tally::detail
