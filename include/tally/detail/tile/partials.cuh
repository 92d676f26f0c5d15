#pragma once
// A tile partial in scratch, with the tag that says which call published it. Every call that
// uses a stream's scratch has an epoch of its own (dispatch/runtime.cuh, call_scratch), and
// a reader takes a cell only when its tag is the call's epoch: a cell another call left
// behind, or one this call has not published yet, reads as not ready. So no kernel has to
// clear the cells for the next call, and a call that stopped half way (a failed launch)
// leaves nothing a later call could misread.
//
// An accumulator of up to packed_cell_max_bytes is split into 32-bit pieces, and each piece
// travels with the tag in one 64-bit word, written and read as one access. A reader that
// sees the tag on every word has every piece, so no fence stands between a block finishing
// its tile and the folder seeing it (a release fence per tile costs a block far more than
// the extra words: docs/decisions/0010-packed-partial-cells.md). Larger accumulators write
// the value, then the tag with release semantics.

#include "tally/detail/scratch_layout.cuh"

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
  __device__ __forceinline__ bool is_published(unsigned int epoch) {
    bool published = true;
#pragma unroll
    for (std::size_t k = 0; k < pieces; ++k)
      published = published && static_cast<unsigned int>(
                                   cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(word[k]).load(
                                       cuda::std::memory_order_relaxed) >> 32) == epoch;
    return published;
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
  __device__ __forceinline__ bool is_published(unsigned int epoch) {
    return cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(flag).load(cuda::std::memory_order_relaxed) == epoch;
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

// Forward progress of a single pass. Block 0 folds the tile blocks' partials as they are
// published, but the CUDA model promises no co-residency to an ordinary launch: other
// streams' kernels, MPS clients or green contexts may hold the SMs that a tile block needs
// while block 0 waits for its partial. So block 0's wait is bounded: a warp polls a cell at
// most poll_limit times (milliseconds, far beyond any healthy wait). If a wait ran out,
// block 0 reduces every tile whose partial is not published yet itself (by the code a tile
// block runs, so to the same bits), publishes those partials, and folds them all again, with
// no bound: every cell is then filled. Block 0 depends on no other block, and tile blocks
// wait for nothing and take no part in the protocol. A tile block that starts late
// publishes the same bits into a cell block 0 may have filled already, and the grid's end,
// which the stream's next work waits for, still comes after it. An atomic or a barrier of
// the tile blocks' for a protocol, or a count of started blocks that block 0 checks before
// it polls, made every mid-size single pass slower, which this protocol does not
// (docs/decisions/0002-bounded-fold-wait.md).
struct fold_sync {
  unsigned int* control = nullptr;  // the call's control block (scratch_layout.cuh, control_word)
  unsigned int epoch = 0;
  unsigned int poll_limit = 0;      // polls of one batch slot of a warp's cells before its wait runs out
};

// Waits until cells[k] is published by this call and reads it into value; ready says whether
// it has been read already (or this lane has no cell: then cells[k] is never touched). Every
// lane of the warp calls it together and loops until all of them are ready, so the warp stays
// converged (a lane that left its poll loop as soon as its partial landed diverged from its
// warp until the warp's tree, which made calls slower: docs/decisions/0009-fold-polling.md).
//
// With `bounded` (block 0's first fold), the warp polls this slot of its cells at most
// sync.poll_limit times (so its whole wait is bounded by the slots times the limit); if they
// are still not all published, it sets gave_up and stops waiting (fold_sync). A warp
// that gave up waits for none of its later cells either. Only a count and an exit sit in
// the loop: a clock read or a call there made mid-size single passes slower
// (docs/decisions/0002-bounded-fold-wait.md).
template <class Partial>
__device__ __forceinline__ void poll_converged(partial_cell<Partial>* cells, std::uint64_t k, bool& ready,
                                               Partial& value, unsigned int epoch, fold_sync sync, bool bounded,
                                               bool& gave_up) {
  if (gave_up) {
    ready = true;
    return;
  }
  // The loop's own test says the same, but a warp whose cells are all read already (every
  // warp of a two-pass fold, whose partials were published before it started) leaves here
  // without entering the poll loop's code. Without this line the two pass of int was slower
  // per call, with the same kernels' times in isolation (docs/decisions/0034).
  if (__all_sync(0xffffffffu, ready)) return;
  unsigned int polls = 0;
  while (!__all_sync(0xffffffffu, ready)) {
    if (!ready) ready = cells[k].try_read(value, epoch);
    if (bounded && ++polls == sync.poll_limit) {
      gave_up = true;
      ready = true;
      return;
    }
  }
}

}  // namespace tally::detail
