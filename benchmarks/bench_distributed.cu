// Sums of floats spread over the GPUs of one host (issue 38), one process with a thread per GPU
// (ncclCommInitAll), N per GPU from 2^10 to 2^28, side by side in one run:
//
//   tally_nccl  tally::reduce_into(tally::nccl(comm).on(s).shard(offset, R * N), ...): each rank
//               reduces its shard and every rank gets the sum of the whole range, with the bits
//               of single-GPU tally::reduce over it
//   (a)         tally::reduce_into(tally::device.on(s), shard, partial) and a bare
//               ncclAllReduce(partial, sum, 1, ncclFloat, ncclSum): the least a distributed
//               sum can cost with tally's local reduction, without its guarantees
//   (b)         thrust::reduce(thrust::cuda::par.on(s), shard) to the host, then a copy to the
//               device and ncclAllReduce of the one value, waited for: the usual hand-written
//               way (round trip only; thrust::reduce waits)
//   (a) + kernel (a), then one kernel that reads the sum, launched the ordinary way: what any
//               combine that computes on the collective's output pays beyond (a)
//   one GPU     tally::reduce_into(tally::device.on(s), N values) on GPU 0 alone, for weak
//               scaling: time on one GPU with N over time on R GPUs with N each
//
// Device time: each rank's median of 5 timings of k = 20 back-to-back calls on its held stream
// (bench::event_timer), the ranks starting each timing together; the slower rank's figure.
// Round trip: each rank's median wall time of 20 waited calls (tally::reduce under the NCCL
// policy; (a) and (b) then cudaStreamSynchronize and the value copied back), the slower rank's.
// Before timing, every rank's tally_nccl result (10 calls) is checked against single-GPU
// tally::reduce over the whole range, bit for bit. Prints a markdown table.

#include "support/timing.cuh"
#include "tally/distributed.cuh"
#include "tally/tally.cuh"

#include <nccl.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int calls = 20;
constexpr int samples = 5;
constexpr int round_trips = 20;

