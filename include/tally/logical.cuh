#pragma once
// tally::all_of, tally::any_of, tally::none_of: Thrust's signatures and results, as one
// pass of tally::transform_reduce (an or of the predicate's answers).
//
//   bool all_of(policy, first, last, pred)     true on an empty range
//   bool any_of(policy, first, last, pred)     false on an empty range
//   bool none_of(policy, first, last, pred)    true on an empty range
//   void all_of_into(policy, first, last, out, pred), any_of_into, none_of_into
//        the answer written to *out (bool or any arithmetic type): one launch, no host
//        synchronization, capturable in a CUDA graph
//   each returning form also without a policy: host or device from the iterator's system.
//
// Every element is read: there is no early exit, so the cost is a full reduction
// whatever the answer. pred must be callable on the side that runs it.

#include "tally/transform_reduce.cuh"

namespace tally {
namespace detail {

// pred's answer as a flag, or its negation: all_of is "no element fails pred". The flags
// are unsigned rather than bool because the host backend keeps a tile's lanes in a
// std::vector<Acc>, which for bool is the packed specialization; a 4-byte flag also lets
// a forced atomic strategy run, bit_or being exact.
template <class Pred, bool Negate>
struct predicate_answer {
  mutable Pred pred;  // its operator() need not be const (as in Thrust)
  // pred may be host-only (a plain lambda) under a host policy; the device instantiation
  // is then never used, so nvcc need not check it.
#pragma nv_exec_check_disable
  template <class V>
  __host__ __device__ unsigned operator()(const V& x) const {
    return static_cast<bool>(pred(x)) != Negate ? 1u : 0u;
  }
};

template <bool Negate, class Policy, class It, class Pred>
bool any_answer(const Policy& policy, It first, It last, Pred pred, const char* algorithm) {
  return transform_reduce_impl(policy, first, last, predicate_answer<Pred, Negate>{pred}, 0u, bit_or<unsigned>{},
                               algorithm) != 0u;
}

// What the _into forms write from the or of the answers: whether it is set (any_of), or
// whether it is clear (all_of, whose answers are negated, and none_of). Laid out as the
// output element (reduce_into_through).
template <bool Clear>
struct flag_writer_of {
  template <class E>
  struct type {
    E answer;
    __host__ __device__ explicit type(unsigned flags) : answer(static_cast<E>((flags != 0u) != Clear)) {}
  };
};
template <class E>
using flag_set_writer = typename flag_writer_of<false>::template type<E>;
template <class E>
using flag_clear_writer = typename flag_writer_of<true>::template type<E>;

template <bool Negate, template <class> class Writer, class Policy, class It, class OutIt, class Pred>
void any_answer_into(const Policy& policy, It first, It last, OutIt out, Pred pred, const char* algorithm) {
  const auto p = normalize_policy(policy);
  if constexpr (std::is_same_v<decltype(p), const host_policy>) {
    using element = typename std::iterator_traits<OutIt>::value_type;
    *out = Writer<element>(any_answer<Negate>(p, first, last, pred, algorithm) ? 1u : 0u).answer;
  } else {
    algorithm_scope scope(algorithm);
    check_base(p, first, checked_distance(first, last, algorithm), algorithm);
    const predicate_answer<Pred, Negate> answer{pred};
    reduce_into_through<Writer>(p, thrust::make_transform_iterator(first, answer),
                                thrust::make_transform_iterator(last, answer), out, 0u, bit_or<unsigned>{}, algorithm);
  }
}

}  // namespace detail

template <class Policy, class It, class Pred, detail::enable_if_policy_t<Policy> = 0>
bool any_of(const Policy& policy, It first, It last, Pred pred) {
  return detail::any_answer<false>(policy, first, last, pred, "any_of");
}

template <class Policy, class It, class Pred, detail::enable_if_policy_t<Policy> = 0>
bool all_of(const Policy& policy, It first, It last, Pred pred) {
  return !detail::any_answer<true>(policy, first, last, pred, "all_of");
}

template <class Policy, class It, class Pred, detail::enable_if_policy_t<Policy> = 0>
bool none_of(const Policy& policy, It first, It last, Pred pred) {
  return !detail::any_answer<false>(policy, first, last, pred, "none_of");
}

// The answers written to *out (bool or any arithmetic element) by one launch with no host
// synchronization under a device policy (capturable in a CUDA graph), or assigned.
template <class Policy, class It, class OutIt, class Pred, detail::enable_if_policy_t<Policy> = 0>
void any_of_into(const Policy& policy, It first, It last, OutIt out, Pred pred) {
  detail::any_answer_into<false, detail::flag_set_writer>(policy, first, last, out, pred, "any_of_into");
}

template <class Policy, class It, class OutIt, class Pred, detail::enable_if_policy_t<Policy> = 0>
void all_of_into(const Policy& policy, It first, It last, OutIt out, Pred pred) {
  detail::any_answer_into<true, detail::flag_clear_writer>(policy, first, last, out, pred, "all_of_into");
}

template <class Policy, class It, class OutIt, class Pred, detail::enable_if_policy_t<Policy> = 0>
void none_of_into(const Policy& policy, It first, It last, OutIt out, Pred pred) {
  detail::any_answer_into<false, detail::flag_clear_writer>(policy, first, last, out, pred, "none_of_into");
}

template <class It, class Pred, detail::enable_if_iterator_t<It> = 0>
bool any_of(It first, It last, Pred pred) {
  return tally::any_of(detail::policy_for_iterator<It>(), first, last, pred);
}

template <class It, class Pred, detail::enable_if_iterator_t<It> = 0>
bool all_of(It first, It last, Pred pred) {
  return tally::all_of(detail::policy_for_iterator<It>(), first, last, pred);
}

template <class It, class Pred, detail::enable_if_iterator_t<It> = 0>
bool none_of(It first, It last, Pred pred) {
  return tally::none_of(detail::policy_for_iterator<It>(), first, last, pred);
}

}  // namespace tally
