// Sums of N = 2^10, 2^11, 2^12, 2^13, 2^14, 2^16, ..., 2^28 seeded random values of three types, in one run:
//   float   uniform in [0, 1)
//   int     uniform in [0, 8): 7 * 2^28 < 2^31, so no sum overflows and results are exact
//   double  uniform in [0, 1)
// (benchmarks/support/timing.cuh, fill_random).
//
//   device/<type>/...     GPU time from events around k back-to-back calls on one stream
//                         (k = 20 for N <= 2^20, else 5), divided by k; the stream is held
//                         while the k calls are enqueued (bench::event_timer), so the events
//                         time the GPU, not the host; inputs rotate across buffers so that
//                         small ones are not all L2 hits
//     tally_reduce_into       tally::reduce_into to device memory, asynchronous, default
//                             policy (automatic strategy, reproducible)
//     tally_two_pass          the same with .strategy(tally::strategy::two_pass)
//     tally_block_atomic      int: .strategy(block_atomic) under the default policy (exact)
//     tally_block_atomic_nd   float, double: .nondeterministic().strategy(block_atomic)
//     tally_warp_atomic[_nd]  the same with warp_atomic
//     cub_sum                 cub::DeviceReduce::Sum, temp storage allocated outside the timing
//     read_ceiling            our own streaming read of the input's N * sizeof(T) bytes (the
//                             float kernel over N * sizeof(T) / 4 floats): the bound for any
//                             reduction of it
//   loop/<type>/...       the same events without the hold: k calls as a host loop issues
//                         them, so at small N the host's enqueue time sets the pace
//     tally_reduce_into       as above
//     cub_sum                 as above
//   roundtrip/<type>/...  host wall clock of one call that returns the sum to the host
//     tally_reduce            tally::reduce(tally::device.on(stream), ...): the result comes
//                             back through tally's mapped pinned slot
//     thrust_reduce           thrust::reduce(thrust::cuda::par.on(stream), ...)
//     tally_reduce_copy       float only: tally::reduce_into to a device float, cudaMemcpyAsync
//                             to a pinned host float, cudaStreamSynchronize (slot vs copy)
//     launch_floor_flag       float only: the least a round trip can take here, whatever N:
//                             one launch (by tally's launch_kernel) of a kernel that reads
//                             nothing and hands a value to the host through a result slot of
//                             tally's pool, by tally's own hand-over code, the host spinning
//                             on it as tally::reduce does
//     launch_floor_sync       the same kernel, then cudaStreamSynchronize and a host read
//     launch_floor_read       float only: the flag floor's launch and hand-over, of a kernel
//                             that first loads the one value it hands over from the rotated
//                             input of N floats, at a position drawn anew for every call (so
//                             that most loads miss the L2): a launch that waits for memory once.
//                             Where launch costs and kernel time add up (they did on the
//                             H100, docs/benchmarks.md), no reduction of N values of T
//                             returns sooner than this plus N * sizeof(T) bytes at the best
//                             bandwidth any kernel reaches (bench_report.py prints that bound)
//
// Counters: GBps (N * sizeof(T) bytes / time, 1e9 bytes per second) and N. Each benchmark
// runs 5 repetitions of about 0.05 s of wall time each (register_family) and reports
// aggregates only; scripts/bench_report.py reads the medians.
//
// Checks before timing: on first use of each (type, N), tally's default sum against CUB's
// (int exactly, float within a relative 1e-5, double 1e-10; a mismatch aborts the run); each
// other tally variant against CUB's once before its timing (the same bounds; 1e-3 and 1e-9
// for the nondeterministic float and double atomics), which marks that benchmark as an error
// on a mismatch or an exception, leaving the rest of the run alone.

