// The host backend against std::reduce (float sum), for machines without a GPU.
// The host backend follows the device's plan so that its bits match the device's; this
// shows what that costs on the CPU. Also the exact sums (tally::exact_plus, float and double)
// beside the default sum of the same values.
#include <tally/exact.cuh>
#include <tally/tally.cuh>

#include <benchmark/benchmark.h>

#include <numeric>
#include <random>
#include <vector>

namespace {

std::vector<float> random_floats(std::size_t n) {
  std::mt19937_64 rng(n);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

void host_tally_reduce(benchmark::State& state) {
  const auto v = random_floats(std::size_t(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(tally::reduce(tally::host, v.begin(), v.end(), 0.0f));
  state.SetBytesProcessed(std::int64_t(state.iterations()) * state.range(0) * std::int64_t(sizeof(float)));
}

void host_std_reduce(benchmark::State& state) {
  const auto v = random_floats(std::size_t(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(std::reduce(v.begin(), v.end(), 0.0f));
  state.SetBytesProcessed(std::int64_t(state.iterations()) * state.range(0) * std::int64_t(sizeof(float)));
}

void host_exact_float(benchmark::State& state) {
  const auto v = random_floats(std::size_t(state.range(0)));
  for (auto _ : state)
    benchmark::DoNotOptimize(tally::reduce(tally::host, v.begin(), v.end(), 0.0f, tally::exact_plus<float>{}));
  state.SetBytesProcessed(std::int64_t(state.iterations()) * state.range(0) * std::int64_t(sizeof(float)));
}

void host_exact_double(benchmark::State& state) {
  const auto f = random_floats(std::size_t(state.range(0)));
  const std::vector<double> v(f.begin(), f.end());
  for (auto _ : state)
    benchmark::DoNotOptimize(tally::reduce(tally::host, v.begin(), v.end(), 0.0, tally::exact_plus<double>{}));
  state.SetBytesProcessed(std::int64_t(state.iterations()) * state.range(0) * std::int64_t(sizeof(double)));
}

BENCHMARK(host_tally_reduce)->RangeMultiplier(16)->Range(1 << 10, 1 << 26)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(host_std_reduce)->RangeMultiplier(16)->Range(1 << 10, 1 << 26)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(host_exact_float)->RangeMultiplier(16)->Range(1 << 10, 1 << 26)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(host_exact_double)->RangeMultiplier(16)->Range(1 << 10, 1 << 26)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
