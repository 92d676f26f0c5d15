#pragma once
// A tile partial in scratch, with the tag that says which call published it. Every call that
// uses a stream's scratch has an epoch of its own (runtime.cuh, call_scratch), and a reader
// takes a cell only when its tag is the call's epoch: a cell another call left behind, or
// one this call has not published yet, reads as not ready. So no kernel has to clear the
// cells for the next call, and a call that stopped half way (a failed launch) leaves nothing
// a later call could misread.
//
// An accumulator of up to packed_cell_max_bytes is split into 32-bit pieces, and each piece
// travels with the tag in one 64-bit word, written and read as one access. A reader that
// sees the tag on every word has every piece, so no fence stands between a block finishing
// its tile and the folder seeing it (a release fence per tile costs a block far more than
// the extra words). Larger accumulators write the value, then the tag with release semantics.

#include "tally/detail/runtime.cuh"

#include <cuda/atomic>

#include <cstdint>
#include <cstring>

namespace tally::detail {

inline constexpr std::size_t packed_cell_max_bytes = 128;

template <class Acc, bool Packed = (sizeof(Acc) <= packed_cell_max_bytes)>
struct partial_cell;

template <class Acc>
struct alignas(8) partial_cell<Acc, true> {
  static constexpr std::size_t pieces = (sizeof(Acc) + 3) / 4;
  unsigned long long word[pieces];  // high half: the publishing call's epoch; low half: a piece of the value

  __device__ __forceinline__ void publish(const Acc& value, unsigned int epoch) {
    unsigned int bits[pieces] = {};
    std::memcpy(bits, &value, sizeof(Acc));
#pragma unroll
    for (std::size_t w = 0; w < pieces; ++w)
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(word[w]).store(
          (static_cast<unsigned long long>(epoch) << 32) | bits[w], cuda::std::memory_order_relaxed);
  }
  __device__ __forceinline__ bool try_read(Acc& value, unsigned int epoch) {
    unsigned long long w[pieces];
#pragma unroll
    for (std::size_t k = 0; k < pieces; ++k)
      w[k] = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(word[k]).load(
          cuda::std::memory_order_relaxed);
    unsigned int bits[pieces];
    bool published = true;
#pragma unroll
    for (std::size_t k = 0; k < pieces; ++k) {
      published = published && static_cast<unsigned int>(w[k] >> 32) == epoch;
      bits[k] = static_cast<unsigned int>(w[k]);
    }
    if (!published) return false;
    std::memcpy(&value, bits, sizeof(Acc));
    return true;
  }
};

template <class Acc>
struct alignas(alignof(Acc) < 4 ? 4 : alignof(Acc)) partial_cell<Acc, false> {
  static constexpr std::size_t value_words = (sizeof(Acc) + 3) / 4;
  unsigned int value[value_words];
  unsigned int flag;

