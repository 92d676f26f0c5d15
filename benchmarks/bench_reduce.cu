// Float sums of N = 2^10, 2^12, ..., 2^28 seeded random values.
//
//   device/...     GPU time from events around k back-to-back calls on one stream
//                  (k = 20 for N <= 2^20, else 5), divided by k; inputs rotate across
//                  buffers so that small ones are not all L2 hits
//     tally_reduce_into   tally::reduce_into to device memory, asynchronous
//     cub_sum             cub::DeviceReduce::Sum, temp storage allocated outside the timing
//     read_ceiling        our own streaming read of the input: the bound for any reduction
//   roundtrip/...  host wall clock of one call that returns the sum to the host
//     tally_reduce        tally::reduce(tally::device.on(stream), ...)
//     thrust_reduce       thrust::reduce(thrust::cuda::par.on(stream), ...)
//
// Counters: GBps (N * 4 bytes / time, 1e9 bytes per second) and N. Each benchmark runs
// 6 repetitions and reports aggregates only; scripts/bench_report.py reads the medians.

#include "support/timing.cuh"
#include "tally/tally.cuh"

#include <benchmark/benchmark.h>
#include <cub/device/device_reduce.cuh>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

namespace {

constexpr int repetitions = 6;
constexpr double min_time_s = 0.03;
constexpr std::uint64_t seed = 0x7A11'7A11'2024ull;

struct context {
  cudaStream_t stream = nullptr;
  float* out = nullptr;  // device result of the asynchronous calls
  std::unique_ptr<bench::read_ceiling> ceiling;
  std::map<std::size_t, std::unique_ptr<bench::rotating_input>> inputs;
};
context* ctx = nullptr;

int calls_per_timing(std::size_t n) { return n <= (std::size_t{1} << 20) ? 20 : 5; }

// CUB's sum of [in, in + n) with temp storage owned by the caller.
class cub_sum {
 public:
  explicit cub_sum(std::size_t n) : n_(static_cast<int>(n)) {
    BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, bytes_, static_cast<const float*>(nullptr),
                                            static_cast<float*>(nullptr), n_));
    BENCH_CUDA_CHECK(cudaMalloc(&temp_, bytes_ > 0 ? bytes_ : 1));
  }
  ~cub_sum() { cudaFree(temp_); }
  cub_sum(const cub_sum&) = delete;
  cub_sum& operator=(const cub_sum&) = delete;

  void operator()(const float* in, float* out, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(temp_, bytes_, in, out, n_, stream));
  }

 private:
  int n_;
  std::size_t bytes_ = 0;
  void* temp_ = nullptr;
};

// The seeded input of n floats, made on first use; that first use also checks that
// tally's sum matches CUB's within a relative 1e-5.
bench::rotating_input& input_for(std::size_t n) {
  auto& slot = ctx->inputs[n];
  if (slot) return *slot;
  slot = std::make_unique<bench::rotating_input>(n, seed + n);

  const float* in = slot->first();
  const float got = tally::reduce(tally::device.on(ctx->stream), in, in + n, 0.0f);
  cub_sum cub(n);
  cub(in, ctx->out, ctx->stream);
  float want = 0.0f;
  BENCH_CUDA_CHECK(cudaMemcpyAsync(&want, ctx->out, sizeof(float), cudaMemcpyDeviceToHost, ctx->stream));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
  const double rel = std::fabs(static_cast<double>(got) - want) / std::fmax(std::fabs(static_cast<double>(want)), 1e-30);
  if (!(rel <= 1e-5)) {
    std::fprintf(stderr, "bench_reduce: N=%zu: tally sum %.9g differs from CUB sum %.9g (relative %.3g > 1e-5)\n",
                 n, static_cast<double>(got), static_cast<double>(want), rel);
    std::abort();
  }
  return *slot;
}

