#pragma once
// The per-tile work of the commutative plan (plan.cuh): a thread's fold of its chunks of a
// tile, step by step, and the block's reduction of those folds into the tile's partial;
// partial tiles with the plan's checks; and reduce_my_tiles, a block's loop over its tiles
// that publishes each partial (partials.cuh). The kernels (kernels/reduce_kernels.cuh,
// kernels/atomic_kernels.cuh) are thin wrappers around it; the host backend replays the
// same order (dispatch/host_backend.cuh).

#include "tally/block/reduce.cuh"
#include "tally/detail/loads/loads.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tile/fold_chain.cuh"
#include "tally/detail/tile/partials.cuh"
#include "tally/detail/tuning.cuh"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace tally::detail {

// An operator may offer combine_in_order(a, b): op(a, b) for the case where b comes after
// a in the input and both are real values, not stand-ins for "nothing". A thread's own
// fold always has that shape, and the extrema's candidate combine then needs one
// comparison instead of its general case analysis (extrema.cuh).
template <class Op, class Acc, class = void>
struct has_in_order_combine : std::false_type {};
template <class Op, class Acc>
struct has_in_order_combine<Op, Acc,
                            std::void_t<decltype(std::declval<Op&>().combine_in_order(std::declval<const Acc&>(),
                                                                                       std::declval<const Acc&>()))>>
    : std::true_type {};

// acc = op(acc, x), where x follows every element already folded into acc.
template <class Acc, class V, class Op>
__device__ __forceinline__ void fold_into(Acc& acc, const V& x, Op& op) {
  if constexpr (has_in_order_combine<Op, Acc>::value) {
    acc = op.combine_in_order(acc, static_cast<Acc>(x));
  } else {
    acc = static_cast<Acc>(op(acc, static_cast<Acc>(x)));
  }
}

// A loader may keep a step's chunks in registers as they were read (raw_type, by
// raw_chunk) and make each element's value only when it is folded (value(raw, index)):
// for a value much wider than what was read, such as an extremum candidate (a value and
// a 64-bit index made from a 4-byte element), the step's loads then stay in flight in a
// fraction of the registers. A raw_type of void says the loader does not.
template <class Loader, class = void>
struct reads_raw_chunks : std::false_type {};
template <class Loader>
struct reads_raw_chunks<Loader, std::void_t<typename Loader::raw_type>>
    : std::bool_constant<!std::is_void_v<typename Loader::raw_type>> {};

template <class Loader, bool Raw = reads_raw_chunks<Loader>::value>
struct chunk_element {
  using type = typename Loader::value_type;
};
template <class Loader>
struct chunk_element<Loader, true> {
  using type = typename Loader::raw_type;
};

// A loader of raw chunks may also make each element's candidate with a 32-bit position in
// place of its index (local_type, by local_value(raw, position)) and turn a fold of such
// candidates back into a value (globalize(local, index of position 0)). The threads' folds
// of a full tile and the block tree over them then carry 32-bit positions counted from the
// tile's first element, and the 64-bit index is made once per tile instead of per element
// and per tree level. The answer is the same: the extrema's candidates are chosen by value,
// then by position, and positions within a tile order as indices do. Dispatch takes this
// path only where a tile's positions fit in 32 bits (local_positions_fit).
template <class Loader, class Op, class = void>
struct folds_local_positions : std::false_type {};
template <class Loader, class Op>
struct folds_local_positions<Loader, Op, std::enable_if_t<!std::is_void_v<typename Loader::local_type>>>
    : std::bool_constant<tuning::local_positions && has_in_order_combine<Op, typename Loader::local_type>::value> {};

