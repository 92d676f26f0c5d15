#pragma once
// The memory tally keeps between calls, and how an application hands it back.
//
// A device call that needs room for its tile partials borrows its stream's scratch block:
// one per (CUDA context, stream), grown to what the largest plan on that stream has used
// (1 MiB at most), kept for the stream's next call so that steady state
// allocates nothing. reduce() also borrows a slot of pinned host memory for its value.
// Calls captured into a CUDA graph use memory the graph owns instead (docs/lifecycle.md).
//
// Entries are released on their own: a thread's per-thread default stream's when the
// thread exits, the least recently used beyond 64 streams per context, everything of a
// context when it is reset. release_scratch() hands back all of it now.

#include "tally/detail/dispatch/runtime.cuh"

#include <cstddef>

namespace tally {

struct scratch_usage {
  std::size_t streams = 0;       // scratch blocks held, one per stream that has used one
  std::size_t device_bytes = 0;  // their device memory
  std::size_t result_slabs = 0;  // slabs of pinned result slots
};

// What tally holds now.
inline scratch_usage scratch_held() {
  const auto slots = detail::result_slots();
  return {detail::scratch_entries(), detail::scratch_bytes(), slots.slabs};
}

// Frees every scratch block and slab of result slots that no call is using now, in every
// context of the process. It waits for the device to finish its work first (cudaFree does),
// so call it where an application would call cudaFree. Later calls allocate again as needed.
inline void release_scratch() { detail::release_all(); }

}  // namespace tally
