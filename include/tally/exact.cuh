#pragma once
// Exact sums (issue 37; docs/exact.md): the real-number sum of the inputs, rounded once to
// nearest with ties to even, whatever their order, grouping or split.
//
//   T reduce(policy, first, last, T init, tally::exact_plus<T>{})      T = float or double
//   also through transform_reduce, inner_product (the exact sum of the rounded products) and
//   tally::fields(tally::exact_plus<T>{}, ...) (x/y/z sums); segmented_reduce, reduce_by_key,
//   reduce_rows and reduce_columns under tally::host
//   tally::exact_accumulator<T>: add(x), merge(other), value(); and
//   void reduce_into(policy, first, last, exact_accumulator<T>* accumulator)
//       adds the range to *accumulator: a sum that arrives in pieces, merged in any order, has the
//       bits of the one-call sum
//
// Both backends: under a device policy the accumulator must be in memory the device can read and
// write (cudaMalloc, managed, or mapped pinned memory), and the call is asynchronous, like every
// reduce_into: read it back after the stream's work is done. The call adds; it never resets.

#include "tally/detail/exact_sum.cuh"
#include "tally/reduce.cuh"

#include <type_traits>

namespace tally {

template <class Policy, class It, class T, detail::enable_if_policy_t<Policy> = 0>
void reduce_into(const Policy& policy, It first, It last, exact_accumulator<T>* accumulator) {
  const auto p = detail::normalize_policy(policy);
  using policy_t = std::remove_cv_t<decltype(p)>;
  if (accumulator == nullptr)
    detail::throw_invalid_argument("reduce_into", "the exact accumulator is a null pointer; pass one to add to");
  if constexpr (std::is_same_v<policy_t, host_policy>) {
    const std::uint64_t n = detail::checked_distance(first, last, "reduce_into");
    accumulator->merge(detail::host::exact_accumulate<T>(first, n, p.thread_count()));
  } else {
    static_assert(std::is_same_v<policy_t, device_policy> || std::is_same_v<policy_t, strategy_forcing_policy>,
                  "tally::exact_accumulator: this policy's backend does not take exact sums; pass tally::device or "
                  "tally::host");
    detail::algorithm_scope scope("reduce_into");
    const std::uint64_t n = detail::checked_distance(first, last, "reduce_into");
    const int device = detail::current_device();
    detail::check_device_accessible(accumulator, detail::properties(device), "reduce_into", "the exact accumulator");
    if (n == 0) return;
    detail::exact_device_reduce(first, n, T(0), accumulator, static_cast<detail::host_handoff*>(nullptr), p, device,
                                "reduce_into");
  }
}

}  // namespace tally