// How a tile partial travels through the scratch. As it is, in general. A loader of local
// candidates (extrema) sends it in that form, positions counted from the tile's first
// element, and block 0 makes the index again as it reads it: half the words to publish and
// to poll for minmax_element (16 bytes instead of 32), the poll being on the reduction's
// critical path (docs/decisions/0013-order-free-extrema.md). Dispatch has checked that a
// tile's positions fit in 32 bits (local_positions_fit).
template <class Acc>
struct identity_codec {
  using partial_type = Acc;
  __device__ __forceinline__ const Acc& encode(const Acc& value, std::uint64_t) const { return value; }
  __device__ __forceinline__ const Acc& decode(const Acc& partial, std::uint64_t) const { return partial; }
};
template <class Acc, class Loader>
struct position_codec {
  using partial_type = typename Loader::local_type;
  Loader load;
  __device__ __forceinline__ partial_type encode(const Acc& value, std::uint64_t tile_begin) const {
    return load.localize(value, tile_begin);
  }
  __device__ __forceinline__ Acc decode(const partial_type& partial, std::uint64_t tile_begin) const {
    return static_cast<Acc>(load.globalize(partial, tile_begin));
  }
};
template <class Acc, class Loader, class = void>
struct partial_codec_for {
  using type = identity_codec<Acc>;
  static type make(const Loader&) { return {}; }
};
template <class Acc, class Loader>
struct partial_codec_for<Acc, Loader, std::enable_if_t<!std::is_void_v<typename Loader::local_type>>> {
  using type = position_codec<Acc, Loader>;
  static type make(const Loader& load) { return {load}; }
};

// The thread's place in the block that reduces its tile: threadIdx.x, except in
// tile_pair_reduce_kernel, whose block is a run of block_threads threads per tile.
__device__ __forceinline__ unsigned tile_thread() { return threadIdx.x % block_threads; }

// One step's chunks of one thread, in registers: what it fetches, and its elements in
// the plan's order. Loads is the plan's loads_per_step, or fewer in a one-tile kernel
// whose input ends after the first Loads chunks of each thread (single_tile_reduce_kernel).
template <int VW, class Loader, int Loads = loads_per_step>
struct step_chunks {
  using chunk_t = typename chunk_element<Loader>::type;
  static constexpr bool raw = reads_raw_chunks<Loader>::value;
  chunk_t chunks[Loads][VW];

  __device__ __forceinline__ static std::uint64_t chunk_begin(std::uint64_t step_begin, int u) {
    return step_begin + std::uint64_t(u * block_threads + tile_thread()) * VW;
  }
  __device__ __forceinline__ void fetch(const Loader& load, std::uint64_t step_begin) {
#pragma unroll
    for (int u = 0; u < Loads; ++u) {
      if constexpr (raw) {
        load.raw_chunk(chunk_begin(step_begin, u), chunks[u]);
      } else {
        load.chunk(chunk_begin(step_begin, u), chunks[u]);
      }
    }
  }
  __device__ __forceinline__ auto element(const Loader& load, std::uint64_t step_begin, int u, int j) const {
    if constexpr (raw) {
      return load.value(chunks[u][j], chunk_begin(step_begin, u) + j);
    } else {
      return chunks[u][j];
    }
  }
  // Folds every element into acc; with Start, the first element starts it instead.
  template <bool Start, class Acc, class Op>
  __device__ __forceinline__ void fold(const Loader& load, std::uint64_t step_begin, Acc& acc, Op& op) const {
#pragma unroll
    for (int u = 0; u < Loads; ++u)
#pragma unroll
      for (int j = 0; j < VW; ++j) {
        if (Start && u == 0 && j == 0) {
          acc = static_cast<Acc>(element(load, step_begin, 0, 0));
        } else {
          fold_into(acc, element(load, step_begin, u, j), op);
        }
        if (j == VW - 1) end_fold_chain<Acc, Op>(acc);
      }
  }
  // The same over a loader's local candidates (folds_local_positions): element (u, j) at
  // position step_position + u * block_threads * VW + j, step_position being the position
  // of the thread's first element of the step.
  template <bool Start, class Local, class Op>
  __device__ __forceinline__ void fold_positions(const Loader& load, std::uint32_t step_position, Local& acc,
                                                 Op& op) const {
#pragma unroll
    for (int u = 0; u < Loads; ++u)
#pragma unroll
      for (int j = 0; j < VW; ++j) {
        const Local x = load.local_value(chunks[u][j], step_position + std::uint32_t(u * block_threads * VW + j));
        if (Start && u == 0 && j == 0) {
          acc = x;
        } else {
          acc = op.combine_in_order(acc, x);
        }
      }
  }
};

// Whether a block fetches its next tile's first step before reducing the current tile (see
// reduce_my_tiles): only where a step's chunks take at most 32 registers, which the
// block reduction can keep alive at two resident blocks per SM. Wider chunks (a candidate
// read through a fancy iterator, inner_product's raw pairs) would cost occupancy instead.
template <int VW, class Loader>
inline constexpr bool prefetches_next_tile =
    sizeof(typename chunk_element<Loader>::type) * VW * loads_per_step <= tuning::prefetch_max_step_bytes;

