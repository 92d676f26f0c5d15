#pragma once
// Function objects for reductions. Each works on host and device; the void specialization
// is transparent (deduces its argument types), like std::plus<>.
//
// On a tuple-like type (cuda::std::tuple / thrust::tuple, a CUDA vector type such as float3,
// a struct with tally::field_members; see docs/fields.md) every operator here works field
// by field: tally::minimum<float3> is the componentwise minimum, not a lexicographic one.

#include "tally/detail/tuple_like.cuh"
#include "tally/operator_traits.cuh"

#include <cuda/std/limits>
#include <cuda/type_traits>

#include <type_traits>
#include <utility>

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

// Which value an operator leaves its other operand unchanged with (tally::identity_of).
enum class identity_kind { zero, one, highest, lowest, all_ones };

template <identity_kind K, class T>
__host__ __device__ constexpr T identity_value();

template <identity_kind K, class T, std::size_t... I>
__host__ __device__ constexpr T identity_fields(std::index_sequence<I...>) {
  T out{};
  ((field<I>(out) = identity_value<K, field_t<I, T>>()), ...);
  return out;
}

template <identity_kind K, class T>
__host__ __device__ constexpr T identity_value() {
  if constexpr (is_tuple_like_v<T>) {
    return identity_fields<K, T>(std::make_index_sequence<field_count_v<T>>{});
  } else {
    // Arithmetic types and CUDA's extended floating-point types (__half, __nv_bfloat16), whose
    // numeric_limits libcu++ provides.
    static_assert(std::is_arithmetic_v<T> || cuda::is_floating_point_v<T>,
                  "tally::identity_of: no identity is known for this type");
    using limits = cuda::std::numeric_limits<T>;
    if constexpr (K == identity_kind::zero) {
      return T(0);
    } else if constexpr (K == identity_kind::one) {
      return T(1);
    } else if constexpr (K == identity_kind::highest) {
      if constexpr (limits::has_infinity) {
        return limits::infinity();
      } else {
        return limits::max();
      }
    } else if constexpr (K == identity_kind::lowest) {
      if constexpr (limits::has_infinity) {
        return -limits::infinity();
      } else {
        return limits::lowest();
      }
    } else {
      static_assert(std::is_integral_v<T>, "tally::identity_of: bit_and has an identity only for integers");
      return static_cast<T>(~T(0));
    }
  }
}

}  // namespace detail

// Defines name<T> and the transparent name<void> from a binary expression on (a, b); both
// recurse field by field into tuple-like arguments. Every operator here is commutative, so
// reductions by it take the fastest plan (operator_traits.cuh).
#define TALLY_DEFINE_BINARY_OP(name, expression, kind)                                                 \
  template <class T = void>                                                                       \
  struct name;                                                                                    \
  template <>                                                                                     \
  struct name<void> {                                                                             \
    static constexpr bool commutative = true;                                                     \
    static constexpr detail::identity_kind identity_kind = detail::identity_kind::kind;           \
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
    static constexpr detail::identity_kind identity_kind = detail::identity_kind::kind;           \
    __host__ __device__ constexpr T operator()(const T& a, const T& b) const {                    \
      if constexpr (detail::is_tuple_like_v<T>) {                                                 \
        return detail::every_field(a, b, name<void>{});                                           \
      } else {                                                                                    \
        return expression;                                                                        \
      }                                                                                           \
    }                                                                                             \
  };

TALLY_DEFINE_BINARY_OP(plus, detail::add_rounded(a, b), zero)
TALLY_DEFINE_BINARY_OP(minimum, b < a ? b : a, highest)
TALLY_DEFINE_BINARY_OP(maximum, a < b ? b : a, lowest)
TALLY_DEFINE_BINARY_OP(multiplies, detail::multiply_rounded(a, b), one)
// Bitwise operators, for integer reductions (and the atomic strategies' exact integer ops).
TALLY_DEFINE_BINARY_OP(bit_and, a & b, all_ones)
TALLY_DEFINE_BINARY_OP(bit_or, a | b, zero)
TALLY_DEFINE_BINARY_OP(bit_xor, a ^ b, zero)
// Logical operators: the result is a bool (or, fieldwise, the field's type).
TALLY_DEFINE_BINARY_OP(logical_and, a && b, one)
TALLY_DEFINE_BINARY_OP(logical_or, a || b, zero)
#undef TALLY_DEFINE_BINARY_OP

// The identity of one of the operators above on T: the value e with op(e, x) == x for every
// x. 0 for plus, bit_or, bit_xor and logical_or; 1 for multiplies and logical_and (true); the
// largest T (+infinity for floating point) for minimum, the lowest (-infinity) for maximum;
// all bits set for bit_and. Field by field for tuple-like T. Usable in constant expressions
// and on the device.
template <class T, class Op>
__host__ __device__ constexpr T identity_of(const Op& = Op{}) {
  return detail::identity_value<Op::identity_kind, T>();
}

}  // namespace tally
