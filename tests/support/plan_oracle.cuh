#pragma once
// An executable statement of the reduction plan: docs/determinism.md's rules (and
// docs/operators.md's for the order-preserving plan) transcribed one by one, without the
// library's plan code. It includes nothing of tally's and has its own constants and tile
// arithmetic, so that a change to the plan in the library shows up as a difference from
// it: tests/test_reduce_host.cu static_asserts that the constants below equal the
// library's, and the tests compare the bits of tally::reduce on the host and the device
// with it (tests/support/plan_cases.cuh).
//
// Slow and plain on purpose: thread by thread and lane by lane, every tree step reading the
// values the lanes held before it, an empty lane or warp holding nothing (std::nullopt)
// rather than an identity.
//
// Entry points, for the three plan kinds:
//   commutative(values, width, init, op)  operators that are commutative (tally::plus, ...)
//   ordered(values, width, init, op)      operators that are not: lambdas, user functors
//   order_free(values, width, init, op)   commutative operators that also declare
//                                         `static constexpr bool order_free = true`
// `values` are the values the loader delivers, element i of the input as the fold sees it:
// converted to init's type (Acc), every fold converting each element so (a range of int8
// summed into an int delivers ints; a transform_iterator delivers f(base[i])). The loader
// itself (vector loads, element by element, 48-byte chunks, a zip, a transform) enters the
// plan only through `width`, the elements per chunk (W), which the rules below state.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

