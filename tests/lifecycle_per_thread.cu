// Part of test_lifecycle, built with `nvcc --default-stream per-thread` (tests/CMakeLists.txt):
// here stream 0, and so a plain tally::device, names each host thread's own stream, while
// tally's compiled runtime was built without the flag.
//
// The two translation units resolve stream 0 differently, so they must not share
// instantiations of tally's device templates (docs/lifecycle.md): only device_vector iterators
// reach them from here, and test_lifecycle.cu passes none under a device policy.
#include "support/test_support.cuh"
#include "tally/reduce.cuh"

#include <thrust/device_vector.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if !defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "lifecycle_per_thread.cu must be compiled with --default-stream per-thread"
#endif

#if !defined(TALLY_TEST_HOST_ONLY)
namespace {

using tally_test::bits_of;
using tally_test::random_values;
using tally_test::reference_sum;
using tally_test::seeded;

std::string cuda_failure(cudaError_t status, const char* call) {
  return std::string(call) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
}

// Counts a thread in at the start line however it leaves, so that a thread that fails early
// does not keep the others waiting.
class arrival {
 public:
  explicit arrival(std::atomic<int>& waiting) : waiting_(waiting) {}
  ~arrival() { arrive(); }
  arrival(const arrival&) = delete;
  arrival& operator=(const arrival&) = delete;
  void arrive() {
    if (!arrived_) waiting_.fetch_sub(1);
    arrived_ = true;
  }
  void arrive_and_wait() {
    arrive();
    while (waiting_.load() > 0) std::this_thread::yield();
  }

 private:
  std::atomic<int>& waiting_;
  bool arrived_ = false;
};

// One thread's calls; the first failure's text, or an empty string.
std::string run_thread(int t, std::atomic<int>& waiting) {
  arrival start(waiting);
  seeded s(5100 + t);
  const bool light = tally_test::under_sanitizer();
  const std::size_t n = (light ? 70001 : (std::size_t(1) << 20) + 3) + std::size_t(t) * 977;
  const int calls = light ? 3 : 40;
  const auto hi = random_values<int>(n, s.rng);
  const auto hf = random_values<float>(n, s.rng);
  const int want_i = reference_sum<int>(hi, 0, n, 0);
  const float want_f = tally::reduce(tally::host, hf.begin(), hf.end());  // the device's bits
  const std::string at = "thread " + std::to_string(t) + ", n " + std::to_string(n) + ", " + s.trace();
  int* out = nullptr;
  try {
    // Thrust's copies go to this thread's default stream too, and wait for it.
    thrust::device_vector<int> di(hi.begin(), hi.end());
    thrust::device_vector<float> df(hf.begin(), hf.end());
    // Batches of reduce_into calls wait behind a spin that every thread starts at about the
    // same time, so that the threads' kernels run together: were scratch shared between
    // per-thread streams, they would overlap on it.
    constexpr int batch = 8;
    cudaError_t status = cudaMalloc(&out, batch * sizeof(int));
    if (status != cudaSuccess) return cuda_failure(status, "cudaMalloc") + ", " + at;
    start.arrive_and_wait();
    for (int c = 0; c < calls; ++c) {
      const std::string call = ", call " + std::to_string(c) + ", " + at;
      const int got_i = tally::reduce(tally::device, di.begin(), di.end());
      if (got_i != want_i)
        return "int reduce on stream 0: got " + std::to_string(got_i) + ", expected " + std::to_string(want_i) + call;
      const float got_f = tally::reduce(tally::device, df.begin(), df.end());
      if (bits_of(got_f) != bits_of(want_f))
        return "float reduce on stream 0: got " + std::to_string(got_f) + ", expected " + std::to_string(want_f) + call;
      if (c % 2 == 0) {
        status = cudaMemsetAsync(out, 0xA5, batch * sizeof(int), cudaStreamPerThread);
        if (status != cudaSuccess) return cuda_failure(status, "cudaMemsetAsync") + call;
        tally_test::keep_stream_busy<><<<1, 1, 0, cudaStreamPerThread>>>(light ? 20000 : 400000);
        status = cudaGetLastError();
        if (status != cudaSuccess) return cuda_failure(status, "keep_stream_busy") + call;
        for (int k = 0; k < batch; ++k)
          tally::reduce_into(tally::device, di.begin(), di.end(), out + k, k, tally::plus<int>{});
        int got[batch];
        status = cudaMemcpyAsync(got, out, sizeof got, cudaMemcpyDeviceToHost, cudaStreamPerThread);
        if (status == cudaSuccess) status = cudaStreamSynchronize(cudaStreamPerThread);
        if (status != cudaSuccess) return cuda_failure(status, "reading reduce_into's results") + call;
        for (int k = 0; k < batch; ++k) {
          const int want = int(unsigned(want_i) + unsigned(k));  // wraps as the device's sum does
          if (got[k] != want)
            return "int reduce_into on stream 0 with init " + std::to_string(k) + ": got " + std::to_string(got[k]) +
                   ", expected " + std::to_string(want) + call;
        }
      }
    }
  } catch (const std::exception& e) {
    cudaFree(out);
    return std::string("threw: ") + e.what() + ", " + at;
  }
  cudaFree(out);
  return "";
}

}  // namespace

int per_thread_default_stream_case(std::string& message) {
  // The resolution itself: were this file's copy of tally's stream-0 choice replaced by the
  // other translation unit's, every call here would run on the legacy stream and still be
  // right, so the answers alone would not show it.
  if (tally::detail::normalize_policy(tally::device).stream() != cudaStreamPerThread) {
    message = "stream 0 did not resolve to cudaStreamPerThread in a translation unit built with --default-stream "
              "per-thread";
    return 1;
  }
  const int threads = 4;
  std::vector<std::string> failures(threads);
  std::atomic<int> waiting{threads};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back([&, t] { failures[t] = run_thread(t, waiting); });
  for (auto& w : workers) w.join();
  for (const auto& f : failures) {
    if (f.empty()) continue;
    message += (message.empty() ? "" : "\n  ") + f;
  }
  return message.empty() ? 0 : 1;
}
#endif  // !TALLY_TEST_HOST_ONLY
