#pragma once
// Exact sums of fields (tally::fields of exact_plus operators only; docs/exact.md): what both
// backends check of the operators and the values, and the value each field's sum takes from an
// element. The host adds every field of an element into its own accumulator in one pass; the
// device runs one exact sum a field.

#include "tally/detail/exact_sum.cuh"
#include "tally/detail/tuple_like.cuh"

#include <cuda/std/tuple>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace tally::detail {

template <class Acc, class V, std::size_t... I>
constexpr bool fields_convert_exactly(std::index_sequence<I...>) {
  if constexpr (is_tuple_like_v<V> && field_count_v<V> == sizeof...(I)) {
    return (converts_exactly<field_t<I, V>, field_t<I, Acc>>() && ...);
  } else {
    return false;
  }
}

// Whether field operator I is exact_plus of field I's type, for every field.
template <class Op, class Acc, std::size_t... I>
constexpr bool field_operators_match(std::index_sequence<I...>) {
  using ops_t = std::remove_cv_t<decltype(std::declval<Op&>().ops)>;
  if constexpr (cuda::std::tuple_size<ops_t>::value == sizeof...(I)) {
    return (std::is_same_v<typename cuda::std::tuple_element_t<I, ops_t>::accumulator_type::value_type,
                           field_t<I, Acc>> &&
            ...);
  } else {
    return false;
  }
}

// Refuses, at compile time, exact fields whose operators or values do not fit init's fields.
template <class Op, class Acc, class V>
constexpr bool check_exact_fields() {
  constexpr auto fields = std::make_index_sequence<field_count_v<Acc>>{};
  static_assert(field_operators_match<Op, Acc>(fields),
                "tally::fields of tally::exact_plus: field i of init must be exact_plus's T of operator i, one "
                "operator per field");
  static_assert(fields_convert_exactly<Acc, std::remove_cv_t<V>>(fields),
                "tally::fields of tally::exact_plus: each field of the values must convert exactly to the same field "
                "of init (T itself; float, half or bf16 into double; half or bf16 into float)");
  return field_operators_match<Op, Acc>(fields) && fields_convert_exactly<Acc, std::remove_cv_t<V>>(fields);
}

// Field I of an element, converted as init's field I: the term that element gives field I's sum.
template <std::size_t I, class Acc>
struct exact_field_of {
  template <class V>
  __host__ __device__ field_t<I, Acc> operator()(const V& element) const {
    Acc value = static_cast<Acc>(element);
    return field<I>(value);
  }
};

}  // namespace tally::detail
