#pragma once
// tally::transform_reduce, tally::inner_product, tally::count, tally::count_if: Thrust's
// and the standard library's signatures and results, fused into one pass by reducing a
// transformed view of the input with tally::reduce's kernels (the same plan, so host and
// device agree bit for bit here too).
//
//   T transform_reduce(policy, first, last, unary_op, T init, binary_op)       Thrust's form
//   T transform_reduce(policy, first1, last1, first2, T init)                  std:: form: sum of products
//                                                                             in the elements' type
//   T transform_reduce(policy, first1, last1, first2, T init, reduce_op, transform_op)
//   T inner_product(policy, first1, last1, first2, T init)                    products in T, as Thrust
//   T inner_product(policy, first1, last1, first2, T init, op1, op2)           op1 folds, op2 pairs
//   difference_type count(policy, first, last, value)
//   difference_type count_if(policy, first, last, pred)
//   void transform_reduce_into(policy, first, last, out, unary_op, T init, binary_op)
//   void transform_reduce_into(policy, first1, last1, first2, out, T init[, reduce_op, transform_op])
//   void inner_product_into(policy, first1, last1, first2, out, T init[, op1, op2])
//   void count_into(policy, first, last, out, value), count_if_into(policy, first, last, out, pred)
//        the result written to *out as reduce_into writes it: one launch, no host
//        synchronization, capturable in a CUDA graph; the same bits as the returning forms
//   each returning form also without a policy: host or device from the iterators' systems. Two ranges of
//   different systems (a host range and a device range) throw std::invalid_argument.
//
// The transforming functors must be callable on the side that runs them; for device
// iterators, make them __host__ __device__ (as thrust::transform_iterator needs).

#include "tally/detail/loads/transform_views.cuh"
#include "tally/reduce.cuh"

#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/tuple.h>

#include <iterator>

