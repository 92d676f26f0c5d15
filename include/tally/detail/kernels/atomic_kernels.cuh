#pragma once
// The atomic strategies: every block (block_atomic) or every warp (warp_atomic) reduces
// what it reads and combines its result into one accumulator in scratch, with the type's
// native atomic for the operator where CUDA has one and a compare-and-swap loop otherwise.
// The unit that arrives last writes op(init, accumulator) and clears the scratch.
//
// The order of the atomic combines is whatever the hardware makes it, so the result is
// reproducible only where the operator is exact: integer +, min, max, &, |, ^.

#include "tally/block/reduce.cuh"
#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/kernels/publish_result.cuh"
#include "tally/detail/op_kind.cuh"
#include "tally/detail/scratch_layout.cuh"
#include "tally/detail/tile/commutative_tile.cuh"

#include <cuda/atomic>

#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

namespace tally::detail {

// The atomic strategies hold the accumulator in one 32- or 64-bit word.
template <class Acc>
inline constexpr bool fits_atomic_word_v = std::is_trivially_copyable_v<Acc> && (sizeof(Acc) == 4 || sizeof(Acc) == 8);

// The native type an integer of Acc's size is combined as (two's complement: same bits).
template <class Acc>
using native_int_t = std::conditional_t<sizeof(Acc) == 4, std::conditional_t<std::is_signed_v<Acc>, int, unsigned int>,
                                        std::conditional_t<std::is_signed_v<Acc>, long long, unsigned long long>>;

template <class Acc, class Op>
__device__ void atomic_cas_combine(Acc* target, const Acc& value, Op& op) {
  using word_t = std::conditional_t<sizeof(Acc) == 4, unsigned int, unsigned long long>;
  auto* word = reinterpret_cast<word_t*>(target);
  word_t seen = cuda::atomic_ref<word_t, cuda::thread_scope_device>(*word).load(cuda::std::memory_order_relaxed);
  for (;;) {
    Acc current;
    std::memcpy(&current, &seen, sizeof(Acc));
    const Acc next = static_cast<Acc>(op(current, value));
    word_t desired;
    std::memcpy(&desired, &next, sizeof(Acc));
    const word_t previous = atomicCAS(word, seen, desired);
    if (previous == seen) return;
    seen = previous;
  }
}

template <class Acc, class Op>
__device__ __forceinline__ void atomic_combine(Acc* target, const Acc& value, Op& op) {
  constexpr op_kind kind = op_kind_v<Op>;
  if constexpr (is_exact_integer_op_v<Acc, Op>) {
    using N = native_int_t<Acc>;
    using U = std::make_unsigned_t<N>;
    auto* t = reinterpret_cast<N*>(target);
    const N v = static_cast<N>(value);
    if constexpr (kind == op_kind::sum) {
      atomicAdd(reinterpret_cast<std::conditional_t<sizeof(N) == 4, U, unsigned long long>*>(t),
                static_cast<std::conditional_t<sizeof(N) == 4, U, unsigned long long>>(v));
    } else if constexpr (kind == op_kind::min) {
      atomicMin(t, v);
    } else if constexpr (kind == op_kind::max) {
      atomicMax(t, v);
    } else {
      using B = std::conditional_t<sizeof(N) == 4, unsigned int, unsigned long long>;
      auto* b = reinterpret_cast<B*>(t);
      if constexpr (kind == op_kind::bit_and) atomicAnd(b, static_cast<B>(v));
      if constexpr (kind == op_kind::bit_or) atomicOr(b, static_cast<B>(v));
      if constexpr (kind == op_kind::bit_xor) atomicXor(b, static_cast<B>(v));
    }
  } else if constexpr (kind == op_kind::sum && (std::is_same_v<Acc, float> || std::is_same_v<Acc, double>)) {
    atomicAdd(target, value);
  } else {
    atomic_cas_combine(target, value, op);
  }
}

// Control words in scratch (scratch_layout.cuh, control_word): units done, tickets taken
// by units with a value, 1 once the first such unit has stored its value; the accumulator at
// byte 128. The last unit leaves them zero (the runtime zeroes them again after a call that did
// not run to its end).
struct atomic_control {
  unsigned int* words;
  template <class Acc>
  __device__ Acc* accumulator() const {
    return reinterpret_cast<Acc*>(reinterpret_cast<char*>(words) + control_word::accumulator_byte);
  }
};

// A unit with a value: the first to take a ticket stores it, the others wait until that
// store is visible, then combine atomically. The first holds a ticket and waits for
// nothing, so the waits always end.
template <class Acc, class Op>
__device__ void contribute(const atomic_control& control, const Acc& value, Op& op) {
  Acc* accumulator = control.accumulator<Acc>();
  cuda::atomic_ref<unsigned int, cuda::thread_scope_device> stored(control.words[control_word::first_stored]);
  if (atomicAdd(&control.words[control_word::tickets], 1u) == 0) {
    *accumulator = value;
    stored.store(1u, cuda::std::memory_order_release);
  } else {
    while (stored.load(cuda::std::memory_order_acquire) == 0) {
    }
    atomic_combine(accumulator, value, op);
  }
}

// Counts the unit as done; the last one writes the result and zeroes the control block.
template <class Acc, class Op, class Out>
__device__ void finish_unit(const atomic_control& control, unsigned int units, Acc init, Op& op, Out* out,
                            host_handoff* handoff) {
  __threadfence();
  if (atomicAdd(&control.words[control_word::units_done], 1u) != units - 1) return;
  __threadfence();
  using word_t = std::conditional_t<sizeof(Acc) == 4, unsigned int, unsigned long long>;
  word_t* word = reinterpret_cast<word_t*>(control.accumulator<Acc>());
  const word_t bits = cuda::atomic_ref<word_t, cuda::thread_scope_device>(*word).load(cuda::std::memory_order_relaxed);
  Acc total;
  std::memcpy(&total, &bits, sizeof(Acc));
  *word = 0;
  control.words[control_word::units_done] = 0;
  control.words[control_word::tickets] = 0;
  control.words[control_word::first_stored] = 0;
  publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), handoff);
}

