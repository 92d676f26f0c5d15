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
// A second table: exact sums per segment (tally::segmented_reduce with exact_plus<T>), 2^24
// elements in equal segments of 1 .. 2^24, uniform random sizes 1-64 and power-law sizes, against
// tally's default segmented sum, cub::DeviceSegmentedReduce::Sum and the read ceiling of the
// values, the S + 1 int offsets and the S outputs.
//
// Device time: the median of 5 timings of k back-to-back calls on a held stream (k = 10), per
// call. Before timing, each exact result is checked against the host backend's exact sum, bit
// for bit (per segment: the first and last 300). Prints markdown tables; exits 1 if a check failed.

#include "support/timing.cuh"
#include "tally/exact.cuh"
#include "tally/segmented_reduce.cuh"
#include "tally/tally.cuh"

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
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

// S + 1 offsets over n elements: equal segments of `size`, or (size 0) random sizes 1-64, or
// (size -1) power-law sizes, P(size >= s) ~ s^-1.2, at most 2^20.
std::vector<int> offsets_of(int n, int size, std::mt19937_64& rng) {
  std::vector<int> offsets{0};
  std::uniform_int_distribution<int> small(1, 64);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  while (offsets.back() < n) {
    const int next = size > 0    ? size
                     : size == 0 ? small(rng)
                                 : int(std::min(1048576.0, std::floor(std::pow(1.0 - unit(rng), -1.0 / 1.2))));
    offsets.push_back(int(std::min<long long>(n, (long long)offsets.back() + next)));
  }
  return offsets;
}

template <class T>
bool run_segmented(const char* name, cudaStream_t s, const bench::read_ceiling& ceiling) {
  const int n = 1 << 24;
  T* data = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&data, std::size_t(n) * sizeof(T)));
  bench::fill_random(data, std::size_t(n), 77);
  std::vector<T> host(n);
  BENCH_CUDA_CHECK(cudaMemcpy(host.data(), data, std::size_t(n) * sizeof(T), cudaMemcpyDeviceToHost));
  void* ceiling_input = nullptr;
  const std::size_t ceiling_room = std::size_t(n) * (sizeof(T) + 4 + sizeof(T)) + 64;
  BENCH_CUDA_CHECK(cudaMalloc(&ceiling_input, ceiling_room));
  BENCH_CUDA_CHECK(cudaMemset(ceiling_input, 0, ceiling_room));
  float* sink = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
  std::mt19937_64 rng(11);
  bool all_ok = true;
  for (int size : {1, 32, 256, 4096, 1 << 16, 1 << 20, 1 << 24, 0, -1}) {
    const std::vector<int> h_offsets = offsets_of(n, size, rng);
    const int segments = int(h_offsets.size()) - 1;
    int* offsets = nullptr;
    T* out = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&offsets, h_offsets.size() * sizeof(int)));
    BENCH_CUDA_CHECK(cudaMemcpy(offsets, h_offsets.data(), h_offsets.size() * sizeof(int), cudaMemcpyHostToDevice));
    BENCH_CUDA_CHECK(cudaMalloc(&out, std::size_t(segments) * 2 * sizeof(T)));
    std::size_t temp_bytes = 0;
    BENCH_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(nullptr, temp_bytes, data, out + segments, segments, offsets,
                                                     offsets + 1, s));
    void* temp = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&temp, temp_bytes + 1));
    const auto run_exact = [&] {
      tally::segmented_reduce(tally::device.on(s), data, offsets, offsets + segments + 1, out, T(0),
                              tally::exact_plus<T>{});
    };
    const auto run_default = [&] {
      tally::segmented_reduce(tally::device.on(s), data, offsets, offsets + segments + 1, out + segments, T(0),
                              tally::plus<T>{});
    };
    const auto run_cub = [&] {
      BENCH_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(temp, temp_bytes, data, out + segments, segments, offsets,
                                                       offsets + 1, s));
    };
    const std::size_t bytes =
        (std::size_t(n) * sizeof(T) + std::size_t(segments + 1) * 4 + std::size_t(segments) * sizeof(T)) / 16 * 16;
    const auto run_ceiling = [&] { ceiling.read_bytes(ceiling_input, bytes, sink, s); };

    BENCH_CUDA_CHECK(cudaMemset(out, 0xA5, std::size_t(segments) * sizeof(T)));
    run_exact();
    BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<T> got(segments);
    BENCH_CUDA_CHECK(cudaMemcpy(got.data(), out, std::size_t(segments) * sizeof(T), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = 0; i < segments && ok; i = (i == 299 && segments > 600) ? segments - 300 : i + 1) {
      const T want = tally::reduce(tally::host, host.begin() + h_offsets[i], host.begin() + h_offsets[i + 1], T(0),
                                   tally::exact_plus<T>{});
      ok = std::memcmp(&got[i], &want, sizeof(T)) == 0;
      if (!ok) std::printf("segment %d: exact %.17g, host %.17g\n", i, double(got[i]), double(want));
    }
    all_ok = all_ok && ok;
    const double us_exact = bench::median_device_us(s, calls, samples, run_exact);
    const double us_default = bench::median_device_us(s, calls, samples, run_default);
    const double us_cub = bench::median_device_us(s, calls, samples, run_cub);
    const double us_ceiling = bench::median_device_us(s, calls, samples, run_ceiling);
    const std::string label = size > 0 ? std::to_string(size) : size == 0 ? "random 1-64" : "power law";
    std::printf("| %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %.0f%% | %.2f | %.2f |%s\n", name, label.c_str(), segments,
                us_exact, us_default, us_cub, us_ceiling, 100.0 * us_ceiling / us_exact, us_exact / us_default,
                us_cub / us_exact, ok ? "" : " CHECK FAILED");
    BENCH_CUDA_CHECK(cudaFree(temp));
    BENCH_CUDA_CHECK(cudaFree(out));
    BENCH_CUDA_CHECK(cudaFree(offsets));
  }
  BENCH_CUDA_CHECK(cudaFree(sink));
  BENCH_CUDA_CHECK(cudaFree(ceiling_input));
  BENCH_CUDA_CHECK(cudaFree(data));
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
  std::printf("\n# bench_exact: exact sums per segment (segmented_reduce, exact_plus), 2^24 elements, on %s\n\n",
              prop.name);
  std::printf("| type | segment size | segments | exact µs | default segmented µs | CUB µs | ceiling µs | exact %% of "
              "ceiling | exact / default | CUB / exact |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  ok = run_segmented<float>("float", s, ceiling) && ok;
  ok = run_segmented<double>("double", s, ceiling) && ok;
  cudaStreamDestroy(s);
  return ok ? 0 : 1;
}
