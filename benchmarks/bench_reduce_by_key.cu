// Sums by key of 2^24 floats (uniform in [0, 1), seeded) with an int key column in device
// memory, in runs of 1, 4, 32, 256, 4096, 65536, 2^20 and 2^24 keys and of random lengths 1-64,
// side by side in one run (issue 36):
//
//   tally_into  tally::reduce_by_key_into(tally::device.on(s), keys, keys + N, values, keys_out,
//               values_out, run_count): device time, the run count left in device memory
//   cub         cub::DeviceReduce::ReduceByKey(temp, bytes, keys, keys_out, values, values_out,
//               run_count, cuda::std::plus<>{}, N, s), temporary storage allocated outside the
//               timing: device time
//   tally       tally::reduce_by_key(tally::device.on(s), ...), which returns the ends, so it
//               waits: as a host loop issues its calls
//   thrust      thrust::reduce_by_key(thrust::cuda::par.on(s), ...), the same way
//   ceiling     our streaming read (support/timing.cu) of the bytes a sum by key must move at
//               least: the keys and values read, the runs' keys and sums written
//
// Device time: the median of 5 timings of k back-to-back calls on a held stream (k = 10), per
// call. Before timing, tally's runs are checked against CUB's (the same keys and count, sums to
// a relative 1e-5) and the first and last 1000 runs' sums against tally::reduce over each run's
// values, bit for bit. Prints a markdown table.

#include "support/timing.cuh"
#include "tally/reduce_by_key.cuh"
#include "tally/tally.cuh"

#include <cub/device/device_reduce.cuh>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int calls = 10;
constexpr int samples = 5;

// Keys of runs of `size` (0: random lengths 1-64), adjacent runs different.
std::vector<int> run_keys(int n, int size, std::vector<int>& starts) {
  std::vector<int> keys(static_cast<std::size_t>(n));
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> length(1, 64);
  int i = 0, key = 0;
  starts.clear();
  while (i < n) {
    const int run = std::min(n - i, size > 0 ? size : length(rng));
    starts.push_back(i);
    std::fill(keys.begin() + i, keys.begin() + i + run, key);
    i += run;
    ++key;
  }
  starts.push_back(n);
  return keys;
}

