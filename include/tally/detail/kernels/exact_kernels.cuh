#pragma once
// The device's exact sums (tally::exact_plus; docs/exact.md), one launch. Every block adds its
// grid-stride share of the input exactly into a fixed-point integer of base-2^32 digits whose
// unit is T's smallest subnormal (exact_sum.cuh), adds that integer's nonzero digits into the
// call's accumulator in the control block with integer atomics, and the last block to finish
// adds init, rounds once, publishes and leaves the accumulator zero again. Every addition is an
// integer addition or an exact floating-point one, so no order, grid or split can change the
// result: no plan is needed.
//
// How a thread adds its elements depends on T:
//  - float: into 32 double-precision bins, one per 8 binades of the float's exponent. A float
//    of bin b is a whole multiple of the bin's unit 2^(8b - 150) below 2^31 units, so up to
//    2^22 of them (and any partial sums of those) stay below 2^53 units: every double addition
//    is exact. A block adds its threads' bins together and into its digits after at most 2^22
//    elements (a round), and the bins start again. Per element: a shift, a mask, a conversion
//    and one double addition in shared memory.
//  - double: into the thread's own digits in shared memory, each term split into two pieces
//    (its low 32 bits into one digit, the rest, below 2^52, into the next), the digits it
//    touched brought back to [-2^31, 2^31) every 1024 additions (a round).
//
// Under reduce_into(policy, first, last, exact_accumulator*) the last block adds the call's
// digits to the accumulator instead of rounding.

#include "tally/detail/exact_sum.cuh"
#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/kernels/publish_result.cuh"
#include "tally/detail/scratch_layout.cuh"

#include <cuda/atomic>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tally::detail {

// Threads per block of the exact sums: a float thread's bins take 256 bytes of shared memory, a
// double thread's digits 544.
template <class T>
inline constexpr unsigned exact_block_threads = sizeof(T) == 4 ? 128u : 64u;

// 16-byte vectors a thread has in flight while it adds the previous ones.
inline constexpr unsigned exact_vectors_in_flight = 4;

// ---- float: binned double accumulators ---------------------------------------------------------
inline constexpr unsigned exact_bins = 32;
inline constexpr unsigned exact_bin_of_bits_shift = 26;  // bits >> 26, masked: the biased exponent / 8
inline constexpr std::uint64_t exact_bin_capacity = std::uint64_t(1) << 22;  // terms a bin adds exactly

// float -> double without flushing a subnormal to zero, whatever -ftz the program is built with.
__device__ __forceinline__ double widen_without_flush(float x) {
  double wide;
  asm("cvt.f64.f32 %0, %1;" : "=d"(wide) : "f"(x));
  return wide;
}

// ---- double: per-thread digits -----------------------------------------------------------------
inline constexpr unsigned exact_digit_round = 1024;  // additions between two balancings of the digits

// Adds a finite or special term to digits (digit k at digits[k * stride]): the low 32 bits of
// its placed significand to one digit, the rest (below 2^52) to the next. The digits it touches
// widen [lowest, highest].
template <class T>
__device__ __forceinline__ void exact_add_two_pieces(T x, std::int64_t* digits, unsigned stride, unsigned& flags,
                                                     unsigned& lowest, unsigned& highest) {
  const exact_term term = decode_exact_term(x);
  if (term.special != 0) {
    flags |= term.special;
    return;
  }
  if (term.nonzero_sign) flags |= exact_nonzero_sign;
  const unsigned word = term.position / 32, shift = term.position % 32;
  const std::int64_t low = std::int64_t(std::uint32_t(term.significand) << shift);
  const std::int64_t high = std::int64_t(term.significand >> (32 - shift));
  std::int64_t* d = digits + std::size_t(word) * stride;
  d[0] += term.negative ? -low : low;
  d[stride] += term.negative ? -high : high;
  lowest = word < lowest ? word : lowest;
  highest = word + 1 > highest ? word + 1 : highest;
}

