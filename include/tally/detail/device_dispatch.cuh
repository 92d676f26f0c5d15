#pragma once
// Device dispatch: check the arguments, classify the input, make the plan, launch.

#include "tally/detail/iterators.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/reduce_kernel.cuh"
#include "tally/detail/runtime.cuh"
#include "tally/error.cuh"
#include "tally/execution_policy.cuh"

#include <atomic>
#include <cstdint>
#include <string>

namespace tally::detail {

// Device memory, managed memory and mapped pinned memory are readable by the device;
// ordinary (pageable) host memory only where the device has pageable memory access.
inline void check_device_accessible(const void* p, const device_properties& props, const char* algorithm,
                                    const char* what) {
  if (p == nullptr) throw_invalid_argument(algorithm, std::string(what) + " is a null pointer but the range is not empty");
  if (!is_device_accessible(p, props))
    throw_invalid_argument(algorithm, std::string(what) +
                                          " points to pageable host memory, which this GPU cannot read; "
                                          "copy it to the device, or use tally::host");
}

// Occupancy of one kernel on one device, asked once per call site's cache.
template <class Kernel>
int resident_blocks_per_sm(Kernel kernel, int device, std::atomic<int>* cache, int cache_size) {
  if (device < cache_size) {
    const int cached = cache[device].load(std::memory_order_relaxed);
    if (cached > 0) return cached;
  }
  int blocks = 0;
  TALLY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, block_threads, 0));
  if (blocks < 1) blocks = 1;
  if (device < cache_size) cache[device].store(blocks, std::memory_order_relaxed);
  return blocks;
}

template <class Acc, int VW, class Loader, class Op, class Out>
void launch_reduce(const Loader& load, std::uint64_t n, Acc init, Op op, Out* out, unsigned int* ready,
                   const device_policy& policy, int device) {
  static_assert(sizeof(partial_slot<Acc>) <= max_accumulator_bytes, "tally: the accumulator type is too large");
  const reduction_plan plan = make_plan(n, VW);
  const stream_scratch scratch = scratch_for(device, policy.stream());
  auto kernel = single_pass_reduce_kernel<Acc, VW, Loader, Op, Out>;
  std::uint64_t grid = policy.forced_grid_size();
  if (grid == 0) {
    constexpr int cached_devices = 64;
    static std::atomic<int> occupancy[cached_devices];  // one cache per kernel instantiation
    grid = std::uint64_t(properties(device).multiprocessors) *
           resident_blocks_per_sm(kernel, device, occupancy, cached_devices);
  }
  if (grid > plan.tiles) grid = plan.tiles;
#if TALLY_TUNE_BALANCED_GRID
  // Every block takes the same number of tiles: no block is left with one fewer at the end.
  if (policy.forced_grid_size() == 0) {
    const std::uint64_t per_block = (plan.tiles + grid - 1) / grid;
    grid = (plan.tiles + per_block - 1) / per_block;
  }
#endif
  kernel<<<unsigned(grid), block_threads, 0, policy.stream()>>>(
      load, plan, init, op, static_cast<partial_slot<Acc>*>(scratch.partials), scratch.counter, out, ready);
  TALLY_CUDA_CHECK(cudaGetLastError());
}

// Reduces [first, first + n) on the device into *out (device-writable memory), raising
// *ready (pinned host memory) afterwards when it is not null. n > 0.
template <class Acc, class It, class Op, class Out>
void device_reduce(It first, std::uint64_t n, Acc init, Op op, Out* out, unsigned int* ready,
                   const device_policy& policy, int device, const char* algorithm) {
  using V = iterator_value_t<It>;
  constexpr int vw = vector_width_v<V>;
  if constexpr (is_contiguous_v<It>) {
    const auto* data = raw_pointer(first);
    check_device_accessible(data, properties(device), algorithm, "the input range");
    using elem = std::remove_cv_t<std::remove_pointer_t<decltype(data)>>;
    if constexpr (vw > 1 && sizeof(elem) * vw == 16) {
      if (reinterpret_cast<std::uintptr_t>(data) % 16 == 0) {
        launch_reduce<Acc, vw>(vector_loader<elem, vw>{data}, n, init, op, out, ready, policy, device);
        return;
      }
    }
    launch_reduce<Acc, vw>(iterator_loader<const elem*, V, vw>{data}, n, init, op, out, ready, policy, device);
  } else {
    launch_reduce<Acc, vw>(iterator_loader<It, V, vw>{first}, n, init, op, out, ready, policy, device);
  }
}

}  // namespace tally::detail