// The resident blocks per SM the kernels' register budget must allow.
template <int VW, class Loader>
inline constexpr int min_resident_blocks =
    prefetches_next_tile<VW, Loader> ? tuning::prefetch_min_resident_blocks : tuning::min_resident_blocks;

// A loader may say that its single pass also pays compiled for two resident blocks per SM
// where the tiles outnumber the blocks that one per SM holds (static constexpr bool
// two_blocks_at_many_tiles): float inner_product's raw pairs take 181 registers, one block
// per SM; held to 128 they read faster where the tiles outnumber the blocks, and slower
// where one block per SM holds every tile (docs/decisions/0015-transforms-at-the-fold.md).
// Dispatch picks by the tile count (launch_commutative_reduce).
template <class Loader, class = void>
struct has_two_block_variant : std::false_type {};
template <class Loader>
struct has_two_block_variant<Loader, std::enable_if_t<Loader::two_blocks_at_many_tiles>>
    : std::bool_constant<tuning::two_block_variant> {};

// Folds a full tile's steps in order: fold_step(chunks, s, Start) folds step s, held in
// `chunks`; Start (std::true_type for step 0) says it starts the accumulator. Step 0 is
// already in `step` (fetched by the caller). (Fetching step s + 1 before folding step s,
// into a second register set or chunk by chunk into the same one, gained nothing:
// docs/decisions/0005-next-tile-prefetch.md.)
template <int VW, class Loader, int Loads, class BeginOf, class FoldStep>
__device__ __forceinline__ void fold_tile_steps(const Loader& load, std::uint64_t steps,
                                                step_chunks<VW, Loader, Loads>& step, BeginOf begin_of,
                                                FoldStep fold_step) {
  fold_step(step, std::uint64_t(0), std::true_type{});
  for (std::uint64_t s = 1; s < steps; ++s) {
    step.fetch(load, begin_of(s));
    fold_step(step, s, std::false_type{});
  }
}

// A thread's fold of a full tile whose first step is already in `step` (fetched by the
// caller, so that its loads can be in flight while the block finishes the previous tile):
// every thread has chunks at every step, so no bounds or validity checks. On return `step`
// is free. The fold is an Acc, or with folds_local_positions the loader's local candidate,
// its positions counted from the tile's first element (as_tile_value turns either into an
// Acc).
template <class Acc, int VW, class Loader, class Op, int Loads>
__device__ __forceinline__ auto fold_fetched_full_tile(const Loader& load, std::uint64_t tile_begin, std::uint64_t steps,
                                                       Op& op,
                                                       step_chunks<VW, Loader, Loads>& step) {
  using chunks_t = step_chunks<VW, Loader, Loads>;
  constexpr std::uint64_t step_items = std::uint64_t(block_threads) * Loads * VW;
  const auto begin_of = [tile_begin](std::uint64_t s) { return tile_begin + s * step_items; };
  if constexpr (folds_local_positions<Loader, Op>::value) {
    typename Loader::local_type acc;
    const std::uint32_t first = tile_thread() * VW;
    fold_tile_steps(load, steps, step, begin_of, [&](const chunks_t& chunks, std::uint64_t s, auto start) {
      chunks.template fold_positions<decltype(start)::value>(load, std::uint32_t(s) * std::uint32_t(step_items) + first,
                                                             acc, op);
    });
    return acc;
  } else {
    Acc acc;
    fold_tile_steps(load, steps, step, begin_of, [&](const chunks_t& chunks, std::uint64_t s, auto start) {
      chunks.template fold<decltype(start)::value>(load, begin_of(s), acc, op);
    });
    return acc;
  }
}

// A full tile's fold (of a thread, or the block's) as an Acc.
template <class Acc, class Loader, class Folded>
__device__ __forceinline__ Acc as_tile_value(const Loader& load, const Folded& folded, std::uint64_t tile_begin) {
  if constexpr (std::is_same_v<Folded, Acc>) {
    return folded;
  } else {
    return static_cast<Acc>(load.globalize(folded, tile_begin));
  }
}

// The block's reduction of its threads' folds of a full tile, in thread 0. Local candidates
// go through the block tree as they are (half the width of 64-bit indices, and never
// empty) and become an Acc once. Runs > 1: tile_pair_reduce_kernel's block, each run of
// block_threads threads reducing its own tile (tally::block::detail::fold_warps).
template <class Acc, int Runs = 1, class Loader, class Folded, class Op>
__device__ __forceinline__ Acc reduce_full_tile_folds(const Loader& load, const Folded& mine, std::uint64_t tile_begin,
                                                      Op& op) {
  return as_tile_value<Acc>(load, tally::block::detail::reduce_all<block_threads, Runs>(mine, op), tile_begin);
}

