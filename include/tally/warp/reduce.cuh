#pragma once
// Warp-level building blocks, usable inside your own kernels. All 32 lanes must call them
// together (the warp converged); the result is in lane 0.

#include <cstring>
#include <type_traits>

namespace tally::warp {

inline constexpr unsigned full_mask = 0xffffffffu;

// __shfl_down_sync for any trivially copyable type: moves it as 32-bit words.
template <class T>
__device__ __forceinline__ T shuffle_down(const T& value, unsigned delta) {
  static_assert(std::is_trivially_copyable_v<T>, "tally::warp::shuffle_down needs a trivially copyable type");
  if constexpr (std::is_arithmetic_v<T> && sizeof(T) >= 4) {
    return __shfl_down_sync(full_mask, value, delta);
  } else {
    constexpr int words = int((sizeof(T) + 3) / 4);
    int buffer[words] = {};
    std::memcpy(buffer, &value, sizeof(T));
#pragma unroll
    for (int w = 0; w < words; ++w) buffer[w] = __shfl_down_sync(full_mask, buffer[w], delta);
    T out;
    std::memcpy(&out, buffer, sizeof(T));
    return out;
  }
}

namespace detail {
// The trees below over the first Lanes lanes only (a power of two, at most 32), the others
// holding nothing. Levels whose partner lane lies at Lanes or beyond change nothing that
// reaches lane 0, so they are left out: lane 0 gets the same result, in the same bits, as
// the 32-lane tree with the other lanes marked empty. The block trees fold their warps'
// results with them (8 warps: 3 levels instead of 5).

// Every lane below Lanes holds a value. Lanes at or beyond it take part in the shuffles,
// but nothing they compute reaches lane 0: at the level of distance d, only lanes below d
// still feed lane 0, and they read lanes below 2d <= Lanes.
template <unsigned Lanes, class T, class Op>
__device__ __forceinline__ T reduce_lanes(T value, Op& op) {
  static_assert(Lanes >= 1 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0, "Lanes: a power of two, at most 32");
#pragma unroll
  for (unsigned delta = Lanes / 2; delta > 0; delta /= 2) value = static_cast<T>(op(value, shuffle_down(value, delta)));
  return value;
}

// Lanes at or beyond Lanes must be marked empty (valid == false).
template <unsigned Lanes, class T, class Op>
__device__ __forceinline__ T reduce_lanes(T value, bool& valid, Op& op) {
  static_assert(Lanes >= 1 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0, "Lanes: a power of two, at most 32");
  const unsigned lane = threadIdx.x % 32;
#pragma unroll
  for (unsigned delta = Lanes / 2; delta > 0; delta /= 2) {
    const T other = shuffle_down(value, delta);
    const bool other_valid = __shfl_down_sync(full_mask, valid, delta) && lane + delta < 32;
    if (other_valid) value = valid ? static_cast<T>(op(value, other)) : other;
    valid = valid || other_valid;
  }
  return value;
}

// Lanes at or beyond Lanes must be marked empty (valid == false).
template <unsigned Lanes, class T, class Op>
__device__ __forceinline__ T reduce_ordered_lanes(T value, bool& valid, Op& op) {
  static_assert(Lanes >= 1 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0, "Lanes: a power of two, at most 32");
  const unsigned lane = threadIdx.x % 32;
#pragma unroll
  for (unsigned delta = 1; delta < Lanes; delta *= 2) {
    const T right = shuffle_down(value, delta);
    const bool right_valid = __shfl_down_sync(full_mask, valid, delta) && lane + delta < 32;
    if ((lane & (2 * delta - 1)) == 0) {
      if (right_valid) value = valid ? static_cast<T>(op(value, right)) : right;
      valid = valid || right_valid;
    }
  }
  return value;
}

// The smallest power of two at or above n (n at most 32).
__host__ __device__ constexpr unsigned lanes_covering(unsigned n) {
  unsigned lanes = 1;
  while (lanes < n) lanes *= 2;
  return lanes;
}
}  // namespace detail

// Folds the 32 lanes' values by a shuffle-down tree: lane i takes op(v[i], v[i + d]) for
// d = 16, 8, 4, 2, 1. The order is fixed, so results are reproducible for any associative
// and commutative op. Lane 0 holds the result.
template <class T, class Op>
__device__ __forceinline__ T reduce(T value, Op op) {
  return detail::reduce_lanes<32>(value, op);
}

// The same tree where some lanes hold nothing (valid == false): an empty side leaves the
// other unchanged. On return lane 0's `valid` says whether any lane had a value.
template <class T, class Op>
__device__ __forceinline__ T reduce(T value, bool& valid, Op op) {
  return detail::reduce_lanes<32>(value, valid, op);
}

// Order-preserving folds, for operators that are associative but not commutative: the
// result is v[0] op v[1] op ... op v[31] (lane order). Adjacent lanes combine first
// (d = 1, 2, 4, 8, 16: lane i, a multiple of 2d, takes op(v[i], v[i + d])); the left
// operand is always the lower lane. Lanes that are not a multiple of 2d do not call op,
// so op never sees a value that is not a fold of consecutive lanes. Lane 0 holds the result.
template <class T, class Op>
__device__ __forceinline__ T reduce_ordered(T value, Op op) {
  const unsigned lane = threadIdx.x % 32;
#pragma unroll
  for (unsigned delta = 1; delta < 32; delta *= 2) {
    const T right = shuffle_down(value, delta);
    if ((lane & (2 * delta - 1)) == 0) value = static_cast<T>(op(value, right));
  }
  return value;
}

// The same where some lanes hold nothing (valid == false): an empty side leaves the other
// unchanged, so the result is the ordered fold of the valid lanes. On return lane 0's
// `valid` says whether any lane had a value.
template <class T, class Op>
__device__ __forceinline__ T reduce_ordered(T value, bool& valid, Op op) {
  return detail::reduce_ordered_lanes<32>(value, valid, op);
}

}  // namespace tally::warp
