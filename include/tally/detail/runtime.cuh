#pragma once
// The compiled runtime (lib/): device properties, per-stream scratch, pinned result slots.
// Everything here is thread safe and allocates only on first use of a device, stream or slot.
// An allocation that fails throws tally::bad_alloc and leaves the pools as they were.

#include <cuda_runtime_api.h>

#include <cstddef>

namespace tally::detail {

struct device_properties {
  int ordinal = 0;
  int multiprocessors = 0;
  int l2_bytes = 0;
  bool pageable_memory_access = false;  // the device may read ordinary malloc'd host memory
  bool programmatic_launch = false;     // compute capability 9.0+: kernels may overlap (launch.cuh)
};

// The current device, or tally::cuda_error when no CUDA device can be used.
int current_device();

// Cached properties of a device (queried once per device).
const device_properties& properties(int device);

// Whether the device can read memory at p: CUDA allocations (device, managed, pinned) yes;
// ordinary host memory only with pageable memory access.
bool is_device_accessible(const void* p, const device_properties& props);

// Largest accumulator a device reduction supports, in bytes; scratch is sized for it.
inline constexpr std::size_t max_accumulator_bytes = 256;
// Most tile partials one plan produces (see plan.cuh); scratch holds this many cells.
inline constexpr std::size_t max_tiles = 8192;
// Bytes of scratch for one tile partial and its ready flag (partials.cuh).
inline constexpr std::size_t partial_cell_bytes = max_accumulator_bytes + 16;
// Bytes of the control block in front of the cells: the atomic strategies' counters and
// accumulator (control_words below).
inline constexpr std::size_t control_bytes = 256;

// Scratch owned by one (device, stream) pair. Work on one stream runs in order, so calls
// on the same stream may share it; calls on different streams never do. All of it is zero
// bytes between calls: each kernel clears what it used before it ends.
struct stream_scratch {
  unsigned int* control = nullptr;  // control_bytes: counters, then an accumulator at byte 128
  void* partials = nullptr;         // max_tiles * partial_cell_bytes bytes
};
stream_scratch scratch_for(int device, cudaStream_t stream);

// Throws std::invalid_argument, naming both devices, when `stream` belongs to a device other
// than `device` (a launch there would fail with "invalid resource handle"). For the calls
// that need no scratch (an empty range, a one-tile plan): the last stream and device this
// thread checked are remembered, so a loop of calls asks CUDA once. Skipped while the
// stream is being captured, as scratch_for does.
void check_stream_of_device(cudaStream_t stream, int device);

// Scratch entries the pool holds: one per (device, stream handle) that has run a reduction
// (per host thread for cudaStreamPerThread). A new stream that gets a destroyed stream's
// handle gets a new block in that entry, told apart by cudaStreamGetId (tests check this).
std::size_t scratch_entries();

// The pinned result slots: slabs allocated, slots in them, slots free now (for tests).
struct result_slot_counts {
  std::size_t slabs = 0;
  std::size_t slots = 0;
  std::size_t free = 0;
};
result_slot_counts result_slots();

// Test hook: the next `count` allocations the runtime makes (a stream's scratch with
// cudaMalloc, a slab of result slots with cudaHostAlloc) fail as if memory ran out, without
// asking CUDA; the call throws tally::bad_alloc. 0 cancels what is pending. Not for use
// outside tests: it is process-wide.
void fail_next_allocations(int count);
// Injected failures not yet used.
int pending_allocation_failures();

// How a kernel hands reduce()'s value to the host, in mapped pinned memory: word w holds
// bytes [4w, 4w + 4) of the value in its low half and handoff_tag in its high half, each
// word written by one 8-byte store. The host zeroes the words before the launch and takes
// the value once every word it needs shows the tag, so each word vouches for itself and no
// fence has to order a value before a flag (that fence cost 0.53-0.65 us a call on the H100,
// benchmarks/RESULTS.md). The partial cells use the same pattern (partials.cuh).
inline constexpr unsigned long long handoff_tag = 1ull << 32;
inline constexpr std::size_t handoff_words = max_accumulator_bytes / 4;
struct host_handoff {
  unsigned long long word[handoff_words];
};

// A slot of pinned, mapped host memory that reduce()'s kernel hands its value over in.
// reduce() waits for the value itself, not for the whole stream, and reads it without a copy.
class result_slot {
 public:
  result_slot();  // its words start zeroed: no value handed over
  ~result_slot();
  result_slot(const result_slot&) = delete;
  result_slot& operator=(const result_slot&) = delete;
  host_handoff* handoff() const noexcept { return handoff_; }  // unified addressing: the device's address too
  // Returns, with the value's `bytes` in `value`, once the kernel launched on `stream` has
  // handed them over. Spins (the value arrives before the kernel has finished retiring);
  // after 0.2 ms it blocks in cudaStreamSynchronize only under cudaDeviceScheduleBlockingSync.
  // A failed stream throws tally::cuda_error.
  void take(cudaStream_t stream, void* value, std::size_t bytes) const;

 private:
  bool handed_over(std::size_t words) const noexcept;
  host_handoff* handoff_;
};

}  // namespace tally::detail
