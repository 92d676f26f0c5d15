// Exact sums on the device (issue 37) against tally's default sum, CUB and the read ceiling, for
// float and double, N = 2^20 .. 2^28 (seeded uniform values), side by side in one run:
//
//   exact       tally::reduce_into(tally::device.on(s), ..., tally::exact_plus<T>{})
//   default     tally::reduce_into(tally::device.on(s), ..., T(0))   (tally's reproducible sum)
//   cub         cub::DeviceReduce::Sum, temporary storage allocated outside the timing
//   ceiling     our streaming read (support/timing.cu) of the same bytes
//   round trip  tally::reduce with exact_plus<T> against thrust::reduce, as a host loop issues
//               them (N <= 2^22): the median of 5 timings of 20 calls each
//
// Device time: the median of 5 timings of k back-to-back calls on a held stream (k = 10), per
// call. Before timing, each exact result is checked against the host backend's exact sum, bit
// for bit. Prints a markdown table; exits 1 if a check failed.

#include "support/timing.cuh"
#include "tally/exact.cuh"
#include "tally/tally.cuh"

#include <cub/device/device_reduce.cuh>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int calls = 10;
constexpr int samples = 5;

template <class F>
double median_round_trip_us(F&& call) {
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) call();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / 20);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class T>
bool run(const char* name, cudaStream_t s, const bench::read_ceiling& ceiling) {
  bool all_ok = true;
  for (int log2n : {20, 22, 24, 26, 28}) {
    const std::size_t n = std::size_t(1) << log2n;
    T* data = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&data, n * sizeof(T)));
    bench::fill_random(data, n, 1000 + log2n);
    T* out = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&out, 2 * sizeof(T)));
    std::size_t temp_bytes = 0;
    BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, temp_bytes, data, out + 1, int(n), s));
    void* temp = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&temp, temp_bytes + 1));
    float* sink = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));

    const auto run_exact = [&] { tally::reduce_into(tally::device.on(s), data, data + n, out, T(0), tally::exact_plus<T>{}); };
    const auto run_default = [&] { tally::reduce_into(tally::device.on(s), data, data + n, out + 1, T(0)); };
    const auto run_cub = [&] { BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(temp, temp_bytes, data, out + 1, int(n), s)); };
    const auto run_ceiling = [&] { ceiling.read_bytes(data, n * sizeof(T), sink, s); };

    run_exact();
    T got;
    BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
    BENCH_CUDA_CHECK(cudaMemcpy(&got, out, sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<T> host(n);
    BENCH_CUDA_CHECK(cudaMemcpy(host.data(), data, n * sizeof(T), cudaMemcpyDeviceToHost));
    const T want = tally::reduce(tally::host, host.begin(), host.end(), T(0), tally::exact_plus<T>{});
    const bool ok = std::memcmp(&got, &want, sizeof(T)) == 0;
    all_ok = all_ok && ok;

    const double us_exact = bench::median_device_us(s, calls, samples, run_exact);
    const double us_default = bench::median_device_us(s, calls, samples, run_default);
    const double us_cub = bench::median_device_us(s, calls, samples, run_cub);
    const double us_ceiling = bench::median_device_us(s, calls, samples, run_ceiling);
    char round_trips[96] = "- | - | -";
    if (log2n <= 22) {
      const double us_tally = median_round_trip_us([&] {
        volatile T r = tally::reduce(tally::device.on(s), data, data + n, T(0), tally::exact_plus<T>{});
        (void)r;
      });
      const double us_thrust = median_round_trip_us([&] {
        volatile T r = thrust::reduce(thrust::cuda::par.on(s), thrust::device_pointer_cast(data),
                                      thrust::device_pointer_cast(data) + n, T(0));
        (void)r;
      });
      std::snprintf(round_trips, sizeof round_trips, "%.1f | %.1f | %.2f", us_tally, us_thrust, us_thrust / us_tally);
    }
    std::printf("| %s | 2^%d | %.1f | %.1f | %.1f | %.1f | %.0f%% | %.2f | %s |%s\n", name, log2n, us_exact, us_default,
                us_cub, us_ceiling, 100.0 * us_ceiling / us_exact, us_exact / us_default, round_trips,
                ok ? "" : " CHECK FAILED");
    BENCH_CUDA_CHECK(cudaFree(sink));
    BENCH_CUDA_CHECK(cudaFree(temp));
    BENCH_CUDA_CHECK(cudaFree(out));
    BENCH_CUDA_CHECK(cudaFree(data));
  }
  return all_ok;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_exact: no CUDA device; nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const bench::read_ceiling ceiling;
  std::printf("# bench_exact: exact sums (tally::exact_plus) on %s\n\n", prop.name);
  std::printf("| type | N | exact µs | default sum µs | CUB µs | ceiling µs | exact %% of ceiling | exact / default | "
              "round trip exact µs | round trip thrust µs | thrust / exact |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool ok = run<float>("float", s, ceiling);
  ok = run<double>("double", s, ceiling) && ok;
  cudaStreamDestroy(s);
  return ok ? 0 : 1;
}
