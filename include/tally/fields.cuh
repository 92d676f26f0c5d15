#pragma once
// Multi-field reductions: several fields reduced in one pass over memory, their arithmetic
// and shuffles interleaved (docs/fields.md).
//
//   auto first = tally::zip(x, y, z);                   structure of arrays: a thrust::zip_iterator
//   tally::reduce(policy, first, first + n, cuda::std::make_tuple(0.f, 0.f, 0.f), tally::plus<>{});
//   tally::fields(op0, op1, ...)                        op_i on field i of a tuple-like value
//   tally::plus<>{}, minimum<>{}, ... on tuple-like      the same operator on every field
//   tally::reduce(policy, p, p + n, float3{}, tally::plus<>{})  array of structures (vector types,
//                                                       structs with tally::field_members)
//   tally::transform_reduce(policy, first, last, make_tuple_op, init, tally::fields(...))
//
// Tuples are cuda::std::tuple; thrust::tuple is the same type (CCCL 2 and later), so either
// spelling works for init and results. Reductions go through tally::reduce's plan: device and
// host agree bit for bit on float fields. In your own kernels tally::warp::reduce and
// tally::block::reduce take tuples and tuple-like structs directly (every field's shuffle
// is issued in each step of the tree).

#include "tally/detail/tuple_like.cuh"
#include "tally/functional.cuh"
#include "tally/reduce.cuh"
#include "tally/transform_reduce.cuh"

#include <cuda/std/tuple>
#include <thrust/iterator/zip_iterator.h>

#include <cstddef>
#include <utility>

namespace tally {

// A structure of arrays as one iterator of tuples: thrust::make_zip_iterator(firsts...).
// Contiguous ranges (pointers, device_ptr, device_vector iterators) of equal element size
// are read 16 bytes at a time each.
template <class... Its>
auto zip(Its... firsts) {
  static_assert(sizeof...(Its) > 0, "tally::zip needs at least one range");
  return thrust::make_zip_iterator(firsts...);
}

// op_i applied to field i: the operator tally::fields(op0, op1, ...) returns.
template <class... Ops>
struct fields_op {
  // Fieldwise, so as commutative as its least commutative field operator.
  static constexpr bool commutative = (is_commutative_v<Ops> && ...);
  // Every field an exact sum (tally::exact_plus): the host backend sums each field exactly
  // (docs/exact.md); a mix of exact and other fields is not taken yet.
  static constexpr bool exact_fields = (detail::is_exact_plus_v<Ops> && ...);
  mutable cuda::std::tuple<Ops...> ops;  // an operator() need not be const (as in Thrust)

  // An op may be host-only under a host policy; the device instantiation is then never used.
#pragma nv_exec_check_disable
  template <class T>
  __host__ __device__ constexpr T operator()(const T& a, const T& b) const {
    static_assert(detail::is_tuple_like_v<T>,
                  "tally::fields: the values must be tuple-like (cuda::std::tuple, a CUDA vector type, or a "
                  "struct with tally::field_members)");
    static_assert(detail::field_count_v<T> == sizeof...(Ops), "tally::fields: one operator per field");
    return detail::apply_fieldwise(a, b, ops, std::index_sequence_for<Ops...>{});
  }
};

// Callable in device code too, to build the operator inside a kernel.
template <class... Ops>
__host__ __device__ constexpr fields_op<Ops...> fields(Ops... ops) {
  return fields_op<Ops...>{cuda::std::tuple<Ops...>(ops...)};
}

// The number of fields of a tuple-like type.
template <class T>
inline constexpr std::size_t field_count_v = detail::field_count_v<T>;

// Field I of a tuple-like value (tuple, vector type or struct with tally::field_members).
template <std::size_t I, class T>
__host__ __device__ constexpr decltype(auto) get_field(T& value) {
  return detail::field<I>(value);
}

}  // namespace tally
