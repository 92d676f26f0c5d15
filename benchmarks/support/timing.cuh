#pragma once
// Measurement helpers for tally's benchmarks: CUDA error checks, an event timer, seeded
// random inputs rotated across several buffers (so inputs that fit in L2 are not all cache
// hits) and a streaming-read kernel that bounds what any reduction can reach.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bench {

[[noreturn]] void cuda_fail(cudaError_t code, const char* call, const char* file, int line);

}  // namespace bench

// Aborts the benchmark with a message if a CUDA runtime call fails.
#define BENCH_CUDA_CHECK(call)                                                   \
  do {                                                                           \
    const cudaError_t bench_cuda_status_ = (call);                               \
    if (bench_cuda_status_ != cudaSuccess)                                       \
      ::bench::cuda_fail(bench_cuda_status_, #call, __FILE__, __LINE__);         \
  } while (0)

namespace bench {

// Times a callable enqueued k times back to back on a stream, between two events. The
// stream is held by a kernel that spins on a host flag while the k calls are enqueued, and
// released once the stop event is in: the events then time the GPU running the calls back
// to back, not the host enqueuing them. Without the hold, a call that runs for less time
// than its enqueue takes (a few µs at small N) would be timed at the host's pace, and two
// libraries would differ by their host work and its jitter (docs/benchmarks.md).
// pacing::host leaves the stream unheld: the events then time calls as a host loop issues
// them, each starting when the GPU is free and the host has enqueued it (what a caller's
// loop of calls gets; at small N, the host's enqueue time).
class event_timer {
 public:
  enum class pacing { gpu, host };
  explicit event_timer(pacing pace = pacing::gpu);
  ~event_timer();
  event_timer(const event_timer&) = delete;
  event_timer& operator=(const event_timer&) = delete;

  // Seconds per call: the events' elapsed time divided by k. Waits for the stop event.
  // Aborts if the hold ran out (hold_timeout_ms) before the host had enqueued the k calls:
  // then the host's time would be in the figure. An enqueue must not synchronize the stream.
  template <class F>
  double seconds_per_call(cudaStream_t stream, int k, F&& enqueue) {
    const bool held = pace_ == pacing::gpu;
    if (held) hold(stream);
    BENCH_CUDA_CHECK(cudaEventRecord(start_, stream));
    for (int i = 0; i < k; ++i) enqueue();
    BENCH_CUDA_CHECK(cudaEventRecord(stop_, stream));
    if (held) release();
    BENCH_CUDA_CHECK(cudaEventSynchronize(stop_));
    if (held) check_hold_kept(k);
    float ms = 0.0f;
    BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms) * 1e-3 / k;
  }

  static constexpr unsigned hold_timeout_ms = 1000;

 private:
  void hold(cudaStream_t stream);
  void release();
  void check_hold_kept(int k) const;

  pacing pace_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  unsigned int* flags_ = nullptr;  // pinned, mapped: [0] release (host writes), [1] timed out (kernel writes)
};

// The median over `samples` timings (event_timer, held stream) of k back-to-back calls, in
// µs per call, after `warmup` untimed calls.
template <class F>
double median_device_us(cudaStream_t stream, int k, int samples, F&& enqueue, int warmup = 3) {
  event_timer timer;
  for (int i = 0; i < warmup; ++i) enqueue();
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) t.push_back(timer.seconds_per_call(stream, k, enqueue) * 1e6);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Fills n device values with seeded random values drawn on the host from
// std::mt19937_64 seeded with seed, then copied over:
//   float   uniform in [0, 1): 24 random bits each, two values per 64-bit draw
//   double  uniform in [0, 1): 53 random bits each, one value per draw
//   int     uniform in [0, 8): 3 random bits each, 21 values per draw; the sum of 2^28 of
//           them is at most 7 * 2^28 < 2^31, so int sums of every size we time are exact
//           (no signed overflow anywhere) and compare bit for bit
void fill_random(float* device_data, std::size_t n, std::uint64_t seed);
void fill_random(double* device_data, std::size_t n, std::uint64_t seed);
void fill_random(int* device_data, std::size_t n, std::uint64_t seed);

// The current device's L2 cache size in bytes.
std::size_t l2_cache_bytes();

// clamp(ceil(2 * l2_bytes / bytes), 1, 8): how many copies of an input of `bytes` make
// the rotation's footprint at least twice the L2 cache (at most 8 copies).
int rotation_copies(std::size_t bytes, std::size_t l2_bytes);

// rotation_copies() device buffers of n values of T holding the same seeded random values
// (fill_random). next() hands them out in turn, one per call being timed. Instantiated for
// float, double and int; rotating_input is the float one.
template <class T>
class basic_rotating_input {
 public:
  basic_rotating_input(std::size_t n, std::uint64_t seed);
  ~basic_rotating_input();
  basic_rotating_input(const basic_rotating_input&) = delete;
  basic_rotating_input& operator=(const basic_rotating_input&) = delete;

  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  int copies() const { return static_cast<int>(buffers_.size()); }
  const T* first() const { return buffers_.front(); }
  const T* next() {
    const T* p = buffers_[cursor_];
    cursor_ = (cursor_ + 1) % buffers_.size();
    return p;
  }

 private:
  std::size_t n_;
  std::vector<T*> buffers_;
  std::size_t cursor_ = 0;
};

extern template class basic_rotating_input<float>;
extern template class basic_rotating_input<double>;
extern template class basic_rotating_input<int>;
using rotating_input = basic_rotating_input<float>;

// Our own streaming read of n floats: grid-stride, float4 loads, four in flight per
// thread, the sum kept in registers and written only if it equals an impossible magic
// value (so the loads cannot be dropped). Its time bounds any reduction of the same input.
// read_bytes() runs the same kernel over any input as bytes / 4 floats: the ceiling of a
// reduction of N values of T is the read of N * sizeof(T) bytes, whatever T is.
class read_ceiling {
 public:
  read_ceiling();  // sizes the grid for the current device: SMs * resident blocks per SM
  void operator()(const float* in, std::size_t n, float* out, cudaStream_t stream) const;
  // bytes must be a multiple of 4 and in 16-byte aligned (cudaMalloc's are). The bits are
  // summed as floats; should they ever sum to the magic value, the only effect is a write
  // of one float to *out.
  void read_bytes(const void* in, std::size_t bytes, float* out, cudaStream_t stream) const {
    (*this)(static_cast<const float*>(in), bytes / sizeof(float), out, stream);
  }
  int grid() const { return grid_; }
  static constexpr int block = 256;

 private:
  int grid_ = 0;
};

}  // namespace bench
