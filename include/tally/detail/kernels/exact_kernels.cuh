#pragma once
// The device's exact sums (tally::exact_plus; docs/exact.md). Each thread adds its elements into
// its own fixed-point integer, kept in shared memory as base-2^32 digits whose unit is T's
// smallest subnormal (exact_sum.cuh); a block adds its threads' integers into one partial of the
// scratch; a second launch adds the blocks' partials and init, and rounds once. Every addition is
// an integer addition, so no order, grid or split can change the result: no plan is needed.

#include "tally/detail/exact_sum.cuh"
#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/kernels/publish_result.cuh"
#include "tally/detail/plan.cuh"

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tally::detail {

// Threads per block of the exact sums: a float's digits take 88 bytes a thread in shared
// memory, a double's 544.
template <class T>
inline constexpr unsigned exact_block_threads = sizeof(T) == 4 ? 256u : 64u;

enum exact_flag : unsigned { exact_nan = 1, exact_plus_infinity = 2, exact_minus_infinity = 4, exact_nonzero_sign = 8 };

// One block's sum in the scratch: its digits (each below 2^40 in magnitude) and special values.
template <class T>
struct exact_block_sum {
  std::int64_t digits[exact_format<T>::digits];
  unsigned flags;
};

// Adds x to a thread's digits, digit k at digits[k * stride]. A float's shifted significand
// (at most 55 bits) goes into one digit, which normalization carries later; a double's (at
// most 84 bits) is split into three 32-bit pieces.
template <class T>
__device__ __forceinline__ void exact_add(T x, std::int64_t* digits, unsigned stride, unsigned& flags) {
  using format = exact_format<T>;
  using bits_t = typename format::bits_t;
  constexpr int total_bits = int(sizeof(T) * 8);
  constexpr int fraction_bits = format::precision - 1;
  constexpr bits_t exponent_mask = (bits_t(1) << format::exponent_bits) - 1;
  bits_t bits;
  std::memcpy(&bits, &x, sizeof(T));
  const bool negative = (bits >> (total_bits - 1)) != 0;
  const unsigned exponent = unsigned((bits >> fraction_bits) & exponent_mask);
  const bits_t fraction = bits & ((bits_t(1) << fraction_bits) - 1);
  if (exponent == unsigned(exponent_mask)) {
    flags |= fraction != 0 ? exact_nan : (negative ? exact_minus_infinity : exact_plus_infinity);
    return;
  }
  if (!negative || exponent != 0 || fraction != 0) flags |= exact_nonzero_sign;
  const std::uint64_t significand =
      exponent == 0 ? std::uint64_t(fraction) : std::uint64_t(fraction) | (std::uint64_t(1) << fraction_bits);
  const unsigned position = exponent == 0 ? 0u : exponent - 1u;
  const unsigned word = position / 32, shift = position % 32;
  std::int64_t* d = digits + std::size_t(word) * stride;
  if constexpr (sizeof(T) == 4) {
    const std::int64_t placed = std::int64_t(significand << shift);  // below 2^55
    *d += negative ? -placed : placed;
  } else {
    const std::uint64_t low = significand << shift;  // the placed value's bits 0-63
    const std::int64_t pieces[3] = {std::int64_t(low & 0xFFFFFFFFu), std::int64_t(low >> 32),
                                    shift == 0 ? 0 : std::int64_t(significand >> (64 - shift))};
#pragma unroll
    for (int k = 0; k < 3; ++k) d[k * stride] += negative ? -pieces[k] : pieces[k];
  }
}

// 16-byte loads a thread has in flight: a double's block is small (its digits fill the shared
// memory), so each thread keeps more loads going.
template <class T>
inline constexpr unsigned exact_loads_in_flight = sizeof(T) == 4 ? 2u : 4u;

// Float digits take up to 2^55 an addition: normalized every 128 additions they stay far below
// 2^63. A double's pieces are below 2^32 each: 2^30 additions before a normalization.
template <class T>
inline constexpr unsigned exact_normalize_every = sizeof(T) == 4 ? 128u : (1u << 30);

template <class T>
__device__ __forceinline__ void normalize_strided(std::int64_t* digits, unsigned stride) {
  constexpr int count = exact_format<T>::digits;
  for (int k = 0; k + 1 < count; ++k) {
    const std::int64_t carry = digits[std::size_t(k) * stride] >> 32;
    digits[std::size_t(k) * stride] -= carry * (std::int64_t(1) << 32);
    digits[std::size_t(k + 1) * stride] += carry;
  }
}

// The sum of v over the warp, in lane 0.
__device__ __forceinline__ std::int64_t warp_sum_int64(std::int64_t v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xFFFFFFFFu, v, offset);
  return v;
}