// The same for a double, the hot loop of the double sums: the special values leave the loop,
// and the -0 test is an OR of bits (sign_test stays 0 while every term is -0). top_word is the
// highest word a term's low piece went to.
__device__ __forceinline__ void exact_add_double(double x, std::int64_t* digits, unsigned stride, unsigned& flags,
                                                 unsigned& sign_test, unsigned& lowest, unsigned& top_word) {
  const unsigned hi = unsigned(__double2hiint(x)), lo = unsigned(__double2loint(x));
  const unsigned exponent = (hi >> 20) & 0x7FFu;
  if (exponent == 0x7FFu) {
    flags |= ((hi & 0xFFFFFu) | lo) != 0 ? exact_nan : (hi >> 31) != 0 ? exact_minus_infinity : exact_plus_infinity;
    return;
  }
  sign_test |= (hi ^ 0x80000000u) | lo;
  const std::uint64_t fraction = (std::uint64_t(hi & 0xFFFFFu) << 32) | lo;
  const std::uint64_t significand = exponent == 0 ? fraction : fraction | (std::uint64_t(1) << 52);
  const unsigned position = exponent == 0 ? 0u : exponent - 1u;
  const unsigned word = position / 32, shift = position % 32;
  const std::int64_t low = std::int64_t(lo << shift);  // the low 32 bits of significand << shift
  const std::int64_t high = std::int64_t(significand >> (32 - shift));
  const bool negative = (hi >> 31) != 0;
  std::int64_t* d = digits + std::size_t(word) * stride;
  d[0] += negative ? -low : low;
  d[stride] += negative ? -high : high;
  lowest = word < lowest ? word : lowest;
  top_word = word > top_word ? word : top_word;
}

// balance_exact_digits over the digits a thread may hold, [lowest, highest]: below them all are
// 0, and above them a carry stops at the first digit it leaves 0. highest grows with the carry.
__device__ __forceinline__ void balance_touched_digits(std::int64_t* d, int count, unsigned stride, unsigned lowest,
                                                       unsigned& highest) {
  unsigned k = lowest;
  for (; k + 1 < unsigned(count); ++k) {
    const std::int64_t carry = (d[k * stride] + (std::int64_t(1) << 31)) >> 32;
    d[k * stride] -= carry * (std::int64_t(1) << 32);
    d[(k + 1) * stride] += carry;
    if (k >= highest && carry == 0) break;
  }
  highest = k > highest ? k : highest;
}

// The call's accumulator in the control block (scratch_layout.cuh, control_word): the digits,
// the special values' flags and the count of blocks done; zero before the launch and after it.
struct exact_control {
  unsigned int* words;
  __device__ unsigned long long* digits() const {
    return reinterpret_cast<unsigned long long*>(reinterpret_cast<char*>(words) + control_word::exact_digits_byte);
  }
};

// Adds a block's digit (two's complement) to the call's accumulator; 0 adds nothing.
__device__ __forceinline__ void add_to_call(const exact_control& control, int k, std::int64_t digit) {
  if (digit != 0) atomicAdd(control.digits() + k, static_cast<unsigned long long>(digit));
}

// Adds v, a double that is a whole multiple of float's smallest subnormal (a bin's total), to
// a block's float digits with shared-memory atomics.
__device__ __forceinline__ void add_bin_total(double v, unsigned long long* digits) {
  const std::uint64_t bits = static_cast<std::uint64_t>(__double_as_longlong(v));
  const unsigned exponent = unsigned(bits >> 52) & 0x7FFu;  // at least 1: |v| >= 2^-149
  std::uint64_t significand = (bits & ((std::uint64_t(1) << 52) - 1)) | (std::uint64_t(1) << 52);
  // v = significand * 2^(exponent - 1075), and float's unit is 2^-149.
  int position = int(exponent) - 1075 + 149;
  if (position < 0) {  // the bits shifted out are zero: v is a whole number of units
    significand >>= unsigned(-position);
    position = 0;
  }
  const unsigned word = unsigned(position) / 32, shift = unsigned(position) % 32;
  const std::uint64_t placed_low = significand << shift;
  const std::uint64_t pieces[3] = {placed_low & 0xFFFFFFFFu, placed_low >> 32,
                                   shift == 0 ? 0 : significand >> (64 - shift)};
  const bool negative = (bits >> 63) != 0;
#pragma unroll
  for (unsigned k = 0; k < 3; ++k)
    if (pieces[k] != 0) atomicAdd(digits + word + k, negative ? 0ull - pieces[k] : pieces[k]);
}

