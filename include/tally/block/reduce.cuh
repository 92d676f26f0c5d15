#pragma once
// Block-level building blocks, usable inside your own kernels. Every thread of a
// one-dimensional block of BlockThreads threads (a multiple of 32, at most 1024) must call
// them; thread 0 gets the result. They may be called repeatedly in one kernel.

#include "tally/warp/reduce.cuh"

#include <type_traits>

namespace tally::block {

namespace detail {
template <class T, int Warps>
struct reduce_storage {
  alignas(T) unsigned char values[Warps * sizeof(T)];
  bool valid[Warps];
  __device__ T* slots() { return reinterpret_cast<T*>(values); }
};

// Runs > 1 (tally's own kernels only): the block is Runs runs of BlockThreads threads, and
// each run reduces its own values by the same tree, as a block of its own would; thread 0 of
// each run gets its run's result. Each run waits at its own named barrier (1 + run), so runs
// may take different paths to the reduction (a full tile and a partial one).
template <int BlockThreads, int Runs>
__device__ __forceinline__ void sync_run() {
  if constexpr (Runs == 1) {
    __syncthreads();
  } else {
    asm volatile("bar.sync %0, %1;" ::"r"(1u + threadIdx.x / BlockThreads), "n"(BlockThreads) : "memory");
  }
}

// A run's warps: warp_id's place in its run, and where its run's slots start.
template <int BlockThreads, int Runs>
struct run_warps {
  static constexpr unsigned warps = BlockThreads / 32;
  unsigned in_run;  // the warp's index in its run
  unsigned first;   // the run's first warp in the block
  __device__ explicit run_warps(unsigned warp_id)
      : in_run(Runs == 1 ? warp_id : warp_id % warps), first(Runs == 1 ? 0u : warp_id - warp_id % warps) {}
};

// The block tree of reduce and reduce_ordered: each warp folds its lanes by the warp tree
// (ordered or not), then warp 0 folds the warps' results, in warp order, by the same tree.
template <int BlockThreads, bool Ordered, int Runs = 1, class T, class Op>
__device__ T fold_warps(T value, bool& valid, Op& op) {
  static_assert(BlockThreads % 32 == 0 && BlockThreads * Runs <= 1024, "BlockThreads: a multiple of 32, at most 1024");
  constexpr int warps = BlockThreads / 32;
  __shared__ reduce_storage<T, warps * Runs> storage;
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp_id = threadIdx.x / 32;
  const run_warps<BlockThreads, Runs> run(warp_id);
  // The tree over the warps' results runs on the lanes that hold one (warp::detail).
  constexpr unsigned warp_lanes = tally::warp::detail::lanes_covering(warps);
  const auto warp_tree = [&op](auto lanes, T v, bool& ok) {
    if constexpr (Ordered) {
      return tally::warp::detail::reduce_ordered_lanes<decltype(lanes)::value>(v, ok, op);
    } else {
      return tally::warp::detail::reduce_lanes<decltype(lanes)::value>(v, ok, op);
    }
  };

  value = warp_tree(std::integral_constant<unsigned, 32>{}, value, valid);
  sync_run<BlockThreads, Runs>();  // an earlier call may still be reading the storage
  if (lane == 0) {
    storage.slots()[warp_id] = value;
    storage.valid[warp_id] = valid;
  }
  sync_run<BlockThreads, Runs>();
  if (run.in_run == 0) {
    valid = lane < warps && storage.valid[run.first + lane];
    if (lane < warps) value = storage.slots()[run.first + lane];
    value = warp_tree(std::integral_constant<unsigned, warp_lanes>{}, value, valid);
  }
  return value;
}

// The tree of reduce without flags, every thread holding a value.
template <int BlockThreads, int Runs = 1, class T, class Op>
__device__ T reduce_all(T value, Op& op) {
  static_assert(BlockThreads % 32 == 0 && BlockThreads * Runs <= 1024, "BlockThreads: a multiple of 32, at most 1024");
  constexpr int warps = BlockThreads / 32;
  __shared__ reduce_storage<T, warps * Runs> storage;
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp_id = threadIdx.x / 32;
  const run_warps<BlockThreads, Runs> run(warp_id);

  value = tally::warp::reduce(value, op);
  sync_run<BlockThreads, Runs>();
  if (lane == 0) storage.slots()[warp_id] = value;
  sync_run<BlockThreads, Runs>();
  constexpr unsigned warp_lanes = tally::warp::detail::lanes_covering(warps);
  if constexpr (warp_lanes == warps && tally::warp::detail::folds_slots_in_one_thread_v<warp_lanes, T, Op>) {
    // The tree over the warps' results by the run's thread 0 alone (warp::detail::tree_of_slots).
    if (run.in_run == 0 && lane == 0)
      value = tally::warp::detail::tree_of_slots<warp_lanes, 1, 0>(storage.slots() + run.first, op);
  } else if (run.in_run == 0) {
    // Lanes past the last warp hold nothing: the tree over `warps` slots is the
    // validity-aware one, which needs no flags where `warps` is a power of two.
    if (lane < warps) value = storage.slots()[run.first + lane];
    if constexpr (warp_lanes == warps) {
      value = tally::warp::detail::reduce_lanes<warp_lanes>(value, op);
    } else {
      bool valid = lane < warps;
      value = tally::warp::detail::reduce_lanes<warp_lanes>(value, valid, op);
    }
  }
  return value;
}
}  // namespace detail

// Every thread holds a value (valid == false: nothing). Warps fold by tally::warp::reduce,
// then warp 0 folds the warps' results with the same tree; thread 0's `valid` says whether
// the block had any value.
template <int BlockThreads, class T, class Op>
__device__ T reduce(T value, bool& valid, Op op) {
  return detail::fold_warps<BlockThreads, false>(value, valid, op);
}

// All threads hold a value.
template <int BlockThreads, class T, class Op>
__device__ T reduce(T value, Op op) {
  return detail::reduce_all<BlockThreads>(value, op);
}

// Order-preserving: the result is the fold of the threads' values in thread order, for
// operators that are associative but not commutative. Each warp folds its lanes by
// tally::warp::reduce_ordered, then warp 0 folds the warps' results in warp order.
template <int BlockThreads, class T, class Op>
__device__ T reduce_ordered(T value, bool& valid, Op op) {
  return detail::fold_warps<BlockThreads, true>(value, valid, op);
}

// All threads hold a value.
template <int BlockThreads, class T, class Op>
__device__ T reduce_ordered(T value, Op op) {
  bool valid = true;
  return reduce_ordered<BlockThreads>(value, valid, op);
}

}  // namespace tally::block
