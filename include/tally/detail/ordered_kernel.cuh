#pragma once
// The order-preserving kernels, for operators that are associative but not commutative:
// the result is the left-to-right fold whatever N. They follow the plan's ordered variant
// (plan.cuh, ordered_tile): lanes own contiguous runs, warps contiguous regions of the tile,
// trees combine neighbours with the lower one on the left, and tile partials are folded in
// tile order. The single pass and the two pass reuse the flagged partial cells of the
// commutative kernels (partials.cuh), so the scratch protocol is the same.

#include "tally/block/reduce.cuh"
#include "tally/detail/loads.cuh"
#include "tally/detail/partials.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/reduce_kernel.cuh"
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

// Aligned to its size where that is 8 or 16 bytes, so a lane stores and loads a chunk in
// one shared-memory access (the bank analysis above assumes it).
template <class C, int VW>
struct alignas(sizeof(C) * VW == 16 ? 16 : (sizeof(C) * VW == 8 ? 8 : alignof(C))) staged_chunk {
  C values[VW];
};

// One tile by the whole block, in the ordered plan. Thread 0 gets the tile's fold; every
// tile of a plan holds at least one element, so it is always valid there.
template <class Acc, int VW, class Loader, class Op>
__device__ Acc ordered_reduce_tile(const Loader& load, const reduction_plan& plan, std::uint64_t tile, Op& op) {
  using C = typename chunk_element<Loader>::type;
  using staged_t = staged_chunk<C, VW>;
  constexpr int warps = block_threads / warp_threads;
  const ordered_tile shape = ordered_tile_of(plan, tile);
  const int warp = int(threadIdx.x / warp_threads);
  const int lane = int(threadIdx.x % warp_threads);

  Acc warp_acc{};  // the warp's fold of its pieces so far, in lane 0
  bool warp_valid = false;
  for (std::uint64_t piece = 0; piece < shape.steps; ++piece) {
    const std::uint64_t piece_begin = shape.piece_begin(warp, piece);
    if (piece_begin >= shape.end) break;  // the same for every lane of the warp
    C run[loads_per_step][VW];
    if constexpr (ordered_stages_chunks<VW, Loader>) {
      // Raw bytes: C may have a constructor, which __shared__ variables cannot run.
      __shared__ alignas(16) unsigned char staging_bytes[warps * ordered_staged_slots * sizeof(staged_t)];
      staged_t* staging = reinterpret_cast<staged_t*>(staging_bytes) + warp * ordered_staged_slots;
#pragma unroll
      for (int u = 0; u < loads_per_step; ++u) {
        const int chunk = u * warp_threads + lane;
        staged_t loaded;
        read_chunk_below<VW>(load, piece_begin + std::uint64_t(chunk) * VW, shape.end, loaded.values);
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
        read_chunk_below<VW>(load, piece_begin + std::uint64_t(lane * loads_per_step + k) * VW, shape.end, run[k]);
    }

    const std::uint64_t run_begin = piece_begin + std::uint64_t(lane) * shape.run_items;
    Acc acc{};
    bool valid = false;
#pragma unroll
    for (int k = 0; k < loads_per_step; ++k)
#pragma unroll
      for (int j = 0; j < VW; ++j) {
        const std::uint64_t index = run_begin + std::uint64_t(k) * VW + j;
        if (index < shape.end) {
          const Acc x = static_cast<Acc>(chunk_value(load, run[k][j], index));
          acc = valid ? static_cast<Acc>(op(acc, x)) : x;
          valid = true;
        }
      }
    const Acc piece_fold = tally::warp::reduce_ordered(acc, valid, op);
    if (lane == 0 && valid) {
      warp_acc = warp_valid ? static_cast<Acc>(op(warp_acc, piece_fold)) : piece_fold;
      warp_valid = true;
    }
  }
  // Only lane 0 of each warp holds a value: the block tree folds the warps in order.
  bool valid = lane == 0 && warp_valid;
  return tally::block::reduce_ordered<block_threads>(warp_acc, valid, op);
}

template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ void ordered_reduce_my_tiles(const Loader& load, const reduction_plan& plan, Op& op,
                                                        partial_cell<Acc>* cells) {
  for (std::uint64_t tile = blockIdx.x; tile < plan.tiles; tile += gridDim.x) {
    const Acc partial = ordered_reduce_tile<Acc, VW>(load, plan, tile, op);
    if (threadIdx.x == 0) cells[tile].publish(partial);
  }
}

// The ordered fold of the tile partials by one block: thread t waits for and folds its
// contiguous range of partials, then the ordered block tree. Every cell read is cleared
// for the next call.
template <class Acc, class Op>
__device__ Acc ordered_fold_published_partials(partial_cell<Acc>* cells, std::uint64_t tiles, Op& op) {
  const std::uint64_t per_thread = ordered_partials_per_thread(tiles);
  const std::uint64_t from = std::uint64_t(threadIdx.x) * per_thread;
  const std::uint64_t to = from + per_thread < tiles ? from + per_thread : tiles;
  Acc acc{};
  bool valid = false;
  for (std::uint64_t k = from; k < to; ++k) {
    Acc value;
    while (!cells[k].try_read(value)) {
    }
    cells[k].clear();
    acc = valid ? static_cast<Acc>(op(acc, value)) : value;
    valid = true;
  }
  return tally::block::reduce_ordered<block_threads>(acc, valid, op);
}

template <class Acc, int VW, class Loader, class Op, class Out>
__global__ void __launch_bounds__(block_threads)
    ordered_single_pass_kernel(Loader load, reduction_plan plan, Acc init, Op op, partial_cell<Acc>* cells, Out* out,
                               unsigned int* ready) {
  if (plan.tiles == 1) {
    const Acc total = ordered_reduce_tile<Acc, VW>(load, plan, 0, op);
    if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), ready);
    return;
  }
  ordered_reduce_my_tiles<Acc, VW>(load, plan, op, cells);
  // As in single_pass_reduce_kernel: block 0 waits only on blocks that wait on nothing.
  if (blockIdx.x != 0) return;
  const Acc total = ordered_fold_published_partials(cells, plan.tiles, op);
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), ready);
}

template <class Acc, int VW, class Loader, class Op>
__global__ void __launch_bounds__(block_threads)
    ordered_tile_partials_kernel(Loader load, reduction_plan plan, Op op, partial_cell<Acc>* cells) {
  ordered_reduce_my_tiles<Acc, VW>(load, plan, op, cells);
}

template <class Acc, class Op, class Out>
__global__ void __launch_bounds__(block_threads)
    ordered_fold_partials_kernel(std::uint64_t tiles, Acc init, Op op, partial_cell<Acc>* cells, Out* out,
                                 unsigned int* ready) {
  const Acc total = ordered_fold_published_partials(cells, tiles, op);
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), ready);
}

}  // namespace tally::detail