// Blocks add a grid-stride share of [first, first + n) each into exact_block_sum
// blocks[blockIdx.x]. A pointer to T is read 16 bytes at a time from its first aligned element.
template <class T, class It>
__global__ void __launch_bounds__(exact_block_threads<T>)
    exact_sum_blocks_kernel(It first, std::uint64_t n, exact_block_sum<T>* blocks) {
  wait_for_prior_grid();
  constexpr unsigned threads = exact_block_threads<T>;
  constexpr int count = exact_format<T>::digits;
  __shared__ std::int64_t digits[count * threads];
  for (unsigned k = threadIdx.x; k < count * threads; k += threads) digits[k] = 0;
  std::int64_t* mine = digits + threadIdx.x;
  unsigned flags = 0, pending = 0;
  const std::uint64_t stride = std::uint64_t(gridDim.x) * threads;
  const auto add = [&](T x) {
    exact_add<T>(x, mine, threads, flags);
    if (++pending == exact_normalize_every<T>) {
      normalize_strided<T>(mine, threads);
      pending = 0;
    }
  };
  std::uint64_t i = std::uint64_t(blockIdx.x) * threads + threadIdx.x;
  if constexpr (std::is_same_v<It, const T*>) {
    // Whole 16-byte vectors from the first aligned element; the elements before it and after
    // the last whole vector one by one.
    constexpr unsigned per_vector = 16 / sizeof(T);
    const std::uint64_t misalignment = (reinterpret_cast<std::uintptr_t>(first) % 16) / sizeof(T);
    const std::uint64_t unaligned = misalignment == 0 ? 0 : per_vector - misalignment;
    const std::uint64_t head = unaligned < n ? unaligned : n;
    const std::uint64_t body = (n - head) / per_vector;
    using vector_t = std::conditional_t<sizeof(T) == 4, float4, double2>;
    const vector_t* vectors = reinterpret_cast<const vector_t*>(first + head);
    // In flight: exact_loads_in_flight vectors a thread before it adds their elements.
    constexpr unsigned in_flight = exact_loads_in_flight<T>;
    std::uint64_t v = i;
    for (; v + (in_flight - 1) * stride < body; v += in_flight * stride) {
      vector_t loaded[in_flight];
#pragma unroll
      for (unsigned u = 0; u < in_flight; ++u) loaded[u] = vectors[v + u * stride];
#pragma unroll
      for (unsigned u = 0; u < in_flight; ++u) {
        T elements[per_vector];
        std::memcpy(elements, &loaded[u], sizeof(vector_t));
#pragma unroll
        for (unsigned j = 0; j < per_vector; ++j) add(elements[j]);
      }
    }
    for (; v < body; v += stride) {
      T elements[per_vector];
      const vector_t loaded = vectors[v];
      std::memcpy(elements, &loaded, sizeof(loaded));
#pragma unroll
      for (unsigned j = 0; j < per_vector; ++j) add(elements[j]);
    }
    const std::uint64_t rest_begin = head + body * per_vector;
    if (i < head) add(first[i]);
    for (std::uint64_t r = rest_begin + i; r < n; r += stride) add(first[r]);
  } else {
    for (; i < n; i += stride) add(static_cast<T>(first[i]));
  }
  normalize_strided<T>(mine, threads);  // every digit below 2^32, the sign in the top one
  __syncthreads();
  // Digit k of the block: warp w adds digits k = w, w + warps, ... over the threads.
  constexpr unsigned warps = threads / 32;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (unsigned k = warp; k < unsigned(count); k += warps) {
    std::int64_t sum = 0;
    for (unsigned t = lane; t < threads; t += 32) sum += digits[k * threads + t];
    sum = warp_sum_int64(sum);
    if (lane == 0) blocks[blockIdx.x].digits[k] = sum;
  }
  const unsigned nan = __syncthreads_or(flags & exact_nan), plus = __syncthreads_or(flags & exact_plus_infinity),
                 minus = __syncthreads_or(flags & exact_minus_infinity),
                 sign = __syncthreads_or(flags & exact_nonzero_sign);
  if (threadIdx.x == 0)
    blocks[blockIdx.x].flags = (nan ? exact_nan : 0u) | (plus ? exact_plus_infinity : 0u) |
                               (minus ? exact_minus_infinity : 0u) | (sign ? exact_nonzero_sign : 0u);
}

// One block: adds the blocks' sums and init, rounds once, and writes the result.
template <class T, class Out>
__global__ void __launch_bounds__(256)
    exact_sum_finish_kernel(const exact_block_sum<T>* blocks, unsigned block_count, T init, Out* out,
                            host_handoff* handoff) {
  wait_for_prior_grid();
  constexpr int count = exact_format<T>::digits;
  __shared__ std::int64_t digits[count];
  __shared__ unsigned flags;
  if (threadIdx.x == 0) flags = 0;
  __syncthreads();
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (unsigned k = warp; k < unsigned(count); k += blockDim.x / 32) {
    std::int64_t sum = 0;  // at most 2^40 a block: any grid of fewer than 2^22 blocks fits
    for (unsigned b = lane; b < block_count; b += 32) sum += blocks[b].digits[k];
    sum = warp_sum_int64(sum);
    if (lane == 0) digits[k] = sum;
  }
  unsigned mine = 0;
  for (unsigned b = threadIdx.x; b < block_count; b += blockDim.x) mine |= blocks[b].flags;
  if (mine != 0) atomicOr(&flags, mine);
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned all = flags;
    exact_add<T>(init, digits, 1, all);
    exact_specials specials;
    specials.nan = (all & exact_nan) != 0;
    specials.plus_infinity = (all & exact_plus_infinity) != 0;
    specials.minus_infinity = (all & exact_minus_infinity) != 0;
    specials.only_negative_zeros = (all & exact_nonzero_sign) == 0;
    publish(out, static_cast<Out>(round_exact_sum<T>(digits, specials)), handoff);
  }
}

}  // namespace tally::detail
