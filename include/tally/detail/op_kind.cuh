#pragma once
// What an operator is, where it is one the hardware knows: +, min, max, &, |, ^ from
// tally::, thrust::, cuda::std:: or std::. The atomic strategies combine with the matching
// atomic, and warps fold 32-bit integers with the matching redux (tally/warp/reduce.cuh).

#include "tally/functional.cuh"

#include <cuda/std/functional>
#include <thrust/functional.h>

#include <functional>
#include <type_traits>

namespace tally::detail {

enum class op_kind { other, sum, min, max, bit_and, bit_or, bit_xor };

// operand: the functor's template argument (void for the transparent ones).
template <class Op>
struct op_kind_of : std::integral_constant<op_kind, op_kind::other> {
  using operand = void;
};
// thrust:: functors are cuda::std:: ones in recent CCCL, so they cover both.
#define TALLY_OP_KIND(templ, kind)                                                \
  template <class T>                                                              \
  struct op_kind_of<templ<T>> : std::integral_constant<op_kind, op_kind::kind> { \
    using operand = T;                                                            \
  };
TALLY_OP_KIND(tally::plus, sum)
TALLY_OP_KIND(thrust::plus, sum)
TALLY_OP_KIND(std::plus, sum)
TALLY_OP_KIND(tally::minimum, min)
TALLY_OP_KIND(thrust::minimum, min)
TALLY_OP_KIND(tally::maximum, max)
TALLY_OP_KIND(thrust::maximum, max)
TALLY_OP_KIND(tally::bit_and, bit_and)
TALLY_OP_KIND(thrust::bit_and, bit_and)
TALLY_OP_KIND(std::bit_and, bit_and)
TALLY_OP_KIND(tally::bit_or, bit_or)
TALLY_OP_KIND(thrust::bit_or, bit_or)
TALLY_OP_KIND(std::bit_or, bit_or)
TALLY_OP_KIND(tally::bit_xor, bit_xor)
TALLY_OP_KIND(thrust::bit_xor, bit_xor)
TALLY_OP_KIND(std::bit_xor, bit_xor)
#undef TALLY_OP_KIND

template <class Op>
inline constexpr op_kind op_kind_v = op_kind_of<std::remove_cv_t<Op>>::value;

// Whether Op computes in Acc itself: a transparent functor, or one of Acc. thrust::plus<float>
// over int accumulators rounds through float, which no integer atomic or redux reproduces.
template <class Acc, class Op>
inline constexpr bool op_computes_in_v =
    std::is_void_v<typename op_kind_of<std::remove_cv_t<Op>>::operand> ||
    std::is_same_v<typename op_kind_of<std::remove_cv_t<Op>>::operand, Acc>;

// Integer operators whose result does not depend on the order of the combines.
template <class Acc, class Op>
inline constexpr bool is_exact_integer_op_v = std::is_integral_v<Acc> && !std::is_same_v<Acc, bool> &&
                                              op_kind_v<Op> != op_kind::other && op_computes_in_v<Acc, Op>;

}  // namespace tally::detail
