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

#include "tally/block/reduce.cuh"
#include "tally/detail/fold_chain.cuh"
#include "tally/detail/launch.cuh"
#include "tally/detail/loads.cuh"
#include "tally/detail/partials.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tuning.cuh"

#include <cuda/atomic>

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

// Writes the result: to *out, or for reduce() into the host's hand-over words (runtime.cuh),
// each 4 bytes of the value with the tag beside them in one 8-byte store, so that the host
// can take each word as soon as it lands, with no fence before a flag.
template <class Out>
__device__ __forceinline__ void publish(Out* out, const Out& value, host_handoff* handoff) {
  if (!handoff) {
    *out = value;
    return;
  }
  constexpr std::size_t words = (sizeof(Out) + 3) / 4;  // 4 bytes of the value per word
  static_assert(words <= handoff_words, "tally: the value is too large to hand over");
  unsigned int pieces[words] = {};
  std::memcpy(pieces, &value, sizeof(Out));
#pragma unroll
  for (std::size_t w = 0; w < words; ++w)
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(handoff->word[w])
        .store(handoff_tag | pieces[w], cuda::std::memory_order_relaxed);
}

// Reduces the tiles first_tile, first_tile + tile_stride, ... and publishes their partials.
// The first step of a block's next full tile is fetched before the block reduction of the
// current one, so a block keeps its loads in flight from one tile to the next: with
// one-step tiles (N up to 2^24 floats) that reduction would otherwise leave it idle.
template <class Acc, int VW, class Loader, class Op, class Codec>
__device__ __forceinline__ void reduce_my_tiles(const Loader& load, const reduction_plan& plan, Op& op,
                                                const Codec& codec, partial_cell<typename Codec::partial_type>* cells,
                                                unsigned int epoch, std::uint64_t first_tile,
                                                std::uint64_t tile_stride) {
  constexpr bool prefetch = prefetches_next_tile<VW, Loader>;
  step_chunks<VW, Loader> step;
  const auto fetch_if_full = [&](std::uint64_t tile) {
    if (tile < plan.tiles && plan.tile_is_full(tile)) step.fetch(load, plan.tile_begin(tile));
  };
  if constexpr (prefetch) fetch_if_full(first_tile);
  for (std::uint64_t tile = first_tile; tile < plan.tiles; tile += tile_stride) {
    Acc partial;
    if (plan.tile_is_full(tile)) {
      if constexpr (!prefetch) fetch_if_full(tile);
      const auto mine = fold_fetched_full_tile<Acc, VW>(load, plan.tile_begin(tile), plan.steps_per_tile, op, step);
      if constexpr (prefetch) fetch_if_full(tile + tile_stride);
      partial = reduce_full_tile_folds<Acc>(load, mine, plan.tile_begin(tile), op);
    } else {
      partial = reduce_partial_tile_of_block<Acc, VW>(load, plan.tile_begin(tile), plan.n, op);
    }
    if (threadIdx.x == 0) cells[tile].publish(codec.encode(partial, plan.tile_begin(tile)), epoch);
  }
}

// The block tree over the folding block's threads' folds of the tile partials (thread t has
// folded partials t, t + block_threads, ...; valid says whether it had any); thread 0 gets it.
// With a partial for every thread the tree needs no validity flags: the same tree, with
// less on its critical path. With at most warp_threads partials only warp 0 holds any, and
// the block tree's answer is warp 0's tree: the other warps' results are empty, and
// combining with empty changes nothing. Warp 0's tree alone gives those bits without the
// block stage's two barriers, which sit at the end of every call of 2 to 32 tiles
// (docs/decisions/0009-fold-polling.md).
template <class Acc, class Op>
__device__ __forceinline__ Acc fold_partials_of(Acc acc, bool valid, std::uint64_t tiles, Op& op) {
  if (tiles >= block_threads) return tally::block::reduce<block_threads>(acc, op);
  if (tuning::fold_few_partials_by_warp && tiles <= warp_threads) {
    if (threadIdx.x < warp_threads) acc = tally::warp::detail::reduce_lanes<warp_threads>(acc, valid, op);
    return acc;
  }
  return tally::block::reduce<block_threads>(acc, valid, op);
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
// then folds every cell without a bound. Out of line on purpose: inlined, this cold path's
// second copy of the tile code and of the fold made ptxas spill 24-180 bytes per thread in the
// single pass of float, int and double sums (it had none before the fallback existed), which
// every tile block paid for on the hot path. A call costs only the path that runs it.
template <class Acc, int VW, class Loader, class Op, class Codec>
__device__ __noinline__ Acc refold_after_wait_ran_out(Loader load, reduction_plan plan, Op op, Codec codec,
                                                       partial_cell<typename Codec::partial_type>* cells,
                                                       fold_sync sync) {
  reduce_unpublished_tiles<Acc, VW>(load, plan, op, codec, cells, sync);
  bool gave_up = false;
  return fold_published_partials<Acc>(codec, cells, plan.tiles, plan.tile_items, op, sync, false, gave_up);
}

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
  if (gave_up) total = refold_after_wait_ran_out<Acc, VW>(load, plan, op, codec, cells, sync);
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
