#pragma once
// Measurement helpers for tally's benchmarks: CUDA error checks, an event timer, seeded
// random inputs rotated across several buffers (so inputs that fit in L2 are not all cache
// hits) and a streaming-read kernel that bounds what any reduction can reach.

#include <cuda_runtime_api.h>

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

// Times a callable enqueued k times back to back on a stream, between two events.
class event_timer {
 public:
  event_timer();
  ~event_timer();
  event_timer(const event_timer&) = delete;
  event_timer& operator=(const event_timer&) = delete;

  // Seconds per call: the events' elapsed time divided by k. Waits for the stop event.
  template <class F>
  double seconds_per_call(cudaStream_t stream, int k, F&& enqueue) {
    BENCH_CUDA_CHECK(cudaEventRecord(start_, stream));
    for (int i = 0; i < k; ++i) enqueue();
    BENCH_CUDA_CHECK(cudaEventRecord(stop_, stream));
    BENCH_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms) * 1e-3 / k;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// Fills n device floats with uniform values in [0, 1) drawn on the host from
// std::mt19937_64 seeded with seed, then copied over.
void fill_random(float* device_data, std::size_t n, std::uint64_t seed);

// The current device's L2 cache size in bytes.
std::size_t l2_cache_bytes();

// clamp(ceil(2 * l2_bytes / bytes), 1, 8): how many copies of an input of `bytes` make
// the rotation's footprint at least twice the L2 cache (at most 8 copies).
int rotation_copies(std::size_t bytes, std::size_t l2_bytes);

// rotation_copies() device buffers of n floats holding the same seeded random values.
// next() hands them out in turn, one per call being timed.
class rotating_input {
 public:
  rotating_input(std::size_t n, std::uint64_t seed);
  ~rotating_input();
  rotating_input(const rotating_input&) = delete;
  rotating_input& operator=(const rotating_input&) = delete;

  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(float); }
  int copies() const { return static_cast<int>(buffers_.size()); }
  const float* first() const { return buffers_.front(); }
  const float* next() {
    const float* p = buffers_[cursor_];
    cursor_ = (cursor_ + 1) % buffers_.size();
    return p;
  }

 private:
  std::size_t n_;
  std::vector<float*> buffers_;
  std::size_t cursor_ = 0;
};

// Our own streaming read of n floats: grid-stride, float4 loads, four in flight per
// thread, the sum kept in registers and written only if it equals an impossible magic
// value (so the loads cannot be dropped). Its time bounds any reduction of the same input.
class read_ceiling {
 public:
  read_ceiling();  // sizes the grid for the current device: SMs * resident blocks per SM
  void operator()(const float* in, std::size_t n, float* out, cudaStream_t stream) const;
  int grid() const { return grid_; }
  static constexpr int block = 256;

 private:
  int grid_ = 0;
};

}  // namespace bench