// Calls add(x) for the block's grid-stride share of [first, first + n) and end_round() after
// every `round_terms` terms a thread adds at most (and once at the end); every thread of the
// block calls end_round() the same number of times, at least once. A pointer to T is read 16
// bytes at a time from its first aligned element, exact_vectors_in_flight vectors loaded
// ahead; vectors past the end read as -0, which adds nothing to an exact sum.
template <class T, unsigned Threads, class It, class Add, class EndRound>
__device__ __forceinline__ void exact_visit(It first, std::uint64_t n, std::uint64_t round_terms, Add&& add,
                                            EndRound&& end_round) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * Threads;
  const std::uint64_t i = std::uint64_t(blockIdx.x) * Threads + threadIdx.x;
  if constexpr (std::is_same_v<It, const T*>) {
    constexpr unsigned per_vector = 16 / sizeof(T);
    constexpr unsigned batch = exact_vectors_in_flight;
    using vector_t = std::conditional_t<sizeof(T) == 4, float4, double2>;
    const std::uint64_t misalignment = (reinterpret_cast<std::uintptr_t>(first) % 16) / sizeof(T);
    const std::uint64_t unaligned = misalignment == 0 ? 0 : per_vector - misalignment;
    const std::uint64_t head = unaligned < n ? unaligned : n;
    const std::uint64_t body = (n - head) / per_vector;
    const std::uint64_t rest_begin = head + body * per_vector;
    // One element at most of each end a thread, counted in the first round.
    if (i < head) add(first[i]);
    if (rest_begin + i < n) add(first[rest_begin + i]);
    const vector_t* vectors = reinterpret_cast<const vector_t*>(first + head);
    const T negative_zero = -T(0);
    vector_t padding;
    std::memcpy(&padding.x, &negative_zero, sizeof(T));
    padding.y = padding.x;
    if constexpr (sizeof(T) == 4) {
      padding.z = padding.x;
      padding.w = padding.x;
    }
    const auto load = [&](vector_t (&into)[batch], std::uint64_t step) {
#pragma unroll
      for (unsigned u = 0; u < batch; ++u) {
        const std::uint64_t v = i + (step * batch + u) * stride;
        into[u] = v < body ? vectors[v] : padding;
      }
    };
    const auto add_all = [&](const vector_t (&loaded)[batch]) {
#pragma unroll
      for (unsigned u = 0; u < batch; ++u) {
        T elements[per_vector];
        std::memcpy(elements, &loaded[u], sizeof(vector_t));
#pragma unroll
        for (unsigned e = 0; e < per_vector; ++e) add(elements[e]);
      }
    };
    // Steps of `batch` vectors a thread; the same count for every thread of the grid.
    const std::uint64_t steps = (body + stride * batch - 1) / (stride * batch);
    const std::uint64_t steps_per_round = (round_terms - 2) / (batch * per_vector);
    std::uint64_t step = 0;
    do {
      const std::uint64_t round_end = steps - step < steps_per_round ? steps : step + steps_per_round;
      if (step < round_end) {
        vector_t current[batch];
        load(current, step);
        for (; step + 1 < round_end; ++step) {
          vector_t next[batch];
          load(next, step + 1);
          add_all(current);
#pragma unroll
          for (unsigned u = 0; u < batch; ++u) current[u] = next[u];
        }
        add_all(current);
        ++step;
      }
      end_round();
    } while (step < steps);
  } else {
    const std::uint64_t steps = (n + stride - 1) / stride;
    std::uint64_t step = 0;
    do {
      const std::uint64_t round_end = steps - step < round_terms ? steps : step + round_terms;
      for (; step < round_end; ++step) {
        const std::uint64_t k = i + step * stride;
        if (k < n) add(static_cast<T>(first[k]));
      }
      end_round();
    } while (step < steps);
  }
}

// The sum of v over the warp, in lane 0.
__device__ __forceinline__ std::int64_t warp_sum_int64(std::int64_t v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xFFFFFFFFu, v, offset);
  return v;
}