double host_paced_us(cudaStream_t s, const std::function<void()>& run) {
  std::vector<double> us;
  bench::event_timer host_paced(bench::event_timer::pacing::host);
  run();
  for (int i = 0; i < samples; ++i) us.push_back(host_paced.seconds_per_call(s, calls, run) * 1e6);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_reduce_by_key: no CUDA device; nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int n = 1 << 24;
  float* values = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&values, std::size_t(n) * sizeof(float)));
  bench::fill_random(values, std::size_t(n), 42);
  cudaStream_t s;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const bench::read_ceiling ceiling;
  void* ceiling_input = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&ceiling_input, 4 * std::size_t(n) * sizeof(float) + 16));
  BENCH_CUDA_CHECK(cudaMemset(ceiling_input, 0, 4 * std::size_t(n) * sizeof(float) + 16));
  float* sink = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
  std::printf("# bench_reduce_by_key: 2^24 float values, int keys, %s\n\n", prop.name);
  std::printf("| run length | runs | tally_into µs | CUB µs | ceiling µs | tally_into %% of ceiling | CUB / tally_into | "
              "tally µs (returns) | thrust::reduce_by_key µs | thrust / tally |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool all_ok = true;
  // Arguments, where given: the run lengths' log2 to measure (-1: random lengths); all by default.
  std::vector<int> log2sizes{0, 2, 5, 8, 12, 16, 20, 24, -1};
  if (argc > 1) log2sizes.clear();
  for (int a = 1; a < argc; ++a) log2sizes.push_back(std::atoi(argv[a]));
  for (int log2size : log2sizes) {
    const int size = log2size >= 0 ? 1 << log2size : 0;
    std::vector<int> starts;
    const std::vector<int> h_keys = run_keys(n, size, starts);
    const int runs = int(starts.size()) - 1;
    const thrust::device_vector<int> keys(h_keys.begin(), h_keys.end());
    thrust::device_vector<int> keys_tally(n), keys_cub(n), keys_thrust(n), count(2);
    thrust::device_vector<float> out_tally(n), out_cub(n), out_thrust(n);
    const int* k = keys.data().get();
    std::size_t temp_bytes = 0;
    BENCH_CUDA_CHECK(cub::DeviceReduce::ReduceByKey(nullptr, temp_bytes, k, keys_cub.data().get(), values,
                                                    out_cub.data().get(), count.data().get() + 1,
                                                    cuda::std::plus<>{}, n, s));
    void* temp = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&temp, temp_bytes + 1));
    const auto run_into = [&] {
      tally::reduce_by_key_into(tally::device.on(s), k, k + n, values, keys_tally.data().get(), out_tally.data().get(),
                                count.data().get());
    };
    const auto run_cub = [&] {
      BENCH_CUDA_CHECK(cub::DeviceReduce::ReduceByKey(temp, temp_bytes, k, keys_cub.data().get(), values,
                                                      out_cub.data().get(), count.data().get() + 1,
                                                      cuda::std::plus<>{}, n, s));
    };
    const auto run_tally = [&] {
      tally::reduce_by_key(tally::device.on(s), k, k + n, values, keys_tally.data().get(), out_tally.data().get());
    };
    const auto run_thrust = [&] {
      thrust::reduce_by_key(thrust::cuda::par.on(s), k, k + n, values, keys_thrust.begin(), out_thrust.begin());
    };
    const std::size_t bytes = (std::size_t(n) * 8 + std::size_t(runs) * 8) / 16 * 16;
    const auto run_ceiling = [&] { ceiling.read_bytes(ceiling_input, bytes, sink, s); };
    // Checks before timing.
    run_into();
    run_cub();
    BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
    const thrust::host_vector<int> counts = count, kt = keys_tally, kc = keys_cub;
    const thrust::host_vector<float> t = out_tally, c = out_cub;
    bool ok = counts[0] == runs && counts[1] == runs;
    if (!ok) std::printf("run counts: tally %d, CUB %d, want %d\n", counts[0], counts[1], runs);
    for (int r = 0; r < runs && ok; ++r) {
      ok = kt[r] == kc[r] && std::fabs(double(t[r]) - double(c[r])) <= 1e-5 * std::fabs(double(c[r])) + 1e-30;
      if (!ok) std::printf("run %d: tally key %d sum %.9g, CUB key %d sum %.9g\n", r, kt[r], t[r], kc[r], c[r]);
    }
    std::vector<float> h_values(16);
    for (int r = 0; r < runs && ok; r = (r == 999 && runs > 2000) ? runs - 1000 : r + 1) {
      float first = 0;
      BENCH_CUDA_CHECK(cudaMemcpy(&first, values + starts[r], sizeof(float), cudaMemcpyDeviceToHost));
      const float alone = tally::reduce(tally::device.on(s), values + starts[r] + 1, values + starts[r + 1], first,
                                        tally::plus<float>{});
      ok = std::memcmp(&alone, &t[r], sizeof(float)) == 0;
      if (!ok) std::printf("run %d: tally %.9g, its own reduce %.9g\n", r, t[r], alone);
    }
    all_ok = all_ok && ok;
    const double us_into = bench::median_device_us(s, calls, samples, run_into);
    const double us_cub = bench::median_device_us(s, calls, samples, run_cub);
    const double us_bound = bench::median_device_us(s, calls, samples, run_ceiling);
    const double us_tally = host_paced_us(s, run_tally);
    const double us_thrust = host_paced_us(s, run_thrust);
    const std::string label = size > 0 ? std::to_string(size) : std::string("random 1-64");
    std::printf("| %s | %d | %.1f | %.1f | %.1f | %.0f%% | %.2f | %.1f | %.1f | %.2f |%s\n", label.c_str(), runs,
                us_into, us_cub, us_bound, 100.0 * us_bound / us_into, us_cub / us_into, us_tally, us_thrust,
                us_thrust / us_tally, ok ? "" : " CHECK FAILED");
    BENCH_CUDA_CHECK(cudaFree(temp));
  }
  cudaFree(sink);
  cudaFree(ceiling_input);
  cudaFree(values);
  cudaStreamDestroy(s);
  return all_ok ? 0 : 1;
}
