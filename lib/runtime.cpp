#include "tally/detail/runtime.cuh"

#include "tally/error.cuh"

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <cstdio>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace tally::detail {
namespace {

// Allocations may happen while another thread captures a graph in global mode; relaxed
// mode lets this thread allocate then, and the previous mode comes back on scope exit.
class relaxed_capture_mode {
 public:
  relaxed_capture_mode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~relaxed_capture_mode() { cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// Frees what the pools hold when the process exits. The pools are function-local statics
// made after the CUDA runtime started, so they are destroyed before it shuts down.
template <class Free>
void free_quietly(void* p, Free free_fn) {
  if (p) free_fn(p);
}

struct properties_cache {
  std::mutex mutex;
  std::map<int, std::unique_ptr<device_properties>> by_device;
};

properties_cache& props_cache() {
  static auto* cache = new properties_cache;  // never destroyed: used until process exit
  return *cache;
}

struct scratch_entry {
  unsigned long long stream_id;  // 0 while unknown (made during a capture); see stream_id
  stream_scratch scratch;
};

// (device, handle, thread): the thread only for cudaStreamPerThread, a handle that names a
// different stream on every host thread.
using scratch_key = std::tuple<int, cudaStream_t, const void*>;

struct scratch_pool {
  std::mutex mutex;
  std::map<scratch_key, scratch_entry> entries;
  ~scratch_pool() {
    for (auto& [key, entry] : entries) {
      cudaSetDevice(std::get<0>(key));
      free_quietly(entry.scratch.control, cudaFree);
    }
  }
};

scratch_pool& pool() {
  static scratch_pool p;
  return p;
}

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

// Frees device memory when a later step of making a pool entry throws.
struct device_memory_guard {
  void* memory;
  ~device_memory_guard() { free_quietly(memory, cudaFree); }
};

// A stream's unique id, or 0 while the stream is being captured. The handle alone does not
// say which stream it is: the driver hands a destroyed stream's handle to the next stream
// created, even while the destroyed stream's kernels are still running (seen on an H100
// with CUDA 13), and a pool that trusted the handle would give the new stream scratch those
// kernels are still using. Ids are never reused in a context. cudaStreamGetId on a stream
// being captured fails and invalidates the capture, so then the handle is trusted: the
// stream is live, and the graph runs later.
unsigned long long stream_id(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TALLY_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return 0;
  unsigned long long id = 0;
  TALLY_CUDA_CHECK(cudaStreamGetId(stream, &id));
  return id;
}

// A kernel launched on a stream of another device fails with "invalid resource handle",
// which names neither the stream nor the device; this says what is wrong, before anything
// is allocated. The special handles (legacy, per-thread) always name a current-device stream.
// cudaStreamGetDevice came with CUDA 12.8; older toolkits leave the check to the launch.
void check_stream_device(cudaStream_t stream, int device) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return;
#if CUDART_VERSION >= 12080
  int owner = device;
  TALLY_CUDA_CHECK(cudaStreamGetDevice(stream, &owner));
  if (owner != device) {
    throw std::invalid_argument("tally: the policy's stream belongs to device " + std::to_string(owner) +
                                " but the current device is " + std::to_string(device) +
                                "; call cudaSetDevice(" + std::to_string(owner) +
                                ") first, or use a stream of the current device");
  }
#endif
}

// Makes a zeroed scratch block; the caller owns it. Throws tally::bad_alloc when memory is
// short, leaving nothing allocated.
stream_scratch make_scratch(int device, cudaStream_t stream) {
  const std::size_t bytes = control_bytes + max_tiles * partial_cell_bytes;
  device_memory_guard memory{nullptr};
  const cudaError_t allocated = allocate_device(&memory.memory, bytes);
  if (allocated != cudaSuccess) {
    char handle[32];
    std::snprintf(handle, sizeof handle, "%p", static_cast<void*>(stream));
    const std::string what = std::string("the scratch of stream ") + handle + " on device " + std::to_string(device);
    throw_allocation_error(allocated, what.c_str(), bytes);
  }
  // Zero it all on a private stream: a memset on the caller's stream could be
  // swallowed by a graph capture, and one on the legacy stream would break that capture.
  cudaStream_t init_stream = nullptr;
  TALLY_CUDA_CHECK(cudaStreamCreateWithFlags(&init_stream, cudaStreamNonBlocking));
  const cudaError_t set = cudaMemsetAsync(memory.memory, 0, bytes, init_stream);
  const cudaError_t synced = cudaStreamSynchronize(init_stream);
  cudaStreamDestroy(init_stream);
  TALLY_CUDA_CHECK(set);
  TALLY_CUDA_CHECK(synced);
  stream_scratch scratch;
  scratch.control = static_cast<unsigned int*>(memory.memory);
  scratch.partials = static_cast<char*>(memory.memory) + control_bytes;
  memory.memory = nullptr;  // the caller owns it now
  return scratch;
}

constexpr std::size_t slot_bytes = (sizeof(host_handoff) + 63) / 64 * 64;  // whole cache lines
constexpr std::size_t slots_per_slab = 64;

struct slot_pool {
  std::mutex mutex;
  std::vector<void*> free_slots;
  std::vector<void*> slabs;
  ~slot_pool() {
    for (void* slab : slabs) free_quietly(slab, cudaFreeHost);
  }
};

slot_pool& slots() {
  static slot_pool p;
  return p;
}

}  // namespace

stream_scratch find_or_make_scratch(int device, cudaStream_t stream, unsigned long long id);

int current_device() {
  // Once a device has been seen the count cannot drop to zero, so later calls skip asking.
  static std::atomic<bool> device_seen{false};
  if (!device_seen.load(std::memory_order_relaxed)) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0) {
      cudaGetLastError();  // leave no sticky-looking error behind for the caller
      const cudaError_t reported = status == cudaSuccess ? cudaErrorNoDevice : status;
      throw cuda_error(reported, std::string("tally: no CUDA device is available for a device policy (") +
                                     cudaGetErrorName(reported) + "); use tally::host for host data");
    }
    device_seen.store(true, std::memory_order_relaxed);
  }
  int device = 0;
  TALLY_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

const device_properties& properties(int device) {
  // Lock-free after the first query of a device; entries live until process exit.
  constexpr int fast_devices = 64;
  static std::atomic<const device_properties*> fast[fast_devices] = {};
  if (device >= 0 && device < fast_devices) {
    if (const auto* known = fast[device].load(std::memory_order_acquire)) return *known;
  }
  auto& cache = props_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto& entry = cache.by_device[device];
  if (!entry) {
    auto props = std::make_unique<device_properties>();
    props->ordinal = device;
    int value = 0;
    TALLY_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device));
    props->multiprocessors = value;
    TALLY_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrL2CacheSize, device));
    props->l2_bytes = value;
    TALLY_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrPageableMemoryAccess, device));
    props->pageable_memory_access = value != 0;
    TALLY_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, device));
    props->programmatic_launch = value >= 9;
    entry = std::move(props);
  }
  if (device >= 0 && device < fast_devices) fast[device].store(entry.get(), std::memory_order_release);
  return *entry;
}

