#pragma once
// Dispatch of the device's exact sums (tally::exact_plus; kernels/exact_kernels.cuh): one launch
// over at most the grid the device holds at once. Its accumulator lives in the control block
// of the call's scratch, which every call leaves zero (and the runtime zeroes again after a
// call whose launch failed), so the scratch needs no room beyond it and no epoch.

#include "tally/detail/dispatch/launch.cuh"
#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/exact_fields.cuh"
#include "tally/detail/exact_sum.cuh"
#include "tally/detail/kernels/exact_kernels.cuh"
#include "tally/detail/loads/iterators.cuh"
#include "tally/error.cuh"

#include <thrust/iterator/transform_iterator.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

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

// Blocks of an exact-sum kernel of Threads threads that the device holds at once.
template <auto Kernel, unsigned Threads>
std::uint64_t exact_resident_grid(int device) {
  return std::uint64_t(properties(device).multiprocessors) *
         std::uint64_t(asked_once<exact_blocks_per_multiprocessor<Threads>, Kernel>(device));
}

// Each thread's first loads take at least this many elements before a block more is worth it.
inline constexpr std::uint64_t exact_elements_per_thread = 32;

// Launches the exact sum into the control block `control` of scratch the caller leased, on
// `stream`; forced_grid: a grid the caller forces (tests), or 0.
template <class T, class It, class Out>
void launch_exact_sum_in(unsigned int* control, It first, std::uint64_t n, T init, Out* out, host_handoff* handoff,
                         cudaStream_t stream, std::uint64_t forced_grid, int device) {
  constexpr unsigned threads = exact_block_threads<T>;
  constexpr auto kernel = &exact_sum_kernel<T, It, Out>;
  std::uint64_t grid = forced_grid;
  if (grid == 0) {
    const std::uint64_t resident = exact_resident_grid<kernel, threads>(device);
    const std::uint64_t wanted = (n + threads * exact_elements_per_thread - 1) / (threads * exact_elements_per_thread);
    grid = wanted < resident ? wanted : resident;
    if (grid == 0) grid = 1;
  }
  // A block adds below 2^40 to each of the accumulator's digits: fewer than 2^21 blocks keep
  // them below 2^61.
  if (grid > (std::uint64_t(1) << 21)) grid = std::uint64_t(1) << 21;
  launch_kernel<kernel>(unsigned(grid), threads, stream, device, first, n, init, exact_control{control}, out, handoff);
}

template <class T, class It, class Out, class Policy>
void launch_exact_sum(It first, std::uint64_t n, T init, Out* out, host_handoff* handoff, const Policy& policy,
                      int device) {
  scratch_lease lease(device, policy.stream(), 0, handoff != nullptr);
  launch_exact_sum_in<T>(lease.scratch().control, first, n, init, out, handoff, policy.stream(),
                         policy.forced_grid_size(), device);
  lease.launched();
}

// A contiguous input as the exact-sum kernels read it: its raw pointer to const, checked to be
// device-accessible; any other iterator as it is.
template <class It>
auto exact_readable(It first, int device, const char* algorithm) {
  if constexpr (is_contiguous_v<It>) {
    const auto* data = raw_pointer(first);
    check_device_accessible(data, properties(device), algorithm, "the input range");
    using elem = std::remove_cv_t<std::remove_pointer_t<decltype(data)>>;
    return static_cast<const elem*>(data);
  } else {
    (void)device, (void)algorithm;
    return first;
  }
}

// The exact sum of init and [first, first + n) (n > 0) on the device, rounded once, into *out or
// the host's hand-over words (device_reduce's contract); or, where Out is exact_accumulator<T>
// (in device-accessible memory), the sum of the range added to *out. The values must convert to T exactly.
template <class T, class It, class Out, class Policy>
void exact_device_reduce(It first, std::uint64_t n, T init, Out* out, host_handoff* handoff, const Policy& policy,
                         int device, const char* algorithm) {
  static_assert(converts_exactly<iterator_value_t<It>, T>(),
                "tally::exact_plus<T>: the values must convert to T exactly (T itself; float, half or bf16 into "
                "double; half or bf16 into float)");
  static_assert(std::is_same_v<Out, T> || std::is_same_v<Out, exact_accumulator<T>>,
                "tally::exact_plus<T>: the result is written as T");
  check_stream_of_device(policy.stream(), device);
  launch_exact_sum<T>(exact_readable(first, device, algorithm), n, init, out, handoff, policy, device);
}

// Exact sums of fields (tally::fields of exact_plus operators only) on the device: one exact sum
// a field, over each element's field I converted as init's field I, so the input is read once a
// field. Into *out: field I's sum to field I of *out, the other bytes of *out untouched.
template <class Acc, class It, class Policy, std::size_t... I>
void exact_fields_device_into(It first, std::uint64_t n, Acc init, Acc* out, const Policy& policy, int device,
                              const char* algorithm, std::index_sequence<I...>) {
  const Acc layout{};
  const auto field_address = [&](auto& field_of_layout) {
    using F = std::remove_cv_t<std::remove_reference_t<decltype(field_of_layout)>>;
    const std::ptrdiff_t offset =
        reinterpret_cast<const char*>(&field_of_layout) - reinterpret_cast<const char*>(&layout);
    return reinterpret_cast<F*>(reinterpret_cast<char*>(out) + offset);
  };
  (exact_device_reduce(thrust::make_transform_iterator(first, exact_field_of<I, Acc>{}), n, field<I>(init),
                       field_address(field<I>(layout)), static_cast<host_handoff*>(nullptr), policy, device, algorithm),
   ...);
}

// The same for tally::reduce: field I's sum handed over in a result slot of its own, all taken
// once every launch is enqueued.
template <class Acc, class It, class Policy, std::size_t... I>
Acc exact_fields_device_to_host(It first, std::uint64_t n, Acc init, const Policy& policy, int device,
                                const char* algorithm, std::index_sequence<I...>) {
  std::array<std::optional<result_slot>, sizeof...(I)> slots;
  for (auto& slot : slots) slot.emplace(device);
  (exact_device_reduce(thrust::make_transform_iterator(first, exact_field_of<I, Acc>{}), n, field<I>(init),
                       static_cast<field_t<I, Acc>*>(nullptr), slots[I]->handoff(), policy, device, algorithm),
   ...);
  (slots[I]->take(policy.stream(), &field<I>(init), sizeof(field_t<I, Acc>)), ...);
  return init;
}

}  // namespace tally::detail
