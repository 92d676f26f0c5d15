#pragma once
// Loaders hand a tile's chunks to the threads. A chunk is vector_width consecutive
// elements; which thread gets which chunk is the plan's business, how it is read is the
// loader's: 16-byte vector loads for aligned contiguous data, element reads otherwise.
// Both give the same values in the same order, so the result does not depend on alignment.

#include <cstdint>
#include <cstring>
#include <iterator>

namespace tally::detail {

// Aligned contiguous data: one 16-byte load per chunk (sizeof(V) * VW == 16).
template <class V, int VW>
struct vector_loader {
  static_assert(sizeof(V) * VW == 16, "vector_loader reads 16-byte chunks");
  using value_type = V;
  const V* data;

  __device__ __forceinline__ void chunk(std::uint64_t first, V (&out)[VW]) const {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(data + first));
    std::memcpy(out, &raw, sizeof(raw));
  }
  __device__ __forceinline__ V element(std::uint64_t i) const { return data[i]; }
};

// Any random-access iterator readable on the device (raw pointers at any alignment,
// Thrust's fancy iterators): element by element.
template <class It, class V, int VW>
struct iterator_loader {
  using value_type = V;
  using difference_type = typename std::iterator_traits<It>::difference_type;
  It first_;

  __device__ __forceinline__ void chunk(std::uint64_t first, V (&out)[VW]) const {
#pragma unroll
    for (int j = 0; j < VW; ++j) out[j] = static_cast<V>(first_[static_cast<difference_type>(first + j)]);
  }
  __device__ __forceinline__ V element(std::uint64_t i) const {
    return static_cast<V>(first_[static_cast<difference_type>(i)]);
  }
};

// Reads a T written by another block in this launch, bypassing the incoherent L1.
template <class T>
__device__ __forceinline__ T load_coherent(const T* p) {
  static_assert(sizeof(T) % 4 == 0 && alignof(T) >= 4, "load_coherent reads 32-bit words");
  unsigned int words[sizeof(T) / 4];
#pragma unroll
  for (unsigned w = 0; w < sizeof(T) / 4; ++w) words[w] = __ldcg(reinterpret_cast<const unsigned int*>(p) + w);
  T out;
  std::memcpy(&out, words, sizeof(T));
  return out;
}

}  // namespace tally::detail
