#include "tally/detail/dispatch/runtime.cuh"

#include "tally/error.cuh"

#include <cuda.h>  // the driver's context types, for the two entry points below

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tally::detail {
namespace {

// Allocations, and waits for a stream that is not being captured, may happen while another
// thread captures a graph in global mode; relaxed mode lets this thread make them then (in
// global mode they would fail and invalidate that capture), and the previous mode comes back
// on scope exit.
class relaxed_capture_mode {
 public:
  relaxed_capture_mode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~relaxed_capture_mode() { cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// ---- contexts -------------------------------------------------------------------------------
// The runtime API does not say which context it runs in; the driver does, and gives each
// context an id never reused in the process (cuCtxGetId, CUDA 12.0). The two entry points are
// fetched through the runtime, so that tally links no driver library of its own.
// The two stream questions every call asks (is it being captured, which stream is it) go to
// the driver too: the runtime's own versions of them cost several times as much per call.
using ctx_get_current_fn = CUresult (*)(CUcontext*);
using ctx_get_id_fn = CUresult (*)(CUcontext, unsigned long long*);
using stream_is_capturing_fn = CUresult (*)(CUstream, CUstreamCaptureStatus*);
using stream_get_id_fn = CUresult (*)(CUstream, unsigned long long*);

struct driver_entry_points {
  ctx_get_current_fn get_current = nullptr;
  ctx_get_id_fn get_id = nullptr;
  stream_is_capturing_fn stream_is_capturing = nullptr;
  stream_get_id_fn stream_get_id = nullptr;
};

void* driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  const cudaError_t status = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
#else
  const cudaError_t status = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return fn;
}

const driver_entry_points& driver() {
  static const driver_entry_points points = [] {
    driver_entry_points p;
    p.get_current = reinterpret_cast<ctx_get_current_fn>(driver_function("cuCtxGetCurrent"));
    p.get_id = reinterpret_cast<ctx_get_id_fn>(driver_function("cuCtxGetId"));
    p.stream_is_capturing = reinterpret_cast<stream_is_capturing_fn>(driver_function("cuStreamIsCapturing"));
    p.stream_get_id = reinterpret_cast<stream_get_id_fn>(driver_function("cuStreamGetId"));
    return p;
  }();
  return points;
}

// The id of the context this thread last ran a call in (0: none yet); thread-local caches
// of CUDA facts compare it with the id they were filled under.
thread_local unsigned long long thread_context = 0;
// Within one algorithm call (algorithm_scope) the context cannot change under this thread,
// so it is asked of the driver once per call, not by every part that needs it.
thread_local int scoped_device = -1;

// ---- the pools --------------------------------------------------------------------------------
// The test hook's count of allocations still to fail (fail_next_allocations).
std::atomic<int> injected_allocation_failures{0};

bool take_injected_failure() {
  int left = injected_allocation_failures.load(std::memory_order_relaxed);
  while (left > 0) {
    if (injected_allocation_failures.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

// The pools' two allocations. A failed one leaves nothing allocated and no error pending:
// cudaGetLastError clears what the failed call recorded, so that the caller's next CUDA
// call does not report it.
cudaError_t allocate_device(void** memory, std::size_t bytes) {
  relaxed_capture_mode relaxed;
  *memory = nullptr;
  if (take_injected_failure()) return cudaErrorMemoryAllocation;
  const cudaError_t status = cudaMalloc(memory, bytes);
  if (status != cudaSuccess) {
    *memory = nullptr;
    cudaGetLastError();
  }
  return status;
}

cudaError_t allocate_pinned(void** memory, std::size_t bytes) {
  relaxed_capture_mode relaxed;
  *memory = nullptr;
  if (take_injected_failure()) return cudaErrorMemoryAllocation;
  const cudaError_t status = cudaHostAlloc(memory, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (status != cudaSuccess) {
    *memory = nullptr;
    cudaGetLastError();
  }
  return status;
}

// Device bytes of the scratch blocks the pool allocated and has not given up, whether or not
// its map still lists them (scratch_bytes_allocated): a block dropped from the map without
// being freed shows here as bytes the map does not hold.
std::atomic<std::size_t> allocated_block_bytes{0};

// A block of a context that has ended: its memory went with the context.
void forget_block(std::size_t bytes) { allocated_block_bytes.fetch_sub(bytes); }

// Frees a scratch block of a live context. cudaFree waits for the device to finish its work
// first ("cudaFree ... synchronizes", CUDA programming guide, implicit synchronization), so
// no kernel still uses the block. Errors are dropped: the memory is given up either way.
void free_device_block(void* memory, std::size_t bytes) {
  if (!memory) return;
  forget_block(bytes);
  relaxed_capture_mode relaxed;
  if (cudaFree(memory) != cudaSuccess) cudaGetLastError();
}

struct scratch_entry {
  std::mutex lock;  // held by the lease of the call that is enqueuing on the stream
  int device = 0;
  unsigned long long context = 0;
  unsigned long long stream_id = 0;
  void* memory = nullptr;
  std::size_t bytes = 0;
  unsigned int epoch = 0;      // the last call's
  bool needs_zeroing = false;  // a call's launches did not all succeed
  // Calls holding it. Raised under the pool's mutex, or without it by a thread's cached
  // lease (take_cached_entry), which then checks the pool's generation; lowered without it.
  // Whatever removes an entry from the pool raises the generation first and reads this after.
  std::atomic<int> leases{0};
  std::atomic<std::uint64_t> last_use{0};  // the pool's clock at its last lease: eviction takes the oldest
};

using scratch_key = std::pair<unsigned long long, unsigned long long>;  // (context, stream id)

// Gives up an entry's block once the pool no longer lists the entry and no call holds it:
// freed where its context is live, only forgotten where the context ended (its memory went
// with it). A lease cache that still holds the entry finds it empty.
void give_up_block(scratch_entry& entry, bool context_live) {
  if (context_live) free_device_block(entry.memory, entry.bytes);
  else if (entry.memory) forget_block(entry.bytes);
  entry.memory = nullptr;
  entry.bytes = 0;
}

// Whether `context` is the live context of `device`, asked of the driver (for the pools'
// destructors at process exit, where the registry may not have seen a reset yet).
bool is_live_context_of(int device, unsigned long long context);

// The entries are shared: with the pool's map, with the lease caches of the threads that
// used them (which keep a removed entry's object, never its memory, until they look again)
// and, for an entry of an ended context that a call still held, with `retired`.
struct scratch_pool {
  std::mutex mutex;
  std::map<scratch_key, std::shared_ptr<scratch_entry>> entries;
  std::vector<std::shared_ptr<scratch_entry>> retired;  // removed while leased: dropped once no call holds them
  std::atomic<std::uint64_t> clock{0};  // raised under the mutex
  // Raised (under the mutex) before anything is removed from `entries`: a thread's cached
  // lease taken under an older generation is not trusted (take_cached_entry).
  std::atomic<std::uint64_t> generation{1};
  // At process exit. The pool is a function-local static made after the CUDA runtime
  // started, so it is destroyed before the runtime shuts down; a block is freed only where
  // its context is still the device's live one, so that nothing of a reset context is
  // touched. Errors are dropped: the process is ending.
  ~scratch_pool() {
    for (auto& [key, entry] : entries)
      if (entry->memory && is_live_context_of(entry->device, entry->context) && cudaFree(entry->memory) != cudaSuccess)
        cudaGetLastError();
  }
};

scratch_pool& pool() {
  static scratch_pool p;
  return p;
}

constexpr std::size_t slot_bytes = (sizeof(host_handoff) + 63) / 64 * 64;  // whole cache lines
constexpr std::size_t slots_per_slab = 64;

struct slab {
  void* memory = nullptr;
  unsigned long long context = 0;  // the context that allocated it: a reset of it frees the slab
  std::size_t in_use = 0;
};

struct slot_pool {
  std::mutex mutex;
  std::vector<slab> slabs;
  std::vector<void*> free_slots;
  std::vector<int> slab_devices;  // the device current when each slab was allocated
  ~slot_pool() {  // at process exit, as scratch_pool's
    for (std::size_t i = 0; i < slabs.size(); ++i)
      if (is_live_context_of(slab_devices[i], slabs[i].context) && cudaFreeHost(slabs[i].memory) != cudaSuccess)
        cudaGetLastError();
  }
};

slot_pool& slots() {
  static slot_pool p;
  return p;
}

slab* slab_of(slot_pool& p, const void* slot) {
  for (slab& s : p.slabs) {
    const char* begin = static_cast<const char*>(s.memory);
    if (slot >= begin && slot < begin + slot_bytes * slots_per_slab) return &s;
  }
  return nullptr;
}

// The context each device ran in when last seen; a new one means the old one was reset.
struct context_registry {
  std::mutex mutex;
  std::map<int, unsigned long long> by_device;
};
context_registry& contexts() {
  static auto* r = new context_registry;
  return *r;
}

// Forgets what the pools made in a context that has ended. Its memory ended with it, so
// nothing is freed; an entry a call still holds is deleted by that call's lease.
void forget_context(unsigned long long context) {
  {
    auto& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.generation.fetch_add(1);
    for (auto it = p.entries.begin(); it != p.entries.end();) {
      if (it->first.first != context) {
        ++it;
        continue;
      }
      if (it->second->memory) forget_block(it->second->bytes);
      if (it->second->leases.load() > 0) p.retired.push_back(std::move(it->second));
      it = p.entries.erase(it);
    }
  }
  auto& s = slots();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<void*> kept;
  for (void* slot : s.free_slots) {
    const slab* owner = slab_of(s, slot);
    if (owner && owner->context != context) kept.push_back(slot);
  }
  s.free_slots.swap(kept);
  for (std::size_t i = s.slabs.size(); i-- > 0;) {
    if (s.slabs[i].context != context) continue;
    s.slabs.erase(s.slabs.begin() + std::ptrdiff_t(i));
    s.slab_devices.erase(s.slab_devices.begin() + std::ptrdiff_t(i));
  }
}

bool context_is_live(int device, unsigned long long context) {
  auto& r = contexts();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto found = r.by_device.find(device);
  return found != r.by_device.end() && found->second == context;
}

// A stream's unique id, which tells a new stream from a destroyed one that had the same
// handle (the driver hands a destroyed stream's handle to the next stream created). For
// cudaStreamPerThread it is the calling thread's own stream.
// The driver is asked first; where it fails (or is missing), the runtime is asked the same
// question, so that the error tally reports is the runtime's, with the runtime's name.
// tally's library is compiled without per-thread default streams, so a null handle here is
// the legacy stream, and the special handles have the same values in both APIs.
CUstream driver_stream(cudaStream_t stream) {
  return stream == nullptr ? CU_STREAM_LEGACY : reinterpret_cast<CUstream>(stream);
}

unsigned long long stream_id(cudaStream_t stream) {
  unsigned long long id = 0;
  const driver_entry_points& d = driver();
  if (d.stream_get_id && d.stream_get_id(driver_stream(stream), &id) == CUDA_SUCCESS) return id;
  check_cuda_call(cudaStreamGetId(stream, &id), "asking the id of the policy's stream (cudaStreamGetId)");
  return id;
}

// The stream's capture status: asked of the driver, and of the runtime only where the driver
// cannot answer (so that an error names the runtime's call).
cudaError_t capture_status(cudaStream_t stream, cudaStreamCaptureStatus& capture) {
  static_assert(int(CU_STREAM_CAPTURE_STATUS_ACTIVE) == int(cudaStreamCaptureStatusActive) &&
                int(CU_STREAM_CAPTURE_STATUS_INVALIDATED) == int(cudaStreamCaptureStatusInvalidated));
  const driver_entry_points& d = driver();
  CUstreamCaptureStatus asked = CU_STREAM_CAPTURE_STATUS_NONE;
  if (d.stream_is_capturing && d.stream_is_capturing(driver_stream(stream), &asked) == CUDA_SUCCESS) {
    capture = static_cast<cudaStreamCaptureStatus>(asked);
    return cudaSuccess;
  }
  return cudaStreamIsCapturing(stream, &capture);
}

bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_cuda_call(capture_status(stream, capture), "asking whether the policy's stream is being captured");
  if (capture == cudaStreamCaptureStatusInvalidated)
    throw_cuda_failure(cudaErrorStreamCaptureInvalidated, "enqueuing on a stream whose capture was invalidated");
  return capture == cudaStreamCaptureStatusActive;
}

// A kernel launched on a stream of another device fails with "invalid resource handle",
// which names neither the stream nor the device; this says what is wrong, before anything
// is allocated. The special handles (legacy, per-thread) always name a current-device stream.
// cudaStreamGetDevice came with CUDA 12.8; older toolkits leave the check to the launch.
void check_stream_device(cudaStream_t stream, int device) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return;
#if CUDART_VERSION >= 12080
  int owner = device;
  check_cuda_call(cudaStreamGetDevice(stream, &owner), "asking the device of the policy's stream");
  if (owner != device) {
    throw_invalid_argument(current_algorithm() ? current_algorithm() : "device",
                           "the policy's stream belongs to device " + std::to_string(owner) +
                               " but the current device is " + std::to_string(device) + "; call cudaSetDevice(" +
                               std::to_string(owner) + ") first, or use a stream of the current device");
  }
#endif
}

// Makes a zeroed block of `bytes` on the current device; the caller owns it. Throws
// tally::bad_alloc when memory is short, leaving nothing allocated. Zeroed on a private
// stream: a memset on the caller's stream could be swallowed by a graph capture, and one on
// the legacy stream would break that capture.
void* make_zeroed_block(int device, unsigned long long stream, std::size_t bytes) {
  void* memory = nullptr;
  const cudaError_t allocated = allocate_device(&memory, bytes);
  if (allocated != cudaSuccess) {
    const std::string what =
        "the scratch of stream " + std::to_string(stream) + " (its cudaStreamGetId) on device " + std::to_string(device);
    throw_allocation_error(allocated, what.c_str(), bytes);
  }
  relaxed_capture_mode relaxed;
  cudaStream_t init_stream = nullptr;
  cudaError_t status = cudaStreamCreateWithFlags(&init_stream, cudaStreamNonBlocking);
  if (status == cudaSuccess) {
    status = cudaMemsetAsync(memory, 0, bytes, init_stream);
    const cudaError_t synced = cudaStreamSynchronize(init_stream);
    if (status == cudaSuccess) status = synced;
    cudaStreamDestroy(init_stream);
  }
  if (status != cudaSuccess) {
    cudaFree(memory);
    throw_cuda_failure(status, "zeroing new scratch");
  }
  allocated_block_bytes.fetch_add(bytes);
  return memory;
}

// Scratch blocks are allocated in powers of two from 16 KiB, so that a stream's block grows
// at most a few times (each growth waits for the device, in cudaFree).
std::size_t block_bytes_for(std::size_t needed) {
  std::size_t bytes = 16384;
  while (bytes < needed) bytes *= 2;
  return bytes;
}

// Frees the least recently used entries of `context` that no call holds, until at most
// max_scratch_entries remain. Under the pool's mutex.
void evict_beyond_limit(scratch_pool& p, unsigned long long context) {
  std::size_t count = 0;
  for (const auto& [key, entry] : p.entries) count += key.first == context;
  if (count <= max_scratch_entries) return;
  p.generation.fetch_add(1);  // before the leases are read: see take_cached_entry
  for (; count > max_scratch_entries; --count) {
    auto victim = p.entries.end();
    for (auto it = p.entries.begin(); it != p.entries.end(); ++it) {
      if (it->first.first != context || it->second->leases.load() != 0) continue;
      if (victim == p.entries.end() || it->second->last_use.load() < victim->second->last_use.load()) victim = it;
    }
    if (victim == p.entries.end()) return;
    give_up_block(*victim->second, true);  // an entry of the calling thread's live context
    p.entries.erase(victim);
  }
}

// Entries of ended contexts that calls held when the context was forgotten, dropped once no
// call holds them. Under the pool's mutex.
void drop_retired(scratch_pool& p) {
  p.retired.erase(std::remove_if(p.retired.begin(), p.retired.end(),
                                 [](const std::shared_ptr<scratch_entry>& e) { return e->leases.load() == 0; }),
                  p.retired.end());
}

// Each thread remembers the entries of the last few streams it ran calls on, so that a loop
// of calls takes its stream's scratch without the pool's mutex, map or eviction scan.
struct cached_lease {
  unsigned long long context = 0;
  unsigned long long stream = 0;
  std::uint64_t generation = 0;  // the pool's, when the entry was found in it
  std::shared_ptr<scratch_entry> entry;
};
struct lease_cache {
  static constexpr int ways = 4;
  cached_lease way[ways];
  int next = 0;  // the way the next miss replaces
};
thread_local lease_cache this_threads_leases;

// The cached entry of (context, stream), leased; nullptr when this thread has none that the
// pool still holds. The lease is raised first and the generation read after it, while
// whatever removes entries raises the generation first and reads the leases after it (both
// sequentially consistent): either the remover sees this lease and keeps the entry, or this
// thread sees the new generation and lets go. The object itself outlives the check, being
// held by the cache.
scratch_entry* take_cached_entry(scratch_pool& p, unsigned long long context, unsigned long long stream) {
  for (cached_lease& c : this_threads_leases.way) {
    if (c.stream != stream || c.context != context || !c.entry) continue;
    if (p.generation.load(std::memory_order_relaxed) != c.generation) return nullptr;
    scratch_entry* entry = c.entry.get();
    entry->leases.fetch_add(1);
    if (p.generation.load() != c.generation) {
      entry->leases.fetch_sub(1);
      return nullptr;
    }
    entry->last_use.store(p.clock.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return entry;
  }
  return nullptr;
}

void remember_lease(unsigned long long context, unsigned long long stream, std::uint64_t generation,
                    std::shared_ptr<scratch_entry> entry) {
  lease_cache& cache = this_threads_leases;
  cached_lease* slot = nullptr;
  for (cached_lease& c : cache.way)
    if (c.stream == stream && c.context == context) slot = &c;
  if (!slot) {
    slot = &cache.way[cache.next];
    cache.next = (cache.next + 1) % lease_cache::ways;
  }
  slot->context = context;
  slot->stream = stream;
  slot->generation = generation;
  slot->entry = std::move(entry);  // may drop the last hold on an entry the pool removed
}

// The entries this thread made for its per-thread default stream: freed when it exits.
struct per_thread_entries {
  std::vector<scratch_key> keys;
  ~per_thread_entries() {
    for (const scratch_key& key : keys) {
      auto& p = pool();
      std::shared_ptr<scratch_entry> gone;
      {
        std::lock_guard<std::mutex> lock(p.mutex);
        auto found = p.entries.find(key);
        if (found == p.entries.end()) continue;
        p.generation.fetch_add(1);
        if (found->second->leases.load() > 0) continue;
        gone = std::move(found->second);
        p.entries.erase(found);
      }
      give_up_block(*gone, context_is_live(gone->device, gone->context));
    }
  }
};
thread_local per_thread_entries this_threads_entries;

std::atomic<unsigned int> fold_polls{default_fold_poll_limit};

// The test hook's override of pageable memory access (set_pageable_access_override).
std::atomic<bool> no_pageable_access_override{false};

thread_local const char* running_algorithm = nullptr;

bool loses_the_context(cudaError_t code) {
  switch (code) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
      return true;
    default:
      return false;
  }
}

std::string remedy_for(cudaError_t code) {
  if (loses_the_context(code))
    return "the CUDA context is lost with all its memory and streams; find the kernel that failed (compute-sanitizer "
           "names it), then restart the process or call cudaDeviceReset()";
  switch (code) {
    case cudaErrorMemoryAllocation:
      return "free device memory, or call tally::release_scratch() to hand back what tally holds";
    case cudaErrorInvalidResourceHandle:
      return "the policy's stream was destroyed or belongs to another device; pass a live stream of the current device";
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureMerge:
      return "the call met a stream capture it cannot take part in (legacy-stream work during a capture, or a "
             "capture already invalidated); capture on a stream created by the application, and see "
             "docs/lifecycle.md";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDeviceFunction:
      return "the program or the tally library holds no code for this GPU; build both with CUDA architectures that "
             "include it (CMAKE_CUDA_ARCHITECTURES, or nvcc -arch)";
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
      return "check that a CUDA device is present and that cudaSetDevice named one";
    default:
      return "check the CUDA state the application left (docs/errors.md says what tally does with errors left pending)";
  }
}

}  // namespace

// ---- errors ---------------------------------------------------------------------------------

// The outermost scope names the call: tally::min_element runs through reduce's code, and
// its errors should say min_element.
algorithm_scope::algorithm_scope(const char* algorithm) noexcept : previous_(running_algorithm) {
  if (!previous_) {
    running_algorithm = algorithm;
    scoped_device = -1;
  }
}
algorithm_scope::~algorithm_scope() { running_algorithm = previous_; }
const char* current_algorithm() noexcept { return running_algorithm; }
std::string message_subject() {
  const char* algorithm = current_algorithm();
  return algorithm ? std::string("tally::") + algorithm : std::string("tally");
}

void throw_cuda_failure(cudaError_t code, const char* action) {
  cudaGetLastError();  // the failed call recorded `code` as the thread's last error: tally reports it here
  throw cuda_error(code, message_subject() + ": " + action + " failed with " + cudaGetErrorName(code) + " (" +
                             cudaGetErrorString(code) + "); " + remedy_for(code) + ".");
}

// ---- devices and contexts -------------------------------------------------------------------

int current_device() {
  // Once a device has been seen the count cannot drop to zero, so later calls skip asking.
  static std::atomic<bool> device_seen{false};
  if (!device_seen.load(std::memory_order_relaxed)) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0) {
      cudaGetLastError();  // leave no sticky-looking error behind for the caller
      const cudaError_t reported = status == cudaSuccess ? cudaErrorNoDevice : status;
      throw cuda_error(reported, message_subject() + ": no CUDA device is available for a device policy (" +
                                     cudaGetErrorName(reported) + "); use tally::host for host data.");
    }
    device_seen.store(true, std::memory_order_relaxed);
  }
  int device = 0;
  check_cuda_call(cudaGetDevice(&device), "asking the current device");
  return device;
}

unsigned long long current_context(int device) {
  if (running_algorithm && scoped_device == device) return thread_context;
  const driver_entry_points& d = driver();
  const auto ask = [&d](unsigned long long& id) {
    CUcontext context = nullptr;
    if (d.get_current) d.get_current(&context);
    if (!context) return false;
    unsigned long long unique = 0;
    if (d.get_id && d.get_id(context, &unique) == CUDA_SUCCESS) {
      id = unique + 1;  // never 0
      return true;
    }
    id = reinterpret_cast<std::uintptr_t>(context);  // a driver without cuCtxGetId
    return d.get_id == nullptr;
  };
  unsigned long long id = 0;
  if (!ask(id)) {
    // No live context is current on this thread yet (a new thread, or the first call after a
    // cudaDeviceReset): the runtime makes the device's primary context current on its first
    // call that needs one.
    relaxed_capture_mode relaxed;
    check_cuda_call(cudaFree(nullptr), "starting the device's CUDA context");
    if (!ask(id)) throw_cuda_failure(cudaErrorContextIsDestroyed, "finding the current CUDA context");
  }
  if (running_algorithm) scoped_device = device;
  if (id == thread_context) return id;  // this thread's last context: nothing to learn
  unsigned long long ended = 0;
  {
    auto& r = contexts();
    std::lock_guard<std::mutex> lock(r.mutex);
    unsigned long long& known = r.by_device[device];
    if (known != id) {
      ended = known;
      known = id;
    }
  }
  if (ended != 0) forget_context(ended);
  thread_context = id;
  return id;
}

namespace {
bool is_live_context_of(int device, unsigned long long context) {
  const driver_entry_points& d = driver();
  if (!d.get_current || !d.get_id || cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  CUcontext current = nullptr;
  unsigned long long unique = 0;
  if (d.get_current(&current) != CUDA_SUCCESS || !current || d.get_id(current, &unique) != CUDA_SUCCESS) return false;
  return unique + 1 == context;
}
}  // namespace

const device_properties& properties(int device) {
  // Lock-free after the first query of a device; entries live until process exit.
  constexpr int fast_devices = 64;
  static std::atomic<const device_properties*> fast[fast_devices] = {};
  if (device >= 0 && device < fast_devices) {
    if (const auto* known = fast[device].load(std::memory_order_acquire)) return *known;
  }
  static std::mutex mutex;
  static auto* by_device = new std::map<int, std::unique_ptr<device_properties>>;
  std::lock_guard<std::mutex> lock(mutex);
  auto& entry = (*by_device)[device];
  if (!entry) {
    auto props = std::make_unique<device_properties>();
    props->ordinal = device;
    int value = 0;
    const auto attribute = [&](cudaDeviceAttr which) {
      check_cuda_call(cudaDeviceGetAttribute(&value, which, device), "asking the device's attributes");
      return value;
    };
    props->multiprocessors = attribute(cudaDevAttrMultiProcessorCount);
    props->l2_bytes = attribute(cudaDevAttrL2CacheSize);
    props->pageable_memory_access = attribute(cudaDevAttrPageableMemoryAccess) != 0;
    props->concurrent_managed_access = attribute(cudaDevAttrConcurrentManagedAccess) != 0;
    props->programmatic_launch = attribute(cudaDevAttrComputeCapabilityMajor) >= 9;
    entry = std::move(props);
  }
  if (device >= 0 && device < fast_devices) fast[device].store(entry.get(), std::memory_order_release);
  return *entry;
}

namespace {
cudaMemoryType memory_type_of(const void* p) {
  cudaPointerAttributes attributes{};
  check_cuda_call(cudaPointerGetAttributes(&attributes, p), "asking what memory a pointer refers to");
  return attributes.type;
}
}  // namespace

bool is_device_accessible(const void* p, const device_properties& props) {
  // Addresses already found to be device allocations are remembered per thread, for the
  // context they were found in: under unified addressing they lie in CUDA's reserved range
  // while it lives. Pinned host memory is not remembered: once freed, malloc may hand its
  // address out again.
  constexpr int remembered = 16;
  thread_local const void* known[remembered] = {};
  thread_local int next = 0;
  thread_local unsigned long long known_context = 0;
  if (known_context != thread_context) {
    for (auto& k : known) k = nullptr;
    known_context = thread_context;
  }
  for (const void* k : known)
    if (k == p) return true;
  const cudaMemoryType type = memory_type_of(p);
  if (type == cudaMemoryTypeUnregistered)
    return props.pageable_memory_access && !no_pageable_access_override.load(std::memory_order_relaxed);
  if (type != cudaMemoryTypeDevice) return true;
  known[next] = p;
  next = (next + 1) % remembered;
  return true;
}

bool needs_idle_device_for_host_access(const void* p, const device_properties& props) {
  if (props.concurrent_managed_access) return false;
  return memory_type_of(p) == cudaMemoryTypeManaged;
}

void check_stream_of_device(cudaStream_t stream, int device) {
  thread_local cudaStream_t last_stream = nullptr;
  thread_local int last_device = -1;
  thread_local unsigned long long last_context = 0;
  if (stream == last_stream && device == last_device && last_context == thread_context) return;
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return;
  if (is_capturing(stream)) return;
  check_stream_device(stream, device);
  last_stream = stream;
  last_device = device;
  last_context = thread_context;
}

namespace {
[[noreturn]] void refuse_capture_of_host_result() {
  throw_invalid_argument(current_algorithm() ? current_algorithm() : "reduce",
                         "the policy's stream is being captured into a CUDA graph, and this call returns its result "
                         "to the host, which a captured call cannot do (its work runs only when the graph is "
                         "launched); inside a capture use tally::reduce_into, which writes the result to device "
                         "memory, or call after the capture ends.");
}
}  // namespace

// ---- scratch --------------------------------------------------------------------------------

scratch_lease::scratch_lease(int device, cudaStream_t stream, std::size_t partial_bytes, bool result_to_host)
    : stream_(stream) {
  const std::size_t needed = control_bytes + partial_bytes;
  const unsigned long long context = current_context(device);
  if (is_capturing(stream)) {
    if (result_to_host) refuse_capture_of_host_result();
    // The graph's own block: a graph memory node, zeroed by a memset node, freed by a free
    // node after the call's kernels. A graph holding memory nodes has at most one executable
    // graph at a time, and launches of one executable graph run one after another, so no two
    // kernels ever share it.
    void* memory = nullptr;
    check_cuda_call(cudaMallocAsync(&memory, needed, stream), "allocating scratch inside a stream capture (cudaMallocAsync)");
    const cudaError_t zeroed = cudaMemsetAsync(memory, 0, needed, stream);
    if (zeroed != cudaSuccess) {
      cudaFreeAsync(memory, stream);
      throw_cuda_failure(zeroed, "zeroing scratch inside a stream capture");
    }
    scratch_.control = static_cast<unsigned int*>(memory);
    scratch_.partials = static_cast<char*>(memory) + control_bytes;
    scratch_.epoch = 1;
    return;
  }
  const unsigned long long id = stream_id(stream);
  check_stream_of_device(stream, device);
  auto& p = pool();
  scratch_entry* entry = take_cached_entry(p, context, id);
  if (!entry) {
    std::shared_ptr<scratch_entry> found;
    std::uint64_t generation = 0;
    {
      std::lock_guard<std::mutex> lock(p.mutex);
      drop_retired(p);
      auto& slot = p.entries[{context, id}];
      if (!slot) {
        slot = std::make_shared<scratch_entry>();
        slot->device = device;
        slot->context = context;
        slot->stream_id = id;
        if (stream == cudaStreamPerThread) this_threads_entries.keys.push_back({context, id});
      }
      found = slot;
      found->leases.fetch_add(1);
      found->last_use.store(p.clock.fetch_add(1) + 1);
      evict_beyond_limit(p, context);
      generation = p.generation.load();
    }
    entry = found.get();
    remember_lease(context, id, generation, std::move(found));
  }
  entry_ = entry;
  entry->lock.lock();
  try {
    if (entry->bytes < needed) {
      void* grown = make_zeroed_block(device, id, block_bytes_for(needed));
      free_device_block(entry->memory, entry->bytes);  // waits for the device: no kernel still uses it
      entry->memory = grown;
      entry->bytes = block_bytes_for(needed);
      entry->needs_zeroing = false;
    }
    ++entry->epoch;
    if (entry->epoch == 0 || entry->needs_zeroing) {
      // After 2^32 calls the epochs come round again, and after a call whose launches did not
      // all succeed the atomic strategies' counters may be dirty: zero the block behind the
      // stream's work.
      check_cuda_call(cudaMemsetAsync(entry->memory, 0, entry->bytes, stream), "zeroing a stream's scratch");
      entry->needs_zeroing = false;
      if (entry->epoch == 0) entry->epoch = 1;
    }
  } catch (...) {
    // A stream whose first block could not be made leaves no entry behind: the pool is as it
    // was before the call.
    entry->lock.unlock();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.generation.fetch_add(1);  // before the lease is let go: see take_cached_entry
    if (entry->leases.fetch_sub(1) == 1 && !entry->memory) {
      const auto found = p.entries.find({context, id});
      if (found != p.entries.end() && found->second.get() == entry) p.entries.erase(found);
    }
    entry_ = nullptr;
    throw;
  }
  scratch_.control = static_cast<unsigned int*>(entry->memory);
  scratch_.partials = static_cast<char*>(entry->memory) + control_bytes;
  scratch_.epoch = entry->epoch;
}

scratch_lease::~scratch_lease() {
  if (!entry_) {  // the graph's block: the free node follows the call's kernels
    if (scratch_.control && cudaFreeAsync(scratch_.control, stream_) != cudaSuccess) cudaGetLastError();
    return;
  }
  auto* entry = static_cast<scratch_entry*>(entry_);
  if (!launched_) entry->needs_zeroing = true;
  entry->lock.unlock();
  entry->leases.fetch_sub(1);  // the last touch: the pool or a cache keeps the object alive until here
}

unsigned int stream_control_word(int device, cudaStream_t stream, int index) {
  const unsigned long long context = current_context(device);
  const unsigned long long id = stream_id(stream);
  std::shared_ptr<scratch_entry> entry;
  auto& p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    const auto found = p.entries.find({context, id});
    if (found == p.entries.end()) return 0;
    entry = found->second;
    entry->leases.fetch_add(1);
  }
  unsigned int word = 0;
  cudaError_t status = cudaSuccess;
  {
    std::lock_guard<std::mutex> hold(entry->lock);
    status = cudaStreamSynchronize(stream);
    if (status == cudaSuccess && entry->memory)
      status = cudaMemcpy(&word, static_cast<unsigned int*>(entry->memory) + index, sizeof word, cudaMemcpyDeviceToHost);
  }
  entry->leases.fetch_sub(1);
  check_cuda_call(status, "reading a stream's scratch");
  return word;
}

std::size_t scratch_entries() {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.entries.size();
}

std::size_t scratch_bytes() {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  std::size_t bytes = 0;
  for (const auto& [key, entry] : p.entries) bytes += entry->bytes;
  return bytes;
}

std::size_t scratch_bytes_allocated() { return allocated_block_bytes.load(); }

void release_all() {
  std::vector<std::shared_ptr<scratch_entry>> freed;
  {
    auto& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.generation.fetch_add(1);  // before the leases are read: see take_cached_entry
    drop_retired(p);
    for (auto it = p.entries.begin(); it != p.entries.end();) {
      if (it->second->leases.load() > 0) {
        ++it;
        continue;
      }
      freed.push_back(std::move(it->second));
      it = p.entries.erase(it);
    }
  }
  for (const auto& entry : freed) give_up_block(*entry, context_is_live(entry->device, entry->context));
  auto& s = slots();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<slab> kept;
  std::vector<int> kept_devices;
  for (std::size_t i = 0; i < s.slabs.size(); ++i) {
    slab& b = s.slabs[i];
    if (b.in_use > 0) {
      kept.push_back(b);
      kept_devices.push_back(s.slab_devices[i]);
      continue;
    }
    const char* begin = static_cast<const char*>(b.memory);
    s.free_slots.erase(std::remove_if(s.free_slots.begin(), s.free_slots.end(),
                                      [&](void* slot) {
                                        return slot >= begin && slot < begin + slot_bytes * slots_per_slab;
                                      }),
                       s.free_slots.end());
    relaxed_capture_mode relaxed;
    if (cudaFreeHost(b.memory) != cudaSuccess) cudaGetLastError();
  }
  s.slabs.swap(kept);
  s.slab_devices.swap(kept_devices);
}

void fail_next_allocations(int count) {
  injected_allocation_failures.store(count > 0 ? count : 0, std::memory_order_relaxed);
}

int pending_allocation_failures() { return injected_allocation_failures.load(std::memory_order_relaxed); }

void set_pageable_access_override(bool no_pageable_access) {
  no_pageable_access_override.store(no_pageable_access, std::memory_order_relaxed);
}
bool pageable_access_overridden() { return no_pageable_access_override.load(std::memory_order_relaxed); }

void set_fold_poll_limit(unsigned int polls) { fold_polls.store(polls, std::memory_order_relaxed); }
unsigned int fold_poll_limit() { return fold_polls.load(std::memory_order_relaxed); }

namespace {
// Whether a wait on `stream` may run in relaxed capture mode: only where the stream itself is
// not being captured. A wait on a capturing stream (active or invalidated) must still fail as
// it would have, never wait for work that runs only when the graph is launched.
bool stream_not_captured(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusActive;
  return capture_status(stream, capture) == cudaSuccess && capture == cudaStreamCaptureStatusNone;
}
}  // namespace

void wait_for_stream(cudaStream_t stream, const char* action) {
  cudaError_t status = cudaSuccess;
  {
    std::optional<relaxed_capture_mode> relaxed;
    if (stream_not_captured(stream)) relaxed.emplace();
    status = cudaStreamSynchronize(stream);
  }
  check_cuda_call(status, action);
}

// ---- result slots ---------------------------------------------------------------------------

result_slot_counts result_slots() {
  auto& p = slots();
  std::lock_guard<std::mutex> lock(p.mutex);
  return {p.slabs.size(), p.slabs.size() * slots_per_slab, p.free_slots.size()};
}

result_slot::result_slot() : result_slot(current_device()) {}

result_slot::result_slot(int device) : handoff_(nullptr), context_(0) {
  context_ = current_context(device);
  auto& p = slots();
  std::lock_guard<std::mutex> lock(p.mutex);
  // Only a slot of this context will do: a slab dies with the context that allocated it, and
  // an application may reset one device while it goes on using another, whose calls would
  // otherwise take slots the reset has unmapped (tally learns of a reset only at the next call
  // on that device).
  std::size_t pick = p.free_slots.size();
  for (std::size_t i = p.free_slots.size(); i-- > 0;) {
    const slab* owner = slab_of(p, p.free_slots[i]);
    if (owner && owner->context == context_) {
      pick = i;
      break;
    }
  }
  if (pick == p.free_slots.size()) {
    // Room in the lists first: once the slab is allocated nothing may throw.
    p.slabs.reserve(p.slabs.size() + 1);
    p.free_slots.reserve((p.slabs.size() + 1) * slots_per_slab);
    void* memory = nullptr;
    const std::size_t bytes = slot_bytes * slots_per_slab;
    const cudaError_t allocated = allocate_pinned(&memory, bytes);
    if (allocated != cudaSuccess) throw_allocation_error(allocated, "a slab of pinned result slots", bytes);
    p.slabs.push_back(slab{memory, context_, 0});
    p.slab_devices.push_back(device);
    for (std::size_t i = 0; i < slots_per_slab; ++i) p.free_slots.push_back(static_cast<char*>(memory) + i * slot_bytes);
    pick = p.free_slots.size() - 1;
  }
  handoff_ = static_cast<host_handoff*>(p.free_slots[pick]);
  p.free_slots[pick] = p.free_slots.back();
  p.free_slots.pop_back();
  if (slab* owner = slab_of(p, handoff_)) ++owner->in_use;
  // A slot goes back to the pool only once no kernel will write it: after its value was
  // taken, after a throw before its kernel was launched, or after its stream failed.
  volatile unsigned long long* words = handoff_->word;
  for (std::size_t w = 0; w < handoff_words; ++w) words[w] = 0;
}

bool result_slot::handed_over(std::size_t words) const noexcept {
  const volatile unsigned long long* word = handoff_->word;  // aligned 8-byte reads: never torn
  for (std::size_t w = 0; w < words; ++w)
    if ((word[w] & ~0xffffffffull) != handoff_tag) return false;
  return true;
}

void result_slot::take(cudaStream_t stream, void* value, std::size_t bytes) const {
  // The fast path reads only the words: no driver call between the kernel's stores and our
  // return. The clock is read every few thousand spins; after quiet_us the stream is asked
  // too (a failed kernel never hands a value over). After spin_us the wait follows the
  // schedule the application gave the device: cudaDeviceScheduleBlockingSync blocks in
  // cudaStreamSynchronize; any other keeps spinning, yielding the core between rounds, as
  // cudaStreamSynchronize itself spins under those schedules, but returns as soon as the
  // value lands, before the kernel retires.
  const std::size_t words = (bytes + 3) / 4;  // 4 bytes of the value per word
  using clock = std::chrono::steady_clock;
  constexpr auto quiet_us = std::chrono::microseconds(50);
  constexpr auto spin_us = std::chrono::microseconds(200);
  const auto start = clock::now();
  bool done = false;
  std::optional<bool> blocks;  // asked of the device's schedule once the wait passes spin_us
  const char* finished_without_value = "waiting for the result (the kernel finished without handing one over)";
  // Made before the first driver call, past quiet_us, and kept until the wait ends: the
  // queries and waits below must not break another thread's capture (wait_for_stream). A
  // value that lands sooner costs no call.
  std::optional<relaxed_capture_mode> relaxed;
  bool relaxing_asked = false;
  while (!done) {
    for (int spin = 0; spin < 2048 && !done; ++spin) done = handed_over(words);
    if (done) break;
    const auto waited = clock::now() - start;
    if (waited > quiet_us && !relaxing_asked) {
      relaxing_asked = true;
      if (stream_not_captured(stream)) relaxed.emplace();
    }
    if (waited > spin_us && !blocks) {
      unsigned int flags = 0;
      check_cuda_call(cudaGetDeviceFlags(&flags), "asking the device's schedule flags");
      blocks = (flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync;
    }
    if (blocks.value_or(false)) {
      check_cuda_call(cudaStreamSynchronize(stream), "waiting for the result on the policy's stream");
      done = handed_over(words);
      if (!done) throw_cuda_failure(cudaErrorLaunchFailure, finished_without_value);
    } else if (waited > quiet_us) {
      const cudaError_t status = cudaStreamQuery(stream);
      if (status != cudaErrorNotReady) {
        check_cuda_call(status, "waiting for the result on the policy's stream");
        done = handed_over(words);
        if (!done) throw_cuda_failure(cudaErrorLaunchFailure, finished_without_value);
      }
      if (blocks) std::this_thread::yield();  // past spin_us
    }
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  unsigned int pieces[handoff_words];
  const volatile unsigned long long* word = handoff_->word;
  for (std::size_t w = 0; w < words; ++w) pieces[w] = static_cast<unsigned int>(word[w]);
  std::memcpy(value, pieces, bytes);
}

result_slot::~result_slot() {
  auto& p = slots();
  std::lock_guard<std::mutex> lock(p.mutex);
  slab* owner = slab_of(p, handoff_);
  if (!owner) return;  // its context was reset: the slab is gone
  --owner->in_use;
  p.free_slots.push_back(handoff_);
}

}  // namespace tally::detail
