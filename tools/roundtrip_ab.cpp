// tools/roundtrip-ab: round trips of tally::reduce from two builds loaded into one process
// (two builds of roundtrip_ab_side.cu), in alternating blocks of calls, so that the drift of
// the host and the GPU falls on both alike. Prints, per type and N, the median call of each
// side and the ratio b/a, with the quartiles of the per-block ratios.
// Usage: roundtrip_ab SIDE_A.so SIDE_B.so [BLOCKS [CALLS_PER_BLOCK]]
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using init_fn = int (*)();
using reduce_fn = double (*)(int, const void*, std::size_t);
using use_stream_fn = int (*)(int);

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
static double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::size_t(q * (v.size() - 1))];
}

int main(int argc, char** argv) {
  const int blocks = argc > 3 ? std::atoi(argv[3]) : 40, per_block = argc > 4 ? std::atoi(argv[4]) : 100;
  // ENQUEUE=1: time only the host's enqueue of reduce_into (ab_enqueue), not the round trip.
  const bool enqueue_only = std::getenv("ENQUEUE") && std::atoi(std::getenv("ENQUEUE")) == 1;
  reduce_fn f[2];
  // Each block of calls runs on the sides' stream b (of their own several, each with its scratch
  // at its own address; roundtrip_ab_side.cu), so that the medians average over addresses.
  use_stream_fn use_stream[2];
  int streams = 1;
  for (int s = 0; s < 2; ++s) {
    void* h = dlopen(argv[1 + s], RTLD_NOW | RTLD_LOCAL);
    if (!h) { std::fprintf(stderr, "%s\n", dlerror()); return 1; }
    auto init = reinterpret_cast<init_fn>(dlsym(h, "ab_init"));
    f[s] = reinterpret_cast<reduce_fn>(dlsym(h, enqueue_only ? "ab_enqueue" : "ab_reduce"));
    use_stream[s] = reinterpret_cast<use_stream_fn>(dlsym(h, "ab_use_stream"));
    if (!init || !f[s] || !use_stream[s] || init() != 0) { std::fprintf(stderr, "side %d: init failed\n", s); return 1; }
    streams = use_stream[s](0);
  }
  std::printf("(each side's calls on %d streams of its own, a block at a time)\n\n", streams);
  const int copies = 4;
  const char* names[3] = {"float", "int", "double"};
  const std::size_t sizes[] = {1u << 10, 1u << 12, 1u << 14, 1u << 16, 1u << 18, 1u << 20, 1u << 22};
  std::printf("| type | N | a µs | b µs | b / a | per-block b/a: 25%% | 50%% | 75%% |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int type = 0; type < 3; ++type) {
    const std::size_t elem = type == 2 ? 8 : 4;
    for (std::size_t n : sizes) {
      // Each side its own copies, so that neither reads what the other just pulled into L2.
      std::vector<void*> buf(2 * copies);
      std::vector<unsigned char> host(n * elem);
      for (std::size_t i = 0; i < n; ++i) {
        if (type == 0) reinterpret_cast<float*>(host.data())[i] = float(i % 1000) * 0.001f;
        if (type == 1) reinterpret_cast<int*>(host.data())[i] = int(i % 1000);
        if (type == 2) reinterpret_cast<double*>(host.data())[i] = double(i % 1000) * 0.001;
      }
      for (auto& b : buf) {
        if (cudaMalloc(&b, n * elem) != cudaSuccess) return 2;
        cudaMemcpy(b, host.data(), n * elem, cudaMemcpyHostToDevice);
      }
      double first[2];
      for (int s = 0; s < 2; ++s)  // every stream warmed: its scratch grown for this n
        for (int w = 0; w < 50 + 4 * streams; ++w) {
          use_stream[s](w);
          first[s] = f[s](type, buf[s * copies + w % copies], n);
        }
      if (!enqueue_only && first[0] != first[1]) std::fprintf(stderr, "%s %zu: the sides disagree: %.17g %.17g\n", names[type], n, first[0], first[1]);
      std::vector<double> all[2], ratios;
      for (int b = 0; b < blocks; ++b) {
        double block_median[2];
        for (int k = 0; k < 2; ++k) use_stream[k](b / 2);  // ABBA pairs share a stream index
        for (int k = 0; k < 2; ++k) {
          const int s = (b % 2 == 0) ? k : 1 - k;  // ABBA: neither side always goes first
          std::vector<double> t(per_block);
          for (int i = 0; i < per_block; ++i) {
            const void* p = buf[s * copies + i % copies];
            const auto t0 = std::chrono::steady_clock::now();
            volatile double r = f[s](type, p, n);
            const auto t1 = std::chrono::steady_clock::now();
            t[i] = enqueue_only ? double(r) : std::chrono::duration<double, std::micro>(t1 - t0).count();
            if (t[i] < 0) {
              std::fprintf(stderr, "side %d: a CUDA call of its enqueue timing failed\n", s);
              return 3;
            }
          }
          block_median[s] = median(t);
          all[s].insert(all[s].end(), t.begin(), t.end());
        }
        ratios.push_back(block_median[1] / block_median[0]);
      }
      const double a = median(all[0]), bb = median(all[1]);
      std::printf("| %s | 2^%d | %.2f | %.2f | %.3f | %.3f | %.3f | %.3f |\n", names[type], __builtin_ctzll(n), a, bb, bb / a,
                  quantile(ratios, 0.25), quantile(ratios, 0.5), quantile(ratios, 0.75));
      std::fflush(stdout);
      for (auto& b : buf) cudaFree(b);
    }
  }
  return 0;
}