// A thread's fold of a full tile, as an Acc.
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc reduce_full_tile(const Loader& load, std::uint64_t tile_begin, std::uint64_t steps,
                                                Op& op) {
  step_chunks<VW, Loader> step;
  step.fetch(load, tile_begin);
  return as_tile_value<Acc>(load, fold_fetched_full_tile<Acc, VW>(load, tile_begin, steps, op, step), tile_begin);
}

// One step of the last, partial tile, `remaining` of whose items lie below n (all of them
// for every step but the last). A thread's elements in the plan's order have increasing
// indices, so those below n are a prefix of them: its chunks wholly below n, then at most
// one chunk that straddles n (one in the whole step: the chunk holding index n - 1 when n
// is not a multiple of VW). The whole chunks are read and folded like a full tile's, under
// predicates instead of branches; the straddling chunk's owner then folds its elements
// below n one by one. With Start, the thread's first element (chunk 0, element 0, below n:
// the caller checked) starts acc.
template <bool Start, class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ void fold_partial_step(const Loader& load, std::uint64_t step_begin, unsigned remaining,
                                                  Op& op, Acc& acc) {
  using C = typename chunk_element<Loader>::type;
  constexpr bool raw = reads_raw_chunks<Loader>::value;
  const auto offset = [](int u) { return (unsigned(u) * block_threads + tile_thread()) * VW; };
  const auto value_of = [&](const C& c, unsigned off) {
    if constexpr (raw) {
      return load.value(c, step_begin + off);
    } else {
      return c;
    }
  };
  C chunks[loads_per_step][VW];
  // Every chunk is read, so that all the loads are in flight at once: under a branch each,
  // the compiler gave the loads of a double sum one register, and each load waited for the
  // one before (docs/decisions/0006-one-tile-kernels.md). A chunk that is not whole reads
  // the step's first chunk instead, and is not folded; that chunk is whole whenever any
  // chunk of the step is. (tuning::partial_step_reads_every_chunk = false reads the whole
  // chunks only, the way before.)
  if (remaining >= unsigned(VW)) {
#pragma unroll
    for (int u = 0; u < loads_per_step; ++u) {
      const bool whole = offset(u) + VW <= remaining;
      if (!tuning::partial_step_reads_every_chunk && !whole) continue;
      const unsigned at = whole ? offset(u) : 0u;
      if constexpr (raw) {
        load.raw_chunk(step_begin + at, chunks[u]);
      } else {
        load.chunk(step_begin + at, chunks[u]);
      }
    }
  }
  bool started = !Start;
#pragma unroll
  for (int u = 0; u < loads_per_step; ++u) {
    if (offset(u) + VW <= remaining) {
#pragma unroll
      for (int j = 0; j < VW; ++j) {
        const auto x = value_of(chunks[u][j], offset(u) + j);
        if (Start && u == 0 && j == 0) {
          acc = static_cast<Acc>(x);
        } else {
          fold_into(acc, x, op);
        }
      }
      end_fold_chain<Acc, Op>(acc);
      started = true;
    }
  }
  const unsigned straddling = remaining / VW * VW;  // offset of the chunk that straddles n
  if (straddling < remaining && (straddling / VW) % block_threads == tile_thread()) {
    for (unsigned off = straddling; off < remaining; ++off) {
      C c;
      if constexpr (raw) {
        c = load.raw_element(step_begin + off);
      } else {
        c = load.element(step_begin + off);
      }
      const auto x = value_of(c, off);
      if (started) {
        fold_into(acc, x, op);
      } else {
        acc = static_cast<Acc>(x);
        started = true;
      }
    }
  }
}

