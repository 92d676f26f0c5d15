#pragma once
// tally::reduce and tally::reduce_into: thrust::reduce's signatures and results.
//
//   T reduce(policy, first, last, init, op)   op(init, fold of [first, last)), init once;
//                                             an empty range returns init
//   reduce(policy, first, last, init)         op = tally::plus<T>
//   reduce(policy, first, last)               init = value_type(0), as Thrust (value_type{}
//                                             for a type that cannot be made from 0)
//   each also without a policy: host or device from the iterator's system, as Thrust does
//   void reduce_into(policy, first, last, out, init, op)
//                                             writes the result to *out without waiting
//                                             for it; device-writable out under a device
//                                             policy; capturable in a CUDA graph
//
// op must be associative and callable as op(T, T) on the policy's side. A commutative op
// (tally::is_commutative: plus, min, max, bitwise and logical functors, or one marked by
// tally::commutative(op)) takes the fastest plan; any other op keeps left-to-right order
// (docs/operators.md).

#include "tally/detail/dispatch/device_dispatch.cuh"
#include "tally/detail/dispatch/host_backend.cuh"
#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/loads/iterators.cuh"
#include "tally/detail/loads/transform_views.cuh"
#include "tally/error.cuh"
#include "tally/execution_policy.cuh"
#include "tally/functional.cuh"
#include "tally/operator_traits.cuh"

#include <cstdint>
#include <iterator>
#include <type_traits>

