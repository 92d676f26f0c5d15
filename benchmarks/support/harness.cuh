#pragma once
// The loop every tally benchmark shares: device time from CUDA events over k back-to-back
// enqueues, round-trip time from the host clock around one call, the GBps and N counters,
// and a correctness check that marks a benchmark as an error instead of timing a wrong
// answer. Header-only: the benchmarks instantiate it with their own callables.

#include "support/timing.cuh"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

namespace bench {

// The start of every benchmark program: Google Benchmark's flags, then the GPU it will time,
// named in the output's context. Returns false, having said why, where there is nothing to
// measure (no CUDA device); the program then exits 0, so scripts run on any machine.
inline bool start(int* argc, char** argv, const char* program, bool* bad_arguments) {
  benchmark::Initialize(argc, argv);
  *bad_arguments = benchmark::ReportUnrecognizedArguments(*argc, argv);
  if (*bad_arguments) return false;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("%s: no CUDA device; nothing to measure\n", program);
    return false;
  }
  int device = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  benchmark::AddCustomContext("gpu", prop.name);
  return true;
}

// Back-to-back calls per device timing: enough to spread one launch's jitter at small N.
inline int calls_per_timing(std::size_t n) { return n <= (std::size_t{1} << 20) ? 20 : 5; }

// What a benchmark's manual time is: per call on the device, or one round trip.
enum class clock_kind { device, roundtrip };

// One benchmark per N = 2^10, 2^11, 2^12, 2^13, 2^14, 2^16, ..., 2^28, each run `repetitions`
// times for about min_time_s of wall time and reported as aggregates only. The odd powers
// up to 2^13 are where one-tile kernels change their loads per thread, and where CUB's
// one tile ends (2^12 floats, 2^11 doubles). A device benchmark's manual time is per call
// while one iteration makes calls_per_timing(n) calls, so its MinTime is min_time_s divided
// by that; a round trip's iteration is one call.
template <class F>
void register_sizes(const std::string& name, clock_kind clock, int repetitions, double min_time_s, F fn) {
  for (int log2n : {10, 11, 12, 13, 14, 16, 18, 20, 22, 24, 26, 28}) {
    const std::size_t n = std::size_t{1} << log2n;
    const double min_time = clock == clock_kind::device ? min_time_s / calls_per_timing(n) : min_time_s;
    benchmark::RegisterBenchmark(name.c_str(), fn)
        ->Arg(static_cast<std::int64_t>(n))
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(min_time)
        ->Repetitions(repetitions)
        ->ReportAggregatesOnly(true);
  }
}

// Sums that must agree to a relative 1e-5 (libraries that add in different orders).
inline bool sums_agree(double got, double want) { return std::fabs(got - want) <= 1e-5 * std::fabs(want); }

// A device value copied back to the host once the stream has reached it.
template <class T>
T read_back(cudaStream_t stream, const void* device_value) {
  T value{};
  BENCH_CUDA_CHECK(cudaMemcpyAsync(&value, device_value, sizeof(T), cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  return value;
}

inline void set_counters(benchmark::State& state, double bytes_per_call, double total_seconds) {
  const double bytes = bytes_per_call * static_cast<double>(state.iterations());
  state.counters["GBps"] = total_seconds > 0 ? bytes / total_seconds * 1e-9 : 0.0;
  state.counters["N"] = static_cast<double>(state.range(0));
}

// Each iteration's time is one call's share of k back-to-back enqueues between two events,
// after three warm-up calls.
template <class Enqueue>
void time_device(benchmark::State& state, cudaStream_t stream, int k, double bytes_per_call, Enqueue&& enqueue) {
  for (int i = 0; i < 3; ++i) enqueue();
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  event_timer timer;
  double total = 0.0;
  for (auto _ : state) {
    const double s = timer.seconds_per_call(stream, k, enqueue);
    state.SetIterationTime(s);
    total += s;
  }
  set_counters(state, bytes_per_call, total);
}

// Each iteration's time is the host clock around one call that returns its answer to the
// host, after three warm-up calls.
template <class Call>
void time_roundtrip(benchmark::State& state, cudaStream_t stream, double bytes_per_call, Call&& call) {
  for (int i = 0; i < 3; ++i) benchmark::DoNotOptimize(call());
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  double total = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto result = call();
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(result);
    const double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    total += s;
  }
  set_counters(state, bytes_per_call, total);
}

// Runs a check (a callable returning an empty string when the answer is right, else what is
// wrong) once; on a failure or an exception prints it, marks the benchmark as an error and
// returns false.
template <class Check>
bool checks_out(benchmark::State& state, const char* program, const char* what, Check&& check) {
  std::string error;
  try {
    error = check();
  } catch (const std::exception& e) {
    error = std::string("threw: ") + e.what();
  }
  if (error.empty()) return true;
  std::fprintf(stderr, "%s: %s N=%lld: %s\n", program, what, static_cast<long long>(state.range(0)), error.c_str());
  state.SkipWithError(error.c_str());
  return false;
}

}  // namespace bench
