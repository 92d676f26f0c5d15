#pragma once
// Range overloads: each algorithm of the reduction family taking a container (anything
// std::begin and std::end accept that is neither an iterator nor an execution policy) in
// place of [first, last). They forward to the iterator overloads, so the results, checks
// and costs are theirs.
//
//   reduce(policy, range[, init[, op]])
//   transform_reduce(policy, range, unary_op, init, binary_op)
//   count(policy, range, value)          count_if(policy, range, pred)
//   min_element(policy, range[, comp])   max_element(policy, range[, comp])
//   minmax_element(policy, range[, comp])
//   all_of(policy, range, pred)          any_of(policy, range, pred)   none_of(policy, range, pred)
//   each also without a policy: host or device from the range's iterators (a
//   thrust::device_vector runs on the device, a std::vector on the host).
//
// The extrema return iterators into the range, so they take only ranges that outlive the
// call (lvalues); the others also take temporaries.

#include "tally/extrema.cuh"
#include "tally/logical.cuh"
#include "tally/reduce.cuh"
#include "tally/transform_reduce.cuh"

#include <iterator>
#include <type_traits>
#include <utility>

namespace tally {
namespace detail {

template <class Range>
using range_iterator_t = decltype(std::begin(std::declval<Range&>()));

template <class T, class = void>
struct has_iterator_category : std::false_type {};
template <class T>
struct has_iterator_category<T, std::void_t<typename std::iterator_traits<T>::iterator_category>> : std::true_type {};

template <class R, class = void>
struct is_range_impl : std::false_type {};
template <class R>
struct is_range_impl<R, std::void_t<range_iterator_t<R>, decltype(std::end(std::declval<R&>()))>>
    : std::bool_constant<!is_execution_policy_v<R> && !has_iterator_category<R>::value> {};

// Whether R is taken as a range. Iterators and policies never are, so a range overload
// never competes with an iterator overload of the same arity.
template <class R>
inline constexpr bool is_range_v = is_range_impl<std::remove_cv_t<std::remove_reference_t<R>>>::value;

template <class R>
using enable_if_range_t = std::enable_if_t<is_range_v<R>, int>;

template <class Range>
auto policy_for_range() {
  return policy_for_iterator<range_iterator_t<Range>>();
}

template <class Range>
constexpr void check_outlives_call() {
  static_assert(std::is_lvalue_reference_v<Range>,
                "tally: the extrema return an iterator into the range, which a temporary would leave dangling; "
                "pass a range that outlives the call");
}

}  // namespace detail

// ---- reduce ----

template <class Policy, class Range, class T, class Op, detail::enable_if_policy_t<Policy> = 0,
          detail::enable_if_range_t<Range> = 0>
T reduce(const Policy& policy, Range&& range, T init, Op op) {
  return tally::reduce(policy, std::begin(range), std::end(range), init, op);
}

template <class Policy, class Range, class T, detail::enable_if_policy_t<Policy> = 0,
          detail::enable_if_range_t<Range> = 0>
T reduce(const Policy& policy, Range&& range, T init) {
  return tally::reduce(policy, std::begin(range), std::end(range), init);
}

template <class Policy, class Range, detail::enable_if_policy_t<Policy> = 0, detail::enable_if_range_t<Range> = 0>
auto reduce(const Policy& policy, Range&& range) {
  return tally::reduce(policy, std::begin(range), std::end(range));
}

template <class Range, class T, class Op, detail::enable_if_range_t<Range> = 0>
T reduce(Range&& range, T init, Op op) {
  return tally::reduce(detail::policy_for_range<Range>(), range, init, op);
}

template <class Range, class T, detail::enable_if_range_t<Range> = 0>
T reduce(Range&& range, T init) {
  return tally::reduce(detail::policy_for_range<Range>(), range, init);
}

template <class Range, detail::enable_if_range_t<Range> = 0>
auto reduce(Range&& range) {
  return tally::reduce(detail::policy_for_range<Range>(), range);
}

// ---- transform_reduce ----

template <class Policy, class Range, class UnaryOp, class T, class BinaryOp, detail::enable_if_policy_t<Policy> = 0,
          detail::enable_if_range_t<Range> = 0>
T transform_reduce(const Policy& policy, Range&& range, UnaryOp unary_op, T init, BinaryOp binary_op) {
  return tally::transform_reduce(policy, std::begin(range), std::end(range), unary_op, init, binary_op);
}

template <class Range, class UnaryOp, class T, class BinaryOp, detail::enable_if_range_t<Range> = 0>
T transform_reduce(Range&& range, UnaryOp unary_op, T init, BinaryOp binary_op) {
  return tally::transform_reduce(detail::policy_for_range<Range>(), range, unary_op, init, binary_op);
}

// ---- count, count_if ----

template <class Policy, class Range, class V, detail::enable_if_policy_t<Policy> = 0,
          detail::enable_if_range_t<Range> = 0>
auto count(const Policy& policy, Range&& range, const V& value) {
  return tally::count(policy, std::begin(range), std::end(range), value);
}

template <class Policy, class Range, class Pred, detail::enable_if_policy_t<Policy> = 0,
          detail::enable_if_range_t<Range> = 0>
auto count_if(const Policy& policy, Range&& range, Pred pred) {
  return tally::count_if(policy, std::begin(range), std::end(range), pred);
}

template <class Range, class V, detail::enable_if_range_t<Range> = 0>
auto count(Range&& range, const V& value) {
  return tally::count(detail::policy_for_range<Range>(), range, value);
}

template <class Range, class Pred, detail::enable_if_range_t<Range> = 0>
auto count_if(Range&& range, Pred pred) {
  return tally::count_if(detail::policy_for_range<Range>(), range, pred);
}

// ---- min_element, max_element, minmax_element ----

template <class Policy, class Range, class Comp, detail::enable_if_policy_t<Policy> = 0,
          detail::enable_if_range_t<Range> = 0>
detail::range_iterator_t<Range> min_element(const Policy& policy, Range&& range, Comp comp) {
  detail::check_outlives_call<Range>();
  return tally::min_element(policy, std::begin(range), std::end(range), comp);
}

template <class Policy, class Range, detail::enable_if_policy_t<Policy> = 0, detail::enable_if_range_t<Range> = 0>
detail::range_iterator_t<Range> min_element(const Policy& policy, Range&& range) {
  detail::check_outlives_call<Range>();
  return tally::min_element(policy, std::begin(range), std::end(range));
}

template <class Policy, class Range, class Comp, detail::enable_if_policy_t<Policy> = 0,
          detail::enable_if_range_t<Range> = 0>
detail::range_iterator_t<Range> max_element(const Policy& policy, Range&& range, Comp comp) {
  detail::check_outlives_call<Range>();
  return tally::max_element(policy, std::begin(range), std::end(range), comp);
}

template <class Policy, class Range, detail::enable_if_policy_t<Policy> = 0, detail::enable_if_range_t<Range> = 0>
detail::range_iterator_t<Range> max_element(const Policy& policy, Range&& range) {
  detail::check_outlives_call<Range>();
  return tally::max_element(policy, std::begin(range), std::end(range));
}

template <class Policy, class Range, class Comp, detail::enable_if_policy_t<Policy> = 0,
          detail::enable_if_range_t<Range> = 0>
thrust::pair<detail::range_iterator_t<Range>, detail::range_iterator_t<Range>> minmax_element(const Policy& policy,
                                                                                            Range&& range, Comp comp) {
  detail::check_outlives_call<Range>();
  return tally::minmax_element(policy, std::begin(range), std::end(range), comp);
}

template <class Policy, class Range, detail::enable_if_policy_t<Policy> = 0, detail::enable_if_range_t<Range> = 0>
thrust::pair<detail::range_iterator_t<Range>, detail::range_iterator_t<Range>> minmax_element(const Policy& policy,
                                                                                            Range&& range) {
  detail::check_outlives_call<Range>();
  return tally::minmax_element(policy, std::begin(range), std::end(range));
}

template <class Range, class Comp, detail::enable_if_range_t<Range> = 0>
detail::range_iterator_t<Range> min_element(Range&& range, Comp comp) {
  return tally::min_element(detail::policy_for_range<Range>(), std::forward<Range>(range), comp);
}

template <class Range, detail::enable_if_range_t<Range> = 0>
detail::range_iterator_t<Range> min_element(Range&& range) {
  return tally::min_element(detail::policy_for_range<Range>(), std::forward<Range>(range));
}

template <class Range, class Comp, detail::enable_if_range_t<Range> = 0>
detail::range_iterator_t<Range> max_element(Range&& range, Comp comp) {
  return tally::max_element(detail::policy_for_range<Range>(), std::forward<Range>(range), comp);
}

template <class Range, detail::enable_if_range_t<Range> = 0>
detail::range_iterator_t<Range> max_element(Range&& range) {
  return tally::max_element(detail::policy_for_range<Range>(), std::forward<Range>(range));
}

template <class Range, class Comp, detail::enable_if_range_t<Range> = 0>
thrust::pair<detail::range_iterator_t<Range>, detail::range_iterator_t<Range>> minmax_element(Range&& range,
                                                                                            Comp comp) {
  return tally::minmax_element(detail::policy_for_range<Range>(), std::forward<Range>(range), comp);
}

template <class Range, detail::enable_if_range_t<Range> = 0>
thrust::pair<detail::range_iterator_t<Range>, detail::range_iterator_t<Range>> minmax_element(Range&& range) {
  return tally::minmax_element(detail::policy_for_range<Range>(), std::forward<Range>(range));
}

// ---- all_of, any_of, none_of ----

template <class Policy, class Range, class Pred, detail::enable_if_policy_t<Policy> = 0,
          detail::enable_if_range_t<Range> = 0>
bool all_of(const Policy& policy, Range&& range, Pred pred) {
  return tally::all_of(policy, std::begin(range), std::end(range), pred);
}

template <class Policy, class Range, class Pred, detail::enable_if_policy_t<Policy> = 0,
          detail::enable_if_range_t<Range> = 0>
bool any_of(const Policy& policy, Range&& range, Pred pred) {
  return tally::any_of(policy, std::begin(range), std::end(range), pred);
}

template <class Policy, class Range, class Pred, detail::enable_if_policy_t<Policy> = 0,
          detail::enable_if_range_t<Range> = 0>
bool none_of(const Policy& policy, Range&& range, Pred pred) {
  return tally::none_of(policy, std::begin(range), std::end(range), pred);
}

template <class Range, class Pred, detail::enable_if_range_t<Range> = 0>
bool all_of(Range&& range, Pred pred) {
  return tally::all_of(detail::policy_for_range<Range>(), range, pred);
}

template <class Range, class Pred, detail::enable_if_range_t<Range> = 0>
bool any_of(Range&& range, Pred pred) {
  return tally::any_of(detail::policy_for_range<Range>(), range, pred);
}

template <class Range, class Pred, detail::enable_if_range_t<Range> = 0>
bool none_of(Range&& range, Pred pred) {
  return tally::none_of(detail::policy_for_range<Range>(), range, pred);
}

}  // namespace tally