  __device__ __forceinline__ void publish(const Acc& v, unsigned int epoch) {
    unsigned int words[value_words] = {};
    std::memcpy(words, &v, sizeof(Acc));
#pragma unroll
    for (std::size_t w = 0; w < value_words; ++w) value[w] = words[w];
    cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(flag).store(epoch, cuda::std::memory_order_release);
  }
  __device__ __forceinline__ bool try_read(Acc& v, unsigned int epoch) {
    if (cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(flag).load(cuda::std::memory_order_acquire) != epoch)
      return false;
    unsigned int words[value_words];
#pragma unroll
    for (std::size_t w = 0; w < value_words; ++w) words[w] = __ldcg(&value[w]);
    std::memcpy(&v, words, sizeof(Acc));
    return true;
  }
};

// How a single pass's folding block (block 0) and its tile blocks agree on who folds. The
// CUDA model promises no co-residency to an ordinary launch: other streams' kernels, MPS
// clients or green contexts may hold the SMs that the tile blocks need while block 0 waits
// for their partials. So block 0 waits only while partials keep arriving: after wait_ns
// without a new one it gives up, and the last tile block to finish folds instead, by the same
// code and so to the same bits (the seeds' last-block guard, as a fallback).
//
// arrivals[epoch & 1] counts the tile blocks (every block but 0) that have started, that is,
// become resident; bit 31 says block 0 gave up. Each tile block adds 1 as it starts (the
// atomic's answer is needed only when the block ends, so its latency hides behind the
// block's loads, and the blocks' atomics on the one word do not queue up at their ends).
// Block 0 sets the bit only while the count is short of `units`: some tile block has not
// become resident, which is exactly when waiting could last forever. Once every tile block
// has started, each will finish (tile blocks wait for nothing), so block 0 waits on. The
// block that brought the count to `units` is the last to start; if the bit was set by then
// it folds, after its own tiles, waiting (without bound) for partials of blocks that are all
// resident. Block 0 zeroes the other word for the stream's next call, which uses it; the
// runtime zeroes both after a call that did not run to the end.
struct fold_sync {
  unsigned int* control = nullptr;  // the call's control block (runtime.cuh, control_word)
  unsigned int epoch = 0;
  unsigned int wait_ns = 0;
};

inline constexpr unsigned int gave_up_bit = 1u << 31;

__device__ __forceinline__ unsigned int* arrival_word(const fold_sync& sync, unsigned int epoch) {
  return sync.control + control_word::arrivals + (epoch & 1u);
}

// The wait is counted in SM clock cycles (clock64 costs a few cycles where %globaltimer
// costs far more on every poll); at the 1-2 GHz a GPU runs, a nanosecond is one or two.
__device__ __forceinline__ long long wait_cycles(const fold_sync& sync) { return 2ll * sync.wait_ns; }

// Called by one lane of a warp of block 0 whose wait ran out: whether block 0 gives up the
// fold (some tile block has not arrived yet) or waits on (all have).
__device__ __forceinline__ bool block0_gives_up(const fold_sync& sync) {
  const unsigned int units = gridDim.x - 1;
  const unsigned int before = atomicOr(arrival_word(sync, sync.epoch), gave_up_bit);
  return (before & ~gave_up_bit) < units;
}

// Called by thread 0 of every tile block as it starts: the count before its own arrival.
__device__ __forceinline__ unsigned int arrive(const fold_sync& sync) {
  return atomicAdd(arrival_word(sync, sync.epoch), 1u);
}

// At the end of a tile block, with what arrive returned: whether this block was the last to
// start while block 0 had already given up, so that it must fold. No fence is needed: the
// folder polls each cell until it shows this call's epoch.
__device__ __forceinline__ bool last_arrival_folds(const fold_sync& sync, unsigned int before) {
  const unsigned int units = gridDim.x - 1;
  return (before & ~gave_up_bit) + 1 == units && (before & gave_up_bit) != 0;
}

// A tile block's end: thread 0 tells the block whether it folds for block 0.
__device__ __forceinline__ bool tile_block_folds(const fold_sync& sync, unsigned int before) {
  __shared__ bool folds;
  if (threadIdx.x == 0) folds = last_arrival_folds(sync, before);
  __syncthreads();
  return folds;
}

// Block 0's first act: the stream's next call counts in the other word.
__device__ __forceinline__ void prepare_next_call(const fold_sync& sync) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *arrival_word(sync, sync.epoch + 1) = 0;
}

// Waits until cells[k] is published by this call and reads it into value; ready says whether
// it has been read already (or this lane has no cell: then cells[k] is never touched). Every
// lane of the warp calls it together and loops until all of them are ready, so the warp stays
// converged (a lane that left its poll loop as soon as its partial landed diverged from its
// warp until the warp's tree, and cost up to 0.65 us a call on the H100).
//
// With `bounded` (block 0 of a single pass), the wait is bounded: if wait_ns pass without
// the warp's cells all arriving, one lane asks block0_gives_up; the answer is the warp's,
// and true means the warp stops waiting (gave_up) and block 0 will not fold. Without it (the
// two pass's fold, or the last tile block folding for block 0), every partial is known to be
// published or on its way, and the wait is unbounded. The sync travels by value: a pointer
// to the kernel's parameter made the compiler copy it to the stack, and the poll read it
// from local memory.
template <class Partial>
__device__ __forceinline__ void poll_converged(partial_cell<Partial>* cells, std::uint64_t k, bool& ready,
                                               Partial& value, unsigned int epoch, fold_sync sync, bool bounded,
                                               bool& gave_up) {
  if (gave_up) {
    ready = true;
    return;
  }
  const long long since = bounded ? clock64() : 0;
  while (!__all_sync(0xffffffffu, ready)) {
    if (!ready) ready = cells[k].try_read(value, epoch);
    if (bounded && clock64() - since > wait_cycles(sync)) {
      bool stop = false;
      if ((threadIdx.x % 32) == 0) stop = block0_gives_up(sync);
      stop = __shfl_sync(0xffffffffu, stop, 0);
      if (stop) {
        gave_up = true;
        ready = true;
        return;
      }
      bounded = false;  // every tile block has started: wait on
    }
  }
}

}  // namespace tally::detail
