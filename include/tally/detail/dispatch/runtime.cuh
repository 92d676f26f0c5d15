#pragma once
// The compiled runtime (lib/): device properties, the CUDA context a call runs in, the
// scratch a call owns while it runs, and pinned result slots. Everything here is thread safe
// and allocates only on first use of a device, stream or slot. An allocation that fails
// throws tally::bad_alloc and leaves the pools as they were. docs/lifecycle.md is the
// ownership model and says what an application may rely on; docs/architecture.md places the
// runtime among the layers.

#include "tally/detail/scratch_layout.cuh"
#include "tally/error.cuh"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace tally::detail {

struct device_properties {
  int ordinal = 0;
  int multiprocessors = 0;
  int l2_bytes = 0;
  bool pageable_memory_access = false;    // the device may read ordinary malloc'd host memory
  bool concurrent_managed_access = false;  // the host may touch managed memory while kernels run
  bool programmatic_launch = false;       // compute capability 9.0+: kernels may overlap (launch.cuh)
};

// The current device, or tally::cuda_error when no CUDA device can be used.
int current_device();

// Cached properties of a device (queried once per device).
const device_properties& properties(int device);

// Whether the device can read memory at p: CUDA allocations (device, managed, pinned) yes;
// ordinary host memory only with pageable memory access.
bool is_device_accessible(const void* p, const device_properties& props);

// Test hook: while on, is_device_accessible answers for every device as for one without
// pageable memory access, so that tests take the path of a GPU that cannot read ordinary host
// memory (the arguments are refused, check_device_accessible) on a GPU that can. It only takes
// access away: device, managed and pinned memory stay readable, and a GPU without pageable
// access is never granted it. Off by default; process-wide, so for tests only.
void set_pageable_access_override(bool no_pageable_access);
bool pageable_access_overridden();

// Whether p is managed memory that the host must not touch while any kernel runs (a device
// without concurrent managed access): reduce() then waits for its stream before returning.
bool needs_idle_device_for_host_access(const void* p, const device_properties& props);

// The algorithm a thread is running, for error messages ("tally::reduce: ..."). Set by
// algorithm_scope at the entry of each device algorithm; messages name "tally" without one.
class algorithm_scope {
 public:
  explicit algorithm_scope(const char* algorithm) noexcept;
  ~algorithm_scope();
  algorithm_scope(const algorithm_scope&) = delete;
  algorithm_scope& operator=(const algorithm_scope&) = delete;

 private:
  const char* previous_;
};
const char* current_algorithm() noexcept;
// "tally::ALGORITHM" for the running algorithm, "tally" outside one: how every message starts.
std::string message_subject();

// Throws tally::cuda_error for a failed CUDA call of tally's own: a sentence that names the
// algorithm, what failed, the CUDA error and what to do. Clears the error the failed call
// recorded as the thread's last error, so that the application's next check does not see it
// again; an error the application left pending before the call was not tally's and stays
// untouched when tally's calls succeed (docs/errors.md).
[[noreturn]] void throw_cuda_failure(cudaError_t code, const char* action);
inline void check_cuda_call(cudaError_t code, const char* action) {
  if (code != cudaSuccess) throw_cuda_failure(code, action);
}

// The CUDA context (the device's primary context, or the one the application made current)
// this thread's calls run in, by its unique id. A cudaDeviceReset ends a context, and the
// next call sees a new id: the runtime then forgets every scratch block and result slab it
// made in the old one (their memory went with it) and starts afresh.
unsigned long long current_context(int device);

// Throws std::invalid_argument, naming both devices, when `stream` belongs to a device other
// than `device` (a launch there would fail with "invalid resource handle"). Skipped while
// the stream is being captured. The last stream and device this thread checked are
// remembered, so a loop of calls asks CUDA once.
void check_stream_of_device(cudaStream_t stream, int device);

// Device memory, managed memory and mapped pinned memory are readable by the device;
// ordinary (pageable) host memory only where the device has pageable memory access.
inline void check_device_accessible(const void* p, const device_properties& props, const char* algorithm,
                                    const char* what) {
  if (p == nullptr) throw_invalid_argument(algorithm, std::string(what) + " is a null pointer but the range is not empty");
  if (!is_device_accessible(p, props))
    throw_invalid_argument(algorithm, std::string(what) +
                                          " points to pageable host memory, which this GPU cannot read; "
                                          "copy it to the device, or use tally::host");
}

// ---- scratch ----------------------------------------------------------------------------
// The scratch one call owns: the control block, then room for its tile partials; epoch
// tags this call's partials (partials.cuh), so cells a previous call left behind are never
// mistaken for this call's. Never 0.
struct call_scratch {
  unsigned int* control = nullptr;
  void* partials = nullptr;
  unsigned int epoch = 0;
};