// The float sum of a block: bins, merged into the block's digits every round; then the digits
// into the call's accumulator.
template <class It>
__device__ __forceinline__ void exact_float_block(It first, std::uint64_t n, const exact_control& control,
                                                  unsigned& flags) {
  constexpr unsigned threads = exact_block_threads<float>;
  constexpr unsigned warps = threads / 32;
  constexpr int count = exact_format<float>::digits;
  __shared__ double bins[exact_bins * threads];  // bin b of thread t at bins[b * threads + t]
  __shared__ double warp_totals[warps][exact_bins];
  __shared__ unsigned long long block_digits[count];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double* mine = bins + threadIdx.x;
  // -0 is the exact sum of no terms: a bin that adds only -0 stays -0, and any other term
  // (x + -x included) leaves it something else.
#pragma unroll
  for (unsigned b = 0; b < exact_bins; ++b) mine[b * threads] = -0.0;
  if (threadIdx.x < unsigned(count)) block_digits[threadIdx.x] = 0;
  const auto add = [&](float x) {
    const unsigned bin = (__float_as_uint(x) >> exact_bin_of_bits_shift) & (exact_bins - 1);
    mine[bin * threads] += widen_without_flush(x);
  };
  unsigned rounds_done = 0;
  const auto end_round = [&]() {
    __syncthreads();
    // Lane l of warp w: bin l over the threads of warp w, each lane starting at its own
    // thread so that the 32 lanes read 32 different banks.
    double sum = -0.0;
#pragma unroll 8
    for (unsigned j = 0; j < 32; ++j) sum += bins[lane * threads + warp * 32 + ((j + lane) & 31)];
    warp_totals[warp][lane] = sum;
    __syncthreads();
#pragma unroll
    for (unsigned b = 0; b < exact_bins; ++b) mine[b * threads] = -0.0;
    if (warp == 0) {
      double total = warp_totals[0][lane];
#pragma unroll
      for (unsigned w = 1; w < warps; ++w) total += warp_totals[w][lane];
      const std::uint64_t bits = static_cast<std::uint64_t>(__double_as_longlong(total));
      // Each round adds below 2^39 to a digit (32 bins, three pieces each below 2^32): the
      // digits are balanced before a second round adds to them, not after the only one.
      if (rounds_done != 0) {
        if (lane == 0) balance_exact_digits(reinterpret_cast<std::int64_t*>(block_digits), count);
        __syncwarp();
      }
      if (((bits >> 52) & 0x7FFu) == 0x7FFu) {  // an infinity or NaN among the bin's terms
        flags |= (bits & ((std::uint64_t(1) << 52) - 1)) != 0 ? exact_nan
                 : (bits >> 63) != 0                          ? exact_minus_infinity
                                                              : exact_plus_infinity;
      } else {
        if (bits != (std::uint64_t(1) << 63)) flags |= exact_nonzero_sign;
        if (total != 0.0) add_bin_total(total, block_digits);
      }
      __syncwarp();
    }
    ++rounds_done;
  };
  exact_visit<float, threads>(first, n, exact_bin_capacity / threads, add, end_round);
  if (warp == 0 && lane < unsigned(count))
    add_to_call(control, int(lane), static_cast<std::int64_t>(block_digits[lane]));
}

// The double sum of a block: each thread's digits, balanced every round; then the digits over
// the threads into the call's accumulator. Only the digits some term touched are balanced and
// added: inputs of a few binades touch a few of the 68.
template <class It>
__device__ __forceinline__ void exact_double_block(It first, std::uint64_t n, const exact_control& control,
                                                   unsigned& flags) {
  constexpr unsigned threads = exact_block_threads<double>;
  constexpr unsigned warps = threads / 32;
  constexpr int count = exact_format<double>::digits;
  __shared__ std::int64_t digits[count * threads];  // digit k of thread t at digits[k * threads + t]
  __shared__ unsigned block_lowest, block_highest;
  std::int64_t* mine = digits + threadIdx.x;
#pragma unroll 4
  for (int k = 0; k < count; ++k) mine[k * threads] = 0;
  if (threadIdx.x == 0) {
    block_lowest = unsigned(count);
    block_highest = 0;
  }
  unsigned lowest = unsigned(count), highest = 0, top_word = 0, sign_test = 0;
  const auto add = [&](double x) { exact_add_double(x, mine, threads, flags, sign_test, lowest, top_word); };
  const auto end_round = [&]() {
    highest = top_word + 1 > highest ? top_word + 1 : highest;
    if (lowest < highest) balance_touched_digits(mine, count, threads, lowest, highest);
  };
  exact_visit<double, threads>(first, n, exact_digit_round, add, end_round);
  if (sign_test != 0) flags |= exact_nonzero_sign;
  __syncthreads();
  if (lowest < highest) {
    atomicMin(&block_lowest, lowest);
    atomicMax(&block_highest, highest);
  }
  __syncthreads();
  // Digit k of the block (below 2^37 in magnitude): warp w adds digits k = w, w + warps, ...
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned from = block_lowest, to = block_highest;
  for (unsigned k = from + warp; k <= to && k < unsigned(count); k += warps) {
    std::int64_t sum = 0;
#pragma unroll
    for (unsigned t = lane; t < threads; t += 32) sum += digits[k * threads + t];
    sum = warp_sum_int64(sum);
    if (lane == 0) add_to_call(control, int(k), sum);
  }
}

