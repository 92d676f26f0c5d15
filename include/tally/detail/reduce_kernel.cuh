#pragma once
// The reduction kernels. Blocks reduce the plan's tiles into partials and one block folds
// the partials in the plan's fixed order, then writes op(init, total):
//   single pass  block 0, after its own tiles, folds each partial as soon as it is
//                published (a ready flag beside every partial, cleared again by block 0)
//   two pass     a second launch folds them
// The atomic strategies (atomic_reduce_kernel) combine block or warp results with atomics
// instead; their order is not fixed, so they are reproducible only for exact integer ops.

#include "tally/block/reduce.cuh"
#include "tally/detail/loads.cuh"
#include "tally/detail/partials.cuh"
#include "tally/detail/plan.cuh"

#include <cuda/atomic>

#include <cstdint>


#ifndef TALLY_TUNE_FOLD_BATCH
#define TALLY_TUNE_FOLD_BATCH 16  // partials block 0 polls at once per thread (small types)
#endif
#ifndef TALLY_TUNE_MIN_BLOCKS
#define TALLY_TUNE_MIN_BLOCKS 1  // resident blocks per SM the register budget must allow
#endif

namespace tally::detail {

template <class Acc, class V, class Op>
__device__ __forceinline__ void fold_into(Acc& acc, const V& x, Op& op) {
  acc = static_cast<Acc>(op(acc, static_cast<Acc>(x)));
}

// A full tile: every thread has chunks at every step, so no bounds or validity checks.
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc reduce_full_tile(const Loader& load, std::uint64_t tile_begin, int steps, Op& op) {
  using V = typename Loader::value_type;
  constexpr std::uint64_t step_items = std::uint64_t(block_threads) * loads_per_step * VW;
  const unsigned t = threadIdx.x;
  V chunks[loads_per_step][VW];
  auto fetch = [&](std::uint64_t step_begin) {
#pragma unroll
    for (int u = 0; u < loads_per_step; ++u)
      load.chunk(step_begin + std::uint64_t(u * block_threads + t) * VW, chunks[u]);
  };

  fetch(tile_begin);
  Acc acc = static_cast<Acc>(chunks[0][0]);
#pragma unroll
  for (int j = 1; j < VW; ++j) fold_into(acc, chunks[0][j], op);
#pragma unroll
  for (int u = 1; u < loads_per_step; ++u)
#pragma unroll
    for (int j = 0; j < VW; ++j) fold_into(acc, chunks[u][j], op);

  for (int s = 1; s < steps; ++s) {
    fetch(tile_begin + std::uint64_t(s) * step_items);
#pragma unroll
    for (int u = 0; u < loads_per_step; ++u)
#pragma unroll
      for (int j = 0; j < VW; ++j) fold_into(acc, chunks[u][j], op);
  }
  return acc;
}

// The last, partial tile: the same order restricted to indices below n. Chunks wholly
// inside the range are read like a full tile's; only the one that straddles n goes element
// by element.
template <class Acc, int VW, class Loader, class Op>
__device__ Acc reduce_partial_tile(const Loader& load, std::uint64_t tile_begin, std::uint64_t n, Op& op, bool& valid) {
  using V = typename Loader::value_type;
  constexpr std::uint64_t step_items = std::uint64_t(block_threads) * loads_per_step * VW;
  const unsigned t = threadIdx.x;
  const std::uint64_t steps = (n - tile_begin + step_items - 1) / step_items;
  Acc acc{};
  valid = false;
  for (std::uint64_t s = 0; s < steps; ++s) {
    const std::uint64_t step_begin = tile_begin + s * step_items;
    V chunks[loads_per_step][VW];
#pragma unroll
    for (int u = 0; u < loads_per_step; ++u) {
      const std::uint64_t first = step_begin + std::uint64_t(u * block_threads + t) * VW;
      if (first + VW <= n) {
        load.chunk(first, chunks[u]);
      } else {
#pragma unroll
        for (int j = 0; j < VW; ++j)
          if (first + j < n) chunks[u][j] = load.element(first + j);
      }
    }
#pragma unroll
    for (int u = 0; u < loads_per_step; ++u) {
      const std::uint64_t first = step_begin + std::uint64_t(u * block_threads + t) * VW;
#pragma unroll
      for (int j = 0; j < VW; ++j) {
        if (first + j < n) {
          if (valid) {
            fold_into(acc, chunks[u][j], op);
          } else {
            acc = static_cast<Acc>(chunks[u][j]);
            valid = true;
          }
        }
      }
    }
  }
  return acc;
}

template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ Acc reduce_tile(const Loader& load, const reduction_plan& plan, std::uint64_t tile, Op& op) {
  const std::uint64_t begin = plan.tile_begin(tile);
  if (plan.tile_is_full(tile)) {
    return tally::block::reduce<block_threads>(reduce_full_tile<Acc, VW>(load, begin, plan.steps_per_tile, op), op);
  }
  bool valid = false;
  const Acc acc = reduce_partial_tile<Acc, VW>(load, begin, plan.n, op, valid);
  return tally::block::reduce<block_threads>(acc, valid, op);
}

// Writes the result; for reduce() also raises the host's ready flag once the value is
// visible to the host.
template <class Out>
__device__ __forceinline__ void publish(Out* out, const Out& value, unsigned int* ready) {
  *out = value;
  if (ready) {
    __threadfence_system();
    *reinterpret_cast<volatile unsigned int*>(ready) = 1u;
  }
}

// Reduces the tiles blockIdx.x, blockIdx.x + gridDim.x, ... and publishes their partials.
template <class Acc, int VW, class Loader, class Op>
__device__ __forceinline__ void reduce_my_tiles(const Loader& load, const reduction_plan& plan, Op& op,
                                                partial_cell<Acc>* cells) {
  for (std::uint64_t tile = blockIdx.x; tile < plan.tiles; tile += gridDim.x) {
    const Acc partial = reduce_tile<Acc, VW>(load, plan, tile, op);
    if (threadIdx.x == 0) cells[tile].publish(partial);
  }
}

// The plan's fold of the tile partials, by one whole block: thread t folds partials t,
// t + block_threads, ... in order, then the block tree. A batch of cells is polled at a
// time, so the L2 latencies overlap; a cell not yet published is polled again together
// with the rest of its batch until it is. Every cell read is cleared for the next call.
template <class Acc, class Op>
__device__ Acc fold_published_partials(partial_cell<Acc>* cells, std::uint64_t tiles, Op& op) {
  constexpr int batch = sizeof(Acc) <= 8 ? TALLY_TUNE_FOLD_BATCH : (sizeof(Acc) <= 32 ? 4 : 1);
  Acc acc{};
  bool valid = false;
  for (std::uint64_t base = threadIdx.x; base < tiles; base += std::uint64_t(batch) * block_threads) {
    Acc value[batch];
    bool ready[batch];
#pragma unroll
    for (int j = 0; j < batch; ++j) {
      const std::uint64_t k = base + std::uint64_t(j) * block_threads;
      ready[j] = k >= tiles || cells[k].try_read(value[j]);
    }
#pragma unroll
    for (int j = 0; j < batch; ++j) {
      const std::uint64_t k = base + std::uint64_t(j) * block_threads;
      if (k >= tiles) break;
      while (!ready[j]) {
#pragma unroll
        for (int i = j; i < batch; ++i) {
          const std::uint64_t ki = base + std::uint64_t(i) * block_threads;
          if (!ready[i] && ki < tiles) ready[i] = cells[ki].try_read(value[i]);
        }
      }
      cells[k].clear();
      acc = valid ? static_cast<Acc>(op(acc, value[j])) : value[j];
      valid = true;
    }
  }
  return tally::block::reduce<block_threads>(acc, valid, op);
}

template <class Acc, int VW, class Loader, class Op, class Out>
__global__ void __launch_bounds__(block_threads, TALLY_TUNE_MIN_BLOCKS)
    single_pass_reduce_kernel(Loader load, reduction_plan plan, Acc init, Op op, partial_cell<Acc>* cells, Out* out,
                              unsigned int* ready) {
  if (plan.tiles == 1) {  // one tile, one block: no partials
    const Acc total = reduce_tile<Acc, VW>(load, plan, 0, op);
    if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), ready);
    return;
  }
  reduce_my_tiles<Acc, VW>(load, plan, op, cells);
  // Block 0 waits only on blocks that need nothing from it, so every block finishes
  // whatever the order in which the GPU schedules them.
  if (blockIdx.x != 0) return;
  const Acc total = fold_published_partials(cells, plan.tiles, op);
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), ready);
}

// Two pass: the first launch publishes the partials, the second folds them (same bits as
// the single pass).
template <class Acc, int VW, class Loader, class Op>
__global__ void __launch_bounds__(block_threads, TALLY_TUNE_MIN_BLOCKS)
    tile_partials_kernel(Loader load, reduction_plan plan, Op op, partial_cell<Acc>* cells) {
  reduce_my_tiles<Acc, VW>(load, plan, op, cells);
}

template <class Acc, class Op, class Out>
__global__ void __launch_bounds__(block_threads)
    fold_partials_kernel(std::uint64_t tiles, Acc init, Op op, partial_cell<Acc>* cells, Out* out, unsigned int* ready) {
  const Acc total = fold_published_partials(cells, tiles, op);
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), ready);
}

}  // namespace tally::detail
