// Segmented sums of 2^24 floats (uniform in [0, 1), seeded) split into equal segments of
// 1, 4, 32, 256, 4096, 65536, 2^20 and 2^24 elements, side by side in one run (issue 36):
//
//   tally      tally::segmented_reduce(tally::device.on(s), in, offsets, offsets + S + 1, out,
//              0.0f, tally::plus<float>{}), int offsets in device memory
//   tally_rows the fixed-size form, tally::segmented_reduce(policy, in, S, size, out, ...)
//   cub        cub::DeviceSegmentedReduce::Sum(temp, bytes, in, out, S, offsets, offsets + 1, s),
//              temporary storage allocated outside the timing
//   thrust     thrust::reduce_by_key(thrust::cuda::par.on(s), keys, keys + N, in, keys_out, out)
//              with keys = the segment of each element (int)
//   ceiling    our streaming read (support/timing.cu) of the bytes a segmented sum must move at
//              least: the values, the S + 1 offsets and the S outputs
//
// Device time: the median of 5 timings of k back-to-back calls on a held stream (k = 10), per
// call; thrust::reduce_by_key, which waits for its run count, as a host loop issues its calls. Before timing, tally's segments are checked against CUB's to a relative 1e-5, and the
// first and last 1000 segments against tally::reduce of each segment alone, bit for bit.
// Prints a markdown table: µs per call and each library's share of the ceiling.

#include "support/timing.cuh"
#include "tally/segmented_reduce.cuh"
#include "tally/tally.cuh"

#include <cub/device/device_segmented_reduce.cuh>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/host_vector.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/reduce.h>

#include <algorithm>
#include <cmath>
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

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_segmented: no CUDA device; nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int n = 1 << 24;
  float* in = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&in, std::size_t(n) * sizeof(float)));
  bench::fill_random(in, std::size_t(n), 42);
  cudaStream_t s;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const bench::read_ceiling ceiling;
  // The ceiling's input: as many bytes as the values, offsets and outputs of one-element segments.
  void* ceiling_input = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&ceiling_input, 3 * std::size_t(n) * sizeof(float) + 16));
  BENCH_CUDA_CHECK(cudaMemset(ceiling_input, 0, 3 * std::size_t(n) * sizeof(float) + 16));
  float* sink = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
  std::printf("# bench_segmented: 2^24 floats, %s\n\n", prop.name);
  std::printf("| segment size | segments | tally µs | tally rows µs | CUB µs | thrust::reduce_by_key µs | ceiling µs | tally %% of ceiling | CUB %% of ceiling | CUB / tally |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool all_ok = true;
  for (int log2size : {0, 2, 5, 8, 12, 16, 20, 24}) {
    const int size = 1 << log2size;
    const int segments = n / size;
    thrust::device_vector<int> offsets(segments + 1);
    thrust::transform(thrust::counting_iterator<int>(0), thrust::counting_iterator<int>(segments + 1), offsets.begin(),
                      times_size{size});
    const int* off = offsets.data().get();
    thrust::device_vector<float> out_tally(segments), out_rows(segments), out_cub(segments), out_thrust(segments);
    thrust::device_vector<int> keys_out(segments);
    const auto keys = thrust::make_transform_iterator(thrust::counting_iterator<int>(0), segment_of{size});
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
      tally::segmented_reduce(tally::device.on(s), in, segments, size, out_rows.data().get(), 0.0f, tally::plus<float>{});
    };
    const auto run_cub = [&] {
      BENCH_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(temp, temp_bytes, in, out_cub.data().get(), segments, off,
                                                       off + 1, s));
    };
    const auto run_thrust = [&] {
      thrust::reduce_by_key(thrust::cuda::par.on(s), keys, keys + n, in, keys_out.begin(), out_thrust.begin());
    };
    // 16-byte multiple: the ceiling reads whole vectors.
    const std::size_t bytes = (std::size_t(n) * 4 + std::size_t(segments + 1) * 4 + std::size_t(segments) * 4) / 16 * 16;
    const auto run_ceiling = [&] { ceiling.read_bytes(ceiling_input, bytes, sink, s); };
    // Checks before timing.
    run_tally();
    run_rows();
    run_cub();
    BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
    const thrust::host_vector<float> t = out_tally, r = out_rows, c = out_cub;
    bool ok = true;
    for (int i = 0; i < segments && ok; ++i) {
      ok = std::fabs(double(t[i]) - double(c[i])) <= 1e-5 * std::fabs(double(c[i])) + 1e-30 &&
           std::memcmp(&t[i], &r[i], sizeof(float)) == 0;
      if (!ok) std::printf("segment %d of size %d: tally %.9g, rows %.9g, CUB %.9g\n", i, size, t[i], r[i], c[i]);
    }
    for (int i = 0; i < segments && ok; i = (i == 999 && segments > 2000) ? segments - 1000 : i + 1) {
      const float alone = tally::reduce(tally::device.on(s), in + std::size_t(i) * size, in + std::size_t(i + 1) * size,
                                        0.0f, tally::plus<float>{});
      ok = std::memcmp(&alone, &t[i], sizeof(float)) == 0;
      if (!ok) std::printf("segment %d of size %d: tally %.9g, its own reduce %.9g\n", i, size, t[i], alone);
    }
    all_ok = all_ok && ok;
    const double us_tally = bench::median_device_us(s, calls, samples, run_tally);
    const double us_rows = bench::median_device_us(s, calls, samples, run_rows);
    const double us_cub = bench::median_device_us(s, calls, samples, run_cub);
    // thrust::reduce_by_key waits for its run count (and allocates), so it cannot be enqueued on a
    // held stream: its calls are timed as a host loop issues them.
    std::vector<double> thrust_us;
    {
      bench::event_timer host_paced(bench::event_timer::pacing::host);
      run_thrust();
      for (int i = 0; i < samples; ++i) thrust_us.push_back(host_paced.seconds_per_call(s, calls, run_thrust) * 1e6);
      std::sort(thrust_us.begin(), thrust_us.end());
    }
    const double us_thrust = thrust_us[thrust_us.size() / 2];
    const double us_bound = bench::median_device_us(s, calls, samples, run_ceiling);
    std::printf("| %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f%% | %.1f%% | %.2f |%s\n", size, segments, us_tally,
                us_rows, us_cub, us_thrust, us_bound, 100.0 * us_bound / us_tally, 100.0 * us_bound / us_cub,
                us_cub / us_tally, ok ? "" : " CHECK FAILED");
    BENCH_CUDA_CHECK(cudaFree(temp));
  }
  cudaFree(sink);
  cudaFree(ceiling_input);
  cudaFree(in);
  cudaStreamDestroy(s);
  return all_ok ? 0 : 1;
}
