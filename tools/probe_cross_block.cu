// A probe, not part of the benchmark suite: what it costs to combine the partials of a few
// blocks at the end of one launch, by each way the H100 offers. Every kernel reduces B tiles
// of 8192 floats (256 threads, eight 16-byte loads each, the plan's step) and then:
//   solo           writes each block's partial, no combine: the floor
//   poll           blocks 1..B publish a flagged partial; block 0 reads no tile and polls
//                  the flags from the start (tally's single pass at these sizes)
//   last_block     fence, atomic ticket; the last block to arrive folds (CUB-style guard)
//   cluster_solo   a cluster launch, no combine: what the cluster launch alone costs
//   cluster_sync   partials into block 0's shared memory, a full cluster barrier
//   cluster_arrive the same, but blocks other than 0 arrive and leave; block 0 waits
//   cluster_mbar   partials into block 0's shared memory, each followed by a remote
//                  arrive on block 0's mbarrier; block 0 waits on that barrier alone
//   poll_warp      poll, but block 0's fold is warp 0's shuffle tree alone (B <= 32)
// and, for comparison on the same inputs, tally::reduce_into and CUB's Sum of B * 8192 floats.
// Every figure is given for 200 calls per timing and for 20 (what the benchmarks use), to
// show what part of a per-call figure is the fixed cost of a timing.
// Each line printed is one variant's median device time per call over back-to-back calls on
// a held stream; every variant's answer is first checked against a double sum on the host.
//
// Built with the tools (TALLY_BUILD_TOOLS, target probe_cross_block); the cluster variants
// need a GPU of compute capability 9.0 or later and code built for it.

#include "support/timing.cuh"
#include "tally/tally.cuh"

#include <cub/device/device_reduce.cuh>

#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

namespace cg = cooperative_groups;

constexpr int threads = 256;
constexpr int loads = 8;
constexpr int tile_floats = threads * loads * 4;
constexpr int most_cluster_blocks = 16;

__device__ __forceinline__ float block_sum(float v) {  // thread 0 gets the block's sum
  __shared__ float warp_sums[threads / 32];
  for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < threads / 32 ? warp_sums[threadIdx.x] : 0.0f;
    for (int d = 4; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
  }
  return v;
}

__device__ __forceinline__ float read_tile(const float* in, unsigned tile) {
  const float4* p = reinterpret_cast<const float4*>(in) + std::size_t(tile) * (tile_floats / 4);
  float4 r[loads];
#pragma unroll
  for (int u = 0; u < loads; ++u) r[u] = __ldg(p + u * threads + threadIdx.x);
  float s = 0.0f;
#pragma unroll
  for (int u = 0; u < loads; ++u) s += (r[u].x + r[u].y) + (r[u].z + r[u].w);
  return block_sum(s);
}

// The folding block's sum of one partial per thread (valid: the thread holds one); thread 0
// gets it.
__device__ __forceinline__ float fold(float v, bool valid) { return block_sum(valid ? v : 0.0f); }

// Also launched as a cluster, to time the cluster launch alone.
__global__ void __launch_bounds__(threads) solo(const float* in, float* partials) {
  const float p = read_tile(in, blockIdx.x);
  if (threadIdx.x == 0) partials[blockIdx.x] = p;
}

// Block b > 0 of a polled combine: its tile's partial, published with its flag in one word.
__device__ __forceinline__ void publish_tile(const float* in, unsigned long long* cells) {
  const float p = read_tile(in, blockIdx.x - 1);
  if (threadIdx.x == 0)
    *reinterpret_cast<volatile unsigned long long*>(&cells[blockIdx.x - 1]) = (1ull << 32) | __float_as_uint(p);
}

// Block 0's thread t of a polled combine: partial t once its flag is up; the cell is cleared.
__device__ __forceinline__ float wait_for_partial(unsigned long long* cells) {
  volatile unsigned long long* cell = &cells[threadIdx.x];
  unsigned long long w;
  while (((w = *cell) >> 32) == 0) {
  }
  *cell = 0ull;
  return __uint_as_float(unsigned(w));
}

// WarpOnly: block 0's fold is warp 0's shuffle tree alone (b <= 32).
template <bool WarpOnly>
__global__ void __launch_bounds__(threads) poll(const float* in, unsigned long long* cells, float* out, unsigned b) {
  if (blockIdx.x != 0) {
    publish_tile(in, cells);
    return;
  }
  if (WarpOnly && threadIdx.x >= 32) return;
  const bool valid = threadIdx.x < b;
  const float v = valid ? wait_for_partial(cells) : 0.0f;
  float total = 0.0f;
  if constexpr (WarpOnly) {
    total = v;
    for (int d = 16; d > 0; d >>= 1) total += __shfl_down_sync(0xffffffffu, total, d);
  } else {
    total = fold(v, valid);
  }
  if (threadIdx.x == 0) *out = total;
}

