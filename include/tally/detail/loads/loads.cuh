#pragma once
// Loaders hand a tile's chunks to the threads. A chunk is vector_width consecutive
// elements; which thread gets which chunk is the plan's business, how it is read is the
// loader's: 16-byte vector loads for aligned contiguous data, element reads otherwise.
// Both give the same values in the same order, so the result does not depend on alignment.

#include "tally/detail/tuning.cuh"

#include <cstdint>
#include <cstring>
#include <iterator>

// Inputs of more than 1 / stream_reads_l2_fraction of the L2 (an eighth: 6.6 MB on the H100)
// are read with an evict-first hint (ld.global.cs): read once, they then do not push the rest
// of the L2 out, and the sums read them faster, with no loss where such an input is read
// again from the L2. Smaller inputs keep the read-only path, which leaves them in L2 for the
// next call: the hint would evict inputs that the next call reads again, and that is slower
// (docs/decisions/0014-evict-first-loads.md).

namespace tally::detail {

inline constexpr std::uint64_t stream_reads_l2_fraction = tuning::stream_reads_l2_fraction;

// Whether an input of `bytes` is read with the evict-first hint on a GPU with `l2_bytes` of L2.
inline bool streams_reads(std::uint64_t bytes, std::uint64_t l2_bytes) {
  if constexpr (tuning::stream_reads == tuning::stream_reads_when::never) {
    return false;
  } else if constexpr (tuning::stream_reads == tuning::stream_reads_when::always) {
    return true;
  } else {
    return bytes > l2_bytes / stream_reads_l2_fraction;
  }
}

#if defined(__CUDACC__)
// One 16-byte read of input (16-byte aligned), evict-first where `streaming`.
__device__ __forceinline__ uint4 read_16_bytes(const void* p, bool streaming) {
  const auto* q = static_cast<const uint4*>(p);
  return streaming ? __ldcs(q) : __ldg(q);
}
#endif

// Aligned contiguous data: one 16-byte load per chunk (sizeof(V) * VW == 16).
template <class V, int VW>
struct vector_loader {
  static_assert(sizeof(V) * VW == 16, "vector_loader reads 16-byte chunks");
  using value_type = V;
  static constexpr std::uint64_t bytes_per_element = sizeof(V);
  const V* data;
  bool streaming = false;  // streams_reads

  __device__ __forceinline__ void chunk(std::uint64_t first, V (&out)[VW]) const {
    const uint4 raw = read_16_bytes(data + first, streaming);
    std::memcpy(out, &raw, sizeof(raw));
  }
  __device__ __forceinline__ V element(std::uint64_t i) const { return data[i]; }
};

// Contiguous data whose chunks may or may not be 16-byte aligned (a segment of a segmented
// reduction starts anywhere): a chunk is one 16-byte read where it is aligned, element reads
// where it is not. A segment's chunks all share its start's alignment, so a block or warp takes
// one branch for all of them.
template <class V, int VW>
struct aligned_where_possible_loader {
  static_assert(sizeof(V) * VW == 16, "aligned_where_possible_loader reads 16-byte chunks");
  using value_type = V;
  const V* data;
  __device__ __forceinline__ void chunk(std::uint64_t first, V (&out)[VW]) const {
    const V* p = data + first;
    if (reinterpret_cast<std::uintptr_t>(p) % 16 == 0) {
      const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
      std::memcpy(out, &raw, sizeof(raw));
    } else {
#pragma unroll
      for (int j = 0; j < VW; ++j) out[j] = p[j];
    }
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
