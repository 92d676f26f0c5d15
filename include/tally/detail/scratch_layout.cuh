#pragma once
// What the kernels and the compiled runtime (dispatch/runtime.cuh) share about memory: the
// layout of the control block at the front of a call's scratch, and the words a kernel
// hands reduce()'s value to the host in. A header of constants and plain structs, so the
// kernel layers include it without the runtime.

#include <cstddef>

namespace tally::detail {

// Bytes of the control block in front of the partial cells: the atomic strategies' counters
// and accumulator, the exact sums' accumulator, and a count the tests read (control_word
// below).
inline constexpr std::size_t control_bytes = 1024;
// Largest accumulator a device reduction supports, in bytes.
inline constexpr std::size_t max_accumulator_bytes = 256;

// Words of the control block. The atomic strategies use words 0-2 and the accumulator at
// byte 128 and leave them zero. A single pass whose block 0 had to reduce tiles itself
// counts it in fallback_folds (partials.cuh, fold_sync), which only the tests read.
namespace control_word {
inline constexpr int units_done = 0;
inline constexpr int tickets = 1;
inline constexpr int first_stored = 2;
// An exact sum's special values and its blocks done, and its digits from byte 256 (68 words at
// most): its blocks add into them and its last block takes them and leaves them 0
// (kernels/exact_kernels.cuh).
inline constexpr int exact_flags = 3;
inline constexpr int exact_blocks_done = 4;
inline constexpr std::size_t exact_digits_byte = 256;
inline constexpr int fallback_folds = 6;   // single passes whose block 0 reduced tiles itself (tests)
// A segmented reduction's counts of the segments it leaves to its later launches: the first launch
// counts them up from 0, the launch after it reads them, and the long segments' launch leaves the
// words 0 again (kernels/segmented_kernels.cuh).
inline constexpr std::size_t block_segments_byte = 64;
inline constexpr std::size_t long_segments_byte = 72;
inline constexpr std::size_t accumulator_byte = 128;
}  // namespace control_word

// How a kernel hands reduce()'s value to the host, in mapped pinned memory: word w holds
// bytes [4w, 4w + 4) of the value in its low half and handoff_tag in its high half, each
// word written by one 8-byte store. The host zeroes the words before the launch and takes
// the value once every word it needs shows the tag, so each word vouches for itself and no
// fence has to order a value before a flag. The partial cells use the same pattern
// (partials.cuh; docs/decisions/0011-host-handoff.md).
inline constexpr unsigned long long handoff_tag = 1ull << 32;
inline constexpr std::size_t handoff_words = max_accumulator_bytes / 4;
struct host_handoff {
  unsigned long long word[handoff_words];
};

}  // namespace tally::detail
