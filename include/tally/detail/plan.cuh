#pragma once
// The plan of a reduction: how N elements split into tiles, and the fixed order in which
// a tile's elements and then the tiles' partials are combined. It is a function of N and
// the element size alone, shared by the device kernels and the host backend, which is why
// their results agree bit for bit and do not depend on the GPU, its SM count or the grid.
//
// Inside a tile, thread t of block_threads owns, at step s and load u, the chunk of
// vector_width consecutive elements starting at
//     tile_begin + s * step_items + (u * block_threads + t) * vector_width
// and folds its chunks left to right into one accumulator. Warps then fold lanes by a
// shuffle-down tree, warp 0 folds the warps' results the same way, and one block (block 0
// of the single pass, or the second launch of the two pass) folds the tile partials:
// thread t takes partials t, t + block_threads, ... in order, then the same block tree.
// See docs/determinism.md.
//
// An operator that is not commutative (operator_traits.cuh) takes the order-preserving
// variant of the same plan (ordered_tile below): the same tiles, but every lane, warp and
// tile owns a contiguous run and every tree combines neighbours, left operand first.

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define TALLY_HOST_DEVICE __host__ __device__
#else
#define TALLY_HOST_DEVICE
#endif

namespace tally::detail {

// The plan's constants decide the bits of every result, so they are fixed: no macro or
// setting changes them. 8 loads per step keep enough bytes in flight per thread at two
// resident blocks per SM, and at most 2048 tiles keep the partials block 0 polls few; no
// variant measured was faster beyond the spread (docs/decisions/0004-plan-shape.md).
inline constexpr int block_threads = 256;
inline constexpr int warp_threads = 32;
inline constexpr int loads_per_step = 8;  // independent 16-byte loads in flight per thread
// Most tiles a plan makes; a call's scratch holds that many partials (dispatch/runtime.cuh).
inline constexpr std::uint64_t plan_max_tiles = 2048;

// Elements per 16-byte vector; 1 for sizes that do not divide 16.
template <class V>
inline constexpr int vector_width_v = (sizeof(V) <= 16 && 16 % sizeof(V) == 0) ? int(16 / sizeof(V)) : 1;

struct reduction_plan {
  std::uint64_t n = 0;
  std::uint64_t tile_items = 0;  // a multiple of step_items
  std::uint64_t tiles = 0;       // at most plan_max_tiles
  std::uint64_t step_items = 0;  // block_threads * loads_per_step * vector_width
  std::uint64_t steps_per_tile = 0;
  int vector_width = 1;

  TALLY_HOST_DEVICE std::uint64_t tile_begin(std::uint64_t tile) const { return tile * tile_items; }
  TALLY_HOST_DEVICE bool tile_is_full(std::uint64_t tile) const { return n - tile_begin(tile) >= tile_items; }
};

// An operator whose answer cannot depend on the order of combination at all, not even in
// its rounding (a selection under a total order, as the extrema's candidate combines), says
// so with `static constexpr bool order_free = true`. Its plan takes fewer, longer tiles:
// each tile costs a block reduction and a partial for block 0 to fold, which for wide
// candidates is worth amortizing (docs/decisions/0013-order-free-extrema.md).
template <class Op, class = void>
struct is_order_free : std::false_type {};
template <class Op>
struct is_order_free<Op, std::enable_if_t<Op::order_free>> : std::true_type {};

inline constexpr std::uint64_t order_free_max_tiles = 256;
static_assert(order_free_max_tiles <= plan_max_tiles, "order-free plans take fewer tiles, never more");

// The most tiles the plan of a reduction by Op makes; host and device both ask this.
template <class Op>
inline constexpr std::uint64_t plan_max_tiles_for = is_order_free<Op>::value ? order_free_max_tiles : plan_max_tiles;

// Tiles are one step long until there would be more than max_tiles of them; beyond that
// each tile takes as many steps as keep the count under max_tiles. All of it is 64-bit and
// exact for every n below 2^64 (a range's length is below 2^63): no sum or product here
// can overflow (tests/test_plan.cu checks the invariants up to 2^64 - 1).
TALLY_HOST_DEVICE constexpr reduction_plan make_plan(std::uint64_t n, int vector_width,
                                                     std::uint64_t max_tiles = plan_max_tiles) {
  reduction_plan plan;
  plan.n = n;
  plan.vector_width = vector_width;
  plan.step_items = std::uint64_t(block_threads) * loads_per_step * vector_width;
  const std::uint64_t steps = n / plan.step_items + (n % plan.step_items != 0);
  std::uint64_t steps_per_tile = steps / max_tiles + (steps % max_tiles != 0);
  if (steps_per_tile == 0) steps_per_tile = 1;
  plan.steps_per_tile = steps_per_tile;
  plan.tile_items = steps_per_tile * plan.step_items;
  plan.tiles = n / plan.tile_items + (n % plan.tile_items != 0);
  return plan;
}

// Whether every position within a tile of the plan fits in 32 bits: then a fold over a
// tile may carry positions counted from the tile's first element in place of 64-bit
// indices (tile/commutative_tile.cuh, folds_local_positions).
TALLY_HOST_DEVICE constexpr bool local_positions_fit(const reduction_plan& plan) {
  return plan.tile_items <= (std::uint64_t(1) << 32);
}

template <class V>
TALLY_HOST_DEVICE constexpr reduction_plan make_plan_for(std::uint64_t n) {
  return make_plan(n, vector_width_v<V>);
}

// The order-preserving plan, for operators that are not commutative. Tiles are the plan's.
// A tile of `steps` steps (its own count: the last tile may have fewer) is cut into
// block_threads / warp_threads contiguous warp regions of steps pieces each; a piece is
// warp_threads contiguous lane runs of loads_per_step chunks (vector_width elements each).
// A lane folds its run left to right, the warp folds its lanes by the ordered tree
// (tally::warp::reduce_ordered) and folds its pieces in order; the block folds its warps by
// the ordered tree. Tile partials: thread t folds the contiguous range
// [t * per_thread, (t + 1) * per_thread) of them, then the ordered block tree.
struct ordered_tile {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;        // min(n, begin + tile_items)
  std::uint64_t steps = 0;      // pieces per warp region
  std::uint64_t run_items = 0;  // one lane's run in a piece: loads_per_step * vector_width
  std::uint64_t piece_items = 0;

  TALLY_HOST_DEVICE std::uint64_t piece_begin(int warp, std::uint64_t piece) const {
    return begin + (std::uint64_t(warp) * steps + piece) * piece_items;
  }
};

TALLY_HOST_DEVICE inline ordered_tile ordered_tile_of(const reduction_plan& plan, std::uint64_t tile) {
  ordered_tile t;
  t.begin = plan.tile_begin(tile);
  t.end = plan.tile_is_full(tile) ? t.begin + plan.tile_items : plan.n;
  t.steps = (t.end - t.begin + plan.step_items - 1) / plan.step_items;
  t.run_items = std::uint64_t(loads_per_step) * plan.vector_width;
  t.piece_items = t.run_items * warp_threads;
  return t;
}

// How many consecutive tile partials each thread of the folding block takes.
TALLY_HOST_DEVICE constexpr std::uint64_t ordered_partials_per_thread(std::uint64_t tiles) {
  return (tiles + block_threads - 1) / block_threads;
}

}  // namespace tally::detail