// The last, partial tile: the same order restricted to indices below n. valid says whether
// this thread holds any element at all.
template <class Acc, int VW, class Loader, class Op>
__device__ Acc reduce_partial_tile(const Loader& load, std::uint64_t tile_begin, std::uint64_t n, Op& op, bool& valid) {
  constexpr unsigned step_items = unsigned(block_threads) * loads_per_step * VW;
  const auto remaining_from = [n](std::uint64_t step_begin) {
    const std::uint64_t left = n - step_begin;
    return left < step_items ? unsigned(left) : step_items;
  };
  Acc acc{};
  valid = tile_begin + std::uint64_t(tile_thread()) * VW < n;
  if (!valid) return acc;
  fold_partial_step<true, Acc, VW>(load, tile_begin, remaining_from(tile_begin), op, acc);
  for (std::uint64_t step_begin = tile_begin + step_items; step_begin < n; step_begin += step_items) {
    fold_partial_step<false, Acc, VW>(load, step_begin, remaining_from(step_begin), op, acc);
  }
  return acc;
}

// The block's reduction of the last, partial tile. Where it reaches every thread (each
// holds at least one element) the block tree needs no validity flags; it combines the same
// values in the same tree either way.
template <class Acc, int VW, int Runs = 1, class Loader, class Op>
__device__ __forceinline__ Acc reduce_partial_tile_of_block(const Loader& load, std::uint64_t tile_begin,
                                                            std::uint64_t n, Op& op) {
  bool valid = false;
  const Acc acc = reduce_partial_tile<Acc, VW>(load, tile_begin, n, op, valid);
  if (n - tile_begin >= std::uint64_t(block_threads) * VW)
    return tally::block::detail::reduce_all<block_threads, Runs>(acc, op);
  return tally::block::detail::fold_warps<block_threads, false, Runs>(acc, valid, op);
}

// Reduces the tiles first_tile, first_tile + tile_stride, ... below end_tile in order, handing
// each partial to take(tile, partial) (thread 0's partial is the block's). The first step of a
// block's next full tile is fetched before the block reduction of the current one, so a block
// keeps its loads in flight from one tile to the next: with one-step tiles (N up to 2^24
// floats) that reduction would otherwise leave it idle.
template <class Acc, int VW, class Loader, class Op, class Take>
__device__ __forceinline__ void reduce_tile_range(const Loader& load, const reduction_plan& plan, Op& op,
                                                  std::uint64_t first_tile, std::uint64_t end_tile,
                                                  std::uint64_t tile_stride, Take take) {
  constexpr bool prefetch = prefetches_next_tile<VW, Loader>;
  step_chunks<VW, Loader> step;
  const auto fetch_if_full = [&](std::uint64_t tile) {
    if (tile < end_tile && plan.tile_is_full(tile)) step.fetch(load, plan.tile_begin(tile));
  };
  if constexpr (prefetch) fetch_if_full(first_tile);
  for (std::uint64_t tile = first_tile; tile < end_tile; tile += tile_stride) {
    Acc partial;
    if (plan.tile_is_full(tile)) {
      if constexpr (!prefetch) fetch_if_full(tile);
      const auto mine = fold_fetched_full_tile<Acc, VW>(load, plan.tile_begin(tile), plan.steps_per_tile, op, step);
      if constexpr (prefetch) fetch_if_full(tile + tile_stride);
      partial = reduce_full_tile_folds<Acc>(load, mine, plan.tile_begin(tile), op);
    } else {
      partial = reduce_partial_tile_of_block<Acc, VW>(load, plan.tile_begin(tile), plan.n, op);
    }
    take(tile, partial);
  }
}

// reduce_tile_range to the plan's last tile.
template <class Acc, int VW, class Loader, class Op, class Take>
__device__ __forceinline__ void reduce_tiles(const Loader& load, const reduction_plan& plan, Op& op,
                                             std::uint64_t first_tile, std::uint64_t tile_stride, Take take) {
  reduce_tile_range<Acc, VW>(load, plan, op, first_tile, plan.tiles, tile_stride, take);
}

// Reduces the tiles first_tile, first_tile + tile_stride, ... and publishes their partials.
template <class Acc, int VW, class Loader, class Op, class Codec>
__device__ __forceinline__ void reduce_my_tiles(const Loader& load, const reduction_plan& plan, Op& op,
                                                const Codec& codec, partial_cell<typename Codec::partial_type>* cells,
                                                unsigned int epoch, std::uint64_t first_tile,
                                                std::uint64_t tile_stride) {
  reduce_tiles<Acc, VW>(load, plan, op, first_tile, tile_stride, [&](std::uint64_t tile, const Acc& partial) {
    if (threadIdx.x == 0) cells[tile].publish(codec.encode(partial, plan.tile_begin(tile)), epoch);
  });
}

}  // namespace tally::detail
