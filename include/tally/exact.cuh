#pragma once
// Exact sums (issue 37; docs/exact.md): the real-number sum of the inputs, rounded once to
// nearest with ties to even, whatever their order, grouping or split.
//
//   T reduce(policy, first, last, T init, tally::exact_plus<T>{})      T = float or double
//   also through transform_reduce, inner_product (the exact sum of the rounded products),
//   segmented_reduce, reduce_by_key, reduce_rows and reduce_columns
//   tally::exact_accumulator<T>: add(x), merge(other), value(); and
//   void reduce_into(policy, first, last, exact_accumulator<T>* accumulator)
//       adds the range to *accumulator: a sum that arrives in pieces, merged in any order, has the
//       bits of the one-call sum
//
// The host backend (tally::host) is built; under a device policy these fail to compile, with a
// message, until the device backend lands.

#include "tally/detail/exact_sum.cuh"
#include "tally/reduce.cuh"

#include <type_traits>

namespace tally {

template <class Policy, class It, class T, detail::enable_if_policy_t<Policy> = 0>
void reduce_into(const Policy& policy, It first, It last, exact_accumulator<T>* accumulator) {
  const auto p = detail::normalize_policy(policy);
  static_assert(std::is_same_v<std::remove_cv_t<decltype(p)>, host_policy>,
                "tally::exact_accumulator: the device backend of exact sums is not built yet (issue 37); pass "
                "tally::host");
  if (accumulator == nullptr)
    detail::throw_invalid_argument("reduce_into", "the exact accumulator is a null pointer; pass one to add to");
  const std::uint64_t n = detail::checked_distance(first, last, "reduce_into");
  accumulator->merge(detail::host::exact_accumulate<T>(first, n, p.thread_count()));
}

}  // namespace tally