#include "support/harness.cuh"
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
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace {

constexpr int repetitions = 5;
// Wall time of one repetition, about: the whole program then takes about 2 minutes on an
// H100 (1 minute at 0.02 s, 7 minutes with MinTime(0.02) of per-call time). Whatever this is,
// sizes up to 2^14 vary by 10-25% from run to run there: compare figures within a run.
constexpr double min_time_s = 0.05;
constexpr std::uint64_t seed = 0x7A11'7A11'2024ull;

template <class T>
struct element;
template <>
struct element<float> {
  static constexpr const char* name = "float";
  static constexpr double tolerance = 1e-5;     // relative, fixed-order sums against CUB
  static constexpr double nd_tolerance = 1e-3;  // relative, nondeterministic atomics against CUB
  static constexpr std::uint64_t seed_offset = 0;
};
template <>
struct element<int> {
  static constexpr const char* name = "int";
  static constexpr double tolerance = 0.0;  // exact
  static constexpr double nd_tolerance = 0.0;
  static constexpr std::uint64_t seed_offset = 1ull << 40;
};
template <>
struct element<double> {
  static constexpr const char* name = "double";
  static constexpr double tolerance = 1e-10;
  static constexpr double nd_tolerance = 1e-9;
  static constexpr std::uint64_t seed_offset = 2ull << 40;
};

struct context {
  cudaStream_t stream = nullptr;
  void* out = nullptr;           // device result of the asynchronous calls (any type)
  float* pinned_out = nullptr;   // pinned host float for roundtrip/float/tally_reduce_copy
  std::unique_ptr<bench::read_ceiling> ceiling;
};
context* ctx = nullptr;

template <class T>
T* device_out() {
  return static_cast<T*>(ctx->out);
}

using bench::calls_per_timing;
using bench::clock_kind;

// CUB's sum of [in, in + n) with temp storage owned by the caller.
template <class T>
class cub_sum {
 public:
  explicit cub_sum(std::size_t n) : n_(static_cast<int>(n)) {
    BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, bytes_, static_cast<const T*>(nullptr),
                                            static_cast<T*>(nullptr), n_));
    BENCH_CUDA_CHECK(cudaMalloc(&temp_, bytes_ > 0 ? bytes_ : 1));
  }
  ~cub_sum() { cudaFree(temp_); }
  cub_sum(const cub_sum&) = delete;
  cub_sum& operator=(const cub_sum&) = delete;

  void operator()(const T* in, T* out, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(temp_, bytes_, in, out, n_, stream));
  }

 private:
  int n_;
  std::size_t bytes_ = 0;
  void* temp_ = nullptr;
};

template <class T>
T read_back(const T* device_value) {
  T value{};
  BENCH_CUDA_CHECK(cudaMemcpyAsync(&value, device_value, sizeof(T), cudaMemcpyDeviceToHost, ctx->stream));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
  return value;
}

// int: equal; float, double: |got - want| <= tolerance * |want|.
template <class T>
bool close_enough(T got, T want, double tolerance, double* relative) {
  if constexpr (std::is_integral_v<T>) {
    *relative = got == want ? 0.0 : 1.0;
    return got == want;
  } else {
    const double g = static_cast<double>(got), w = static_cast<double>(want);
    *relative = std::fabs(g - w) / std::fmax(std::fabs(w), 1e-300);
    return *relative <= tolerance;
  }
}

// The seeded input of n values of T and CUB's sum of it.
template <class T>
struct checked_input {
  std::unique_ptr<bench::basic_rotating_input<T>> input;
  T cub_result{};
};

template <class T>
std::map<std::size_t, checked_input<T>>& inputs() {
  static std::map<std::size_t, checked_input<T>> by_size;
  return by_size;
}

// Made on first use; that first use also checks tally's default sum against CUB's.
template <class T>
checked_input<T>& input_for(std::size_t n) {
  auto& slot = inputs<T>()[n];
  if (slot.input) return slot;
  slot.input = std::make_unique<bench::basic_rotating_input<T>>(n, seed + element<T>::seed_offset + n);

  const T* in = slot.input->first();
  const T got = tally::reduce(tally::device.on(ctx->stream), in, in + n, T{});
  cub_sum<T> cub(n);
  cub(in, device_out<T>(), ctx->stream);
  slot.cub_result = read_back(device_out<T>());
  double rel = 0.0;
  if (!close_enough(got, slot.cub_result, element<T>::tolerance, &rel)) {
    std::fprintf(stderr, "bench_reduce: %s N=%zu: tally sum %.17g differs from CUB sum %.17g (relative %.3g > %.3g)\n",
                 element<T>::name, n, static_cast<double>(got), static_cast<double>(slot.cub_result), rel,
                 element<T>::tolerance);
    std::abort();
  }
  return slot;
}

void set_counters(benchmark::State& state, std::size_t n, std::size_t bytes_per_item, double total_seconds) {
  const double bytes = static_cast<double>(n) * static_cast<double>(bytes_per_item) *
                       static_cast<double>(state.iterations());
  state.counters["GBps"] = total_seconds > 0 ? bytes / total_seconds * 1e-9 : 0.0;
  state.counters["N"] = static_cast<double>(n);
}

