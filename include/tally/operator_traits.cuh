#pragma once
// Which operators may be reordered (docs/operators.md).
//
//   tally::is_commutative<Op>, is_commutative_v<Op>
//       true for tally's, Thrust's, libcu++'s and the standard library's plus, multiplies,
//       minimum/maximum, bit_and/or/xor, logical_and/or, for any type with
//       `static constexpr bool commutative = true`, and for what you specialize it for;
//       false for everything else (lambdas, user functors).
//   tally::commutative(op)
//       op, marked commutative: the reduction may combine its operands in any order.
//
// A commutative operator takes the fastest plan (interleaved loads, shuffle-down trees).
// Any other operator takes the order-preserving plan, whose result is the left-to-right fold
// for every associative operator.

#include <cuda/functional>
#include <cuda/std/functional>

#include <functional>
#include <type_traits>
#include <utility>

namespace tally {

template <class Op, class = void>
struct is_commutative : std::false_type {};

// An operator that declares itself: `static constexpr bool commutative = true`.
template <class Op>
struct is_commutative<Op, std::enable_if_t<Op::commutative>> : std::true_type {};

// The standard library's, libcu++'s and (through libcu++: thrust::plus is cuda::std::plus,
// thrust::minimum is cuda::minimum) Thrust's commutative functors, typed and transparent.
#define TALLY_COMMUTATIVE_FUNCTOR(templ) \
  template <class T>                     \
  struct is_commutative<templ<T>, void> : std::true_type {};
TALLY_COMMUTATIVE_FUNCTOR(std::plus)
TALLY_COMMUTATIVE_FUNCTOR(std::multiplies)
TALLY_COMMUTATIVE_FUNCTOR(std::bit_and)
TALLY_COMMUTATIVE_FUNCTOR(std::bit_or)
TALLY_COMMUTATIVE_FUNCTOR(std::bit_xor)
TALLY_COMMUTATIVE_FUNCTOR(std::logical_and)
TALLY_COMMUTATIVE_FUNCTOR(std::logical_or)
TALLY_COMMUTATIVE_FUNCTOR(cuda::std::plus)
TALLY_COMMUTATIVE_FUNCTOR(cuda::std::multiplies)
TALLY_COMMUTATIVE_FUNCTOR(cuda::std::bit_and)
TALLY_COMMUTATIVE_FUNCTOR(cuda::std::bit_or)
TALLY_COMMUTATIVE_FUNCTOR(cuda::std::bit_xor)
TALLY_COMMUTATIVE_FUNCTOR(cuda::std::logical_and)
TALLY_COMMUTATIVE_FUNCTOR(cuda::std::logical_or)
TALLY_COMMUTATIVE_FUNCTOR(cuda::minimum)
TALLY_COMMUTATIVE_FUNCTOR(cuda::maximum)
#undef TALLY_COMMUTATIVE_FUNCTOR

template <class Op>
inline constexpr bool is_commutative_v = is_commutative<std::remove_cv_t<std::remove_reference_t<Op>>>::value;

// An operator marked commutative by tally::commutative(op); calls are forwarded to op.
template <class Op>
struct commutative_op {
  static constexpr bool commutative = true;
  mutable Op op;  // its operator() need not be const (as in Thrust)

  // op may be host-only (a plain lambda) under a host policy; the device instantiation is
  // then never used, so nvcc need not check it.
#pragma nv_exec_check_disable
  template <class A, class B>
  __host__ __device__ constexpr decltype(auto) operator()(A&& a, B&& b) const {
    return op(std::forward<A>(a), std::forward<B>(b));
  }
};

template <class Op>
__host__ __device__ constexpr commutative_op<Op> commutative(Op op) {
  return commutative_op<Op>{op};
}

}  // namespace tally
