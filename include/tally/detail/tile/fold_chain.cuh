#pragma once
// Cuts a thread's long unrolled fold of a user's integer operator into short chains, for the
// compiler's sake alone.
//
// nvcc's device optimizer takes time exponential in the length of an unrolled chain of some
// integer combines: 32 folds of `(a + b) % 10` on unsigned int (one step of a 4-byte type:
// 8 loads of 4 elements) took more than five minutes to compile where 16 took one second,
// and a call of tally::reduce with such an operator took most of an hour (issue 33). An empty
// inline assembly statement that takes the accumulator and gives it back unchanged ends the
// chain the optimizer can see, at no cost at run time: the value stays in its register, and
// the combines still run one after another in the plan's order, as they must.
//
// It applies only to integer accumulators under an operator tally does not know
// (op_kind::other): tally's own operators (+, min, max, the bitwise ones) compile fast and
// keep the code they were tuned with, and floating-point combines are not analysed that way.

#include "tally/detail/op_kind.cuh"

#include <type_traits>

namespace tally::detail {

template <class Acc, class Op>
inline constexpr bool cuts_fold_chains_v = std::is_integral_v<Acc> && !std::is_same_v<Acc, bool> &&
                                           op_kind_v<std::remove_cv_t<Op>> == op_kind::other;

// Leaves value as it is, but opaque to the optimizer from here on (for cuts_fold_chains_v).
template <class Acc, class Op>
__device__ __forceinline__ void end_fold_chain(Acc& value) {
  if constexpr (cuts_fold_chains_v<Acc, Op>) {
    if constexpr (sizeof(Acc) == 8) {
      unsigned long long word = static_cast<unsigned long long>(value);
      asm("" : "+l"(word));
      value = static_cast<Acc>(word);
    } else {
      unsigned int word = static_cast<unsigned int>(value);
      asm("" : "+r"(word));
      value = static_cast<Acc>(word);
    }
  }
}

}  // namespace tally::detail