// Warms up, then times k back-to-back enqueues per iteration with events.
template <class T, class Enqueue>
void time_device(benchmark::State& state, std::size_t n, Enqueue&& enqueue,
                 bench::event_timer::pacing pace = bench::event_timer::pacing::gpu) {
  const int k = calls_per_timing(n);
  for (int i = 0; i < 3; ++i) enqueue();
  BENCH_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
  bench::event_timer timer(pace);
  double total = 0.0;
  for (auto _ : state) {
    const double s = timer.seconds_per_call(ctx->stream, k, enqueue);
    state.SetIterationTime(s);
    total += s;
  }
  set_counters(state, n, sizeof(T), total);
}

// Warms up, then times one synchronous call per iteration on the host's steady clock.
template <class T, class Call>
void time_roundtrip(benchmark::State& state, std::size_t n, Call&& call) {
  for (int i = 0; i < 3; ++i) benchmark::DoNotOptimize(call());
  BENCH_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
  double total = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    T result = call();
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(result);
    const double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    total += s;
  }
  set_counters(state, n, sizeof(T), total);
}

// tally::plus without its commutative mark: a sum that takes the order-preserving path, to
// time that path against the commutative one on the same input (docs/operators.md).
template <class T>
struct plus_in_order {
  __host__ __device__ T operator()(const T& a, const T& b) const { return tally::plus<T>{}(a, b); }
};
static_assert(!tally::is_commutative_v<plus_in_order<float>>, "plus_in_order must take the ordered path");

// A tally device variant: the default policy with a forced strategy, nondeterministic or not,
// and the sum marked commutative (tally::plus) or not (plus_in_order).
struct variant {
  tally::strategy strategy = tally::strategy::automatic;
  bool nondeterministic = false;
  bool ordered = false;

  // Calls f with the variant's policy: tally::device itself for tally's own choice (the
  // policy a user passes, whose call sites compile only that choice's kernels), else the
  // policy that forces the strategy.
  template <class F>
  void with_policy(cudaStream_t stream, F&& f) const {
    if (strategy == tally::strategy::automatic && !nondeterministic) {
      f(tally::device.on(stream));
      return;
    }
    const tally::strategy_forcing_policy p = tally::device.on(stream).strategy(strategy);
    f(nondeterministic ? p.nondeterministic() : p);
  }
};

// One call of the variant on the first buffer, against CUB's sum. On a mismatch or an
// exception (a strategy that cannot run this call), marks the benchmark as an error.
template <class T>
bool variant_checks_out(benchmark::State& state, const variant& v, std::size_t n, const checked_input<T>& input) {
  std::string error;
  try {
    const T* in = input.input->first();
    v.with_policy(ctx->stream, [&](const auto& policy) {
      if (v.ordered) {
        tally::reduce_into(policy, in, in + n, device_out<T>(), T{}, plus_in_order<T>{});
      } else {
        tally::reduce_into(policy, in, in + n, device_out<T>(), T{}, tally::plus<T>{});
      }
    });
    const T got = read_back(device_out<T>());
    const double tolerance = v.nondeterministic ? element<T>::nd_tolerance : element<T>::tolerance;
    double rel = 0.0;
    if (!close_enough(got, input.cub_result, tolerance, &rel)) {
      char message[256];
      std::snprintf(message, sizeof message, "sum %.17g differs from CUB's %.17g (relative %.3g > %.3g)",
                    static_cast<double>(got), static_cast<double>(input.cub_result), rel, tolerance);
      error = message;
    }
  } catch (const std::exception& e) {
    error = std::string("threw: ") + e.what();
  }
  if (error.empty()) return true;
  std::fprintf(stderr, "bench_reduce: %s N=%zu: %s\n", element<T>::name, n, error.c_str());
  state.SkipWithError(error.c_str());
  return false;
}

template <class T>
void device_tally(benchmark::State& state, variant v,
                  bench::event_timer::pacing pace = bench::event_timer::pacing::gpu) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for<T>(n);
  if ((v.strategy != tally::strategy::automatic || v.ordered) && !variant_checks_out(state, v, n, input)) return;
  v.with_policy(ctx->stream, [&](const auto& policy) {
    if (v.ordered) {
      time_device<T>(state, n, [&] {
        const T* in = input.input->next();
        tally::reduce_into(policy, in, in + n, device_out<T>(), T{}, plus_in_order<T>{});
      }, pace);
      return;
    }
    time_device<T>(
        state, n,
        [&] {
          const T* in = input.input->next();
          tally::reduce_into(policy, in, in + n, device_out<T>(), T{}, tally::plus<T>{});
        },
        pace);
  });
}

