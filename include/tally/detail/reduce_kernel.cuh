#pragma once
// The single-pass reduction kernel: blocks reduce tiles into partials, and the last block
// to finish (found by an atomic counter that it then resets) folds the partials in the
// plan's fixed order and writes op(init, total).

#include "tally/block/reduce.cuh"
#include "tally/detail/loads.cuh"
#include "tally/detail/plan.cuh"

#include <cstdint>

#ifndef TALLY_TUNE_FOLD_BATCH
#define TALLY_TUNE_FOLD_BATCH 8
#endif

namespace tally::detail {

// A partial in scratch, padded to whole 32-bit words so it can be read back coherently.
template <class Acc>
struct alignas(alignof(Acc) < 4 ? 4 : alignof(Acc)) partial_slot {
  Acc value;
};

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

template <class Acc, int VW, class Loader, class Op, class Out>
__global__ void __launch_bounds__(block_threads)
    single_pass_reduce_kernel(Loader load, reduction_plan plan, Acc init, Op op, partial_slot<Acc>* partials,
                              unsigned int* counter, Out* out, unsigned int* ready) {
  if (plan.tiles == 1) {  // one tile, one block: no partials, no guard
    const Acc total = reduce_tile<Acc, VW>(load, plan, 0, op);
    if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), ready);
    return;
  }

  for (std::uint64_t tile = blockIdx.x; tile < plan.tiles; tile += gridDim.x) {
    const Acc partial = reduce_tile<Acc, VW>(load, plan, tile, op);
    if (threadIdx.x == 0) partials[tile].value = partial;
  }

  // Last-block guard: publish this block's partials, then count it done.
  __shared__ bool is_last_block;
  if (threadIdx.x == 0) {
    __threadfence();
    is_last_block = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last_block) return;
  __threadfence();

  // Thread t folds partials t, t + block_threads, ... in order. They are loaded a batch at a
  // time so that the L2 latencies overlap instead of adding up.
  constexpr int batch = TALLY_TUNE_FOLD_BATCH;
  Acc acc{};
  bool valid = false;
  for (std::uint64_t base = threadIdx.x; base < plan.tiles; base += batch * block_threads) {
    Acc loaded[batch];
#pragma unroll
    for (int b = 0; b < batch; ++b) {
      const std::uint64_t k = base + std::uint64_t(b) * block_threads;
      if (k < plan.tiles) loaded[b] = load_coherent(&partials[k]).value;
    }
#pragma unroll
    for (int b = 0; b < batch; ++b) {
      if (base + std::uint64_t(b) * block_threads < plan.tiles) {
        acc = valid ? static_cast<Acc>(op(acc, loaded[b])) : loaded[b];
        valid = true;
      }
    }
  }
  const Acc total = tally::block::reduce<block_threads>(acc, valid, op);
  if (threadIdx.x == 0) {
    *counter = 0;
    publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), ready);  // every other block has counted itself: ready for the next call
  }
}

}  // namespace tally::detail
