#pragma once
// Warp-level building blocks, usable inside your own kernels. All 32 lanes must call them
// together (the warp converged); the result is in lane 0.

#include "tally/detail/byte_movable.cuh"
#include "tally/detail/op_kind.cuh"
#include "tally/detail/tuning.cuh"

#include <cuda/std/limits>

#include <cstring>
#include <type_traits>

namespace tally::warp {

inline constexpr unsigned full_mask = 0xffffffffu;

// __shfl_down_sync for any type whose copy is its bytes (tally/detail/byte_movable.cuh):
// moves it as 32-bit words.
template <class T>
__device__ __forceinline__ T shuffle_down(const T& value, unsigned delta) {
  static_assert(tally::detail::moves_as_bytes_v<T>,
                "tally::warp::shuffle_down needs a type whose copy is its bytes: trivially copyable, or "
                "copy-constructible and trivially destructible");
  if constexpr (std::is_arithmetic_v<T> && sizeof(T) >= 4) {
    return __shfl_down_sync(full_mask, value, delta);
  } else {
    constexpr int words = int((sizeof(T) + 3) / 4);
    int buffer[words] = {};
    std::memcpy(buffer, static_cast<const void*>(&value), sizeof(T));
#pragma unroll
    for (int w = 0; w < words; ++w) buffer[w] = __shfl_down_sync(full_mask, buffer[w], delta);
    T out;
    std::memcpy(static_cast<void*>(&out), buffer, sizeof(T));
    return out;
  }
}

namespace detail {
// Whether this compilation pass has redux.sync: device code for compute capability 8.0+.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
inline constexpr bool compiles_redux = true;
#else
inline constexpr bool compiles_redux = false;
#endif

// 32-bit integers under an exact operator (+, min, max, &, |, ^ of tally::, thrust:: or
// std::, computing in T) fold in one instruction on compute capability 8.0 and later
// (redux.sync) instead of five shuffles and five combines. Exact: any order of the
// combines gives the bits of the shuffle tree, so the result is the same as on the host
// and on older GPUs. A single pass has four such trees on its critical path, so every int
// sum gains (docs/decisions/0016-integer-trees-by-redux.md).
template <class T, class Op>
inline constexpr bool folds_by_redux_v = tally::detail::tuning::warp_integer_redux && compiles_redux &&
                                         (std::is_same_v<T, int> || std::is_same_v<T, unsigned int>) &&
                                         tally::detail::is_exact_integer_op_v<T, Op>;

// The value that leaves every other unchanged under the exact operator Op: a lane that
// holds nothing contributes it.
template <class T, class Op>
__device__ __forceinline__ T redux_identity() {
  constexpr tally::detail::op_kind kind = tally::detail::op_kind_v<Op>;
  if constexpr (kind == tally::detail::op_kind::min) {
    return cuda::std::numeric_limits<T>::max();
  } else if constexpr (kind == tally::detail::op_kind::max) {
    return cuda::std::numeric_limits<T>::lowest();
  } else if constexpr (kind == tally::detail::op_kind::bit_and) {
    return static_cast<T>(~0u);
  } else {
    return T(0);
  }
}

// Every lane gets the fold of all 32 lanes' values (folds_by_redux_v<T, Op> only).
template <class T, class Op>
__device__ __forceinline__ T redux_all_lanes(T value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr tally::detail::op_kind kind = tally::detail::op_kind_v<Op>;
  const unsigned bits = static_cast<unsigned>(value);
  if constexpr (kind == tally::detail::op_kind::sum) {
    return static_cast<T>(__reduce_add_sync(full_mask, bits));
  } else if constexpr (kind == tally::detail::op_kind::min) {
    return __reduce_min_sync(full_mask, value);
  } else if constexpr (kind == tally::detail::op_kind::max) {
    return __reduce_max_sync(full_mask, value);
  } else if constexpr (kind == tally::detail::op_kind::bit_and) {
    return static_cast<T>(__reduce_and_sync(full_mask, bits));
  } else if constexpr (kind == tally::detail::op_kind::bit_or) {
    return static_cast<T>(__reduce_or_sync(full_mask, bits));
  } else {
    return static_cast<T>(__reduce_xor_sync(full_mask, bits));
  }
#else
  return value;  // never called: folds_by_redux_v is false in this pass
#endif
}

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
  if constexpr (folds_by_redux_v<T, Op>) {
    if (Lanes < 32 && threadIdx.x % 32 >= Lanes) value = redux_identity<T, Op>();
    return redux_all_lanes<T, Op>(value);
  } else {
#pragma unroll
    for (unsigned delta = Lanes / 2; delta > 0; delta /= 2)
      value = static_cast<T>(op(value, shuffle_down(value, delta)));
    return value;
  }
}

// Lanes at or beyond Lanes must be marked empty (valid == false).
template <unsigned Lanes, class T, class Op>
__device__ __forceinline__ T reduce_lanes(T value, bool& valid, Op& op) {
  static_assert(Lanes >= 1 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0, "Lanes: a power of two, at most 32");
  if constexpr (folds_by_redux_v<T, Op>) {
    const T folded = redux_all_lanes<T, Op>(valid ? value : redux_identity<T, Op>());
    const bool any = __any_sync(full_mask, valid);
    if (any) value = folded;
    valid = any;
    return value;
  } else {
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

// reduce_lanes' tree, evaluated by one thread over values that lanes 0 .. Lanes - 1 left in
// shared memory: lane 0's result. At each level lane i < delta combines op(v[i], v[i + delta]),
// so the value lane i holds after the level of delta d is op(value(i, 2d), value(i + d, 2d)),
// down to the leaves value(i, Lanes) = slots[i]. Same operands, same order, same bits; but
// where a shuffle level costs a round trip through the warp's shuffle unit, a level here
// costs one op, the leaves' reads overlapping. The block tree's last stage ends every tile
// block's work, so its latency is on every short call's path
// (docs/decisions/0029-shorter-trees-at-the-end-of-a-call.md).
template <unsigned Lanes, unsigned Delta, unsigned Lane, class T, class Op>
__device__ __forceinline__ T tree_of_slots(const T* slots, Op& op) {
  if constexpr (Delta == Lanes) {
    return slots[Lane];
  } else {
    // Not const: the shuffle tree hands op an lvalue on the left too.
    T left = tree_of_slots<Lanes, 2 * Delta, Lane>(slots, op);
    T right = tree_of_slots<Lanes, 2 * Delta, Lane + Delta>(slots, op);
    return static_cast<T>(op(left, right));
  }
}

// Whether a tree over Lanes values of T is evaluated by one thread from shared memory rather
// than by shuffles: small values (a thread holds all Lanes of them) under an operator that
// the warp does not fold in hardware (redux).
template <unsigned Lanes, class T, class Op>
inline constexpr bool folds_slots_in_one_thread_v =
    tally::detail::tuning::last_tree_levels_in_one_thread && !folds_by_redux_v<T, Op> &&
    std::is_trivially_copyable_v<T> && sizeof(T) * Lanes <= 128;

// reduce_lanes' validity tree where the values are exactly lanes 0 .. count - 1's. After the
// level of delta d, lane j < 2d holds a value exactly when j < count (its own leaf is the
// first of its subtree), so at the level of delta lane i combines with lane i + delta exactly
// when i + delta < count: the flags need no shuffles and no selects, and the bits are those of
// reduce_lanes(value, lane < count, op).
template <unsigned Lanes, class T, class Op>
__device__ __forceinline__ T reduce_prefix_lanes(T value, unsigned count, Op& op) {
  static_assert(Lanes >= 1 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0, "Lanes: a power of two, at most 32");
  const unsigned lane = threadIdx.x % 32;
  if constexpr (folds_by_redux_v<T, Op>) {
    bool valid = lane < count;
    return reduce_lanes<Lanes>(value, valid, op);
  } else {
#pragma unroll
    for (unsigned delta = Lanes / 2; delta > 0; delta /= 2) {
      const T other = shuffle_down(value, delta);
      if (lane + delta < count) value = static_cast<T>(op(value, other));
    }
    return value;
  }
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
// and commutative op. Lane 0 holds the result. 32-bit integers under +, min, max, &, | or ^
// fold by one redux.sync where the GPU has it (compute capability 8.0+): the same result,
// since those operators are exact.
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
