// tools/roundtrip-ab --family: the rest of scripts/bench's tally rows (bench_family's device
// views and round trips, bench_fields' x/y/z sums and bounding box, bench_types' narrow and
// wide sums) from two builds loaded into one process (tools/family_ab_side.cu), in
// alternating blocks, on each side's streams in turn (STREAMS, at most 16, default 16 for the
// device rows, 4 for the round trips). Prints, per case and N, each side's median per-call
// time, b/a, and each side's spread over its streams, in tools/device_ab.cu's table, so that
// tools/device_ab_report.py combines the two placements.
// Usage: family_ab SIDE_A.so SIDE_B.so [BLOCKS]   (ONLY=KIND,CASE,LOG2N narrows, -1 for all;
//   SIZES=a,b,c as log2 of N, default 10,12,14,16,18,20,22,24,26)
#include "ab_blocks.h"
#include "support/timing.cuh"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using init_fn = int (*)();
using cases_fn = int (*)(int);
using name_fn = const char* (*)(int, int);
using run_fn = double (*)(int, int, int, const float* const*, const float* const*, const float* const*, int,
                          std::size_t, int);

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: family_ab SIDE_A.so SIDE_B.so [BLOCKS]\n");
    return 2;
  }
  const int blocks = argc > 3 ? std::atoi(argv[3]) : 20;
  int only[3] = {-1, -1, -1};
  if (const char* o = std::getenv("ONLY")) std::sscanf(o, "%d,%d,%d", &only[0], &only[1], &only[2]);
  std::vector<int> log2_sizes = {10, 12, 14, 16, 18, 20, 22, 24, 26};
  if (const char* s = std::getenv("SIZES")) {
    log2_sizes.clear();
    for (const char* p = s; *p;) {
      log2_sizes.push_back(std::atoi(p));
      p = std::strchr(p, ',');
      if (!p) break;
      ++p;
    }
  }
  cases_fn cases = nullptr;
  name_fn name = nullptr;
  run_fn run[2];
  for (int s = 0; s < 2; ++s) {
    void* h = dlopen(argv[1 + s], RTLD_NOW | RTLD_LOCAL);
    if (!h) { std::fprintf(stderr, "%s\n", dlerror()); return 1; }
    auto init = reinterpret_cast<init_fn>(dlsym(h, "ab_family_init"));
    run[s] = reinterpret_cast<run_fn>(dlsym(h, "ab_family_run"));
    cases = reinterpret_cast<cases_fn>(dlsym(h, "ab_family_cases"));
    name = reinterpret_cast<name_fn>(dlsym(h, "ab_family_name"));
    if (!init || !run[s] || !cases || !name || init() != 0) { std::fprintf(stderr, "side %d: init failed\n", s); return 1; }
  }
  const std::size_t l2_bytes = bench::l2_cache_bytes();
  const char* kinds[2] = {"device", "roundtrip"};
  std::printf("| case | kind | N | a µs | b µs | b / a | a's streams max/min | b's streams max/min |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (int log2n : log2_sizes) {
    const std::size_t n = std::size_t(1) << log2n;
    if (only[2] >= 0 && only[2] != log2n) continue;
    // Three float arrays of n values, as many copies as the benchmarks rotate through. The
    // buffers hold 8n bytes, so that the cases of narrow and wide types read n values of theirs.
    const std::size_t bytes = n * 8;
    const int copies = bench::rotation_copies(n * 12, l2_bytes);
    std::vector<float*> x(copies), y(copies), z(copies);
    for (int c = 0; c < copies; ++c) {
      for (float** p : {&x[c], &y[c], &z[c]})
        if (cudaMalloc(p, bytes) != cudaSuccess) return 2;
      bench::fill_random(x[c], bytes / 4, 11 + c);
      bench::fill_random(y[c], bytes / 4, 23 + c);
      bench::fill_random(z[c], bytes / 4, 37 + c);
    }
    if (cudaDeviceSynchronize() != cudaSuccess) return 2;
    for (int kind = 0; kind < 2; ++kind) {
      if (only[0] >= 0 && only[0] != kind) continue;
      const int streams = std::getenv("STREAMS") ? std::max(1, std::min(16, std::atoi(std::getenv("STREAMS"))))
                                                 : (kind == 0 ? 16 : 4);
      // Calls per timing: about the same device time per timing at every N.
      const int calls = kind == 0 ? (log2n <= 20 ? 40 : 5) : (log2n <= 20 ? 20 : 3);
      for (int which = 0; which < cases(kind); ++which) {
        if (only[1] >= 0 && only[1] != which) continue;
        for (int s = 0; s < 2; ++s)
          for (int w = 0; w < streams; ++w)
            if (run[s](kind, which, w, x.data(), y.data(), z.data(), copies, n, 0) < 0 ||
                run[s](kind, which, w, x.data(), y.data(), z.data(), copies, n, calls) < 0) {
              std::fprintf(stderr, "side %d failed: %s %s 2^%d\n", s, kinds[kind], name(kind, which), log2n);
              return 3;
            }
        const ab_summary r = time_alternating(blocks, streams, [&](int side, int stream) {
          return run[side](kind, which, stream, x.data(), y.data(), z.data(), copies, n, calls);
        });
        std::printf("| %s | %s | 2^%d | %.3f | %.3f | %.3f | %.3f | %.3f |\n", name(kind, which), kinds[kind], log2n,
                    r.median[0], r.median[1], r.median[1] / r.median[0], r.spread[0], r.spread[1]);
        std::fflush(stdout);
      }
    }
    for (int c = 0; c < copies; ++c)
      for (float* p : {x[c], y[c], z[c]}) cudaFree(p);
  }
  return 0;
}