// Lends scratch to one call, for all of its launches; the call's launches go to `stream`.
//  - A stream not being captured: the block that (context, stream id) owns. Work on one
//    stream runs in order, so its calls may share it; the lease also holds the block's lock
//    until it is destroyed, so that two host threads enqueuing on one stream never
//    interleave one call's launches with another's (the two pass launches twice).
//  - A stream being captured: a block of the graph's own, allocated and zeroed on the
//    stream and freed after the call's launches (graph memory nodes), so the graph owns it
//    for its whole life, shares it with nothing, and may be replayed on any stream.
// partial_bytes is the room the call's partials need. Call launched() once every launch of
// the call succeeded; a lease destroyed without it (a launch failed or threw) has its block
// zeroed again behind whatever the call did launch.
class scratch_lease {
 public:
  // result_to_host: the call hands its result to the host (tally::reduce and the algorithms
  // built on it). Such a call cannot run inside a capture, whose work runs only when the graph
  // is launched: on a stream being captured the lease throws std::invalid_argument before
  // anything is enqueued (the capture stays valid), where the lease already asks whether the
  // stream is being captured, so the check costs nothing more.
  scratch_lease(int device, cudaStream_t stream, std::size_t partial_bytes, bool result_to_host);
  ~scratch_lease();
  scratch_lease(const scratch_lease&) = delete;
  scratch_lease& operator=(const scratch_lease&) = delete;

  const call_scratch& scratch() const noexcept { return scratch_; }
  void launched() noexcept { launched_ = true; }

 private:
  void* entry_ = nullptr;  // the pool's entry for a stream not being captured
  cudaStream_t stream_ = nullptr;
  call_scratch scratch_;
  bool launched_ = false;
};

// Scratch blocks the pool holds now (one per (context, stream) that has run a reduction
// needing one, until the stream's entry is released) and their bytes.
std::size_t scratch_entries();
std::size_t scratch_bytes();
// Test hook: the device bytes of the scratch blocks allocated and not yet freed (or lost with
// their context), whether or not the pool still lists them. Equal to scratch_bytes() except
// while a call grows a block: more means a block the pool let go of without freeing it.
std::size_t scratch_bytes_allocated();

// At most this many stream entries per context: past it, the least recently used one that
// no call holds is freed (after the device has finished its work). Entries of a thread's
// per-thread default stream are freed when the thread exits.
inline constexpr std::size_t max_scratch_entries = 64;

// Frees every scratch block and result slab that no call holds now, in every context of
// this process (tally::release_scratch). Waits for the device first.
void release_all();

// Test hook: the next `count` allocations the runtime makes (a stream's scratch with
// cudaMalloc, a slab of result slots with cudaHostAlloc) fail as if memory ran out, without
// asking CUDA; the call throws tally::bad_alloc. 0 cancels what is pending. Not for use
// outside tests: it is process-wide.
void fail_next_allocations(int count);
// Injected failures not yet used.
int pending_allocation_failures();

// Test hook: word `index` of the control block of `stream`'s scratch (control_word), read
// after the stream's work has finished; 0 where the stream has no scratch yet. A count kept
// there (fallback_folds) starts again at 0 whenever the block grows or is zeroed again.
unsigned int stream_control_word(int device, cudaStream_t stream, int index);

// Test hook: how many times a warp of block 0 of a single pass polls one batch slot of its
// cells (partials.cuh, poll_converged) before its wait runs out and block 0 reduces the missing tiles itself (partials.cuh, fold_sync). The
// default, default_fold_poll_limit, is a few milliseconds of polling; 1 makes nearly every
// single pass take that path.
inline constexpr unsigned int default_fold_poll_limit = 4096;
void set_fold_poll_limit(unsigned int polls);
unsigned int fold_poll_limit();

// Waits for the work on `stream` (cudaStreamSynchronize), checked, with this thread's capture
// mode relaxed for the wait: while another thread captures a graph in global mode, a wait on a
// stream that is not being captured is otherwise a forbidden call, which fails and invalidates
// that thread's capture. `action` names the wait in the error.
void wait_for_stream(cudaStream_t stream, const char* action);

// ---- result slots -------------------------------------------------------------------------
// The pinned result slots: slabs allocated, slots in them, slots free now (for tests).
struct result_slot_counts {
  std::size_t slabs = 0;
  std::size_t slots = 0;
  std::size_t free = 0;
};
result_slot_counts result_slots();

// A slot of pinned, mapped host memory that reduce()'s kernel hands its value over in.
// reduce() waits for the value itself, not for the whole stream, and reads it without a copy.
class result_slot {
 public:
  result_slot();  // its words start zeroed: no value handed over
  explicit result_slot(int device);  // the same, for the current device when the caller knows it
  ~result_slot();
  result_slot(const result_slot&) = delete;
  result_slot& operator=(const result_slot&) = delete;
  host_handoff* handoff() const noexcept { return handoff_; }  // unified addressing: the device's address too
  // Returns, with the value's `bytes` in `value`, once the kernel launched on `stream` has
  // handed them over. Spins (the value arrives before the kernel has finished retiring);
  // after 0.2 ms it blocks in cudaStreamSynchronize only under cudaDeviceScheduleBlockingSync.
  // The stream queries and waits of a long wait run in relaxed capture mode (wait_for_stream
  // says why). A failed stream throws tally::cuda_error.
  void take(cudaStream_t stream, void* value, std::size_t bytes) const;

 private:
  bool handed_over(std::size_t words) const noexcept;
  host_handoff* handoff_;
  unsigned long long context_;  // the context whose slab holds it
};

}  // namespace tally::detail