template <class T>
void device_cub_sum(benchmark::State& state, bench::event_timer::pacing pace = bench::event_timer::pacing::gpu) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for<T>(n);
  cub_sum<T> cub(n);
  time_device<T>(state, n, [&] { cub(input.input->next(), device_out<T>(), ctx->stream); }, pace);
}

// The float kernel over the input's bytes: N * sizeof(T) / 4 floats.
template <class T>
void device_read_ceiling(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for<T>(n);
  const bench::read_ceiling& ceiling = *ctx->ceiling;
  time_device<T>(state, n, [&] {
    ceiling.read_bytes(input.input->next(), n * sizeof(T), device_out<float>(), ctx->stream);
  });
}

template <class T>
void roundtrip_tally_reduce(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for<T>(n);
  const auto policy = tally::device.on(ctx->stream);
  time_roundtrip<T>(state, n, [&] {
    const T* in = input.input->next();
    return tally::reduce(policy, in, in + n, T{});
  });
}

// The alternative to tally::reduce's mapped pinned result slot: an asynchronous reduce_into
// to device memory, then a copy of the value to pinned host memory and a synchronize.
void roundtrip_tally_reduce_copy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for<float>(n);
  const auto policy = tally::device.on(ctx->stream);
  time_roundtrip<float>(state, n, [&] {
    const float* in = input.input->next();
    tally::reduce_into(policy, in, in + n, device_out<float>(), 0.0f, tally::plus<float>{});
    BENCH_CUDA_CHECK(
        cudaMemcpyAsync(ctx->pinned_out, device_out<float>(), sizeof(float), cudaMemcpyDeviceToHost, ctx->stream));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    return *ctx->pinned_out;
  });
}

// The launch floors' kernel: no input, one value handed to the host by tally's own
// hand-over (publish into a result slot's tagged words, runtime.cuh).
__global__ void hand_over(float value, tally::detail::host_handoff* handoff) {
  tally::detail::publish(static_cast<float*>(nullptr), value, handoff);
}

// The read floor's kernel: the value handed over must first come back from memory.
__global__ void hand_over_one_read(const float* in, std::size_t index, tally::detail::host_handoff* handoff) {
  tally::detail::publish(static_cast<float*>(nullptr), in[index], handoff);
}

// A launch that waits for one load from memory before it hands the value over: the launch
// floor plus one memory latency. The position moves by a xorshift step every call, so that
// across the rotated copies most loads find their line outside the L2 (a hit only lowers the
// floor, which keeps the bound built on it a bound). The values are uniform in [0, 1); the
// last one handed over is checked against a copy of that element.
void roundtrip_launch_floor_read(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for<float>(n);
  const int device = tally::detail::current_device();
  std::uint64_t position = seed | 1;
  const float* last_input = nullptr;
  std::size_t last_index = 0;
  float last_handed = 0.0f;
  time_roundtrip<float>(state, n, [&] {
    position ^= position << 13;
    position ^= position >> 7;
    position ^= position << 17;
    last_index = static_cast<std::size_t>(position % n);
    last_input = input.input->next();
    tally::detail::result_slot slot;
    tally::detail::launch_kernel<hand_over_one_read>(1, 1, ctx->stream, device, last_input, last_index, slot.handoff());
    slot.take(ctx->stream, &last_handed, sizeof(last_handed));
    return last_handed;
  });
  float expected = -1.0f;
  BENCH_CUDA_CHECK(cudaMemcpy(&expected, last_input + last_index, sizeof(float), cudaMemcpyDeviceToHost));
  if (last_handed != expected) state.SkipWithError("the read floor's kernel handed over a wrong value");
}

// A round trip that reads nothing: a result slot from tally's pool, the launch as tally
// launches its kernels (launch_kernel: with programmatic dependent launch where the GPU has
// it, which on the H100 took 0.4-0.8 us less per round trip than <<<>>>), and the value
// taken as tally::reduce takes it (spinning on the slot), or after a synchronize.
void roundtrip_launch_floor(benchmark::State& state, bool spin_on_flag) {
  const auto n = static_cast<std::size_t>(state.range(0));
  float value = 1.0f;
  const int device = tally::detail::current_device();
  time_roundtrip<float>(state, n, [&] {
    value += 1.0f;
    tally::detail::result_slot slot;
    tally::detail::launch_kernel<hand_over>(1, 1, ctx->stream, device, value, slot.handoff());
    if (!spin_on_flag) BENCH_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    float handed = 0.0f;
    slot.take(ctx->stream, &handed, sizeof(handed));
    if (handed != value) {
      state.SkipWithError("the launch floor's kernel handed over a wrong value");
    }
    return handed;
  });
}