__global__ void __launch_bounds__(threads)
    last_block(const float* in, float* partials, unsigned* ticket, float* out, unsigned b) {
  __shared__ bool is_last;
  const float p = read_tile(in, blockIdx.x);
  if (threadIdx.x == 0) {
    *reinterpret_cast<volatile float*>(&partials[blockIdx.x]) = p;
    __threadfence();
    is_last = atomicAdd(ticket, 1u) == b - 1;
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  const bool valid = threadIdx.x < b;
  const float v = valid ? *reinterpret_cast<volatile float*>(&partials[threadIdx.x]) : 0.0f;
  const float total = fold(v, valid);
  if (threadIdx.x == 0) {
    *out = total;
    *ticket = 0u;
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // the cluster kernels' bodies
// Block 0 of a cluster combine: the fold of the partials its cluster's blocks wrote into
// its shared memory.
__device__ __forceinline__ void fold_slots(const float* slots, unsigned blocks, float* out) {
  const bool valid = threadIdx.x < blocks;
  const float total = fold(valid ? slots[threadIdx.x] : 0.0f, valid);
  if (threadIdx.x == 0) *out = total;
}
#endif

// Partials into block 0's shared memory, then a cluster barrier: every block arrives and
// waits, or (ArriveAndLeave) blocks other than 0 arrive and leave and block 0 waits.
template <bool ArriveAndLeave>
__global__ void __launch_bounds__(threads) cluster_barrier(const float* in, float* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ float slots[most_cluster_blocks];
  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const float p = read_tile(in, blockIdx.x);
  if (threadIdx.x == 0) cluster.map_shared_rank(slots, 0)[rank] = p;
  if constexpr (ArriveAndLeave) {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    if (rank != 0) return;
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
  } else {
    cluster.sync();
    if (rank != 0) return;
  }
  fold_slots(slots, cluster.num_blocks(), out);
#else
  (void)in;
  (void)out;
#endif
}

__global__ void __launch_bounds__(threads) cluster_mbar(const float* in, float* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ float slots[most_cluster_blocks];
  __shared__ alignas(8) unsigned long long arrived;
  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const unsigned blocks = cluster.num_blocks();
  const unsigned bar = unsigned(__cvta_generic_to_shared(&arrived));
  if (rank == 0 && threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(blocks - 1) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  const float p = read_tile(in, blockIdx.x);
  if (rank != 0) {
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // block 0's barrier is initialized
    if (threadIdx.x == 0) {
      unsigned remote_slot, remote_bar;
      const unsigned slot = unsigned(__cvta_generic_to_shared(&slots[rank]));
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_slot) : "r"(slot), "r"(0u));
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_bar) : "r"(bar), "r"(0u));
      asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote_slot), "f"(p) : "memory");
      asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
    }
    return;
  }
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  if (threadIdx.x == 0) slots[0] = p;
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred ready; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 ready, [%1], %2; "
        "selp.u32 %0, 1, 0, ready; }"
        : "=r"(done)
        : "r"(bar), "r"(0u)
        : "memory");
  }
  __syncthreads();  // slots[0], written by thread 0 of this block
  fold_slots(slots, blocks, out);
#else
  (void)in;
  (void)out;
#endif
}

template <class Kernel, class... Args>
void launch_cluster(Kernel kernel, unsigned blocks, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = blocks;
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  BENCH_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}


}  // namespace