namespace tally {
namespace detail {

template <class Out, class T>
__global__ void write_value_kernel(Out* out, T value) {
  wait_for_prior_grid();
  *out = static_cast<Out>(value);
}

// Whether the host may touch the input as soon as reduce() has the value, while the kernel
// may still be retiring: not where the input is managed memory on a device without
// concurrent managed access, where any host access during a kernel faults.
template <class It>
bool input_needs_idle_device(It first, const device_properties& props) {
  if constexpr (is_contiguous_v<It>) {
    return needs_idle_device_for_host_access(raw_pointer(first), props);
  } else {
    return !props.concurrent_managed_access;  // a fancy iterator may read managed memory
  }
}

template <class It>
std::uint64_t checked_distance(It first, It last, const char* algorithm) {
  const auto n = last - first;
  if (n < 0) throw_invalid_argument(algorithm, "last precedes first (a reversed range)");
  return static_cast<std::uint64_t>(n);
}

#if defined(__CUDACC_EXTENDED_LAMBDA__)
template <class Op>
inline constexpr bool is_device_lambda_v = __nv_is_extended_device_lambda_closure_type(Op);
#else
template <class Op>
inline constexpr bool is_device_lambda_v = false;
#endif
// tally::commutative(a __device__ lambda) hides the lambda's result type just as well.
template <class Op>
inline constexpr bool is_device_lambda_v<commutative_op<Op>> = is_device_lambda_v<Op>;

template <class Acc, class Op>
constexpr bool folds_accumulator() {
  if constexpr (std::is_invocable_v<Op&, const Acc&, const Acc&>) {
    return std::is_convertible_v<std::invoke_result_t<Op&, const Acc&, const Acc&>, Acc>;
  } else {
    return false;
  }
}

// Whether op can fold a range of V into init's type Acc. An extended __device__ lambda's
// result type cannot be asked on the host, so it is trusted.
template <class Acc, class Op, class V>
inline constexpr bool operator_fits_v = std::is_convertible_v<V, Acc> && (is_device_lambda_v<Op> || folds_accumulator<Acc, Op>());

// Readable errors for operators that cannot fold init's type. The callers compile nothing
// else when one fails (operator_fits_v), so the message is not buried in template errors.
template <class Acc, class Op, class V>
constexpr void check_operator() {
  static_assert(std::is_convertible_v<V, Acc>, "tally: the range's values must convert to init's type");
  if constexpr (!is_device_lambda_v<Op>) {
    static_assert(std::is_invocable_v<Op&, const Acc&, const Acc&>,
                  "tally: the operator cannot be called as op(init, init); init's type is the accumulator");
    if constexpr (std::is_invocable_v<Op&, const Acc&, const Acc&>)
      static_assert(std::is_convertible_v<std::invoke_result_t<Op&, const Acc&, const Acc&>, Acc>,
                    "tally: op(init, init) must return a type convertible to init's type");
  }
}

template <class Acc, class It, class Op>
Acc reduce_impl(const host_policy& policy, It first, It last, Acc init, Op op) {
  check_operator<Acc, Op, iterator_value_t<It>>();
  if constexpr (!operator_fits_v<Acc, Op, iterator_value_t<It>>) {
    return init;  // not compiled further: check_operator has failed
  } else {
    const std::uint64_t n = checked_distance(first, last, "reduce");
    return host::reduce(first, n, init, op, policy.thread_count(), plan_vector_width_v<It>);
  }
}

template <class Acc, class It, class Op, bool MayForceStrategy>
Acc reduce_impl(const basic_device_policy<MayForceStrategy>& policy, It first, It last, Acc init, Op op) {
  check_operator<Acc, Op, iterator_value_t<It>>();
  static_assert(moves_as_bytes_v<Acc>,
                "tally: a device reduction moves init's type as bytes, so it must be trivially copyable, or "
                "copy-constructible and trivially destructible (a type that owns nothing); reduce into a plain "
                "value type instead");
  if constexpr (!operator_fits_v<Acc, Op, iterator_value_t<It>> || !moves_as_bytes_v<Acc>) {
    return init;  // not compiled further: a check above has failed
  } else {
    algorithm_scope scope("reduce");
    const std::uint64_t n = checked_distance(first, last, "reduce");
    const int device = current_device();
    if (n == 0) return init;
    Acc result = init;
    if constexpr (declares_exact_fields<Op>::value) {
      // One exact sum a field, each handing its field over in a slot of its own.
      if constexpr (check_exact_fields<Op, Acc, iterator_value_t<It>>())
        result = exact_fields_device_to_host(first, n, init, policy, device, "reduce",
                                             std::make_index_sequence<field_count_v<Acc>>{});
    } else {
      result_slot slot(device);
      device_reduce(first, n, init, op, static_cast<Acc*>(nullptr), slot.handoff(), policy, device, "reduce");
      slot.take(policy.stream(), &result, sizeof(Acc));
    }
    if (input_needs_idle_device(first, properties(device)))
      wait_for_stream(policy.stream(), "waiting for the kernel before the host may touch managed input");
    return result;
  }
}

template <class Acc, class It, class OutIt, class Op>
void reduce_into_impl(const host_policy& policy, It first, It last, OutIt out, Acc init, Op op) {
  *out = reduce_impl(policy, first, last, init, op);
}

template <class Acc, class It, class OutIt, class Op, bool MayForceStrategy>
void reduce_into_impl(const basic_device_policy<MayForceStrategy>& policy, It first, It last, OutIt out, Acc init, Op op,
                      const char* algorithm = "reduce_into") {  // the name errors give (the _into forms')
  check_operator<Acc, Op, iterator_value_t<It>>();
  static_assert(is_contiguous_v<OutIt>,
                "tally::reduce_into: out must be a pointer, thrust::device_ptr or a device_vector iterator");
  if constexpr (operator_fits_v<Acc, Op, iterator_value_t<It>> && is_contiguous_v<OutIt>) {
    algorithm_scope scope(algorithm);
    const std::uint64_t n = checked_distance(first, last, algorithm);
    const int device = current_device();
    const auto* const_out = raw_pointer(out);
    using out_t = std::remove_cv_t<std::remove_pointer_t<decltype(const_out)>>;
    auto* out_ptr = const_cast<out_t*>(const_out);
    check_device_accessible(out_ptr, properties(device), algorithm, "out");
    if (n == 0) {
      check_stream_of_device(policy.stream(), device);
      launch_kernel<write_value_kernel<out_t, Acc>>(1, 1, policy.stream(), device, out_ptr, init);
      return;
    }
    device_reduce(first, n, init, op, out_ptr, static_cast<host_handoff*>(nullptr), policy, device, algorithm);
  }
}

// The _into forms of the family (transform_reduce_into, min_element_into, all_of_into, ...):
// one reduce_into whose result is converted as it is written. Writer<E> is laid out as the
// output element E (or as several, for minmax_element_into's two positions) and is
// constructed from the accumulator, so the kernels write it as they write any result: in the
// same launch, with no host synchronization. Errors name `algorithm`.
template <class OutIt>
using output_element_t = std::remove_cv_t<std::remove_pointer_t<decltype(raw_pointer(std::declval<OutIt>()))>>;

template <template <class> class Writer, class Acc, class It, class OutIt, class Op, bool MayForceStrategy>
void reduce_into_through(const basic_device_policy<MayForceStrategy>& policy, It first, It last, OutIt out, Acc init, Op op,
                         const char* algorithm) {
  static_assert(is_contiguous_v<OutIt>,
                "tally: out must be a pointer, thrust::device_ptr or a device_vector iterator for the _into forms");
  if constexpr (is_contiguous_v<OutIt>) {
    using element = output_element_t<OutIt>;
    using writer = Writer<element>;
    static_assert(sizeof(writer) % sizeof(element) == 0 && alignof(writer) == alignof(element),
                  "a writer is laid out as output elements");
    algorithm_scope scope(algorithm);
    auto* target = reinterpret_cast<writer*>(const_cast<element*>(raw_pointer(out)));
    reduce_into_impl(policy, first, last, target, init, op, algorithm);
  }
}

// The init of reduce(first, last): Thrust's value_type(0), which differs from value_type{}
// for a type whose default constructor is not its zero; value_type{} for the types that
// cannot be made from 0 (tuples, CUDA vector types), which Thrust does not reduce this way.
template <class V>
constexpr V default_init() {
  if constexpr (std::is_constructible_v<V, int>) {
    return V(0);
  } else {
    return V{};
  }
}

template <class It>
auto policy_for_iterator() {
  if constexpr (is_device_iterator_v<It>) {
    return device_policy{};
  } else {
    return host_policy{};
  }
}

template <class P>
using enable_if_policy_t = std::enable_if_t<is_execution_policy_v<P>, int>;
template <class It>
using enable_if_iterator_t = std::enable_if_t<!is_execution_policy_v<It>, int>;

}  // namespace detail

// ---- with a policy ----

template <class Policy, class It, class T, class Op, detail::enable_if_policy_t<Policy> = 0>
T reduce(const Policy& policy, It first, It last, T init, Op op) {
  return detail::reduce_impl(detail::normalize_policy(policy), first, last, init, op);
}

template <class Policy, class It, class T, detail::enable_if_policy_t<Policy> = 0>
T reduce(const Policy& policy, It first, It last, T init) {
  return tally::reduce(policy, first, last, init, plus<T>{});
}

template <class Policy, class It, detail::enable_if_policy_t<Policy> = 0>
detail::iterator_value_t<It> reduce(const Policy& policy, It first, It last) {
  return tally::reduce(policy, first, last, detail::default_init<detail::iterator_value_t<It>>());
}

template <class Policy, class It, class OutIt, class T, class Op, detail::enable_if_policy_t<Policy> = 0>
void reduce_into(const Policy& policy, It first, It last, OutIt out, T init, Op op) {
  detail::reduce_into_impl(detail::normalize_policy(policy), first, last, out, init, op);
}

template <class Policy, class It, class OutIt, class T, detail::enable_if_policy_t<Policy> = 0>
void reduce_into(const Policy& policy, It first, It last, OutIt out, T init) {
  tally::reduce_into(policy, first, last, out, init, plus<T>{});
}

template <class Policy, class It, class OutIt, detail::enable_if_policy_t<Policy> = 0>
void reduce_into(const Policy& policy, It first, It last, OutIt out) {
  tally::reduce_into(policy, first, last, out, detail::default_init<detail::iterator_value_t<It>>());
}

// ---- without a policy: the iterator's system decides ----

template <class It, class T, class Op, detail::enable_if_iterator_t<It> = 0>
T reduce(It first, It last, T init, Op op) {
  return tally::reduce(detail::policy_for_iterator<It>(), first, last, init, op);
}

template <class It, class T, detail::enable_if_iterator_t<It> = 0>
T reduce(It first, It last, T init) {
  return tally::reduce(detail::policy_for_iterator<It>(), first, last, init);
}

template <class It, detail::enable_if_iterator_t<It> = 0>
detail::iterator_value_t<It> reduce(It first, It last) {
  return tally::reduce(detail::policy_for_iterator<It>(), first, last);
}

}  // namespace tally