bool is_device_accessible(const void* p, const device_properties& props) {
  // Addresses already found to be device allocations are remembered per thread: under
  // unified addressing they lie in CUDA's reserved range and never become ordinary host
  // memory, so the answer holds. Pinned host memory is not remembered: once freed, malloc
  // may hand its address out again.
  constexpr int remembered = 16;
  thread_local const void* known[remembered] = {};
  thread_local int next = 0;
  for (const void* k : known)
    if (k == p) return true;
  cudaPointerAttributes attributes{};
  TALLY_CUDA_CHECK(cudaPointerGetAttributes(&attributes, p));
  if (attributes.type == cudaMemoryTypeUnregistered) return props.pageable_memory_access;
  if (attributes.type != cudaMemoryTypeDevice) return true;
  known[next] = p;
  next = (next + 1) % remembered;
  return true;
}

void check_stream_of_device(cudaStream_t stream, int device) {
  thread_local cudaStream_t last_stream = nullptr;
  thread_local int last_device = -1;
  if (stream == last_stream && device == last_device) return;
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TALLY_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return;
  check_stream_device(stream, device);
  last_stream = stream;
  last_device = device;
}

stream_scratch scratch_for(int device, cudaStream_t stream) {
  // The last entry this thread used, checked without the lock, by id: the same handle may
  // name a newer stream now. While capturing (no id) the pool is asked instead, since this
  // thread's entry may be one the pool has freed since.
  thread_local int last_device = -1;
  thread_local unsigned long long last_id = 0;
  thread_local stream_scratch last_scratch;
  const unsigned long long id = stream_id(stream);
  if (id != 0 && last_device == device && last_id == id && last_scratch.control) return last_scratch;
  // Not this thread's last stream: check it is the current device's (skipped while capturing,
  // where a query could invalidate the capture; the launch then reports it).
  if (id != 0) check_stream_device(stream, device);
  const stream_scratch found_scratch = find_or_make_scratch(device, stream, id);
  if (id != 0) {
    last_device = device;
    last_id = id;
    last_scratch = found_scratch;
  }
  return found_scratch;
}

