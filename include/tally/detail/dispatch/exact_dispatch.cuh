#pragma once
// Dispatch of the device's exact sums (tally::exact_plus; kernels/exact_kernels.cuh): the
// blocks' launch over a grid the device holds at once, then one block that adds their sums and
// init and rounds. The scratch holds one exact_block_sum a block, each written whole by its
// block before the second launch reads it, so no scratch is cleared and no epoch is needed.

#include "tally/detail/dispatch/launch.cuh"
#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/exact_sum.cuh"
#include "tally/detail/kernels/exact_kernels.cuh"
#include "tally/detail/loads/iterators.cuh"
#include "tally/error.cuh"

#include <cstdint>
#include <type_traits>

namespace tally::detail {

// How many blocks of an exact-sum kernel of Threads threads an SM holds at once (at least 1).
template <unsigned Threads>
struct exact_blocks_per_multiprocessor {
  template <auto Kernel>
  static int ask(int) {
    int blocks = 0;
    check_cuda_call(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Kernel, int(Threads), 0),
                    "asking a kernel's occupancy");
    return blocks > 0 ? blocks : 1;
  }
};

// Each thread's first loads take at least this many elements before a block more is worth it.
inline constexpr std::uint64_t exact_elements_per_thread = 32;

template <class T, class It, class Out, class Policy>
void launch_exact_sum(It first, std::uint64_t n, T init, Out* out, host_handoff* handoff, const Policy& policy,
                      int device) {
  constexpr unsigned threads = exact_block_threads<T>;
  constexpr auto blocks_kernel = &exact_sum_blocks_kernel<T, It>;
  std::uint64_t grid = policy.forced_grid_size();
  if (grid == 0) {
    const std::uint64_t resident =
        std::uint64_t(properties(device).multiprocessors) *
        std::uint64_t(asked_once<exact_blocks_per_multiprocessor<threads>, blocks_kernel>(device));
    const std::uint64_t wanted = (n + threads * exact_elements_per_thread - 1) / (threads * exact_elements_per_thread);
    grid = wanted < resident ? wanted : resident;
    if (grid == 0) grid = 1;
  }
  // The finish kernel's sums of digits stay below 2^62 for fewer than 2^22 blocks.
  if (grid > (std::uint64_t(1) << 21)) grid = std::uint64_t(1) << 21;
  scratch_lease lease(device, policy.stream(), grid * sizeof(exact_block_sum<T>), handoff != nullptr);
  auto* blocks = static_cast<exact_block_sum<T>*>(lease.scratch().partials);
  launch_kernel<blocks_kernel>(unsigned(grid), threads, policy.stream(), device, first, n, blocks);
  launch_kernel<exact_sum_finish_kernel<T, Out>>(1, 256, policy.stream(), device,
                                                 static_cast<const exact_block_sum<T>*>(blocks), unsigned(grid), init,
                                                 out, handoff);
  lease.launched();
}

// The exact sum of init and [first, first + n) (n > 0) on the device, rounded once, into *out or
// the host's hand-over words (device_reduce's contract). The values must convert to T exactly.
template <class T, class It, class Out, class Policy>
void exact_device_reduce(It first, std::uint64_t n, T init, Out* out, host_handoff* handoff, const Policy& policy,
                         int device, const char* algorithm) {
  static_assert(converts_exactly<iterator_value_t<It>, T>(),
                "tally::exact_plus<T>: the values must convert to T exactly (T itself; float, half or bf16 into "
                "double; half or bf16 into float)");
  static_assert(std::is_same_v<Out, T>, "tally::exact_plus<T>: the result is written as T");
  check_stream_of_device(policy.stream(), device);
  if constexpr (is_contiguous_v<It>) {
    const auto* data = raw_pointer(first);
    check_device_accessible(data, properties(device), algorithm, "the input range");
    using elem = std::remove_cv_t<std::remove_pointer_t<decltype(data)>>;
    launch_exact_sum<T>(static_cast<const elem*>(data), n, init, out, handoff, policy, device);
  } else {
    launch_exact_sum<T>(first, n, init, out, handoff, policy, device);
  }
}

}  // namespace tally::detail
