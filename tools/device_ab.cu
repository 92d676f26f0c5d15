// tools/roundtrip-ab --device: device time of forced strategies from two builds loaded into one
// process (the same two shared objects as the round trips), in alternating blocks, on each
// side's streams in turn (STREAMS, at most 16, default 16). Prints, per type, strategy and N, each side's median per-call
// time, b/a, and each side's spread over its streams (max/min of the per-stream medians):
// each stream has its own scratch block, so the spread is what the block's address alone
// does to the time.
// Usage: device_ab SIDE_A.so SIDE_B.so [BLOCKS]
#include "ab_blocks.h"
#include "support/timing.cuh"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

using init_fn = int (*)();
using device_fn = double (*)(int, int, int, const void* const*, int, std::size_t, int);

int main(int argc, char** argv) {
  const int blocks = argc > 3 ? std::atoi(argv[3]) : 20;
  const int streams = std::getenv("STREAMS") ? std::max(1, std::min(16, std::atoi(std::getenv("STREAMS")))) : 16;
  const int calls = 40;
  // ONLY=TYPE,STRATEGY,LOG2N (indices as printed: float 0, int 1, double 2; automatic 0,
  // two_pass 1, block_atomic 2, warp_atomic 3): that row alone, for a profiler; a field of -1
  // takes every value of it.
  int only[3] = {-1, -1, -1};
  if (const char* o = std::getenv("ONLY")) std::sscanf(o, "%d,%d,%d", &only[0], &only[1], &only[2]);
  device_fn f[2];
  for (int s = 0; s < 2; ++s) {
    void* h = dlopen(argv[1 + s], RTLD_NOW | RTLD_LOCAL);
    if (!h) { std::fprintf(stderr, "%s\n", dlerror()); return 1; }
    auto init = reinterpret_cast<init_fn>(dlsym(h, "ab_init"));
    f[s] = reinterpret_cast<device_fn>(dlsym(h, "ab_device"));
    if (!init || !f[s] || init() != 0) { std::fprintf(stderr, "side %d: init failed\n", s); return 1; }
  }
  const std::size_t l2_bytes = bench::l2_cache_bytes();
  const char* types[3] = {"float", "int", "double"};
  const char* strategies[4] = {"automatic", "two_pass", "block_atomic", "warp_atomic"};
  const std::size_t sizes[] = {1u << 10, 1u << 12, 1u << 14, 1u << 16, 1u << 18, 1u << 20, 1u << 22, 1u << 24};
  std::printf("| type | strategy | N | a µs | b µs | b / a | a's streams max/min | b's streams max/min |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (int type = 0; type < 3; ++type) {
    const std::size_t elem = type == 2 ? 8 : 4;
    for (int strategy = 0; strategy < 4; ++strategy) {
      for (std::size_t n : sizes) {
        if ((only[0] >= 0 && only[0] != type) || (only[1] >= 0 && only[1] != strategy) ||
            (only[2] >= 0 && only[2] != __builtin_ctzll(n)))
          continue;
        // As many copies as bench_reduce's rotating inputs, so that large inputs come from memory.
        const std::size_t copies = std::size_t(bench::rotation_copies(n * elem, l2_bytes));
        std::vector<void*> buf(copies, nullptr);
        for (void*& b : buf)
          if (cudaMalloc(&b, n * elem) != cudaSuccess || cudaMemset(b, 0, n * elem) != cudaSuccess) return 2;
        // Warm each stream up unheld first (k = 0), then once held, untimed.
        for (int s = 0; s < 2; ++s)
          for (int w = 0; w < streams; ++w)
            if (f[s](type, strategy, w, buf.data(), int(copies), n, 0) < 0 ||
                f[s](type, strategy, w, buf.data(), int(copies), n, calls) < 0) {
              std::fprintf(stderr, "side %d failed\n", s);
              return 3;
            }
        const ab_summary r = time_alternating(blocks, streams, [&](int side, int stream) {
          return f[side](type, strategy, stream, buf.data(), int(copies), n, calls);
        });
        std::printf("| %s | %s | 2^%d | %.3f | %.3f | %.3f | %.3f | %.3f |\n", types[type], strategies[strategy],
                    __builtin_ctzll(n),
                    r.median[0], r.median[1], r.median[1] / r.median[0], r.spread[0], r.spread[1]);
        std::fflush(stdout);
        for (void* b : buf) cudaFree(b);
      }
    }
  }
  return 0;
}
