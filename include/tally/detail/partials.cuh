#pragma once
// A tile partial in scratch, with the flag that says it has been published. The block that
// folds the partials polls the flags and clears each cell, value and flag, once read, so
// between calls every cell is all zero bytes whatever type the previous call reduced.
//
// An accumulator of up to packed_cell_max_bytes is split into 32-bit pieces, and each piece
// travels with its own flag in one 64-bit word, written and read as one access. A reader
// that sees every word's flag has every piece, so no fence stands between a block finishing
// its tile and the folder seeing it. A release fence per tile costs a block far more than
// the extra words (the double sums, benchmarks/RESULTS.md). Larger accumulators write the
// value, then raise one flag with release semantics.

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
  unsigned long long word[pieces];  // high half: 1 once published; low half: a piece of the value

  __device__ __forceinline__ void publish(const Acc& value) {
    unsigned int bits[pieces] = {};
    std::memcpy(bits, &value, sizeof(Acc));
#pragma unroll
    for (std::size_t w = 0; w < pieces; ++w)
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(word[w]).store(
          (1ull << 32) | bits[w], cuda::std::memory_order_relaxed);
  }
  __device__ __forceinline__ bool try_read(Acc& value) {
    unsigned long long w[pieces];
#pragma unroll
    for (std::size_t k = 0; k < pieces; ++k)
      w[k] = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(word[k]).load(
          cuda::std::memory_order_relaxed);
    unsigned int bits[pieces];
    bool published = true;
#pragma unroll
    for (std::size_t k = 0; k < pieces; ++k) {
      published = published && (w[k] >> 32) != 0;
      bits[k] = static_cast<unsigned int>(w[k]);
    }
    if (!published) return false;
    std::memcpy(&value, bits, sizeof(Acc));
    return true;
  }
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (std::size_t k = 0; k < pieces; ++k)
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(word[k]).store(0,
                                                                                      cuda::std::memory_order_relaxed);
  }
};

template <class Acc>
struct alignas(alignof(Acc) < 4 ? 4 : alignof(Acc)) partial_cell<Acc, false> {
  static constexpr std::size_t value_words = (sizeof(Acc) + 3) / 4;
  unsigned int value[value_words];
  unsigned int flag;

  __device__ __forceinline__ void publish(const Acc& v) {
    unsigned int words[value_words] = {};
    std::memcpy(words, &v, sizeof(Acc));
#pragma unroll
    for (std::size_t w = 0; w < value_words; ++w) value[w] = words[w];
    cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(flag).store(1u, cuda::std::memory_order_release);
  }
  __device__ __forceinline__ bool try_read(Acc& v) {
    if (cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(flag).load(cuda::std::memory_order_acquire) == 0)
      return false;
    unsigned int words[value_words];
#pragma unroll
    for (std::size_t w = 0; w < value_words; ++w) words[w] = __ldcg(&value[w]);
    std::memcpy(&v, words, sizeof(Acc));
    return true;
  }
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (std::size_t w = 0; w < value_words; ++w) value[w] = 0u;
    cuda::atomic_ref<unsigned int, cuda::thread_scope_device>(flag).store(0u, cuda::std::memory_order_relaxed);
  }
};

// Waits until cells[k] is published and reads it into value; ready says whether it has been
// read already (or this lane has no cell: then cells[k] is never touched). Every lane of the
// warp calls it together and loops until all of them are ready, so the warp stays converged.
// A lane that left its own poll loop as soon as its partial landed diverged from the rest of
// its warp until the warp's tree: on the H100 that cost up to 0.65 us per call from 2^14 to
// 2^24 (doubles at 2^20: 6.34 us against 5.82 converged; benchmarks/RESULTS.md, 2026-11-25).
template <class Partial>
__device__ __forceinline__ void poll_converged(partial_cell<Partial>* cells, std::uint64_t k, bool& ready,
                                               Partial& value) {
  while (!__all_sync(0xffffffffu, ready)) {
    if (!ready) ready = cells[k].try_read(value);
  }
}

}  // namespace tally::detail
