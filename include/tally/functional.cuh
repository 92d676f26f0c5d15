#pragma once
// Function objects for reductions. Each works on host and device; the void specialization
// is transparent (deduces its argument types), like std::plus<>.
//
// On a tuple-like type (cuda::std::tuple / thrust::tuple, a CUDA vector type such as float3,
// a struct with tally::field_members; see docs/fields.md) every operator here works field
// by field: tally::minimum<float3> is the componentwise minimum, not a lexicographic one.

#include "tally/detail/tuple_like.cuh"
#include "tally/operator_traits.cuh"

#include <type_traits>

namespace tally {
namespace detail {

// Signed integer + and * in the unsigned type of the same width: the result wraps in two's
// complement, as on the device and as Thrust's reductions do, where the signed operation
// would overflow into undefined behaviour on the host (also for narrow unsigned operands,
// which promote to int: 65535 * 65535 overflows int).
template <class R>
using wrapping_t = std::make_unsigned_t<R>;

// float and double + and * that the device compiler may not fuse with a neighbouring
// multiply or add: an FMA rounds once where the host rounds twice, so a transform such as
// x * x folded by a contracted plus would give the device other bits than the host
// (docs/determinism.md). The explicitly rounded intrinsics cost the same as the plain ops.
template <class A, class B>
__host__ __device__ constexpr auto add_rounded(const A& a, const B& b) -> decltype(a + b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<A, float> && std::is_same_v<B, float>) {
    return __fadd_rn(a, b);
  } else if constexpr (std::is_same_v<A, double> && std::is_same_v<B, double>) {
    return __dadd_rn(a, b);
  }
#endif
  if constexpr (std::is_integral_v<decltype(a + b)> && std::is_signed_v<decltype(a + b)>) {
    using R = decltype(a + b);
    return static_cast<R>(static_cast<wrapping_t<R>>(a) + static_cast<wrapping_t<R>>(b));
  } else {
    return a + b;
  }
}

template <class A, class B>
__host__ __device__ constexpr auto multiply_rounded(const A& a, const B& b) -> decltype(a * b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<A, float> && std::is_same_v<B, float>) {
    return __fmul_rn(a, b);
  } else if constexpr (std::is_same_v<A, double> && std::is_same_v<B, double>) {
    return __dmul_rn(a, b);
  }
#endif
  if constexpr (std::is_integral_v<decltype(a * b)> && std::is_signed_v<decltype(a * b)>) {
    using R = decltype(a * b);
    return static_cast<R>(static_cast<wrapping_t<R>>(a) * static_cast<wrapping_t<R>>(b));
  } else {
    return a * b;
  }
}

}  // namespace detail

// Defines name<T> and the transparent name<void> from a binary expression on (a, b); both
// recurse field by field into tuple-like arguments. Every operator here is commutative, so
// reductions by it take the fastest plan (operator_traits.cuh).
#define TALLY_DEFINE_BINARY_OP(name, expression)                                                   \
  template <class T = void>                                                                       \
  struct name;                                                                                    \
  template <>                                                                                     \
  struct name<void> {                                                                             \
    static constexpr bool commutative = true;                                                     \
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
    static constexpr bool commutative = true;                                                     \
    __host__ __device__ constexpr T operator()(const T& a, const T& b) const {                    \
      if constexpr (detail::is_tuple_like_v<T>) {                                                 \
        return detail::every_field(a, b, name<void>{});                                           \
      } else {                                                                                    \
        return expression;                                                                        \
      }                                                                                           \
    }                                                                                             \
  };

TALLY_DEFINE_BINARY_OP(plus, detail::add_rounded(a, b))
TALLY_DEFINE_BINARY_OP(minimum, b < a ? b : a)
TALLY_DEFINE_BINARY_OP(maximum, a < b ? b : a)
TALLY_DEFINE_BINARY_OP(multiplies, detail::multiply_rounded(a, b))
// Bitwise operators, for integer reductions (and the atomic strategies' exact integer ops).
TALLY_DEFINE_BINARY_OP(bit_and, a & b)
TALLY_DEFINE_BINARY_OP(bit_or, a | b)
TALLY_DEFINE_BINARY_OP(bit_xor, a ^ b)
// Logical operators: the result is a bool (or, fieldwise, the field's type).
TALLY_DEFINE_BINARY_OP(logical_and, a && b)
TALLY_DEFINE_BINARY_OP(logical_or, a || b)
#undef TALLY_DEFINE_BINARY_OP

}  // namespace tally