// The exact sum of init and [first, first + n), written to *out or handed to the host; or, where
// Out is exact_accumulator<T>, the sum of [first, first + n) added to *out (init unused).
template <class T, class It, class Out>
__global__ void __launch_bounds__(exact_block_threads<T>)
    exact_sum_kernel(It first, std::uint64_t n, T init, exact_control control, Out* out, host_handoff* handoff) {
  wait_for_prior_grid();
  constexpr int count = exact_format<T>::digits;
  unsigned flags = 0;
  if constexpr (sizeof(T) == 4) {
    exact_float_block(first, n, control, flags);
  } else {
    exact_double_block(first, n, control, flags);
  }
  // The block's special values, then its arrival: the last block finishes the call.
  __shared__ bool last;
  unsigned block_flags = 0;
#pragma unroll
  for (unsigned flag : {exact_nan, exact_plus_infinity, exact_minus_infinity, exact_nonzero_sign})
    if (__syncthreads_or(flags & flag) != 0) block_flags |= flag;
  if (threadIdx.x == 0) {
    if (block_flags != 0) atomicOr(&control.words[control_word::exact_flags], block_flags);
    // Release: the block's additions (ordered before this thread's by the barrier) are
    // visible to the block that counts last, which acquires.
    last = cuda::atomic_ref<unsigned, cuda::thread_scope_device>(control.words[control_word::exact_blocks_done])
               .fetch_add(1u, cuda::std::memory_order_acq_rel) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  // The call's digits, taken and left 0 by the block's threads, one digit each; thread 0 then
  // adds init and rounds over the digits between the lowest and the highest nonzero one.
  __shared__ std::int64_t total[count];
  __shared__ int nonzero_lowest, nonzero_highest;
  __shared__ unsigned call_flags;
  unsigned init_lowest = unsigned(count), init_highest = 0, init_flags = 0;
  if (threadIdx.x == 0) {
    nonzero_lowest = count;
    nonzero_highest = -1;
  }
  __syncthreads();
  if (threadIdx.x == blockDim.x - 1) {
    call_flags = cuda::atomic_ref<unsigned, cuda::thread_scope_device>(control.words[control_word::exact_flags])
                     .load(cuda::std::memory_order_relaxed);
    control.words[control_word::exact_flags] = 0;
    control.words[control_word::exact_blocks_done] = 0;
  }
  for (unsigned k = threadIdx.x; k < unsigned(count); k += blockDim.x) {
    unsigned long long& word = control.digits()[k];
    total[k] = static_cast<std::int64_t>(
        cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(word).load(cuda::std::memory_order_relaxed));
    word = 0;
    if (total[k] != 0) {
      atomicMin(&nonzero_lowest, int(k));
      atomicMax(&nonzero_highest, int(k));
    }
  }
  __syncthreads();
  if constexpr (std::is_same_v<Out, exact_accumulator<T>>) {
    // reduce_into an accumulator: its digits plus the call's, normalized, and its special values.
    using access = exact_accumulator_access<T>;
    std::int64_t* held = access::digits(*out);
    for (unsigned k = threadIdx.x; k < unsigned(count); k += blockDim.x) total[k] += held[k];  // below 2^63
    __syncthreads();
    if (threadIdx.x == 0) {
      normalize_exact_digits(total, count);
      const unsigned all = call_flags;
      access::after_device_addition(*out, (all & exact_nan) != 0, (all & exact_plus_infinity) != 0,
                                    (all & exact_minus_infinity) != 0, (all & exact_nonzero_sign) != 0);
    }
    __syncthreads();
    for (unsigned k = threadIdx.x; k < unsigned(count); k += blockDim.x) held[k] = total[k];
    (void)init;
    (void)handoff;
  } else if (threadIdx.x == 0) {
    unsigned all = call_flags;
    exact_add_two_pieces<T>(init, total, 1, init_flags, init_lowest, init_highest);
    all |= init_flags;
    int from = nonzero_lowest, highest = nonzero_highest;
    if (init_lowest <= init_highest) {
      from = int(init_lowest) < from ? int(init_lowest) : from;
      highest = int(init_highest) > highest ? int(init_highest) : highest;
    }
    const int end = highest + 3 < count ? highest + 3 : count;  // room for the carries and the sign
    exact_specials specials;
    specials.nan = (all & exact_nan) != 0;
    specials.plus_infinity = (all & exact_plus_infinity) != 0;
    specials.minus_infinity = (all & exact_minus_infinity) != 0;
    specials.only_negative_zeros = (all & exact_nonzero_sign) == 0;
    publish(out, static_cast<Out>(round_exact_sum<T>(total, specials, from, end)), handoff);
  }
}

}  // namespace tally::detail
