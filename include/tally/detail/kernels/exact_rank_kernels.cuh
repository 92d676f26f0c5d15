#pragma once
// The kernels of an exact sum over the ranks of an NCCL communicator (dispatch/
// distributed_exact_dispatch.cuh). Each rank sums its shard exactly into an accumulator in its
// scratch, and packs it as words that NCCL can add: the accumulator's digits, which integer
// addition over any number of ranks below 2^31 keeps exact, and a count of the ranks that met
// each special value. Every rank then adds init to the same words and rounds them once.

#include "tally/detail/exact_sum.cuh"
#include "tally/detail/kernels/exact_kernels.cuh"
#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/kernels/publish_result.cuh"

#include <cstdint>

namespace tally::detail {

// The words a rank contributes: the digits, then its counts of NaN, +inf, -inf, and of terms
// that were not -0 (each 0 or 1).
template <class T>
inline constexpr int exact_rank_words = exact_format<T>::digits + 4;

// Starts the rank's accumulator empty.
template <class T>
__global__ void exact_rank_begin_kernel(exact_accumulator<T>* accumulator) {
  wait_for_prior_grid();
  if (threadIdx.x == 0) *accumulator = exact_accumulator<T>{};
}

// Packs the accumulator, whose digits the device left normalized, into the rank's words.
template <class T>
__global__ void exact_rank_pack_kernel(exact_accumulator<T>* accumulator, std::int64_t* words) {
  wait_for_prior_grid();
  constexpr int count = exact_format<T>::digits;
  std::int64_t* digits = exact_accumulator_access<T>::digits(*accumulator);
  for (int k = int(threadIdx.x); k < count; k += int(blockDim.x)) words[k] = digits[k];
  if (threadIdx.x == 0) {
    const exact_specials specials = exact_accumulator_access<T>::specials(*accumulator);
    words[count] = specials.nan;
    words[count + 1] = specials.plus_infinity;
    words[count + 2] = specials.minus_infinity;
    words[count + 3] = !specials.only_negative_zeros;
  }
}

// Adds init to the words all ranks summed and rounds once: into *out, or handed to the host.
// Launched in order behind the all-reduce (launch_kernel_in_order): no wait_for_prior_grid.
template <class T>
__global__ void exact_ranks_finish_kernel(std::int64_t* words, T init, T* out, host_handoff* handoff) {
  if (threadIdx.x != 0) return;
  constexpr int count = exact_format<T>::digits;
  unsigned flags = 0, lowest = unsigned(count), highest = 0;
  exact_add_two_pieces<T>(init, words, 1, flags, lowest, highest);
  exact_specials specials;
  specials.nan = words[count] != 0 || (flags & exact_nan) != 0;
  specials.plus_infinity = words[count + 1] != 0 || (flags & exact_plus_infinity) != 0;
  specials.minus_infinity = words[count + 2] != 0 || (flags & exact_minus_infinity) != 0;
  specials.only_negative_zeros = words[count + 3] == 0 && (flags & exact_nonzero_sign) == 0;
  publish(out, round_exact_sum<T>(words, specials, 0, count), handoff);
}

}  // namespace tally::detail
