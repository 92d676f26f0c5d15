#pragma once
// Function objects for reductions. Each works on host and device; the void specialization
// is transparent (deduces its argument types), like std::plus<>.
//
// On a tuple-like type (cuda::std::tuple / thrust::tuple, a CUDA vector type such as float3,
// a struct with tally::field_members; see docs/fields.md) every operator here works field
// by field: tally::minimum<float3> is the componentwise minimum, not a lexicographic one.

#include "tally/detail/tuple_like.cuh"

namespace tally {

// Defines name<T> and the transparent name<void> from a binary expression on (a, b); both
// recurse field by field into tuple-like arguments.
#define TALLY_DEFINE_BINARY_OP(name, expression)                                                   \
  template <class T = void>                                                                       \
  struct name;                                                                                    \
  template <>                                                                                     \
  struct name<void> {                                                                             \
    template <class A, class B, std::enable_if_t<!detail::is_tuple_like_v<A>, int> = 0>           \
    __host__ __device__ constexpr auto operator()(const A& a, const B& b) const -> decltype(expression) { \
      return expression;                                                                          \
    }                                                                                             \
    template <class A, std::enable_if_t<detail::is_tuple_like_v<A>, int> = 0>                      \
    __host__ __device__ constexpr A operator()(const A& a, const A& b) const {                    \
      return detail::every_field(a, b, *this);                                                    \
    }                                                                                             \
  };                                                                                              \
  template <class T>                                                                              \
  struct name {                                                                                   \
    __host__ __device__ constexpr T operator()(const T& a, const T& b) const {                    \
      if constexpr (detail::is_tuple_like_v<T>) {                                                 \
        return detail::every_field(a, b, name<void>{});                                           \
      } else {                                                                                    \
        return expression;                                                                        \
      }                                                                                           \
    }                                                                                             \
  };

TALLY_DEFINE_BINARY_OP(plus, a + b)
TALLY_DEFINE_BINARY_OP(minimum, b < a ? b : a)
TALLY_DEFINE_BINARY_OP(maximum, a < b ? b : a)
TALLY_DEFINE_BINARY_OP(multiplies, a * b)
// Bitwise operators, for integer reductions (and the atomic strategies' exact integer ops).
TALLY_DEFINE_BINARY_OP(bit_and, a & b)
TALLY_DEFINE_BINARY_OP(bit_or, a | b)
TALLY_DEFINE_BINARY_OP(bit_xor, a ^ b)
#undef TALLY_DEFINE_BINARY_OP

}  // namespace tally
