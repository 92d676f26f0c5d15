// A probe, not part of the benchmark suite: where a round trip (one call that returns a float
// sum to the host) could still lose time at 2^14-2^24, against designs that combine the tile
// partials differently. Every probe kernel reads the input as tally's plan does at these
// sizes (tiles of 8192 floats: 256 threads, eight 16-byte loads each, evict-first where
// tally's are (streams_reads), one tile a block) and reduces each tile in the block; then:
//   host_fold   each block writes its tile's sum straight into mapped pinned host memory
//               (one 8-byte word: the call's epoch in the high half, the float's bits in the
//               low half, one relaxed system-scope store); the host waits for every word of
//               this call and folds them: no combine on the device at all
//   ticket      each block writes its sum to device memory, fences and takes an atomic
//               ticket; the last block to arrive folds the sums and hands the total over as
//               tally::reduce does (CUB's last-block guard)
// beside tally::reduce, thrust::reduce and the launch floor (tally's launch of a kernel that
// reads nothing and hands over one value), all launched as tally launches its kernels
// (launch_kernel), on one stream over the same rotated inputs (bench::rotating_input). Each
// variant's calls run back to back, as bench_reduce times round trips, in runs of 100 that
// take turns. (Variants interleaved call by call are not comparable: the rotation then hands
// a variant the copy that Thrust's cached reads left in the L2, while the others read
// evict-first and leave it there; on the H100 that made tally's round trip at 2^22 look 2.6 us
// shorter.) Each line is one variant's median round trip (host clock), with its 10th and 90th
// percentiles; then the device times of tally::reduce_into and the ticket kernel over
// back-to-back calls (events, held stream). Every answer is checked against a double sum of
// the input on the host.
//
// Built with the tools (TALLY_BUILD_TOOLS, target probe_roundtrip).

#include "support/timing.cuh"
#include "tally/tally.cuh"

#include <thrust/execution_policy.h>
#include <thrust/reduce.h>

#include <cuda/atomic>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int threads = 256;
constexpr int loads = 8;
constexpr std::size_t tile_floats = std::size_t(threads) * loads * 4;

// The sum of every thread's acc, in thread 0: warp trees, then warp 0 over the warps' sums.
__device__ __forceinline__ float block_sum(float acc) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  __shared__ float warp_sums[threads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < threads / 32 ? warp_sums[lane] : 0.0f;
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  }
  return acc;
}

// The sum of one tile, in thread 0.
__device__ __forceinline__ float tile_sum(const float* in, std::size_t tile, bool streaming) {
  const uint4* p = reinterpret_cast<const uint4*>(in + tile * tile_floats);
  uint4 r[loads];
#pragma unroll
  for (int u = 0; u < loads; ++u) r[u] = tally::detail::read_16_bytes(p + u * threads + threadIdx.x, streaming);
  float acc = 0.0f;
#pragma unroll
  for (int u = 0; u < loads; ++u)
    acc += (__uint_as_float(r[u].x) + __uint_as_float(r[u].y)) + (__uint_as_float(r[u].z) + __uint_as_float(r[u].w));
  return block_sum(acc);
}

__global__ void __launch_bounds__(threads)
    sums_to_host(const float* in, bool streaming, unsigned epoch, unsigned long long* words) {
  tally::detail::wait_for_prior_grid();
  const float s = tile_sum(in, blockIdx.x, streaming);
  if (threadIdx.x == 0)
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(words[blockIdx.x])
        .store((static_cast<unsigned long long>(epoch) << 32) | __float_as_uint(s), cuda::std::memory_order_relaxed);
}

