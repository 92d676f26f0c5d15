#pragma once
// Sums of 64-bit counts over a block of block_threads threads, by warp shuffles and a shared word
// per warp: what the kernels that number runs (key_run_kernels.cuh) and the split segments'
// chains (segmented_kernels.cuh) scan with.

#include "tally/detail/plan.cuh"
#include "tally/warp/reduce.cuh"

#include <cstdint>

namespace tally::detail {

// The sum of a block's values, in thread 0 (`sums`: a shared word per warp).
__device__ __forceinline__ std::uint64_t block_sum(std::uint64_t value, std::uint64_t* sums) {
  const unsigned lane = threadIdx.x % warp_threads, warp = threadIdx.x / warp_threads;
  for (int delta = warp_threads / 2; delta > 0; delta /= 2)
    value += __shfl_down_sync(tally::warp::full_mask, value, delta);
  if (lane == 0) sums[warp] = value;
  __syncthreads();
  std::uint64_t total = 0;
  if (threadIdx.x == 0)
    for (unsigned w = 0; w < block_threads / warp_threads; ++w) total += sums[w];
  __syncthreads();
  return total;
}

// The sum of the values of the threads before this one in the block, and the block's total.
__device__ __forceinline__ std::uint64_t block_exclusive_sum(std::uint64_t value, std::uint64_t* sums,
                                                             std::uint64_t& total) {
  const unsigned lane = threadIdx.x % warp_threads, warp = threadIdx.x / warp_threads;
  std::uint64_t inclusive = value;
  for (int delta = 1; delta < warp_threads; delta *= 2) {
    const std::uint64_t other = __shfl_up_sync(tally::warp::full_mask, inclusive, delta);
    if (lane >= unsigned(delta)) inclusive += other;
  }
  if (lane == warp_threads - 1) sums[warp] = inclusive;
  __syncthreads();
  std::uint64_t before = 0;
  total = 0;
  for (unsigned w = 0; w < block_threads / warp_threads; ++w) {
    if (w < warp) before += sums[w];
    total += sums[w];
  }
  __syncthreads();
  return before + inclusive - value;
}

}  // namespace tally::detail
