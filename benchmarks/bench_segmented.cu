// Segmented sums of floats (uniform in [0, 1), seeded), side by side in one run (issue 36), on
// totals of 2^24 and 2^26 elements in the distributions of the issue:
//   equal segments of 1, 4, 32, 256, 4096, 65536 and 2^20 elements, and one segment of all
//   (2^26: 1, 32, 4096, 2^20 and one);
//   uniform random sizes 1-64; power-law sizes (P(size >= s) ~ s^-1.2, at most 2^20); and
//   random sizes 1-64 with a tenth of the segments empty:
//
//   tally      tally::segmented_reduce(tally::device.on(s), in, offsets, offsets + S + 1, out,
//              0.0f, tally::plus<float>{}), int offsets in device memory
//   tally_rows the fixed-size form, tally::segmented_reduce(policy, in, S, size, out, ...) (equal
//              segments only)
//   cub        cub::DeviceSegmentedReduce::Sum(temp, bytes, in, out, S, offsets, offsets + 1, s),
//              temporary storage allocated outside the timing
//   thrust     thrust::reduce_by_key(thrust::cuda::par.on(s), keys, keys + N, in, keys_out, out)
//              with keys = the segment of each element (int; empty segments have no key)
//   ceiling    our streaming read (support/timing.cu) of the bytes a segmented sum must move at
//              least: the values, the S + 1 offsets and the S outputs
//
// Device time: the median of 5 timings of k back-to-back calls on a held stream (k = 10), per
// call; thrust::reduce_by_key, which waits for its run count, as a host loop issues its calls.
// Before timing, tally's segments are checked against CUB's to a relative 1e-5, and the first
// and last 1000 segments against tally::reduce of each segment alone, bit for bit.
// Prints a markdown table: µs per call and each library's share of the ceiling.

#include "support/timing.cuh"
#include "tally/segmented_reduce.cuh"
#include "tally/tally.cuh"

#include <cub/device/device_segmented_reduce.cuh>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/host_vector.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/binary_search.h>
#include <thrust/reduce.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int calls = 10;
constexpr int samples = 5;

struct segment_of {
  int size;
  __host__ __device__ int operator()(int i) const { return i / size; }
};
struct times_size {
  int size;
  __host__ __device__ int operator()(int s) const { return s * size; }
};

// One row of the table: equal segments of `size` (size > 0), or a random distribution.
struct distribution {
  std::string name;
  int size = 0;  // 0: random sizes, drawn by `kind`
  enum class kind { equal, uniform_1_64, power_law, uniform_with_empty } how = kind::equal;
};