namespace tally_test::oracle {

// ---- the plan's constants (docs/determinism.md, "How") ----
inline constexpr std::uint64_t block_threads = 256;  // threads of a block
inline constexpr std::uint64_t warp_lanes = 32;      // lanes of a warp
inline constexpr std::uint64_t warps = block_threads / warp_lanes;
inline constexpr std::uint64_t loads_per_step = 8;   // chunks a thread loads per step
inline constexpr std::uint64_t chunk_bytes = 16;     // a chunk: one 16-byte vector
inline constexpr std::uint64_t wide_chunk_bytes = 48;  // or 48 bytes of 12- and 24-byte elements
inline constexpr std::uint64_t max_tiles = 2048;
inline constexpr std::uint64_t order_free_max_tiles = 256;

// ---- W, the elements per chunk: which loader gives which ----
// W is a property of the types alone, the same on the host and the device, whatever the
// alignment (a misaligned range is read element by element, in chunks of the same W).
//
// chunk_width(b): elements of b bytes per 16-byte chunk: 16 / b where b divides 16, else 1.
// "W = 16 / sizeof(value)" of docs/determinism.md, where the value is the input's element
// (the iterator's value type), never init's: int8 summed into int has W = 16, __half into
// float W = 8.
constexpr int chunk_width(std::size_t bytes) {
  return bytes != 0 && bytes <= chunk_bytes && chunk_bytes % bytes == 0 ? int(chunk_bytes / bytes) : 1;
}

// array_width(b, ...): a contiguous range (pointer, thrust::device_ptr, std::vector's or
// thrust's vector iterators) of elements of b bytes. 12- and 24-byte elements (float3,
// double3, ...; trivially copyable, aligned to at least 4) take 48-byte chunks, W = 48 / b;
// every other size chunk_width(b): a 48-byte struct has W = 1.
constexpr int array_width(std::size_t bytes, std::size_t alignment, bool trivially_copyable) {
  const bool wide = (bytes == 12 || bytes == 24) && alignment >= 4 && trivially_copyable;
  return wide ? int(wide_chunk_bytes / bytes) : chunk_width(bytes);
}

// The other loaders (docs/fields.md; the rules not stated there are marked *):
//   thrust::transform_iterator over a contiguous range of E: array_width(E), the base's W,
//     not the transformed value's (a transform of __half to float has W = 8).
//   * a transform_iterator over any other base: chunk_width(sizeof(its value type)).
//   thrust::zip_iterator (or tally::zip) of contiguous ranges whose elements all have one
//     size e with chunk_width(e) > 1, and a transform_iterator over such a zip:
//     chunk_width(e) (a zip of two float ranges has W = 4, whatever the tuple's size).
//   * any other zip (a counting or transformed base, elements of different sizes, or of 12
//     or 24 bytes): chunk_width(sizeof(the zip's value type)), the tuple's size: a zip of a
//     float range and a counting_iterator<int> has W = 2.
//   * transform_reduce / inner_product over two ranges (a transform over a zip of two):
//     where both are contiguous with elements of one size e, chunk_width(e); otherwise the
//     zip rules above, on the transform's value type.
//   * min_element / max_element / minmax_element over a contiguous range of E:
//     chunk_width(E) (16-byte chunks only: 12- and 24-byte elements get W = 1); over any
//     other iterator chunk_width(sizeof(candidate)), a value and an 8-byte index: W = 1
//     for every value type of 8 bytes or less.
//   every other iterator (counting, constant, permutation, ...): chunk_width(sizeof(its
//     value type)).

// ---- tiles (docs/determinism.md: "Tiles are one step long until ...") ----
struct tiling {
  std::uint64_t step_items = 0;      // threads x loads x W
  std::uint64_t steps_per_tile = 0;  // the fewest that keep the tiles at most max_tiles
  std::uint64_t tile_items = 0;
  std::uint64_t tiles = 0;  // only the last may be partial
};

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

inline tiling tiles_of(std::uint64_t n, int width, std::uint64_t cap) {
  tiling t;
  t.step_items = block_threads * loads_per_step * std::uint64_t(width);
  const std::uint64_t steps = ceil_div(n, t.step_items);
  // s steps per tile make ceil(steps / s) tiles, at most cap exactly when s >= steps / cap.
  t.steps_per_tile = steps <= cap ? 1 : ceil_div(steps, cap);
  t.tile_items = t.steps_per_tile * t.step_items;
  t.tiles = ceil_div(n, t.tile_items);
  // The arithmetic above is the rule's: no fewer steps per tile would do.
  if (t.tiles > cap || (t.steps_per_tile > 1 && ceil_div(n, (t.steps_per_tile - 1) * t.step_items) <= cap))
    throw std::logic_error("plan oracle: steps per tile are not the fewest that keep the tiles at most the cap");
  return t;
}

// ---- folds ----
template <class Acc>
using slot = std::optional<Acc>;  // a thread's or lane's value; nullopt: it holds nothing

// into = op(into, x), x coming after everything in into; an empty side leaves the other.
template <class Acc, class Op>
void fold(slot<Acc>& into, const slot<Acc>& x, Op& op) {
  if (!x) return;
  into = into ? slot<Acc>(Acc(op(*into, *x))) : x;
}

// The shuffle-down tree over 32 lanes: for d = 16, 8, 4, 2, 1, lane i takes
// op(v[i], v[i + d]) (lanes i + d >= 32 hold nothing), all lanes reading the values held
// before the step. Lane 0's value is the result.
template <class Acc, class Op>
slot<Acc> shuffle_down_tree(std::vector<slot<Acc>> v, Op& op) {
  for (std::uint64_t d = warp_lanes / 2; d > 0; d /= 2) {
    const std::vector<slot<Acc>> before = v;
    for (std::uint64_t i = 0; i + d < warp_lanes; ++i) fold(v[i], before[i + d], op);
  }
  return v[0];
}

// The ordered tree over 32 lanes: for d = 1, 2, 4, 8, 16, lane i, a multiple of 2d, takes
// op(v[i], v[i + d]), the lower lane on the left. Lane 0's value is the result.
template <class Acc, class Op>
slot<Acc> ordered_tree(std::vector<slot<Acc>> v, Op& op) {
  for (std::uint64_t d = 1; d < warp_lanes; d *= 2) {
    const std::vector<slot<Acc>> before = v;
    for (std::uint64_t i = 0; i + d < warp_lanes; i += 2 * d) fold(v[i], before[i + d], op);
  }
  return v[0];
}

// A block tree over the block's 256 threads: warp w (threads 32w .. 32w + 31) folds its
// lanes by `tree`; then warp 0 folds the 8 warps' results by the same tree, lane w holding
// warp w's result and lanes 8 .. 31 nothing.
template <class Acc, class Op, class Tree>
slot<Acc> block_tree(const std::vector<slot<Acc>>& threads, Op& op, Tree tree) {
  std::vector<slot<Acc>> warp_results(warp_lanes);
  for (std::uint64_t w = 0; w < warps; ++w) {
    const auto first = threads.begin() + std::ptrdiff_t(w * warp_lanes);
    warp_results[w] = tree(std::vector<slot<Acc>>(first, first + std::ptrdiff_t(warp_lanes)), op);
  }
  return tree(warp_results, op);
}

template <class Acc, class Op>
slot<Acc> shuffle_down_block_tree(const std::vector<slot<Acc>>& threads, Op& op) {
  return block_tree(threads, op, [](std::vector<slot<Acc>> v, Op& o) { return shuffle_down_tree(std::move(v), o); });
}

template <class Acc, class Op>
slot<Acc> ordered_block_tree(const std::vector<slot<Acc>>& threads, Op& op) {
  return block_tree(threads, op, [](std::vector<slot<Acc>> v, Op& o) { return ordered_tree(std::move(v), o); });
}

// ---- the commutative plan (docs/determinism.md, "How") ----
// Inside a tile, chunk c is the W elements from the tile's start + c * W (those below N);
// thread t owns the chunks c = t (mod 256) and folds their elements left to right into one
// accumulator, seeded by its first element. The block tree gives the tile's partial. The
// tile partials are folded by one block: thread t takes partials t, t + 256, ... in order,
// then the block tree. Finally op(init, total).
template <class Acc, class Op>
Acc commutative_plan(const std::vector<Acc>& values, int width, Acc init, Op op, std::uint64_t cap) {
  const std::uint64_t n = values.size();
  if (n == 0) return init;
  const tiling plan = tiles_of(n, width, cap);
  const std::uint64_t w = std::uint64_t(width);
  std::vector<slot<Acc>> folding_block(block_threads);
  for (std::uint64_t tile = 0; tile < plan.tiles; ++tile) {
    const std::uint64_t begin = tile * plan.tile_items;
    const std::uint64_t end = begin + plan.tile_items < n ? begin + plan.tile_items : n;
    std::vector<slot<Acc>> threads(block_threads);
    for (std::uint64_t c = 0; begin + c * w < end; ++c)
      for (std::uint64_t i = begin + c * w; i < begin + (c + 1) * w && i < end; ++i)
        fold(threads[c % block_threads], slot<Acc>(values[i]), op);
    fold(folding_block[tile % block_threads], shuffle_down_block_tree(threads, op), op);
  }
  return Acc(op(init, *shuffle_down_block_tree(folding_block, op)));
}

// ---- the order-preserving plan (docs/determinism.md, "Operators that are not commutative") ----
// The same tiles. A tile of s steps (its own count: the last tile's length in steps,
// rounded up) is 8 warp regions of s pieces: warp w owns pieces w*s .. w*s + s - 1 of it.
// A piece is 32 lane runs of 8 * W elements: lane l's run starts l * 8 * W into the piece.
// A lane folds its run left to right, the warp folds its lanes by the ordered tree and its
// pieces in order; warp 0 folds the 8 warps' results by the ordered tree. The tile partials
// are folded by one block: thread t folds partials [t * p, (t + 1) * p), p = ceil(tiles /
// 256), in order, then the ordered block tree. Finally op(init, total).
template <class Acc, class Op>
Acc ordered_plan(const std::vector<Acc>& values, int width, Acc init, Op op, std::uint64_t cap) {
  const std::uint64_t n = values.size();
  if (n == 0) return init;
  const tiling plan = tiles_of(n, width, cap);
  const std::uint64_t run_items = loads_per_step * std::uint64_t(width);
  const std::uint64_t piece_items = warp_lanes * run_items;
  std::vector<Acc> partials;
  for (std::uint64_t tile = 0; tile < plan.tiles; ++tile) {
    const std::uint64_t begin = tile * plan.tile_items;
    const std::uint64_t end = begin + plan.tile_items < n ? begin + plan.tile_items : n;
    const std::uint64_t s = ceil_div(end - begin, plan.step_items);
    std::vector<slot<Acc>> warp_results(warp_lanes);
    for (std::uint64_t w = 0; w < warps; ++w) {
      for (std::uint64_t piece = 0; piece < s; ++piece) {
        const std::uint64_t piece_begin = begin + (w * s + piece) * piece_items;
        std::vector<slot<Acc>> lanes(warp_lanes);
        for (std::uint64_t l = 0; l < warp_lanes; ++l)
          for (std::uint64_t i = piece_begin + l * run_items; i < piece_begin + (l + 1) * run_items && i < end; ++i)
            fold(lanes[l], slot<Acc>(values[i]), op);
        fold(warp_results[w], ordered_tree(lanes, op), op);
      }
    }
    partials.push_back(*ordered_tree(warp_results, op));
  }
  const std::uint64_t p = ceil_div(plan.tiles, block_threads);
  std::vector<slot<Acc>> folding_block(block_threads);
  for (std::uint64_t k = 0; k < plan.tiles; ++k) fold(folding_block[k / p], slot<Acc>(partials[k]), op);
  return Acc(op(init, *ordered_block_tree(folding_block, op)));
}

// ---- entry points ----
template <class Acc, class Op>
Acc commutative(const std::vector<Acc>& values, int width, Acc init, Op op) {
  return commutative_plan(values, width, init, op, max_tiles);
}

template <class Acc, class Op>
Acc ordered(const std::vector<Acc>& values, int width, Acc init, Op op) {
  return ordered_plan(values, width, init, op, max_tiles);
}

// An order-free operator gets "the same rules with a smaller cap". Every order-free
// operator of the library (the extrema's candidate combines) is also commutative, and so
// takes the commutative plan; one that were not would take ordered_plan with this cap.
template <class Acc, class Op>
Acc order_free(const std::vector<Acc>& values, int width, Acc init, Op op) {
  return commutative_plan(values, width, init, op, order_free_max_tiles);
}

}  // namespace tally_test::oracle
