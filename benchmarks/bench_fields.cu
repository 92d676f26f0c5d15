// Multi-field reductions on three float arrays x, y, z of N = 2^10, 2^11, 2^12, 2^13, 2^14, 2^16, ..., 2^28 seeded
// random floats in [0, 1) (fill_random), in one run:
//
//   roundtrip/xyz_sum/tally          tally::reduce over tally::zip(x, y, z) with tally::plus<>
//   roundtrip/xyz_sum/thrust3        three thrust::reduce calls, one per array
//   roundtrip/xyz_sum/thrust_zip     thrust::reduce over a zip_iterator with a tuple-sum functor
//                                    (host wall clock of the calls, answer on the host; all on
//                                    one stream)
//   device/xyz_sum/tally             GPU time (CUDA events around k back-to-back
//   device/bounding_box/tally        tally::reduce_into calls, k = 20 for N <= 2^20, else 5):
//                                    the xyz sum, and the one-pass bounding box (transform of
//                                    the zip into (x, y, z, x, y, z), mins then maxes)
//   device/read_ceiling_3/ceiling    our streaming read of the same 3N floats
//   micro/block_tuple/interleaved    a kernel of 64 block reductions per block of a 3-float
//   micro/block_tuple/per_field      tuple, against the same kernel reducing each field by its
//                                    own tally::block::reduce, one after another (N threads in
//                                    blocks of 256, N = 2^16, 2^20, 2^24)
//
// Counters: GBps (12N bytes / time; for micro, 12 bytes per thread per reduction) and N.
// Each benchmark runs 3 repetitions of about 0.03 s; scripts/bench_fields_report.py reads
// the medians. Before timing, tally's answers are checked once per N against Thrust's (sums
// within a relative 1e-5, the box exactly) and the two micro kernels against each other.

#include "support/harness.cuh"
#include "support/timing.cuh"
#include "tally/tally.cuh"

#include <benchmark/benchmark.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/reduce.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>

