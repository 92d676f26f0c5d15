// Row and column sums of row-major float matrices of 2^24 elements (uniform in [0, 1), seeded),
// from 16 rows of 2^20 to 2^20 rows of 16, side by side in one run (issue 36):
//
//   rows        tally::reduce_rows(tally::device.on(s), m, rows, cols, cols, out)
//   cub rows    cub::DeviceSegmentedReduce::Sum over the rows (offsets i * cols in device memory),
//               temporary storage allocated outside the timing
//   columns     tally::reduce_columns(tally::device.on(s), m, rows, cols, cols, out)
//   ceiling     our streaming read (support/timing.cu) of the matrix and the outputs
//
// Device time: the median of 5 timings of k back-to-back calls on a held stream (k = 10), per
// call. Before timing, the first and last rows and columns are checked against tally::reduce over
// a copy of each, bit for bit. Prints a markdown table.

#include "support/timing.cuh"
#include "tally/matrix_reduce.cuh"
#include "tally/tally.cuh"

#include <cub/device/device_segmented_reduce.cuh>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int calls = 10;
constexpr int samples = 5;

struct times_size {
  int size;
  __host__ __device__ int operator()(int s) const { return s * size; }
};

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_matrix: no CUDA device; nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int n = 1 << 24;
  float* m = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&m, std::size_t(n) * sizeof(float)));
  bench::fill_random(m, std::size_t(n), 42);
  std::vector<float> host(static_cast<std::size_t>(n));
  BENCH_CUDA_CHECK(cudaMemcpy(host.data(), m, std::size_t(n) * sizeof(float), cudaMemcpyDeviceToHost));
  cudaStream_t s;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const bench::read_ceiling ceiling;
  void* ceiling_input = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&ceiling_input, 2 * std::size_t(n) * sizeof(float) + 16));
  BENCH_CUDA_CHECK(cudaMemset(ceiling_input, 0, 2 * std::size_t(n) * sizeof(float) + 16));
  float* sink = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
  std::printf("# bench_matrix: row-major float matrices of 2^24 elements, %s\n\n", prop.name);
  std::printf("| rows x cols | rows µs | CUB rows µs | columns µs | ceiling rows µs | ceiling columns µs | rows %% of "
              "ceiling | columns %% of ceiling | CUB / rows |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool all_ok = true;
  for (int log2rows : {4, 8, 12, 16, 18, 20}) {
    const int rows = 1 << log2rows, cols = n / rows;
    thrust::device_vector<float> out_rows(rows), out_cub(rows), out_cols(cols);
    thrust::device_vector<int> offsets(rows + 1);
    thrust::transform(thrust::counting_iterator<int>(0), thrust::counting_iterator<int>(rows + 1), offsets.begin(),
                      times_size{cols});
    const int* off = offsets.data().get();
    std::size_t temp_bytes = 0;
    BENCH_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(nullptr, temp_bytes, m, out_cub.data().get(), rows, off, off + 1, s));
    void* temp = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&temp, temp_bytes + 1));
    const auto run_rows = [&] { tally::reduce_rows(tally::device.on(s), m, rows, cols, cols, out_rows.data().get()); };
    const auto run_cols = [&] { tally::reduce_columns(tally::device.on(s), m, rows, cols, cols, out_cols.data().get()); };
    const auto run_cub = [&] {
      BENCH_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(temp, temp_bytes, m, out_cub.data().get(), rows, off, off + 1, s));
    };
    const std::size_t bytes_rows = (std::size_t(n) + std::size_t(rows)) * 4 / 16 * 16;
    const std::size_t bytes_cols = (std::size_t(n) + std::size_t(cols)) * 4 / 16 * 16;
    const auto run_ceiling_rows = [&] { ceiling.read_bytes(ceiling_input, bytes_rows, sink, s); };
    const auto run_ceiling_cols = [&] { ceiling.read_bytes(ceiling_input, bytes_cols, sink, s); };
    run_rows();
    run_cols();
    BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
    const thrust::host_vector<float> r = out_rows, c = out_cols;
    bool ok = true;
    for (int i : {0, rows - 1}) {
      const float alone = tally::reduce(tally::host, host.begin() + std::ptrdiff_t(i) * cols,
                                        host.begin() + std::ptrdiff_t(i + 1) * cols, 0.0f, tally::plus<float>{});
      ok = ok && std::memcmp(&alone, &r[i], sizeof(float)) == 0;
    }
    for (int j : {0, cols - 1}) {
      std::vector<float> column(static_cast<std::size_t>(rows));
      for (int i = 0; i < rows; ++i) column[std::size_t(i)] = host[std::size_t(i) * cols + j];
      const float alone = tally::reduce(tally::host, column.begin(), column.end(), 0.0f, tally::plus<float>{});
      ok = ok && std::memcmp(&alone, &c[j], sizeof(float)) == 0;
    }
    all_ok = all_ok && ok;
    const double us_rows = bench::median_device_us(s, calls, samples, run_rows);
    const double us_cub = bench::median_device_us(s, calls, samples, run_cub);
    const double us_cols = bench::median_device_us(s, calls, samples, run_cols);
    const double us_bound_rows = bench::median_device_us(s, calls, samples, run_ceiling_rows);
    const double us_bound_cols = bench::median_device_us(s, calls, samples, run_ceiling_cols);
    std::printf("| %d x %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f%% | %.0f%% | %.2f |%s\n", rows, cols, us_rows, us_cub,
                us_cols, us_bound_rows, us_bound_cols, 100.0 * us_bound_rows / us_rows, 100.0 * us_bound_cols / us_cols,
                us_cub / us_rows, ok ? "" : " CHECK FAILED");
    BENCH_CUDA_CHECK(cudaFree(temp));
  }
  cudaFree(sink);
  cudaFree(ceiling_input);
  cudaFree(m);
  cudaStreamDestroy(s);
  return all_ok ? 0 : 1;
}