__global__ void __launch_bounds__(threads)
    sums_by_ticket(const float* in, bool streaming, float* sums, unsigned* ticket, float* out,
                   tally::detail::host_handoff* handoff) {
  tally::detail::wait_for_prior_grid();
  const float s = tile_sum(in, blockIdx.x, streaming);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    sums[blockIdx.x] = s;
    __threadfence();
    last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  float acc = 0.0f;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += threads) acc += __ldcg(sums + b);
  // block_sum's shared words are free again: tile_sum's last reads came before the barrier above.
  const float total = block_sum(acc);
  if (threadIdx.x == 0) {
    *ticket = 0;
    tally::detail::publish(out, total, handoff);
  }
}

__global__ void hand_over(float value, tally::detail::host_handoff* handoff) {
  tally::detail::publish(static_cast<float*>(nullptr), value, handoff);
}

double percentile(std::vector<double> t, double q) {
  std::sort(t.begin(), t.end());
  return t[static_cast<std::size_t>(q * static_cast<double>(t.size() - 1))];
}

}  // namespace

int main() {
  cudaStream_t stream = nullptr;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int device = tally::detail::current_device();
  const auto policy = tally::device.on(stream);
  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("probe_roundtrip on %s: median round trip (p10, p90) in us, float sums\n", prop.name);

  constexpr std::size_t most_tiles = 2048;
  unsigned long long* words = nullptr;  // mapped pinned; unified addressing: the device's address too
  BENCH_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&words), most_tiles * sizeof(unsigned long long),
                                 cudaHostAllocMapped));
  std::memset(words, 0, most_tiles * sizeof(unsigned long long));
  float* sums = nullptr;
  unsigned* ticket = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&sums, most_tiles * sizeof(float)));
  BENCH_CUDA_CHECK(cudaMalloc(&ticket, sizeof(unsigned)));
  BENCH_CUDA_CHECK(cudaMemset(ticket, 0, sizeof(unsigned)));
  unsigned epoch = 0;
  bool all_right = true;
  float* out = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&out, sizeof(float)));

  for (int log2n : {14, 16, 18, 20, 21, 22, 23, 24}) {
    const std::size_t n = std::size_t(1) << log2n;
    const unsigned tiles = static_cast<unsigned>(n / tile_floats);
    const bool streaming = tally::detail::streams_reads(n * sizeof(float), bench::l2_cache_bytes());
    bench::rotating_input input(n, 0x7A11'0000ull + n);
    std::vector<float> host(n);
    BENCH_CUDA_CHECK(cudaMemcpy(host.data(), input.first(), n * sizeof(float), cudaMemcpyDeviceToHost));
    double want = 0.0;
    for (float x : host) want += x;

    enum { floor_kind, tally_kind, host_fold_kind, ticket_kind, thrust_kind, kinds };
    const char* names[kinds] = {"launch floor", "tally::reduce", "host_fold", "ticket", "thrust::reduce"};
    std::vector<double> t[kinds];
    float got[kinds] = {};
    float floor_value = 0.0f;
    const auto call = [&](int kind) -> float {
      const float* in = input.next();
      if (kind == floor_kind) {
        floor_value += 1.0f;
        tally::detail::result_slot slot;
        tally::detail::launch_kernel<hand_over>(1, 1, stream, device, floor_value, slot.handoff());
        float v = 0.0f;
        slot.take(stream, &v, sizeof(v));
        return v;
      }
      if (kind == tally_kind) return tally::reduce(policy, in, in + n, 0.0f);
      if (kind == thrust_kind) return thrust::reduce(thrust::cuda::par.on(stream), in, in + n, 0.0f);
      if (kind == ticket_kind) {
        tally::detail::result_slot slot;
        tally::detail::launch_kernel<sums_by_ticket>(tiles, threads, stream, device, in, streaming, sums, ticket,
                                                     static_cast<float*>(nullptr), slot.handoff());
        float v = 0.0f;
        slot.take(stream, &v, sizeof(v));
        return v;
      }
      // host_fold
      epoch = epoch == 0xffffffffu ? 1u : epoch + 1u;
      tally::detail::launch_kernel<sums_to_host>(tiles, threads, stream, device, in, streaming, epoch, words);
      const volatile unsigned long long* w = words;
      float total = 0.0f;
      for (unsigned b = 0; b < tiles; ++b) {
        unsigned long long x = 0;
        for (long spins = 1; ((x = w[b]) >> 32) != epoch; ++spins) {
          if (spins % (1 << 20) != 0) continue;
          const cudaError_t status = cudaStreamQuery(stream);  // a failed kernel writes no word
          if (status == cudaErrorNotReady) continue;
          BENCH_CUDA_CHECK(status);
          if ((w[b] >> 32) != epoch) BENCH_CUDA_CHECK(cudaErrorLaunchFailure);  // finished without the word
        }
        std::atomic_thread_fence(std::memory_order_acquire);
        const unsigned bits = static_cast<unsigned>(x);
        float value = 0.0f;
        std::memcpy(&value, &bits, sizeof value);
        total += value;
      }
      return total;
    };
    for (int warm = 0; warm < 20; ++warm)
      for (int kind = 0; kind < kinds; ++kind) call(kind);
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto timed_call = [&](int kind) {
      const auto t0 = std::chrono::steady_clock::now();
      const float v = call(kind);
      t[kind].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      got[kind] = v;
    };
    // Runs of 100 calls of one variant, four rounds of the variants, so that drift hits them alike.
    for (int round = 0; round < 4; ++round)
      for (int kind = 0; kind < kinds; ++kind)
        for (int s = 0; s < 100; ++s) timed_call(kind);
    for (int kind = 0; kind < kinds; ++kind) {
      bool right = true;
      if (kind == floor_kind) {
        right = got[kind] == floor_value;
      } else {
        right = std::fabs(double(got[kind]) - want) <= 1e-5 * std::fabs(want);
      }
      all_right = all_right && right;
      std::printf("N=2^%d %-15s %7.2f  (%6.2f, %6.2f)%s\n", log2n, names[kind], percentile(t[kind], 0.5),
                  percentile(t[kind], 0.1), percentile(t[kind], 0.9), right ? "" : "  WRONG ANSWER");
    }
    std::printf("N=2^%d thrust / tally %.3fx; 2.5x thrust needs %.2f us\n", log2n,
                percentile(t[thrust_kind], 0.5) / percentile(t[tally_kind], 0.5),
                percentile(t[thrust_kind], 0.5) / 2.5);
    // Device time of back-to-back calls (events, held stream), tally::reduce_into and the ticket.
    const double device_tally = bench::median_device_us(stream, 20, 41, [&] {
      const float* in = input.next();
      tally::reduce_into(policy, in, in + n, out, 0.0f, tally::plus<float>{});
    });
    const double device_ticket = bench::median_device_us(stream, 20, 41, [&] {
      tally::detail::launch_kernel<sums_by_ticket>(tiles, threads, stream, device, input.next(), streaming, sums,
                                                   ticket, out,
                                                   static_cast<tally::detail::host_handoff*>(nullptr));
    });
    float ticket_total = 0.0f;
    BENCH_CUDA_CHECK(cudaMemcpy(&ticket_total, out, sizeof(float), cudaMemcpyDeviceToHost));
    const bool ticket_right = std::fabs(double(ticket_total) - want) <= 1e-5 * std::fabs(want);
    all_right = all_right && ticket_right;
    std::printf("N=2^%d device time per call, back to back: tally::reduce_into %.2f  ticket %.2f us%s\n", log2n,
                device_tally, device_ticket, ticket_right ? "" : "  WRONG ANSWER");
  }
  BENCH_CUDA_CHECK(cudaFreeHost(words));
  BENCH_CUDA_CHECK(cudaFree(sums));
  BENCH_CUDA_CHECK(cudaFree(ticket));
  BENCH_CUDA_CHECK(cudaFree(out));
  BENCH_CUDA_CHECK(cudaStreamDestroy(stream));
  return all_right ? 0 : 1;
}