// S + 1 offsets of a random distribution over n elements (the last segment takes what is left).
std::vector<int> random_offsets(int n, distribution::kind how, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> small(1, 64), tenth(0, 9);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<int> offsets{0};
  while (offsets.back() < n) {
    int size = 0;
    if (how == distribution::kind::power_law) {
      size = int(std::min(1048576.0, std::floor(std::pow(1.0 - unit(rng), -1.0 / 1.2))));
    } else {
      size = small(rng);
      if (how == distribution::kind::uniform_with_empty && tenth(rng) == 0) size = 0;
    }
    offsets.push_back(int(std::min<long long>(n, (long long)offsets.back() + size)));
  }
  return offsets;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_segmented: no CUDA device; nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int max_n = 1 << 26;
  float* in = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&in, std::size_t(max_n) * sizeof(float)));
  bench::fill_random(in, std::size_t(max_n), 42);
  cudaStream_t s;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const bench::read_ceiling ceiling;
  // The ceiling's input: as many bytes as the values, offsets and outputs of one-element segments.
  void* ceiling_input = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&ceiling_input, 3 * std::size_t(max_n) * sizeof(float) + 16));
  BENCH_CUDA_CHECK(cudaMemset(ceiling_input, 0, 3 * std::size_t(max_n) * sizeof(float) + 16));
  float* sink = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
  std::mt19937_64 rng(7);
  bool all_ok = true;
  for (const int n : {1 << 24, 1 << 26}) {
    std::vector<distribution> rows;
    const std::vector<int> equal_log2 =
        n == (1 << 24) ? std::vector<int>{0, 2, 5, 8, 12, 16, 20, 24} : std::vector<int>{0, 5, 12, 20, 26};
    for (int log2size : equal_log2) rows.push_back({std::to_string(1 << log2size), 1 << log2size});
    rows.push_back({"random 1-64", 0, distribution::kind::uniform_1_64});
    rows.push_back({"power law", 0, distribution::kind::power_law});
    rows.push_back({"random 1-64, 10% empty", 0, distribution::kind::uniform_with_empty});
    std::printf("\n# bench_segmented: 2^%d floats, %s\n\n", n == (1 << 24) ? 24 : 26, prop.name);
    std::printf("| segment size | segments | tally µs | tally rows µs | CUB µs | thrust::reduce_by_key µs | ceiling µs | tally %% of ceiling | CUB %% of ceiling | CUB / tally |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const distribution& row : rows) {
      const int size = row.size;
      thrust::device_vector<int> offsets;
      if (size > 0) {
        offsets.resize(n / size + 1);
        thrust::transform(thrust::counting_iterator<int>(0), thrust::counting_iterator<int>(n / size + 1),
                          offsets.begin(), times_size{size});
      } else {
        const std::vector<int> h = random_offsets(n, row.how, rng);
        offsets.assign(h.begin(), h.end());
      }
      const int segments = int(offsets.size()) - 1;
      const int* off = offsets.data().get();
      thrust::device_vector<float> out_tally(segments), out_rows(size > 0 ? segments : 0), out_cub(segments),
          out_thrust(segments);
      thrust::device_vector<int> keys_out(segments);
      // Each element's segment, for thrust::reduce_by_key: equal segments as computed, the others
      // from the offsets (the last segment whose offset is at most the element's index).
      thrust::device_vector<int> key_column;
      if (size == 0) {
        key_column.resize(n);
        thrust::upper_bound(offsets.begin() + 1, offsets.end(), thrust::counting_iterator<int>(0),
                            thrust::counting_iterator<int>(n), key_column.begin());
      }
      const auto computed_keys = thrust::make_transform_iterator(thrust::counting_iterator<int>(0),
                                                                 segment_of{size > 0 ? size : 1});
      std::size_t temp_bytes = 0;
      BENCH_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(nullptr, temp_bytes, in, out_cub.data().get(), segments, off,
                                                       off + 1, s));
      void* temp = nullptr;
      BENCH_CUDA_CHECK(cudaMalloc(&temp, temp_bytes + 1));
      const auto run_tally = [&] {
        tally::segmented_reduce(tally::device.on(s), in, off, off + segments + 1, out_tally.data().get(), 0.0f,
                                tally::plus<float>{});
      };
      const auto run_rows = [&] {
        tally::segmented_reduce(tally::device.on(s), in, segments, size, out_rows.data().get(), 0.0f,
                                tally::plus<float>{});
      };
      const auto run_cub = [&] {
        BENCH_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(temp, temp_bytes, in, out_cub.data().get(), segments, off,
                                                         off + 1, s));
      };
      const auto run_thrust = [&] {
        if (size > 0) {
          thrust::reduce_by_key(thrust::cuda::par.on(s), computed_keys, computed_keys + n, in, keys_out.begin(),
                                out_thrust.begin());
        } else {
          thrust::reduce_by_key(thrust::cuda::par.on(s), key_column.begin(), key_column.end(), in, keys_out.begin(),
                                out_thrust.begin());
        }
      };
      // 16-byte multiple: the ceiling reads whole vectors.
      const std::size_t bytes =
          (std::size_t(n) * 4 + std::size_t(segments + 1) * 4 + std::size_t(segments) * 4) / 16 * 16;
      const auto run_ceiling = [&] { ceiling.read_bytes(ceiling_input, bytes, sink, s); };
      // Checks before timing.
      run_tally();
      if (size > 0) run_rows();
      run_cub();
      BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
      const thrust::host_vector<float> t = out_tally, r = out_rows, c = out_cub;
      const thrust::host_vector<int> h_offsets = offsets;
      bool ok = true;
      for (int i = 0; i < segments && ok; ++i) {
        ok = std::fabs(double(t[i]) - double(c[i])) <= 1e-5 * std::fabs(double(c[i])) + 1e-30 &&
             (size == 0 || std::memcmp(&t[i], &r[i], sizeof(float)) == 0);
        if (!ok) std::printf("segment %d (%s): tally %.9g, CUB %.9g\n", i, row.name.c_str(), t[i], c[i]);
      }
      for (int i = 0; i < segments && ok; i = (i == 999 && segments > 2000) ? segments - 1000 : i + 1) {
        const float alone = tally::reduce(tally::device.on(s), in + h_offsets[i], in + h_offsets[i + 1], 0.0f,
                                          tally::plus<float>{});
        ok = std::memcmp(&alone, &t[i], sizeof(float)) == 0;
        if (!ok) std::printf("segment %d (%s): tally %.9g, its own reduce %.9g\n", i, row.name.c_str(), t[i], alone);
      }
      all_ok = all_ok && ok;
      const double us_tally = bench::median_device_us(s, calls, samples, run_tally);
      const double us_rows = size > 0 ? bench::median_device_us(s, calls, samples, run_rows) : 0.0;
      const double us_cub = bench::median_device_us(s, calls, samples, run_cub);
      // thrust::reduce_by_key waits for its run count (and allocates), so it cannot be enqueued on
      // a held stream: its calls are timed as a host loop issues them.
      std::vector<double> thrust_us;
      {
        bench::event_timer host_paced(bench::event_timer::pacing::host);
        run_thrust();
        for (int i = 0; i < samples; ++i) thrust_us.push_back(host_paced.seconds_per_call(s, calls, run_thrust) * 1e6);
        std::sort(thrust_us.begin(), thrust_us.end());
      }
      const double us_thrust = thrust_us[thrust_us.size() / 2];
      const double us_bound = bench::median_device_us(s, calls, samples, run_ceiling);
      char rows_us[32] = "-";
      if (size > 0) std::snprintf(rows_us, sizeof rows_us, "%.1f", us_rows);
      std::printf("| %s | %d | %.1f | %s | %.1f | %.1f | %.1f | %.0f%% | %.1f%% | %.2f |%s\n", row.name.c_str(), segments,
                  us_tally, rows_us, us_cub, us_thrust, us_bound, 100.0 * us_bound / us_tally,
                  100.0 * us_bound / us_cub, us_cub / us_tally, ok ? "" : " CHECK FAILED");
      BENCH_CUDA_CHECK(cudaFree(temp));
    }
  }
  cudaFree(sink);
  cudaFree(ceiling_input);
  cudaFree(in);
  cudaStreamDestroy(s);
  return all_ok ? 0 : 1;
}