// Usage: probe_cross_block [ONLY_B [CALLS_PER_TIMING]]: one block count and one k, for a
// profiler's run.
int main(int argc, char** argv) {
  const unsigned only_b = argc > 1 ? unsigned(std::atoi(argv[1])) : 0u;
  const int only_k = argc > 2 ? std::atoi(argv[2]) : 0;
  const int samples = only_k != 0 && only_k < 20 ? 1 : 21;  // medians of 21 timings, or one for a profiler
  cudaStream_t stream = nullptr;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr unsigned most_blocks = 128;
  float* partials = nullptr;
  float* out = nullptr;
  unsigned long long* cells = nullptr;
  unsigned* ticket = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&partials, most_blocks * sizeof(float)));
  BENCH_CUDA_CHECK(cudaMalloc(&out, sizeof(float)));
  BENCH_CUDA_CHECK(cudaMalloc(&cells, most_blocks * sizeof(unsigned long long)));
  BENCH_CUDA_CHECK(cudaMalloc(&ticket, sizeof(unsigned)));
  BENCH_CUDA_CHECK(cudaMemset(cells, 0, most_blocks * sizeof(unsigned long long)));
  BENCH_CUDA_CHECK(cudaMemset(ticket, 0, sizeof(unsigned)));
  int device = 0, major = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  const bool clusters = major >= 9;  // the cluster kernels are empty in code built for older GPUs
  if (clusters) {
    for (auto k : {solo, cluster_barrier<false>, cluster_barrier<true>, cluster_mbar})
      BENCH_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }

  bool all_right = true;
  const std::vector<int> ks = only_k != 0 ? std::vector<int>{only_k} : std::vector<int>{200, 20};
  for (int k : ks) {
  for (unsigned b : {1u, 2u, 4u, 8u, 16u, 32u, 64u, 128u}) {
    if (only_b != 0 && b != only_b) continue;
    const std::size_t n = std::size_t(b) * tile_floats;
    bench::rotating_input input(n, 1000 + b);
    std::vector<float> host(n);
    BENCH_CUDA_CHECK(cudaMemcpy(host.data(), input.first(), n * sizeof(float), cudaMemcpyDeviceToHost));
    double expected = 0.0;
    for (float v : host) expected += v;
    // Each variant: out and partials poisoned (NaN), one call on the first copy, checked, then timed.
    const auto verify = [&](const char* name, auto&& run_once, bool sums_partials) {
      BENCH_CUDA_CHECK(cudaMemset(out, 0xff, sizeof(float)));
      BENCH_CUDA_CHECK(cudaMemset(partials, 0xff, most_blocks * sizeof(float)));
      run_once(input.first());
      BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
      double got = 0.0;
      if (sums_partials) {
        std::vector<float> p(b);
        BENCH_CUDA_CHECK(cudaMemcpy(p.data(), partials, b * sizeof(float), cudaMemcpyDeviceToHost));
        for (float x : p) got += x;
      } else {
        float o = 0.0f;
        BENCH_CUDA_CHECK(cudaMemcpy(&o, out, sizeof(float), cudaMemcpyDeviceToHost));
        got = o;
      }
      const bool right = std::fabs(got - expected) <= 1e-5 * expected;
      if (!right) {
        std::printf("WRONG %s B=%u: %.6f, expected %.6f\n", name, b, got, expected);
        all_right = false;
      }
    };
    const auto time = [&](const char* name, auto&& run_once, bool sums_partials) {
      verify(name, run_once, sums_partials);
      const double us = bench::median_device_us(stream, k, samples, [&] { run_once(input.next()); }, 5);
      std::printf("k=%-3d B=%-3u %-15s %6.2f us\n", k, b, name, us);
    };
    const auto run_solo = [&](const float* in) { solo<<<b, threads, 0, stream>>>(in, partials); };
    const auto run_poll = [&](const float* in) { poll<false><<<b + 1, threads, 0, stream>>>(in, cells, out, b); };
    const auto run_last = [&](const float* in) { last_block<<<b, threads, 0, stream>>>(in, partials, ticket, out, b); };
    time("solo", run_solo, true);
    time("poll", run_poll, false);
    time("last_block", run_last, false);
    const auto run_poll_warp = [&](const float* in) { poll<true><<<b + 1, threads, 0, stream>>>(in, cells, out, b); };
    if (b <= 32) time("poll_warp", run_poll_warp, false);
    const auto policy = tally::device.on(stream);
    const auto run_tally = [&](const float* in) {
      tally::reduce_into(policy, in, in + n, out, 0.0f, tally::plus<float>{});
    };
    time("tally", run_tally, false);
    std::size_t cub_bytes = 0;
    BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, cub_bytes, input.first(), out, int(n), stream));
    void* cub_temp = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&cub_temp, cub_bytes > 0 ? cub_bytes : 1));
    const auto run_cub = [&](const float* in) {
      BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(cub_temp, cub_bytes, in, out, int(n), stream));
    };
    time("cub", run_cub, false);
    BENCH_CUDA_CHECK(cudaFree(cub_temp));
    if (clusters && b <= most_cluster_blocks) {
      time("cluster_solo", [&](const float* in) { launch_cluster(solo, b, stream, in, partials); }, true);
      time("cluster_sync", [&](const float* in) { launch_cluster(cluster_barrier<false>, b, stream, in, out); }, false);
      time("cluster_arrive", [&](const float* in) { launch_cluster(cluster_barrier<true>, b, stream, in, out); }, false);
      if (b >= 2)
        time("cluster_mbar", [&](const float* in) { launch_cluster(cluster_mbar, b, stream, in, out); }, false);
    }
    BENCH_CUDA_CHECK(cudaGetLastError());
  }
  }
  BENCH_CUDA_CHECK(cudaFree(partials));
  BENCH_CUDA_CHECK(cudaFree(out));
  BENCH_CUDA_CHECK(cudaFree(cells));
  BENCH_CUDA_CHECK(cudaFree(ticket));
  BENCH_CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf(all_right ? "all answers right\n" : "SOME ANSWERS WRONG\n");
  return all_right ? 0 : 1;
}