template <class Acc, int VW, bool PerWarp, class Loader, class Op, class Out>
__global__ void __launch_bounds__(block_threads)
    atomic_reduce_kernel(Loader load, reduction_plan plan, Acc init, Op op, atomic_control control, Out* out,
                         host_handoff* handoff) {
  wait_for_prior_grid();
  // Each thread folds everything it reads across its block's tiles; the order is free.
  Acc acc{};
  bool valid = false;
  for (std::uint64_t tile = blockIdx.x; tile < plan.tiles; tile += gridDim.x) {
    const std::uint64_t begin = plan.tile_begin(tile);
    if (plan.tile_is_full(tile)) {
      const Acc part = reduce_full_tile<Acc, VW>(load, begin, plan.steps_per_tile, op);
      acc = valid ? static_cast<Acc>(op(acc, part)) : part;
      valid = true;
    } else {
      bool part_valid = false;
      const Acc part = reduce_partial_tile<Acc, VW>(load, begin, plan.n, op, part_valid);
      if (part_valid) {
        acc = valid ? static_cast<Acc>(op(acc, part)) : part;
        valid = true;
      }
    }
  }
  if constexpr (PerWarp) {
    acc = tally::warp::reduce(acc, valid, op);
    if (threadIdx.x % warp_threads == 0) {
      if (valid) contribute(control, acc, op);
      finish_unit(control, gridDim.x * (block_threads / warp_threads), init, op, out, handoff);
    }
  } else {
    acc = tally::block::reduce<block_threads>(acc, valid, op);
    if (threadIdx.x == 0) {
      if (valid) contribute(control, acc, op);
      finish_unit(control, gridDim.x, init, op, out, handoff);
    }
  }
}

}  // namespace tally::detail