template <class T>
void roundtrip_thrust_reduce(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& input = input_for<T>(n);
  const auto policy = thrust::cuda::par.on(ctx->stream);
  time_roundtrip<T>(state, n, [&] {
    const T* in = input.input->next();
    return thrust::reduce(policy, in, in + n, T{});
  });
}

template <class F>
void register_family(const std::string& name, clock_kind clock, F fn) {
  bench::register_sizes(name, clock, repetitions, min_time_s, fn);
}

// Every family of one element type. Integer + is exact, so int's atomic strategies run under
// the default policy; float's and double's need nondeterministic(), and their names say so.
template <class T>
void register_type() {
  const std::string type = element<T>::name;
  const bool exact = std::is_integral_v<T>;
  const std::string atomic_suffix = exact ? "" : "_nd";
  const std::string device = "device/" + type + "/";
  const std::string roundtrip = "roundtrip/" + type + "/";

  auto tally_family = [&](const std::string& name, variant v) {
    register_family(device + name, clock_kind::device, [v](benchmark::State& state) { device_tally<T>(state, v); });
  };
  tally_family("tally_reduce_into", variant{tally::strategy::automatic, false});
  tally_family("tally_two_pass", variant{tally::strategy::two_pass, false});
  if constexpr (std::is_same_v<T, float>)
    tally_family("tally_ordered", variant{tally::strategy::automatic, false, true});
  tally_family("tally_block_atomic" + atomic_suffix, variant{tally::strategy::block_atomic, !exact});
  tally_family("tally_warp_atomic" + atomic_suffix, variant{tally::strategy::warp_atomic, !exact});
  register_family(device + "cub_sum", clock_kind::device, [](benchmark::State& state) { device_cub_sum<T>(state); });
  register_family(device + "read_ceiling", clock_kind::device, device_read_ceiling<T>);
  constexpr auto host_paced = bench::event_timer::pacing::host;
  register_family("loop/" + type + "/tally_reduce_into", clock_kind::device,
                  [](benchmark::State& state) { device_tally<T>(state, variant{}, host_paced); });
  register_family("loop/" + type + "/cub_sum", clock_kind::device,
                  [](benchmark::State& state) { device_cub_sum<T>(state, host_paced); });

  register_family(roundtrip + "tally_reduce", clock_kind::roundtrip, roundtrip_tally_reduce<T>);
  register_family(roundtrip + "thrust_reduce", clock_kind::roundtrip, roundtrip_thrust_reduce<T>);
  if constexpr (std::is_same_v<T, float>) {
    register_family(roundtrip + "tally_reduce_copy", clock_kind::roundtrip, roundtrip_tally_reduce_copy);
    register_family(roundtrip + "launch_floor_flag", clock_kind::roundtrip,
                    [](benchmark::State& state) { roundtrip_launch_floor(state, true); });
    register_family(roundtrip + "launch_floor_sync", clock_kind::roundtrip,
                    [](benchmark::State& state) { roundtrip_launch_floor(state, false); });
    register_family(roundtrip + "launch_floor_read", clock_kind::roundtrip, roundtrip_launch_floor_read);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool bad_arguments = false;
  if (!bench::start(&argc, argv, "bench_reduce", &bad_arguments)) return bad_arguments ? 1 : 0;
  benchmark::AddCustomContext("l2_bytes", std::to_string(bench::l2_cache_bytes()));

  context c;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  BENCH_CUDA_CHECK(cudaMalloc(&c.out, 256));
  BENCH_CUDA_CHECK(cudaMallocHost(&c.pinned_out, sizeof(float)));
  c.ceiling = std::make_unique<bench::read_ceiling>();
  ctx = &c;

  register_type<float>();
  register_type<int>();
  register_type<double>();

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  inputs<float>().clear();
  inputs<int>().clear();
  inputs<double>().clear();
  c.ceiling.reset();
  BENCH_CUDA_CHECK(cudaFreeHost(c.pinned_out));
  BENCH_CUDA_CHECK(cudaFree(c.out));
  BENCH_CUDA_CHECK(cudaStreamDestroy(c.stream));
  ctx = nullptr;
  return 0;
}
