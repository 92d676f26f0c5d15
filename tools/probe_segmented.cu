// The offsets form of tally::segmented_reduce over 2^24 floats, row by row of bench_segmented's
// distributions, with a hash of every row's outputs: for A/B builds of a change to the segmented
// kernels (are the bits the same, and which rows moved) and for a profiler (--profile: one call
// a row after one untimed call, so that Nsight Compute sees each row's launches twice).
//
//   probe_segmented [--profile] [--rows NAME,NAME,...] [--log2n K]
//
// --log2n: 2^K floats instead of 2^24 (2^10 to 2^30). Rows: 1, 4, 32, 256, 4096 (equal
// segments of that many elements), random (uniform 1-64),
// power (P(size >= s) ~ s^-1.2, at most 2^20), empty (random 1-64, a tenth of them empty).
// Prints one line a row: name, segments, median device µs (5 timings of 10 back-to-back calls
// on a held stream) and the FNV-1a hash of the outputs' bytes.

#include "support/timing.cuh"
#include "tally/segmented_reduce.cuh"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct row {
  std::string name;
  int size;  // 0: drawn at random
};

std::vector<int> offsets_of(const row& r, int n) {
  std::vector<int> offsets{0};
  if (r.size > 0) {
    for (int s = 1; s <= n / r.size; ++s) offsets.push_back(s * r.size);
    return offsets;
  }
  // Seeded per row, so that a row's segments do not depend on which other rows run.
  std::mt19937_64 rng(std::hash<std::string>{}(r.name) ^ 0x5e9u);
  std::uniform_int_distribution<int> small(1, 64), tenth(0, 9);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  while (offsets.back() < n) {
    int size = 0;
    if (r.name == "power") {
      size = int(std::min(1048576.0, std::floor(std::pow(1.0 - unit(rng), -1.0 / 1.2))));
    } else {
      size = small(rng);
      if (r.name == "empty" && tenth(rng) == 0) size = 0;
    }
    offsets.push_back(int(std::min<long long>(n, (long long)offsets.back() + size)));
  }
  return offsets;
}

std::uint64_t fnv1a(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  bool profile = false;
  std::string only;
  int log2n = 24;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--profile") {
      profile = true;
    } else if (a == "--rows" && i + 1 < argc) {
      only = "," + std::string(argv[++i]) + ",";
    } else if (a == "--log2n" && i + 1 < argc && std::atoi(argv[i + 1]) >= 10 && std::atoi(argv[i + 1]) <= 30) {
      log2n = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: probe_segmented [--profile] [--rows NAME,NAME,...] [--log2n 10..30]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("probe_segmented: no CUDA device; nothing to measure\n");
    return 0;
  }
  const int n = 1 << log2n;
  float* in = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&in, std::size_t(n) * sizeof(float)));
  bench::fill_random(in, std::size_t(n), 42);
  cudaStream_t s;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const std::vector<row> rows{{"1", 1},       {"4", 4},         {"32", 32},       {"256", 256},
                              {"4096", 4096}, {"random", 0},    {"power", 0},     {"empty", 0}};
  for (const row& r : rows) {
    if (!only.empty() && only.find("," + r.name + ",") == std::string::npos) continue;
    const std::vector<int> h_offsets = offsets_of(r, n);
    const int segments = int(h_offsets.size()) - 1;
    int* offsets = nullptr;
    float* out = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&offsets, h_offsets.size() * sizeof(int)));
    BENCH_CUDA_CHECK(cudaMalloc(&out, std::size_t(segments) * sizeof(float)));
    BENCH_CUDA_CHECK(cudaMemcpy(offsets, h_offsets.data(), h_offsets.size() * sizeof(int), cudaMemcpyHostToDevice));
    BENCH_CUDA_CHECK(cudaMemset(out, 0xff, std::size_t(segments) * sizeof(float)));  // poisoned
    const auto run = [&] {
      tally::segmented_reduce(tally::device.on(s), in, offsets, offsets + segments + 1, out, 0.0f,
                              tally::plus<float>{});
    };
    double us = 0.0;
    if (profile) {
      run();
      run();
      BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
    } else {
      us = bench::median_device_us(s, 10, 5, run);
    }
    std::vector<float> h_out(std::size_t(segments), 0.0f);
    BENCH_CUDA_CHECK(cudaMemcpy(h_out.data(), out, h_out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("%-8s %9d segments %9.2f us  hash %016llx\n", r.name.c_str(), segments, us,
                static_cast<unsigned long long>(fnv1a(h_out.data(), h_out.size() * sizeof(float))));
    BENCH_CUDA_CHECK(cudaFree(out));
    BENCH_CUDA_CHECK(cudaFree(offsets));
  }
  BENCH_CUDA_CHECK(cudaStreamDestroy(s));
  BENCH_CUDA_CHECK(cudaFree(in));
  return 0;
}
