#pragma once
// A tile partial in scratch, with the flag that says it has been published. The block that
// folds the partials polls the flags and clears each cell, value and flag, once read, so
// between calls every cell is all zero bytes whatever type the previous call reduced.
//
// A 4-byte partial and its flag share one 64-bit word, written and read as one access: no
// fence stands between a block finishing its tile and the folder seeing it. Other sizes
// write the value, then raise the flag with release semantics.

#include "tally/detail/runtime.cuh"

#include <cuda/atomic>

#include <cstdint>
#include <cstring>

namespace tally::detail {

template <class Acc, bool Packed = (sizeof(Acc) == 4)>
struct partial_cell;

template <class Acc>
struct alignas(8) partial_cell<Acc, true> {
  unsigned long long word;  // high half: 1 once published; low half: the value's bits

  __device__ __forceinline__ void publish(const Acc& value) {
    unsigned int bits;
    std::memcpy(&bits, &value, sizeof(bits));
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(word).store(
        (1ull << 32) | bits, cuda::std::memory_order_relaxed);
  }
  __device__ __forceinline__ bool try_read(Acc& value) {
    const unsigned long long w =
        cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(word).load(cuda::std::memory_order_relaxed);
    if ((w >> 32) == 0) return false;
    const unsigned int bits = static_cast<unsigned int>(w);
    std::memcpy(&value, &bits, sizeof(bits));
    return true;
  }
  __device__ __forceinline__ void clear() {
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(word).store(0, cuda::std::memory_order_relaxed);
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

}  // namespace tally::detail