namespace tally {
namespace detail {

template <class Pred, class Count>
struct count_predicate {
  mutable Pred pred;  // its operator() need not be const (as in Thrust)
  // pred may be host-only under a host policy; the device instantiation is then never used.
#pragma nv_exec_check_disable
  template <class V>
  __host__ __device__ Count operator()(const V& x) const {
    return pred(x) ? Count(1) : Count(0);
  }
};

template <class V>
struct equal_to_value {
  V value;
  // V's operator== may be host-only under a host policy.
#pragma nv_exec_check_disable
  template <class X>
  __host__ __device__ bool operator()(const X& x) const {
    return x == value;
  }
};


// A fancy iterator hides its base from tally::reduce's pointer checks, so the checks run
// here on the base: a contiguous base under a device policy must be device-readable.
template <class It, bool MayForceStrategy>
void check_base(const basic_device_policy<MayForceStrategy>&, It first, std::uint64_t n, const char* algorithm,
                const char* what = "the input range") {
  if constexpr (is_contiguous_v<It>) {
    if (n > 0) check_device_accessible(raw_pointer(first), properties(current_device()), algorithm, what);
  }
}
template <class It>
void check_base(const host_policy&, It, std::uint64_t, const char*, const char* = nullptr) {}

template <class It>
constexpr const char* system_name() {
  return is_device_only_iterator_v<It> ? "device" : "host";
}

// The policy for two ranges without one: the system they share, the device where one is of
// the device and the other of any system (Thrust's choice). A host range and a device range
// have no side that can read both, so that is refused before anything runs.
template <class It1, class It2>
auto policy_for_ranges(const char* algorithm) {
  constexpr bool mixed = (is_host_only_iterator_v<It1> && is_device_only_iterator_v<It2>) ||
                         (is_device_only_iterator_v<It1> && is_host_only_iterator_v<It2>);
  if constexpr (mixed) {
    throw_invalid_argument(algorithm, std::string("the first range is of the ") + system_name<It1>() +
                                          " system and the second of the " + system_name<It2>() +
                                          " system; copy one range to the other's side, or pass a policy "
                                          "whose side can read both");
    return host_policy{};
  } else if constexpr (is_device_only_iterator_v<It1> || is_device_only_iterator_v<It2>) {
    return device_policy{};
  } else if constexpr (is_host_only_iterator_v<It1> || is_host_only_iterator_v<It2>) {
    return host_policy{};
  } else {
    return policy_for_iterator<It1>();
  }
}

template <class Policy, class It, class UnaryOp, class T, class BinaryOp>
T transform_reduce_impl(const Policy& policy, It first, It last, UnaryOp unary_op, T init, BinaryOp binary_op,
                        const char* algorithm) {
  algorithm_scope scope(algorithm);  // errors raised inside reduce name this algorithm
  const auto p = normalize_policy(policy);
  check_base(p, first, checked_distance(first, last, algorithm), algorithm);
  return reduce_impl(p, thrust::make_transform_iterator(first, unary_op), thrust::make_transform_iterator(last, unary_op),
                     init, binary_op);
}

template <class Policy, class It1, class It2, class T, class ReduceOp, class TransformOp>
T transform_reduce_pairs(const Policy& policy, It1 first1, It1 last1, It2 first2, T init, ReduceOp reduce_op,
                         TransformOp transform_op, const char* algorithm) {
  algorithm_scope scope(algorithm);  // errors raised inside reduce name this algorithm
  const auto p = normalize_policy(policy);
  const std::uint64_t n = checked_distance(first1, last1, algorithm);
  check_base(p, first1, n, algorithm, "the first range");
  check_base(p, first2, n, algorithm, "the second range");
  const auto pairs = thrust::make_zip_iterator(thrust::make_tuple(first1, first2));
  const auto first = thrust::make_transform_iterator(pairs, apply_to_pair<TransformOp>{transform_op});
  return reduce_impl(p, first, first + static_cast<std::ptrdiff_t>(n), init, reduce_op);
}

// The _into forms: under a device policy one launch writes the result to *out and nothing
// waits for it (graph-capturable); under a host policy the result is computed and assigned.
template <class Policy, class It, class OutIt, class UnaryOp, class T, class BinaryOp>
void transform_reduce_into_impl(const Policy& policy, It first, It last, OutIt out, UnaryOp unary_op, T init,
                                BinaryOp binary_op, const char* algorithm) {
  const auto p = normalize_policy(policy);
  if constexpr (std::is_same_v<decltype(p), const host_policy>) {
    *out = transform_reduce_impl(p, first, last, unary_op, init, binary_op, algorithm);
  } else {
    algorithm_scope scope(algorithm);
    check_base(p, first, checked_distance(first, last, algorithm), algorithm);
    reduce_into_impl(p, thrust::make_transform_iterator(first, unary_op),
                     thrust::make_transform_iterator(last, unary_op), out, init, binary_op, algorithm);
  }
}

template <class Policy, class It1, class It2, class OutIt, class T, class ReduceOp, class TransformOp>
void transform_reduce_pairs_into(const Policy& policy, It1 first1, It1 last1, It2 first2, OutIt out, T init,
                                 ReduceOp reduce_op, TransformOp transform_op, const char* algorithm) {
  const auto p = normalize_policy(policy);
  if constexpr (std::is_same_v<decltype(p), const host_policy>) {
    *out = transform_reduce_pairs(p, first1, last1, first2, init, reduce_op, transform_op, algorithm);
  } else {
    algorithm_scope scope(algorithm);
    const std::uint64_t n = checked_distance(first1, last1, algorithm);
    check_base(p, first1, n, algorithm, "the first range");
    check_base(p, first2, n, algorithm, "the second range");
    const auto pairs = thrust::make_zip_iterator(thrust::make_tuple(first1, first2));
    const auto first = thrust::make_transform_iterator(pairs, apply_to_pair<TransformOp>{transform_op});
    reduce_into_impl(p, first, first + static_cast<std::ptrdiff_t>(n), out, init, reduce_op, algorithm);
  }
}

}  // namespace detail

// ---- transform_reduce ----

template <class Policy, class It, class UnaryOp, class T, class BinaryOp, detail::enable_if_policy_t<Policy> = 0>
T transform_reduce(const Policy& policy, It first, It last, UnaryOp unary_op, T init, BinaryOp binary_op) {
  return detail::transform_reduce_impl(policy, first, last, unary_op, init, binary_op, "transform_reduce");
}

template <class It, class UnaryOp, class T, class BinaryOp, detail::enable_if_iterator_t<It> = 0>
T transform_reduce(It first, It last, UnaryOp unary_op, T init, BinaryOp binary_op) {
  return tally::transform_reduce(detail::policy_for_iterator<It>(), first, last, unary_op, init, binary_op);
}

template <class Policy, class It1, class It2, class T, class ReduceOp, class TransformOp,
          detail::enable_if_policy_t<Policy> = 0>
T transform_reduce(const Policy& policy, It1 first1, It1 last1, It2 first2, T init, ReduceOp reduce_op,
                   TransformOp transform_op) {
  return detail::transform_reduce_pairs(policy, first1, last1, first2, init, reduce_op, transform_op,
                                        "transform_reduce");
}

template <class Policy, class It1, class It2, class T, detail::enable_if_policy_t<Policy> = 0>
T transform_reduce(const Policy& policy, It1 first1, It1 last1, It2 first2, T init) {
  return detail::transform_reduce_pairs(policy, first1, last1, first2, init, plus<T>{}, multiplies<>{},
                                        "transform_reduce");
}

template <class It1, class It2, class T, class ReduceOp, class TransformOp, detail::enable_if_iterator_t<It1> = 0>
T transform_reduce(It1 first1, It1 last1, It2 first2, T init, ReduceOp reduce_op, TransformOp transform_op) {
  return tally::transform_reduce(detail::policy_for_ranges<It1, It2>("transform_reduce"), first1, last1, first2, init,
                                 reduce_op, transform_op);
}

template <class It1, class It2, class T, detail::enable_if_iterator_t<It1> = 0>
T transform_reduce(It1 first1, It1 last1, It2 first2, T init) {
  return tally::transform_reduce(detail::policy_for_ranges<It1, It2>("transform_reduce"), first1, last1, first2, init);
}

template <class Policy, class It, class OutIt, class UnaryOp, class T, class BinaryOp,
          detail::enable_if_policy_t<Policy> = 0>
void transform_reduce_into(const Policy& policy, It first, It last, OutIt out, UnaryOp unary_op, T init,
                           BinaryOp binary_op) {
  detail::transform_reduce_into_impl(policy, first, last, out, unary_op, init, binary_op, "transform_reduce_into");
}

template <class Policy, class It1, class It2, class OutIt, class T, class ReduceOp, class TransformOp,
          detail::enable_if_policy_t<Policy> = 0>
void transform_reduce_into(const Policy& policy, It1 first1, It1 last1, It2 first2, OutIt out, T init,
                           ReduceOp reduce_op, TransformOp transform_op) {
  detail::transform_reduce_pairs_into(policy, first1, last1, first2, out, init, reduce_op, transform_op,
                                      "transform_reduce_into");
}

template <class Policy, class It1, class It2, class OutIt, class T, detail::enable_if_policy_t<Policy> = 0>
void transform_reduce_into(const Policy& policy, It1 first1, It1 last1, It2 first2, OutIt out, T init) {
  detail::transform_reduce_pairs_into(policy, first1, last1, first2, out, init, plus<T>{}, multiplies<>{},
                                      "transform_reduce_into");
}

// ---- inner_product ----

template <class Policy, class It1, class It2, class T, class Op1, class Op2, detail::enable_if_policy_t<Policy> = 0>
T inner_product(const Policy& policy, It1 first1, It1 last1, It2 first2, T init, Op1 op1, Op2 op2) {
  return detail::transform_reduce_pairs(policy, first1, last1, first2, init, op1, op2, "inner_product");
}

// Thrust's meaning: the products are taken in init's type (thrust::multiplies<T>), so an
// int range with a long long init multiplies without overflow. transform_reduce's two-range
// form above keeps std::transform_reduce's std::multiplies<> instead: the two differ on
// purpose (docs/thrust.md).
template <class Policy, class It1, class It2, class T, detail::enable_if_policy_t<Policy> = 0>
T inner_product(const Policy& policy, It1 first1, It1 last1, It2 first2, T init) {
  return detail::transform_reduce_pairs(policy, first1, last1, first2, init, plus<T>{}, multiplies<T>{},
                                        "inner_product");
}

template <class It1, class It2, class T, class Op1, class Op2, detail::enable_if_iterator_t<It1> = 0>
T inner_product(It1 first1, It1 last1, It2 first2, T init, Op1 op1, Op2 op2) {
  return tally::inner_product(detail::policy_for_ranges<It1, It2>("inner_product"), first1, last1, first2, init, op1,
                              op2);
}

template <class It1, class It2, class T, detail::enable_if_iterator_t<It1> = 0>
T inner_product(It1 first1, It1 last1, It2 first2, T init) {
  return tally::inner_product(detail::policy_for_ranges<It1, It2>("inner_product"), first1, last1, first2, init);
}

template <class Policy, class It1, class It2, class OutIt, class T, class Op1, class Op2,
          detail::enable_if_policy_t<Policy> = 0>
void inner_product_into(const Policy& policy, It1 first1, It1 last1, It2 first2, OutIt out, T init, Op1 op1, Op2 op2) {
  detail::transform_reduce_pairs_into(policy, first1, last1, first2, out, init, op1, op2, "inner_product_into");
}

template <class Policy, class It1, class It2, class OutIt, class T, detail::enable_if_policy_t<Policy> = 0>
void inner_product_into(const Policy& policy, It1 first1, It1 last1, It2 first2, OutIt out, T init) {
  detail::transform_reduce_pairs_into(policy, first1, last1, first2, out, init, plus<T>{}, multiplies<T>{},
                                      "inner_product_into");
}

// ---- count, count_if ----

template <class Policy, class It, class Pred, detail::enable_if_policy_t<Policy> = 0>
typename std::iterator_traits<It>::difference_type count_if(const Policy& policy, It first, It last, Pred pred) {
  using count_t = typename std::iterator_traits<It>::difference_type;
  return detail::transform_reduce_impl(policy, first, last, detail::count_predicate<Pred, count_t>{pred}, count_t(0),
                                       plus<count_t>{}, "count_if");
}

template <class Policy, class It, class V, detail::enable_if_policy_t<Policy> = 0>
typename std::iterator_traits<It>::difference_type count(const Policy& policy, It first, It last, const V& value) {
  // Not through count_if: every message of this call names tally::count.
  using count_t = typename std::iterator_traits<It>::difference_type;
  using pred_t = detail::equal_to_value<V>;
  return detail::transform_reduce_impl(policy, first, last, detail::count_predicate<pred_t, count_t>{pred_t{value}},
                                       count_t(0), plus<count_t>{}, "count");
}

// The counts written to *out (any arithmetic element) by one launch, without waiting.
template <class Policy, class It, class OutIt, class Pred, detail::enable_if_policy_t<Policy> = 0>
void count_if_into(const Policy& policy, It first, It last, OutIt out, Pred pred) {
  using count_t = typename std::iterator_traits<It>::difference_type;
  detail::transform_reduce_into_impl(policy, first, last, out, detail::count_predicate<Pred, count_t>{pred},
                                     count_t(0), plus<count_t>{}, "count_if_into");
}

template <class Policy, class It, class OutIt, class V, detail::enable_if_policy_t<Policy> = 0>
void count_into(const Policy& policy, It first, It last, OutIt out, const V& value) {
  using count_t = typename std::iterator_traits<It>::difference_type;
  using pred_t = detail::equal_to_value<V>;
  detail::transform_reduce_into_impl(policy, first, last, out, detail::count_predicate<pred_t, count_t>{pred_t{value}},
                                     count_t(0), plus<count_t>{}, "count_into");
}

template <class It, class Pred, detail::enable_if_iterator_t<It> = 0>
typename std::iterator_traits<It>::difference_type count_if(It first, It last, Pred pred) {
  return tally::count_if(detail::policy_for_iterator<It>(), first, last, pred);
}

template <class It, class V, detail::enable_if_iterator_t<It> = 0>
typename std::iterator_traits<It>::difference_type count(It first, It last, const V& value) {
  return tally::count(detail::policy_for_iterator<It>(), first, last, value);
}

}  // namespace tally
