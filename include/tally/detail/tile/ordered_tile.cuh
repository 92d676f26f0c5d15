#pragma once
// The per-tile work of the order-preserving plan (plan.cuh, ordered_tile): lanes own
// contiguous runs, warps contiguous regions of the tile, trees combine neighbours with the
// lower one on the left; ordered_reduce_my_tiles publishes each tile's partial
// (partials.cuh). The kernels are kernels/ordered_kernels.cuh.

#include "tally/block/reduce.cuh"
#include "tally/detail/loads/loads.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tile/commutative_tile.cuh"
#include "tally/detail/tile/partials.cuh"
#include "tally/detail/tuning.cuh"
#include "tally/warp/reduce.cuh"

#include <cstdint>

namespace tally::detail {

// Chunk [first, first + VW), restricted to indices below end (the rest is left unset).
template <int VW, class Loader, class C>
__device__ __forceinline__ void read_chunk_below(const Loader& load, std::uint64_t first, std::uint64_t end,
                                                 C (&out)[VW]) {
  constexpr bool raw = reads_raw_chunks<Loader>::value;
  if (first + VW <= end) {
    if constexpr (raw) {
      load.raw_chunk(first, out);
    } else {
      load.chunk(first, out);
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < VW; ++j) {
    if (first + j < end) {
      if constexpr (raw) {
        out[j] = load.raw_element(first + j);
      } else {
        out[j] = load.element(first + j);
      }
    }
  }
}

template <class Loader, class C>
__device__ __forceinline__ auto chunk_value(const Loader& load, const C& c, std::uint64_t index) {
  if constexpr (reads_raw_chunks<Loader>::value) {
    return load.value(c, index);
  } else {
    return c;
  }
}

// A lane's run is loads_per_step consecutive chunks, but reading them directly would make
// each load instruction touch 32 different lines. Where a chunk is at most 16 bytes the
// warp instead reads its piece coalesced (load u, lane l: chunk u * 32 + l), stages it in
// shared memory and each lane takes its run from there. One padding chunk after every
// run makes consecutive lanes' runs start 4 banks apart, so neither side conflicts.
template <int VW, class Loader>
inline constexpr bool ordered_stages_chunks = sizeof(typename chunk_element<Loader>::type) * VW <= 16;

inline constexpr int ordered_piece_chunks = warp_threads * loads_per_step;
inline constexpr int ordered_staged_slots = ordered_piece_chunks + ordered_piece_chunks / loads_per_step;

__device__ __forceinline__ int ordered_staged_slot(int chunk) { return chunk + chunk / loads_per_step; }

// A piece's elements, and where this warp's region starts in a full tile (plan.cuh,
// ordered_tile; the full-tile path computes them without ordered_tile_of's division).
template <int VW>
inline constexpr std::uint64_t ordered_piece_items = std::uint64_t(loads_per_step) * VW * warp_threads;

template <int VW>
__device__ __forceinline__ std::uint64_t ordered_region_offset(const reduction_plan& plan) {
  return std::uint64_t(threadIdx.x / warp_threads) * std::uint64_t(plan.steps_per_tile) * ordered_piece_items<VW>;
}

// Aligned to its size where that is 8 or 16 bytes, so a lane stores and loads a chunk in
// one shared-memory access (the bank analysis above assumes it).
template <class C, int VW>
struct alignas(sizeof(C) * VW == 16 ? 16 : (sizeof(C) * VW == 8 ? 8 : alignof(C))) staged_chunk {
  C values[VW];
};

// This warp's staging area: one per warp, shared by every piece the warp stages, whichever
// function stages it (a __shared__ variable of one function is one allocation per block).
template <class C, int VW>
__device__ __forceinline__ staged_chunk<C, VW>* ordered_staging_of_warp(int warp) {
  constexpr int warps = block_threads / warp_threads;
  // Raw bytes: C may have a constructor, which __shared__ variables cannot run.
  __shared__ alignas(16) unsigned char staging_bytes[warps * ordered_staged_slots * sizeof(staged_chunk<C, VW>)];
  return reinterpret_cast<staged_chunk<C, VW>*>(staging_bytes) + warp * ordered_staged_slots;
}

// The block's fold of its warps' folds, which each warp's lane 0 holds (valid: whether it
// has one), in warp order; thread 0 gets it. The same tree as tally::block::reduce_ordered
// where only lane 0 of each warp holds a value (docs/operators.md), without running the
// warps' trees over lanes that hold nothing.
template <class Acc, class Op>
__device__ __forceinline__ Acc fold_warp_leaders(Acc warp_acc, bool valid, Op& op) {
  constexpr int warps = block_threads / warp_threads;
  __shared__ tally::block::detail::reduce_storage<Acc, warps> storage;
  const int lane = int(threadIdx.x % warp_threads);
  const int warp = int(threadIdx.x / warp_threads);
  __syncthreads();  // the previous tile's fold may still be reading the storage
  if (lane == 0) {
    storage.slots()[warp] = warp_acc;
    storage.valid[warp] = valid;
  }
  __syncthreads();
  if (warp != 0) return warp_acc;
  valid = lane < warps && storage.valid[lane];
  Acc value = warp_acc;
  if (lane < warps) value = storage.slots()[lane];
  // tally::warp::reduce_ordered's steps; those past `warps` would find nothing to the right.
#pragma unroll
  for (int delta = 1; delta < warps; delta *= 2) {
    const Acc right = tally::warp::shuffle_down(value, unsigned(delta));
    const bool right_valid = __shfl_down_sync(tally::warp::full_mask, valid, unsigned(delta)) && lane + delta < warps;
    if ((lane & (2 * delta - 1)) == 0) {
      if (right_valid) value = valid ? static_cast<Acc>(op(value, right)) : right;
      valid = valid || right_valid;
    }
  }
  return value;
}

// One lane's share of a full piece as the warp reads it, coalesced: chunks u * 32 + lane.
template <int VW, class Loader>
struct piece_chunks {
  using chunk_t = typename chunk_element<Loader>::type;
  chunk_t chunks[loads_per_step][VW];

  __device__ __forceinline__ void fetch(const Loader& load, std::uint64_t piece_begin) {
    const int lane = int(threadIdx.x % warp_threads);
#pragma unroll
    for (int u = 0; u < loads_per_step; ++u) {
      const std::uint64_t first = piece_begin + std::uint64_t(u * warp_threads + lane) * VW;
      if constexpr (reads_raw_chunks<Loader>::value) {
        load.raw_chunk(first, chunks[u]);
      } else {
        load.chunk(first, chunks[u]);
      }
    }
  }
};

// A full piece whose chunks this lane holds in `fetched`: stages them, then, while the lanes
// take their runs from the staging and fold them, has the next piece's loads in flight
// (into `fetched`, when fetch_next). No bounds checks: every element exists. Lane 0 gets
// the piece's ordered fold.
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc fold_fetched_full_piece(const Loader& load, std::uint64_t piece_begin,
                                                       piece_chunks<VW, Loader>& fetched, bool fetch_next,
                                                       std::uint64_t next_piece_begin, Op& op) {
  using C = typename chunk_element<Loader>::type;
  using staged_t = staged_chunk<C, VW>;
  const int warp = int(threadIdx.x / warp_threads);
  const int lane = int(threadIdx.x % warp_threads);
  staged_t* staging = ordered_staging_of_warp<C, VW>(warp);
#pragma unroll
  for (int u = 0; u < loads_per_step; ++u) {
    staged_t chunk;
#pragma unroll
    for (int j = 0; j < VW; ++j) chunk.values[j] = fetched.chunks[u][j];
    staging[ordered_staged_slot(u * warp_threads + lane)] = chunk;
  }
  __syncwarp();
  if (fetch_next) fetched.fetch(load, next_piece_begin);
  C run[loads_per_step][VW];
#pragma unroll
  for (int k = 0; k < loads_per_step; ++k) {
    const staged_t mine = staging[ordered_staged_slot(lane * loads_per_step + k)];
#pragma unroll
    for (int j = 0; j < VW; ++j) run[k][j] = mine.values[j];
  }
  __syncwarp();  // the next piece overwrites the staging

  const std::uint64_t run_begin = piece_begin + std::uint64_t(lane) * loads_per_step * VW;
  Acc acc = static_cast<Acc>(chunk_value(load, run[0][0], run_begin));
#pragma unroll
  for (int k = 0; k < loads_per_step; ++k)
#pragma unroll
    for (int j = 0; j < VW; ++j) {
      if (k != 0 || j != 0)
        acc = static_cast<Acc>(op(acc, static_cast<Acc>(chunk_value(load, run[k][j], run_begin + k * VW + j))));
      if (j == VW - 1) end_fold_chain<Acc, Op>(acc);
    }
  return tally::warp::reduce_ordered(acc, op);
}

// A piece that may run past `end` (the end of its tile, or of the input), every read and
// element checked against it. Lane 0 gets the piece's ordered fold; valid (in lane 0) says
// whether the piece holds any element.
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc fold_checked_piece(const Loader& load, std::uint64_t piece_begin, std::uint64_t end,
                                                  Op& op, bool& valid) {
  using C = typename chunk_element<Loader>::type;
  using staged_t = staged_chunk<C, VW>;
  const int warp = int(threadIdx.x / warp_threads);
  const int lane = int(threadIdx.x % warp_threads);
  C run[loads_per_step][VW];
  if constexpr (ordered_stages_chunks<VW, Loader>) {
    staged_t* staging = ordered_staging_of_warp<C, VW>(warp);
#pragma unroll
    for (int u = 0; u < loads_per_step; ++u) {
      const int chunk = u * warp_threads + lane;
      staged_t loaded;
      read_chunk_below<VW>(load, piece_begin + std::uint64_t(chunk) * VW, end, loaded.values);
      staging[ordered_staged_slot(chunk)] = loaded;
    }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < loads_per_step; ++k) {
      const staged_t mine = staging[ordered_staged_slot(lane * loads_per_step + k)];
#pragma unroll
      for (int j = 0; j < VW; ++j) run[k][j] = mine.values[j];
    }
    __syncwarp();  // the next piece overwrites the staging
  } else {
#pragma unroll
    for (int k = 0; k < loads_per_step; ++k)
      read_chunk_below<VW>(load, piece_begin + std::uint64_t(lane * loads_per_step + k) * VW, end, run[k]);
  }

  const std::uint64_t run_begin = piece_begin + std::uint64_t(lane) * loads_per_step * VW;
  Acc acc{};
  valid = false;
#pragma unroll
  for (int k = 0; k < loads_per_step; ++k)
#pragma unroll
    for (int j = 0; j < VW; ++j) {
      const std::uint64_t index = run_begin + std::uint64_t(k) * VW + j;
      if (index < end) {
        const Acc x = static_cast<Acc>(chunk_value(load, run[k][j], index));
        acc = valid ? static_cast<Acc>(op(acc, x)) : x;
        valid = true;
      }
      if (j == VW - 1) end_fold_chain<Acc, Op>(acc);
    }
  return tally::warp::reduce_ordered(acc, valid, op);
}

// One tile by the whole block, in the ordered plan, any tile (a partial one included):
// full pieces as in a full tile, the rest with every read and element checked against the
// tile's end. Thread 0 gets the tile's fold; every tile of a plan holds at least one
// element, so it is always valid there.
template <class Acc, int VW, class Loader, class Op>
__device__ Acc ordered_reduce_tile(const Loader& load, const reduction_plan& plan, std::uint64_t tile, Op& op) {
  const ordered_tile shape = ordered_tile_of(plan, tile);
  const int warp = int(threadIdx.x / warp_threads);
  const int lane = int(threadIdx.x % warp_threads);

  Acc warp_acc{};  // the warp's fold of its pieces so far, in lane 0
  bool warp_valid = false;
  for (std::uint64_t piece = 0; piece < shape.steps; ++piece) {
    const std::uint64_t piece_begin = shape.piece_begin(warp, piece);
    if (piece_begin >= shape.end) break;  // the same for every lane of the warp
    if constexpr (ordered_stages_chunks<VW, Loader>) {
      if (piece_begin + ordered_piece_items<VW> <= shape.end) {  // a full piece: no checks
        piece_chunks<VW, Loader> fetched;
        fetched.fetch(load, piece_begin);
        const Acc piece_fold = fold_fetched_full_piece<Acc, VW>(load, piece_begin, fetched, false, 0, op);
        if (lane == 0) warp_acc = warp_valid ? static_cast<Acc>(op(warp_acc, piece_fold)) : piece_fold;
        warp_valid = true;
        continue;
      }
    }
    bool valid = false;
    const Acc piece_fold = fold_checked_piece<Acc, VW>(load, piece_begin, shape.end, op, valid);
    if (lane == 0 && valid) {
      warp_acc = warp_valid ? static_cast<Acc>(op(warp_acc, piece_fold)) : piece_fold;
      warp_valid = true;
    }
  }
  return fold_warp_leaders(warp_acc, lane == 0 && warp_valid, op);
}

// A full tile whose first piece this warp already holds in `fetched`. The last piece's fold
// overlaps the loads of the first piece of next_tile, when that is a full tile too, so a
// block keeps loads in flight through the block tree as the commutative kernels do
// (reduce_my_tiles).
template <class Acc, int VW, class Loader, class Op>
__device__ Acc ordered_reduce_fetched_full_tile(const Loader& load, const reduction_plan& plan, std::uint64_t tile,
                                                std::uint64_t next_tile, piece_chunks<VW, Loader>& fetched, Op& op) {
  const int lane = int(threadIdx.x % warp_threads);
  const std::uint64_t steps = std::uint64_t(plan.steps_per_tile);  // a full tile's
  const std::uint64_t region = ordered_region_offset<VW>(plan);
  const std::uint64_t first_piece = plan.tile_begin(tile) + region;
  const bool next_is_full = next_tile < plan.tiles && plan.tile_is_full(next_tile);
  const std::uint64_t next_tile_piece = plan.tile_begin(next_tile) + region;

  Acc warp_acc{};  // in lane 0
  for (std::uint64_t piece = 0; piece < steps; ++piece) {
    const bool last = piece + 1 == steps;
    const std::uint64_t begin = first_piece + piece * ordered_piece_items<VW>;
    const Acc piece_fold = fold_fetched_full_piece<Acc, VW>(load, begin, fetched, !last || next_is_full,
                                                            last ? next_tile_piece : begin + ordered_piece_items<VW>, op);
    if (lane == 0) warp_acc = piece == 0 ? piece_fold : static_cast<Acc>(op(warp_acc, piece_fold));
  }
  return fold_warp_leaders(warp_acc, lane == 0, op);
}

// Reduces the tiles first, first + stride, ... and hands each partial to take(tile, partial)
// (every thread calls it; thread 0's partial is the tile's). Full tiles of chunks that are
// staged take the prefetching path above; the rest (the last tile when it is partial, and
// chunks wider than 16 bytes) the checked one.
template <class Acc, int VW, class Loader, class Op, class Take>
__device__ __forceinline__ void ordered_reduce_tiles(const Loader& load, const reduction_plan& plan, Op& op,
                                                     std::uint64_t first, std::uint64_t stride, Take take) {
  constexpr bool prefetch = ordered_stages_chunks<VW, Loader>;
  piece_chunks<VW, Loader> fetched;
  if constexpr (prefetch) {
    if (first < plan.tiles && plan.tile_is_full(first))
      fetched.fetch(load, plan.tile_begin(first) + ordered_region_offset<VW>(plan));
  }
  for (std::uint64_t tile = first; tile < plan.tiles; tile += stride) {
    Acc partial;
    bool done = false;
    if constexpr (prefetch) {
      if (plan.tile_is_full(tile)) {
        partial = ordered_reduce_fetched_full_tile<Acc, VW>(load, plan, tile, tile + stride, fetched, op);
        done = true;
      }
    }
    if (!done) partial = ordered_reduce_tile<Acc, VW>(load, plan, tile, op);
    take(tile, partial);
  }
}

// Reduces the tiles first, first + stride, ... and publishes their partials.
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ void ordered_reduce_my_tiles(const Loader& load, const reduction_plan& plan, Op& op,
                                                        partial_cell<Acc>* cells, unsigned int epoch,
                                                        std::uint64_t first, std::uint64_t stride) {
  ordered_reduce_tiles<Acc, VW>(load, plan, op, first, stride, [&](std::uint64_t tile, const Acc& partial) {
    if (threadIdx.x == 0) cells[tile].publish(partial, epoch);
  });
}

}  // namespace tally::detail