#define BENCH_NCCL_CHECK(call)                                                                         \
  do {                                                                                                 \
    const ncclResult_t bench_nccl_status_ = (call);                                                    \
    if (bench_nccl_status_ != ncclSuccess) {                                                           \
      std::fprintf(stderr, "%s failed: %s\n", #call, ncclGetErrorString(bench_nccl_status_));          \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)

// The rank threads meet here before each timing, so that their held streams start together.
class rendezvous {
 public:
  explicit rendezvous(int parties) : parties_(parties) {}
  void arrive_and_wait() {
    const int generation = generation_.load();
    if (arrived_.fetch_add(1) + 1 == parties_) {
      arrived_.store(0);
      generation_.fetch_add(1);
    } else {
      while (generation_.load() == generation) std::this_thread::yield();
    }
  }

 private:
  const int parties_;
  std::atomic<int> arrived_{0};
  std::atomic<int> generation_{0};
};

// One kernel that reads the all-reduced value, launched the ordinary way after the collective:
// what any combine that computes on the collective's output pays beyond (a).
__global__ void read_the_sum_kernel(const float* sum, float* out) {
  if (threadIdx.x == 0) *out = *sum;
}

struct row {
  std::uint64_t n = 0;
  double nccl_us = 0, plain_us = 0, plain_and_kernel_us = 0, one_gpu_us = 0;
  double nccl_trip_us = 0, plain_trip_us = 0, thrust_trip_us = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double median_round_trip_us(rendezvous& meet, F&& call) {
  std::vector<double> t;
  for (int i = 0; i < round_trips; ++i) {
    meet.arrive_and_wait();
    const auto start = std::chrono::steady_clock::now();
    call();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  return median(t);
}

template <class F>
double median_device_us_together(rendezvous& meet, cudaStream_t stream, F&& enqueue) {
  bench::event_timer timer;
  for (int i = 0; i < 3; ++i) enqueue();
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    meet.arrive_and_wait();
    t.push_back(timer.seconds_per_call(stream, calls, enqueue) * 1e6);
  }
  return median(t);
}

void run_rank(int rank, int ranks, ncclComm_t comm, rendezvous& meet, const std::vector<std::uint64_t>& sizes,
              std::vector<std::vector<row>>& rows, std::atomic<int>& mismatches) {
  BENCH_CUDA_CHECK(cudaSetDevice(rank));
  cudaStream_t s = nullptr;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* partial = nullptr;
  float* sum = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&partial, sizeof(float)));
  BENCH_CUDA_CHECK(cudaMalloc(&sum, sizeof(float)));
  for (std::uint64_t n : sizes) {
    row r;
    r.n = n;
    const std::uint64_t global = n * std::uint64_t(ranks);
    const auto bounds = tally::shard_bounds<float>(global, ranks);
    const std::uint64_t offset = bounds[std::size_t(rank)];
    const std::uint64_t mine = bounds[std::size_t(rank) + 1] - offset;
    // Every rank fills the whole range with the same seed, so it can check the bits of the whole.
    {
      thrust::device_vector<float> whole(global);
      bench::fill_random(thrust::raw_pointer_cast(whole.data()), global, 42);
      const float single = tally::reduce(tally::device.on(s), whole.begin(), whole.end(), 0.0f);
      thrust::device_vector<float> shard(whole.begin() + offset, whole.begin() + offset + mine);
      for (int repeat = 0; repeat < 10; ++repeat) {
        const float got =
            tally::reduce(tally::nccl(comm).on(s).shard(offset, global), shard.begin(), shard.end(), 0.0f);
        if (std::memcmp(&got, &single, sizeof(float)) != 0) {
          std::fprintf(stderr, "rank %d, N per GPU %llu, call %d: %.9g differs from single-GPU %.9g\n", rank,
                       static_cast<unsigned long long>(n), repeat, double(got), double(single));
          mismatches.fetch_add(1);
        }
      }
    }
    // The shards rotate as the single-GPU benchmarks' inputs do; a shard is the rank's bounds.
    bench::rotating_input input(mine > 0 ? mine : 1, 42 + std::uint64_t(rank));
    const auto policy = tally::nccl(comm).on(s).shard(offset, global);
    r.nccl_us = median_device_us_together(meet, s, [&] {
      const float* p = input.next();
      tally::reduce_into(policy, p, p + mine, sum, 0.0f);
    });
    r.plain_us = median_device_us_together(meet, s, [&] {
      const float* p = input.next();
      tally::reduce_into(tally::device.on(s), p, p + mine, partial, 0.0f);
      BENCH_NCCL_CHECK(ncclAllReduce(partial, sum, 1, ncclFloat, ncclSum, comm, s));
    });
    r.plain_and_kernel_us = median_device_us_together(meet, s, [&] {
      const float* p = input.next();
      tally::reduce_into(tally::device.on(s), p, p + mine, partial, 0.0f);
      BENCH_NCCL_CHECK(ncclAllReduce(partial, sum, 1, ncclFloat, ncclSum, comm, s));
      read_the_sum_kernel<<<1, 256, 0, s>>>(sum, partial);
      BENCH_CUDA_CHECK(cudaGetLastError());
    });
    r.nccl_trip_us = median_round_trip_us(meet, [&] {
      const float* p = input.next();
      volatile float v = tally::reduce(policy, p, p + mine, 0.0f);
      (void)v;
    });
    r.plain_trip_us = median_round_trip_us(meet, [&] {
      const float* p = input.next();
      tally::reduce_into(tally::device.on(s), p, p + mine, partial, 0.0f);
      BENCH_NCCL_CHECK(ncclAllReduce(partial, sum, 1, ncclFloat, ncclSum, comm, s));
      float v = 0;
      BENCH_CUDA_CHECK(cudaMemcpyAsync(&v, sum, sizeof(float), cudaMemcpyDeviceToHost, s));
      BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
    });
    r.thrust_trip_us = median_round_trip_us(meet, [&] {
      const float* p = input.next();
      const float local = thrust::reduce(thrust::cuda::par.on(s), p, p + mine, 0.0f);
      BENCH_CUDA_CHECK(cudaMemcpyAsync(partial, &local, sizeof(float), cudaMemcpyHostToDevice, s));
      BENCH_NCCL_CHECK(ncclAllReduce(partial, sum, 1, ncclFloat, ncclSum, comm, s));
      float v = 0;
      BENCH_CUDA_CHECK(cudaMemcpyAsync(&v, sum, sizeof(float), cudaMemcpyDeviceToHost, s));
      BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
    });
    // One GPU with N: rank 0 alone, the others waiting at the next rendezvous.
    if (rank == 0) {
      bench::rotating_input whole_n(n, 42);
      r.one_gpu_us = bench::median_device_us(s, calls, samples, [&] {
        const float* p = whole_n.next();
        tally::reduce_into(tally::device.on(s), p, p + n, partial, 0.0f);
      });
    }
    meet.arrive_and_wait();
    rows[std::size_t(rank)].push_back(r);
  }
  cudaFree(partial);
  cudaFree(sum);
  cudaStreamDestroy(s);
}

}  // namespace

int main() {
  int devices = 0;
  BENCH_CUDA_CHECK(cudaGetDeviceCount(&devices));
  if (devices < 2) {
    std::printf("bench_distributed: needs two GPUs, found %d; nothing measured\n", devices);
    return 0;
  }
  const int ranks = devices;
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(ranks));
  BENCH_NCCL_CHECK(ncclCommInitAll(comms.data(), ranks, nullptr));
  std::vector<std::uint64_t> sizes;
  for (int e = 10; e <= 28; e += 2) sizes.push_back(std::uint64_t(1) << e);
  std::vector<std::vector<row>> rows(static_cast<std::size_t>(ranks));
  std::atomic<int> mismatches{0};
  rendezvous meet(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back(run_rank, r, ranks, comms[std::size_t(r)], std::ref(meet), std::cref(sizes), std::ref(rows),
                         std::ref(mismatches));
  for (auto& t : threads) t.join();
  for (ncclComm_t c : comms) ncclCommDestroy(c);

  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  std::printf("# bench_distributed: %d x %s, NCCL %d, one process, a thread per GPU\n\n", ranks, prop.name,
              nccl_version);
  std::printf("| N per GPU | tally_nccl µs | (a) tally + ncclAllReduce µs | tally_nccl / (a) | (a) + a kernel after µs | "
              "tally_nccl / (a + kernel) | one GPU, N µs | weak scaling | (a)'s weak scaling | round trip tally_nccl µs | "
              "(a) µs | (b) thrust + ncclAllReduce µs | (b) / tally_nccl |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    row worst = rows[0][i];
    for (int r = 1; r < ranks; ++r) {
      const row& other = rows[std::size_t(r)][i];
      worst.nccl_us = std::max(worst.nccl_us, other.nccl_us);
      worst.plain_us = std::max(worst.plain_us, other.plain_us);
      worst.plain_and_kernel_us = std::max(worst.plain_and_kernel_us, other.plain_and_kernel_us);
      worst.nccl_trip_us = std::max(worst.nccl_trip_us, other.nccl_trip_us);
      worst.plain_trip_us = std::max(worst.plain_trip_us, other.plain_trip_us);
      worst.thrust_trip_us = std::max(worst.thrust_trip_us, other.thrust_trip_us);
    }
    std::printf("| 2^%d | %.2f | %.2f | %.3f | %.2f | %.3f | %.2f | %.1f%% | %.1f%% | %.2f | %.2f | %.2f | %.2fx |\n",
                int(std::log2(double(worst.n))), worst.nccl_us, worst.plain_us, worst.nccl_us / worst.plain_us,
                worst.plain_and_kernel_us, worst.nccl_us / worst.plain_and_kernel_us, worst.one_gpu_us,
                100.0 * worst.one_gpu_us / worst.nccl_us, 100.0 * worst.one_gpu_us / worst.plain_us,
                worst.nccl_trip_us, worst.plain_trip_us, worst.thrust_trip_us, worst.thrust_trip_us / worst.nccl_trip_us);
  }
  std::printf("\nbits of tally_nccl against single-GPU tally::reduce over the whole range: %s\n",
              mismatches.load() == 0 ? "equal on every rank at every N" : "MISMATCH");
  return mismatches.load() == 0 ? 0 : 1;
}