stream_scratch find_or_make_scratch(int device, cudaStream_t stream, unsigned long long id) {
  thread_local const char this_thread = 0;  // its address tells host threads apart
  const scratch_key key{device, stream, stream == cudaStreamPerThread ? &this_thread : nullptr};
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  auto found = p.entries.find(key);
  if (found != p.entries.end()) {
    scratch_entry& entry = found->second;
    if (id == 0 || entry.stream_id == id) return entry.scratch;
    if (entry.stream_id == 0) {  // made while this stream was being captured
      entry.stream_id = id;
      return entry.scratch;
    }
  }
  relaxed_capture_mode relaxed;
  const stream_scratch scratch = make_scratch(device, stream);
  if (found == p.entries.end()) {
    try {
      p.entries.emplace(key, scratch_entry{id, scratch});
    } catch (...) {  // out of host memory: the pool stays as it was
      cudaFree(scratch.control);
      throw;
    }
    return scratch;
  }
  // A new stream with a destroyed stream's handle: the entry takes the new block, and the
  // old one is freed. cudaFree synchronizes the device first ("cudaMalloc and cudaFree
  // cause the GPU to synchronize across all executing streams", CUDA programming guide),
  // so the destroyed stream's last kernels are done with it. The new block is made first,
  // so that a failed allocation leaves the pool as it was.
  const stream_scratch old = found->second.scratch;
  found->second = scratch_entry{id, scratch};
  TALLY_CUDA_CHECK(cudaFree(old.control));
  return scratch;
}

std::size_t scratch_entries() {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.entries.size();
}

result_slot_counts result_slots() {
  auto& p = slots();
  std::lock_guard<std::mutex> lock(p.mutex);
  return {p.slabs.size(), p.slabs.size() * slots_per_slab, p.free_slots.size()};
}

void fail_next_allocations(int count) {
  injected_allocation_failures.store(count > 0 ? count : 0, std::memory_order_relaxed);
}

int pending_allocation_failures() { return injected_allocation_failures.load(std::memory_order_relaxed); }

result_slot::result_slot() : handoff_(nullptr) {
  auto& p = slots();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.free_slots.empty()) {
    // Room in the lists first: once the slab is allocated nothing may throw.
    p.slabs.reserve(p.slabs.size() + 1);
    p.free_slots.reserve((p.slabs.size() + 1) * slots_per_slab);
    void* slab = nullptr;
    const std::size_t bytes = slot_bytes * slots_per_slab;
    const cudaError_t allocated = allocate_pinned(&slab, bytes);
    if (allocated != cudaSuccess) throw_allocation_error(allocated, "a slab of pinned result slots", bytes);
    p.slabs.push_back(slab);
    for (std::size_t i = 0; i < slots_per_slab; ++i) p.free_slots.push_back(static_cast<char*>(slab) + i * slot_bytes);
  }
  handoff_ = static_cast<host_handoff*>(p.free_slots.back());
  p.free_slots.pop_back();
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
  // value lands, before the kernel retires (on the H100 the xyz sums at 2^26, a 0.26 ms
  // kernel, came back 3-4 us sooner; benchmarks/RESULTS.md).
  const std::size_t words = (bytes + 3) / 4;  // 4 bytes of the value per word
  using clock = std::chrono::steady_clock;
  constexpr auto quiet_us = std::chrono::microseconds(50);
  constexpr auto spin_us = std::chrono::microseconds(200);
  const auto start = clock::now();
  bool done = false;
  std::optional<bool> blocks;  // asked of the device's schedule once the wait passes spin_us
  while (!done) {
    for (int spin = 0; spin < 2048 && !done; ++spin) done = handed_over(words);
    if (done) break;
    const auto waited = clock::now() - start;
    if (waited > spin_us && !blocks) {
      unsigned int flags = 0;
      TALLY_CUDA_CHECK(cudaGetDeviceFlags(&flags));
      blocks = (flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync;
    }
    if (blocks.value_or(false)) {
      TALLY_CUDA_CHECK(cudaStreamSynchronize(stream));
      done = handed_over(words);
      if (!done) TALLY_CUDA_CHECK(cudaErrorLaunchFailure);  // finished without a value
    } else if (waited > quiet_us) {
      const cudaError_t status = cudaStreamQuery(stream);
      if (status != cudaErrorNotReady) {
        TALLY_CUDA_CHECK(status);
        done = handed_over(words);
        if (!done) TALLY_CUDA_CHECK(cudaErrorLaunchFailure);
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
  p.free_slots.push_back(handoff_);
}

}  // namespace tally::detail
