#pragma once
// The kernels that find reduce_by_key's runs of equal keys on the device, before the segmented
// kernels reduce them (dispatch/key_runs_dispatch.cuh). Three launches over tiles of
// run_tile_keys keys:
//   mark_run_heads_kernel    a bit per key, set where a run starts (key 0, or a key its
//                            predecessor is not equal to), 32 keys to a word by one ballot of a
//                            warp over 32 consecutive keys; and each tile's count of heads
//   count_runs_kernel        one block: each tile's first run number (a scan of the counts), the
//                            number of runs, and the end of the last run
//   write_run_starts_kernel  each run's first position and first key, at its run number
// The keys are read once in full (the last launch reads the head words and, at each head, its
// key), so the cost above the reduction of the values is about one read of the keys.

#include "tally/detail/kernels/block_counts.cuh"
#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/kernels/publish_result.cuh"
#include "tally/detail/plan.cuh"
#include "tally/warp/reduce.cuh"

#include <cstdint>
#include <iterator>

namespace tally::detail {

// A tile: a word of heads per thread of the last launch.
inline constexpr std::uint64_t run_tile_words = block_threads;
inline constexpr std::uint64_t run_tile_keys = run_tile_words * 32;
// The head words one warp of mark_run_heads_kernel writes per tile.
inline constexpr unsigned run_words_per_warp = unsigned(run_tile_words / (block_threads / warp_threads));

template <class It>
__device__ __forceinline__ decltype(auto) element_at(It it, std::uint64_t i) {
  return it[static_cast<typename std::iterator_traits<It>::difference_type>(i)];
}

template <class KeysIt, class KeyEqual>
__global__ void __launch_bounds__(block_threads)
    mark_run_heads_kernel(KeysIt keys, std::uint64_t n, KeyEqual key_equal, unsigned int* heads,
                          std::uint32_t* tile_counts, std::uint64_t tiles) {
  wait_for_prior_grid();
  __shared__ std::uint64_t sums[block_threads / warp_threads];
  const unsigned lane = threadIdx.x % warp_threads, warp = threadIdx.x / warp_threads;
  const std::uint64_t words = (n + 31) / 32;
  for (std::uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::uint64_t first_word = tile * run_tile_words + std::uint64_t(warp) * run_words_per_warp;
    unsigned int my_word = 0;
    std::uint64_t count = 0;
#pragma unroll 8
    for (unsigned j = 0; j < run_words_per_warp; ++j) {
      const std::uint64_t i = (first_word + j) * 32 + lane;
      bool head = false;
      if (i < n) head = i == 0 || !static_cast<bool>(key_equal(element_at(keys, i - 1), element_at(keys, i)));
      const unsigned int word = __ballot_sync(tally::warp::full_mask, head);
      if (lane == j) my_word = word;
      count += unsigned(__popc(word));
    }
    if (first_word + lane < words) heads[first_word + lane] = my_word;
    // Every lane counted the warp's heads; one per warp goes into the block's sum.
    const std::uint64_t total = block_sum(lane == 0 ? count : 0, sums);
    if (threadIdx.x == 0) tile_counts[tile] = static_cast<std::uint32_t>(total);
  }
}

// One block. tile_counts becomes each tile's first run number; *runs the number of runs, which
// also goes, converted, to *count_out or (reduce_by_key, for the host) into `handoff`;
// starts[runs] = n, the end of the last run.
template <class Count>
__global__ void __launch_bounds__(block_threads)
    count_runs_kernel(std::uint32_t* tile_counts, std::uint64_t tiles, std::uint64_t n, std::uint32_t* starts,
                      unsigned long long* runs, Count* count_out, host_handoff* handoff) {
  wait_for_prior_grid();
  __shared__ std::uint64_t sums[block_threads / warp_threads];
  const std::uint64_t per_thread = (tiles + block_threads - 1) / block_threads;
  const std::uint64_t from = threadIdx.x * per_thread;
  const std::uint64_t to = from + per_thread < tiles ? from + per_thread : tiles;
  std::uint64_t mine = 0;
  for (std::uint64_t t = from; t < to; ++t) mine += tile_counts[t];
  std::uint64_t total = 0;
  std::uint64_t running = block_exclusive_sum(mine, sums, total);
  for (std::uint64_t t = from; t < to; ++t) {
    const std::uint32_t c = tile_counts[t];
    tile_counts[t] = static_cast<std::uint32_t>(running);
    running += c;
  }
  if (threadIdx.x == 0) {
    *runs = total;
    publish(count_out, static_cast<Count>(total), handoff);
    starts[total] = static_cast<std::uint32_t>(n);
  }
}

// Each thread takes a head word and its runs' first number (a scan over the block); then each
// warp writes its 32 words' runs one word after another, a lane per key, so that consecutive
// runs go to consecutive places in one store of the warp.
template <class KeysIt, class KeysOut>
__global__ void __launch_bounds__(block_threads)
    write_run_starts_kernel(KeysIt keys, std::uint64_t n, const unsigned int* heads, const std::uint32_t* tile_firsts,
                            std::uint64_t tiles, std::uint32_t* starts, KeysOut keys_out) {
  wait_for_prior_grid();
  __shared__ std::uint64_t sums[block_threads / warp_threads];
  const unsigned lane = threadIdx.x % warp_threads;
  const unsigned below = (1u << lane) - 1u;
  const std::uint64_t words = (n + 31) / 32;
  for (std::uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::uint64_t w = tile * run_tile_words + threadIdx.x;
    const unsigned int my_word = w < words ? heads[w] : 0u;
    std::uint64_t total = 0;
    const std::uint64_t my_first = tile_firsts[tile] + block_exclusive_sum(unsigned(__popc(my_word)), sums, total);
    const std::uint64_t warp_first_word = w - lane;
    // Only the words that hold a head: long runs leave most of them empty.
    for (unsigned holding = __ballot_sync(tally::warp::full_mask, my_word != 0); holding != 0;
         holding &= holding - 1) {
      const unsigned j = unsigned(__ffs(holding)) - 1u;
      const unsigned int word = __shfl_sync(tally::warp::full_mask, my_word, j);
      const std::uint64_t first = __shfl_sync(tally::warp::full_mask, my_first, j);
      if (word & (1u << lane)) {
        const std::uint64_t run = first + unsigned(__popc(word & below));
        const std::uint64_t i = (warp_first_word + j) * 32 + lane;
        starts[run] = static_cast<std::uint32_t>(i);
        keys_out[static_cast<typename std::iterator_traits<KeysOut>::difference_type>(run)] = element_at(keys, i);
      }
    }
  }
}

}  // namespace tally::detail