void set_counters(benchmark::State& state, std::size_t n, double total_seconds) {
  const double bytes = static_cast<double>(n) * sizeof(float) * static_cast<double>(state.iterations());
  state.counters["GBps"] = total_seconds > 0 ? bytes / total_seconds * 1e-9 : 0.0;
  state.counters["N"] = static_cast<double>(n);
}

// Warms up, then times k back-to-back enqueues per iteration with events.
template <class Enqueue>
void time_device(benchmark::State& state, std::size_t n, Enqueue&& enqueue) {
  const int k = calls_per_timing(n);
  for (int i = 0; i < 3; ++i) enqueue();
  BENCH_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
  bench::event_timer timer;
  double total = 0.0;
  for (auto _ : state) {
    const double s = timer.seconds_per_call(ctx->stream, k, enqueue);
    state.SetIterationTime(s);
    total += s;
  }
  set_counters(state, n, total);
}

// Warms up, then times one synchronous call per iteration on the host's steady clock.
template <class Call>
void time_roundtrip(benchmark::State& state, std::size_t n, Call&& call) {
  for (int i = 0; i < 3; ++i) benchmark::DoNotOptimize(call());
  BENCH_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
  double total = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    float result = call();
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(result);
    const double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    total += s;
  }
  set_counters(state, n, total);
}

void device_tally_reduce_into(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for(n);
  const auto policy = tally::device.on(ctx->stream);
  time_device(state, n, [&] {
    const float* in = input.next();
    tally::reduce_into(policy, in, in + n, ctx->out, 0.0f, tally::plus<float>{});
  });
}

void device_cub_sum(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for(n);
  cub_sum cub(n);
  time_device(state, n, [&] { cub(input.next(), ctx->out, ctx->stream); });
}

void device_read_ceiling(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for(n);
  const bench::read_ceiling& ceiling = *ctx->ceiling;
  time_device(state, n, [&] { ceiling(input.next(), n, ctx->out, ctx->stream); });
}

void roundtrip_tally_reduce(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for(n);
  const auto policy = tally::device.on(ctx->stream);
  time_roundtrip(state, n, [&] {
    const float* in = input.next();
    return tally::reduce(policy, in, in + n, 0.0f);
  });
}

void roundtrip_thrust_reduce(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for(n);
  const auto policy = thrust::cuda::par.on(ctx->stream);
  time_roundtrip(state, n, [&] {
    const float* in = input.next();
    return thrust::reduce(policy, in, in + n, 0.0f);
  });
}

void register_family(const char* name, void (*fn)(benchmark::State&)) {
  auto* b = benchmark::RegisterBenchmark(name, fn);
  for (int log2n = 10; log2n <= 28; log2n += 2) b->Arg(std::int64_t{1} << log2n);
  b->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->MinTime(min_time_s)
      ->Repetitions(repetitions)
      ->ReportAggregatesOnly(true);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_reduce: no CUDA device; nothing to measure\n");
    return 0;
  }
  int device = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  benchmark::AddCustomContext("gpu", prop.name);
  benchmark::AddCustomContext("l2_bytes", std::to_string(bench::l2_cache_bytes()));

  context c;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  BENCH_CUDA_CHECK(cudaMalloc(&c.out, sizeof(float)));
  c.ceiling = std::make_unique<bench::read_ceiling>();
  ctx = &c;

  register_family("device/tally_reduce_into", device_tally_reduce_into);
  register_family("device/cub_sum", device_cub_sum);
  register_family("device/read_ceiling", device_read_ceiling);
  register_family("roundtrip/tally_reduce", roundtrip_tally_reduce);
  register_family("roundtrip/thrust_reduce", roundtrip_thrust_reduce);

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  c.inputs.clear();
  c.ceiling.reset();
  BENCH_CUDA_CHECK(cudaFree(c.out));
  BENCH_CUDA_CHECK(cudaStreamDestroy(c.stream));
  ctx = nullptr;
  return 0;
}
