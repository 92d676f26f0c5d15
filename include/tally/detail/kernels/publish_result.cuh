#pragma once
// The one epilogue of every kernel that finishes a reduction: thread 0 writes op(init, total).

#include "tally/detail/scratch_layout.cuh"

#include <cuda/atomic>

#include <cstddef>
#include <cstring>

namespace tally::detail {

// Writes the result: to *out, or for reduce() into the host's hand-over words
// (scratch_layout.cuh), each 4 bytes of the value with the tag beside them in one 8-byte
// store, so that the host can take each word as soon as it lands, with no fence before a flag.
template <class Out>
__device__ __forceinline__ void publish(Out* out, const Out& value, host_handoff* handoff) {
  if (!handoff) {
    *out = value;
    return;
  }
  constexpr std::size_t words = (sizeof(Out) + 3) / 4;  // 4 bytes of the value per word
  static_assert(words <= handoff_words, "tally: the value is too large to hand over");
  unsigned int pieces[words] = {};
  std::memcpy(pieces, &value, sizeof(Out));
#pragma unroll
  for (std::size_t w = 0; w < words; ++w)
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(handoff->word[w])
        .store(handoff_tag | pieces[w], cuda::std::memory_order_relaxed);
}

}  // namespace tally::detail