namespace {

constexpr int repetitions = 3;
constexpr double min_time_s = 0.03;
constexpr std::uint64_t seed = 0xF1E1'D500'2026ull;

using xyz = cuda::std::tuple<float, float, float>;
using box = cuda::std::tuple<float, float, float, float, float, float>;

struct xyz_plus {  // what a Thrust user writes for a zip_iterator reduction
  __host__ __device__ xyz operator()(const xyz& a, const xyz& b) const {
    return xyz(cuda::std::get<0>(a) + cuda::std::get<0>(b), cuda::std::get<1>(a) + cuda::std::get<1>(b),
               cuda::std::get<2>(a) + cuda::std::get<2>(b));
  }
};
struct point_box {
  __host__ __device__ box operator()(const xyz& p) const {
    const float x = cuda::std::get<0>(p), y = cuda::std::get<1>(p), z = cuda::std::get<2>(p);
    return box(x, y, z, x, y, z);
  }
};
const auto box_op = tally::fields(tally::minimum<float>{}, tally::minimum<float>{}, tally::minimum<float>{},
                                  tally::maximum<float>{}, tally::maximum<float>{}, tally::maximum<float>{});
const float inf = INFINITY;
const box empty_box(inf, inf, inf, -inf, -inf, -inf);

struct context {
  cudaStream_t stream = nullptr;
  void* out = nullptr;  // device results (up to 256 bytes)
  std::unique_ptr<bench::read_ceiling> ceiling;
};
context* ctx = nullptr;

using bench::calls_per_timing;
using bench::clock_kind;

struct inputs {
  std::unique_ptr<bench::rotating_input> x, y, z;
  // The same rotation slot of all three arrays.
  cuda::std::tuple<const float*, const float*, const float*> next() { return {x->next(), y->next(), z->next()}; }
};
std::map<std::size_t, inputs> inputs_by_size;  // freed in main, before the runtime shuts down

inputs& inputs_for(std::size_t n) {
  auto& slot = inputs_by_size[n];
  if (!slot.x) {
    slot.x = std::make_unique<bench::rotating_input>(n, seed + n);
    slot.y = std::make_unique<bench::rotating_input>(n, seed + (1ull << 40) + n);
    slot.z = std::make_unique<bench::rotating_input>(n, seed + (2ull << 40) + n);
  }
  return slot;
}

// The shared harness (support/harness.cuh) on this program's stream.
using bench::sums_agree;
template <class T>
T read_back(const void* device_value) {
  return bench::read_back<T>(ctx->stream, device_value);
}
template <class Enqueue>
void time_device(benchmark::State& state, double bytes_per_call, Enqueue&& enqueue) {
  const int k = calls_per_timing(static_cast<std::size_t>(state.range(0)));
  bench::time_device(state, ctx->stream, k, bytes_per_call, enqueue);
}
template <class Call>
void time_roundtrip(benchmark::State& state, double bytes_per_call, Call&& call) {
  bench::time_roundtrip(state, ctx->stream, bytes_per_call, call);
}
template <class Check>
bool checks_out(benchmark::State& state, const char* what, Check&& check) {
  return bench::checks_out(state, "bench_fields", what, check);
}

std::string compare_sums(const xyz& got, const xyz& want) {
  const double g[3] = {cuda::std::get<0>(got), cuda::std::get<1>(got), cuda::std::get<2>(got)};
  const double w[3] = {cuda::std::get<0>(want), cuda::std::get<1>(want), cuda::std::get<2>(want)};
  for (int k = 0; k < 3; ++k) {
    if (!sums_agree(g[k], w[k])) {
      char message[200];
      std::snprintf(message, sizeof message, "field %d: %.9g, reference %.9g", k, g[k], w[k]);
      return message;
    }
  }
  return "";
}

// ---- the three ways to sum x, y and z, each returning the sums to the host ----

xyz tally_xyz(inputs& in, std::size_t n) {
  const auto [x, y, z] = in.next();
  const auto first = tally::zip(x, y, z);
  return tally::reduce(tally::device.on(ctx->stream), first, first + n, xyz(0, 0, 0), tally::plus<>{});
}

xyz thrust_three(inputs& in, std::size_t n) {
  const auto [x, y, z] = in.next();
  const auto policy = thrust::cuda::par.on(ctx->stream);
  return xyz(thrust::reduce(policy, x, x + n, 0.0f), thrust::reduce(policy, y, y + n, 0.0f),
             thrust::reduce(policy, z, z + n, 0.0f));
}

xyz thrust_zip(inputs& in, std::size_t n) {
  const auto [x, y, z] = in.next();
  const auto first = thrust::make_zip_iterator(x, y, z);
  return thrust::reduce(thrust::cuda::par.on(ctx->stream), first, first + n, xyz(0, 0, 0), xyz_plus{});
}

template <xyz (*Call)(inputs&, std::size_t)>
void roundtrip(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  inputs& in = inputs_for(n);
  if (!checks_out(state, "roundtrip", [&] { return compare_sums(Call(in, n), thrust_three(in, n)); })) return;
  time_roundtrip(state, 12.0 * n, [&] { return Call(in, n); });
}

// ---- device time of tally's one-pass views ----

void device_xyz_sum(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  inputs& in = inputs_for(n);
  const auto policy = tally::device.on(ctx->stream);
  xyz* out = static_cast<xyz*>(ctx->out);
  auto enqueue = [&] {
    const auto [x, y, z] = in.next();
    const auto first = tally::zip(x, y, z);
    tally::reduce_into(policy, first, first + n, out, xyz(0, 0, 0), tally::plus<>{});
  };
  if (!checks_out(state, "device xyz_sum", [&] {
        enqueue();
        return compare_sums(read_back<xyz>(out), thrust_three(in, n));
      }))
    return;
  time_device(state, 12.0 * n, enqueue);
}

void device_bounding_box(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  inputs& in = inputs_for(n);
  const auto policy = tally::device.on(ctx->stream);
  box* out = static_cast<box*>(ctx->out);
  auto enqueue = [&] {
    const auto [x, y, z] = in.next();
    const auto first = thrust::make_transform_iterator(tally::zip(x, y, z), point_box{});
    tally::reduce_into(policy, first, first + static_cast<std::ptrdiff_t>(n), out, empty_box, box_op);
  };
  if (!checks_out(state, "device bounding_box", [&] {
        enqueue();
        const box got = read_back<box>(out);
        const auto [x, y, z] = in.next();
        const auto p = thrust::cuda::par.on(ctx->stream);
        const box want(thrust::reduce(p, x, x + n, inf, thrust::minimum<float>{}),
                       thrust::reduce(p, y, y + n, inf, thrust::minimum<float>{}),
                       thrust::reduce(p, z, z + n, inf, thrust::minimum<float>{}),
                       thrust::reduce(p, x, x + n, -inf, thrust::maximum<float>{}),
                       thrust::reduce(p, y, y + n, -inf, thrust::maximum<float>{}),
                       thrust::reduce(p, z, z + n, -inf, thrust::maximum<float>{}));
        return got == want ? std::string() : std::string("the box differs from Thrust's minima and maxima");
      }))
    return;
  time_device(state, 12.0 * n, enqueue);
}

void device_read_ceiling_3(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  inputs& in = inputs_for(n);
  float* out = static_cast<float*>(ctx->out);
  time_device(state, 12.0 * n, [&] {
    const auto [x, y, z] = in.next();
    ctx->ceiling->read_bytes(x, n * sizeof(float), out, ctx->stream);
    ctx->ceiling->read_bytes(y, n * sizeof(float), out, ctx->stream);
    ctx->ceiling->read_bytes(z, n * sizeof(float), out, ctx->stream);
  });
}

// ---- micro: one interleaved tuple block reduction against one per field ----

constexpr int micro_reductions = 64;

// Each thread's values change every round (so no reduction can be hoisted); block 0..
// writes the sum of its results so the work cannot be dropped.
template <bool Interleaved>
__global__ void __launch_bounds__(256) block_tuple_kernel(const float* seeds, xyz* out) {
  const unsigned t = blockIdx.x * 256 + threadIdx.x;
  float x = seeds[t], y = x * 0.5f + 1.0f, z = x * 0.25f - 1.0f;
  xyz total(0, 0, 0);
  for (int r = 0; r < micro_reductions; ++r) {
    xyz sum;
    if constexpr (Interleaved) {
      sum = tally::block::reduce<256>(xyz(x, y, z), tally::plus<>{});
    } else {
      sum = xyz(tally::block::reduce<256>(x, tally::plus<float>{}), tally::block::reduce<256>(y, tally::plus<float>{}),
                tally::block::reduce<256>(z, tally::plus<float>{}));
    }
    total = tally::plus<>{}(total, sum);
    x += 1.0f;
    y -= 0.5f;
    z += 0.25f;
  }
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

template <bool Interleaved>
void micro_block_tuple(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::size_t blocks = std::max<std::size_t>(132, n / 256);
  static std::map<std::size_t, std::pair<float*, xyz*>> buffers;  // per N, freed at exit with the process
  auto& buffer = buffers[blocks];
  if (!buffer.first) {
    BENCH_CUDA_CHECK(cudaMalloc(&buffer.first, blocks * 256 * sizeof(float)));
    BENCH_CUDA_CHECK(cudaMalloc(&buffer.second, 2 * blocks * sizeof(xyz)));
    bench::fill_random(buffer.first, blocks * 256, seed + blocks);
  }
  auto launch = [&](bool interleaved, xyz* out) {
    if (interleaved) {
      block_tuple_kernel<true><<<unsigned(blocks), 256, 0, ctx->stream>>>(buffer.first, out);
    } else {
      block_tuple_kernel<false><<<unsigned(blocks), 256, 0, ctx->stream>>>(buffer.first, out);
    }
  };
  if (!checks_out(state, "micro block_tuple", [&] {
        launch(true, buffer.second);
        launch(false, buffer.second + blocks);
        const xyz a = read_back<xyz>(buffer.second), b = read_back<xyz>(buffer.second + blocks);
        return a == b ? std::string() : std::string("interleaved and per-field block reductions differ");
      }))
    return;
  time_device(state, 12.0 * double(blocks) * 256 * micro_reductions, [&] { launch(Interleaved, buffer.second); });
}

template <class F>
void register_family(const std::string& name, clock_kind clock, F fn) {
  bench::register_sizes(name, clock, repetitions, min_time_s, fn);
}

}  // namespace

int main(int argc, char** argv) {
  bool bad_arguments = false;
  if (!bench::start(&argc, argv, "bench_fields", &bad_arguments)) return bad_arguments ? 1 : 0;

  context c;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  BENCH_CUDA_CHECK(cudaMalloc(&c.out, 256));
  c.ceiling = std::make_unique<bench::read_ceiling>();
  ctx = &c;

  register_family("device/xyz_sum/tally", clock_kind::device, device_xyz_sum);
  register_family("device/bounding_box/tally", clock_kind::device, device_bounding_box);
  register_family("device/read_ceiling_3/ceiling", clock_kind::device, device_read_ceiling_3);
  register_family("roundtrip/xyz_sum/tally", clock_kind::roundtrip, roundtrip<tally_xyz>);
  register_family("roundtrip/xyz_sum/thrust3", clock_kind::roundtrip, roundtrip<thrust_three>);
  register_family("roundtrip/xyz_sum/thrust_zip", clock_kind::roundtrip, roundtrip<thrust_zip>);
  for (const char* name : {"micro/block_tuple/interleaved", "micro/block_tuple/per_field"}) {
    for (int log2n : {16, 20, 24}) {  // 256, 4096 and 65536 blocks
      benchmark::RegisterBenchmark(name, name[18] == 'i' ? micro_block_tuple<true> : micro_block_tuple<false>)
          ->Arg(std::int64_t{1} << log2n)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond)
          ->MinTime(min_time_s / calls_per_timing(std::size_t{1} << log2n))
          ->Repetitions(repetitions)
          ->ReportAggregatesOnly(true);
    }
  }

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  inputs_by_size.clear();
  c.ceiling.reset();
  BENCH_CUDA_CHECK(cudaFree(c.out));
  BENCH_CUDA_CHECK(cudaStreamDestroy(c.stream));
  ctx = nullptr;
  return 0;
}
