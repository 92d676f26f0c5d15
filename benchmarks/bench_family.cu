// The rest of the reduction family on N = 2^10, 2^11, 2^12, 2^13, 2^14, 2^16, ..., 2^28 seeded random floats in
// [0, 1) (fill_random), against Thrust and the streaming-read ceiling, in one run.
//
//   roundtrip/<algorithm>/tally|thrust   host wall clock of one public call that returns its
//                                        answer to the host, tally's on tally::device.on(s),
//                                        Thrust's on thrust::cuda::par.on(s):
//     transform_reduce   sum of x * x              inner_product   sum of x[i] * y[i]
//     count_if           x < 0.5                   count           x == 0.5
//     min_element, max_element, minmax_element     (the answer is an iterator)
//     all_of             x < 2 (true everywhere)   any_of, none_of x > 2 (true nowhere)
//       the logical predicates are chosen so that no algorithm can stop early: the worst
//       case for both libraries, and the one every caller pays when the answer is "all".
//   device/<algorithm>/tally             GPU time from events around k back-to-back enqueues
//                                        (k = 20 for N <= 2^20, else 5), divided by k: the
//                                        reduction the algorithm runs, enqueued through
//                                        tally::reduce_into over the same view the algorithm
//                                        builds (its answer then stays on the device, which
//                                        the public calls cannot do), for transform_reduce,
//                                        inner_product, count_if, min_element,
//                                        minmax_element and any_of
//   device/<ceiling>/read_ceiling        our streaming read of the bytes the algorithm reads:
//     read_ceiling_1   N floats (every algorithm but inner_product)
//     read_ceiling_2   2N floats (inner_product reads x and y)
//
// Counters: GBps (bytes read / time: 4N, or 8N for inner_product) and N. Each device
// benchmark runs 3 repetitions of about 0.03 s of wall time each, each round trip 7: a
// round trip at small N is one host-clock call of a few µs, and 3 medians let the host's
// jitter through (one median varied by 25% at 2^10 in 3). Aggregates only;
// scripts/bench_family_report.py reads the medians.
//
// Checks before timing, once per (algorithm, N): tally's public answer against Thrust's
// (counts, indices and booleans exactly; float sums within a relative 1e-5), and each
// device view's answer against the public one. A mismatch marks that benchmark as an error
// and leaves the rest of the run alone.

#include "support/family_predicates.cuh"
#include "support/harness.cuh"
#include "support/timing.cuh"
#include "tally/tally.cuh"

#include <benchmark/benchmark.h>
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/extrema.h>
#include <thrust/inner_product.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/logical.h>
#include <thrust/transform_reduce.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace {

constexpr int repetitions = 3;
constexpr int roundtrip_repetitions = 7;
constexpr double min_time_s = 0.03;
constexpr std::uint64_t seed = 0xFA11'7A11'2026ull;

using bench::above_two;
using bench::below_half;
using bench::below_two;
using bench::square;

struct context {
  cudaStream_t stream = nullptr;
  void* out = nullptr;  // device result of the asynchronous calls (up to 256 bytes)
  std::unique_ptr<bench::read_ceiling> ceiling;
};
context* ctx = nullptr;

using bench::calls_per_timing;
using bench::clock_kind;

// Two independent seeded inputs of n floats each (x and y), rotated together.
struct inputs {
  std::unique_ptr<bench::rotating_input> x, y;
};

// Freed in main, before the CUDA runtime shuts down.
std::map<std::size_t, inputs> inputs_by_size;

inputs& inputs_for(std::size_t n) {
  auto& slot = inputs_by_size[n];
  if (!slot.x) {
    slot.x = std::make_unique<bench::rotating_input>(n, seed + n);
    slot.y = std::make_unique<bench::rotating_input>(n, seed + (1ull << 40) + n);
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
  return bench::checks_out(state, "bench_family", what, check);
}

std::string mismatch(const char* what, double got, double want) {
  char message[200];
  std::snprintf(message, sizeof message, "%s: tally %.17g, reference %.17g", what, got, want);
  return message;
}

// ---- the algorithms: one call of each library's public API on the next buffers ----


struct transform_reduce_alg {
  static constexpr const char* name = "transform_reduce";
  static constexpr int streams = 1;
  static float tally_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return tally::transform_reduce(tally::device.on(ctx->stream), x, x + n, square{}, 0.0f, tally::plus<float>{});
  }
  static float thrust_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return thrust::transform_reduce(thrust::cuda::par.on(ctx->stream), x, x + n, square{}, 0.0f,
                                    thrust::plus<float>{});
  }
  static std::string compare(inputs&, float t, float r) { return sums_agree(t, r) ? "" : mismatch(name, t, r); }
};

struct inner_product_alg {
  static constexpr const char* name = "inner_product";
  static constexpr int streams = 2;
  static float tally_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    const float* y = in.y->next();
    return tally::inner_product(tally::device.on(ctx->stream), x, x + n, y, 0.0f);
  }
  static float thrust_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    const float* y = in.y->next();
    return thrust::inner_product(thrust::cuda::par.on(ctx->stream), x, x + n, y, 0.0f);
  }
  static std::string compare(inputs&, float t, float r) { return sums_agree(t, r) ? "" : mismatch(name, t, r); }
};

struct count_if_alg {
  static constexpr const char* name = "count_if";
  static constexpr int streams = 1;
  static std::ptrdiff_t tally_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return tally::count_if(tally::device.on(ctx->stream), x, x + n, below_half{});
  }
  static std::ptrdiff_t thrust_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return thrust::count_if(thrust::cuda::par.on(ctx->stream), x, x + n, below_half{});
  }
  static std::string compare(inputs&, std::ptrdiff_t t, std::ptrdiff_t r) {
    return t == r ? "" : mismatch(name, static_cast<double>(t), static_cast<double>(r));
  }
};

struct count_alg {
  static constexpr const char* name = "count";
  static constexpr int streams = 1;
  static std::ptrdiff_t tally_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return tally::count(tally::device.on(ctx->stream), x, x + n, 0.5f);
  }
  static std::ptrdiff_t thrust_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return thrust::count(thrust::cuda::par.on(ctx->stream), x, x + n, 0.5f);
  }
  static std::string compare(inputs& in, std::ptrdiff_t t, std::ptrdiff_t r) { return count_if_alg::compare(in, t, r); }
};

// Extrema answer with iterators; the calls return their offsets into the buffer they read.
struct min_element_alg {
  static constexpr const char* name = "min_element";
  static constexpr int streams = 1;
  static std::ptrdiff_t tally_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return tally::min_element(tally::device.on(ctx->stream), x, x + n) - x;
  }
  static std::ptrdiff_t thrust_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return thrust::min_element(thrust::cuda::par.on(ctx->stream), x, x + n) - x;
  }
  static std::string compare(inputs& in, std::ptrdiff_t t, std::ptrdiff_t r) { return count_if_alg::compare(in, t, r); }
};

struct max_element_alg {
  static constexpr const char* name = "max_element";
  static constexpr int streams = 1;
  static std::ptrdiff_t tally_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return tally::max_element(tally::device.on(ctx->stream), x, x + n) - x;
  }
  static std::ptrdiff_t thrust_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return thrust::max_element(thrust::cuda::par.on(ctx->stream), x, x + n) - x;
  }
  static std::string compare(inputs& in, std::ptrdiff_t t, std::ptrdiff_t r) { return count_if_alg::compare(in, t, r); }
};

// Both offsets packed in one integer (min * 2^32 + max; N < 2^32 here).
struct minmax_element_alg {
  static constexpr const char* name = "minmax_element";
  static constexpr int streams = 1;
  static std::int64_t tally_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    const auto r = tally::minmax_element(tally::device.on(ctx->stream), x, x + n);
    return ((r.first - x) << 32) + (r.second - x);
  }
  static std::int64_t thrust_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    const auto r = thrust::minmax_element(thrust::cuda::par.on(ctx->stream), x, x + n);
    return ((r.first - x) << 32) + (r.second - x);
  }
  // Both return the first of the smallest and the first of the largest.
  static std::string compare(inputs&, std::int64_t t, std::int64_t r) {
    if ((t >> 32) != (r >> 32)) return mismatch("minmax_element min", double(t >> 32), double(r >> 32));
    if ((t & 0xFFFFFFFF) != (r & 0xFFFFFFFF))
      return mismatch("minmax_element max", double(t & 0xFFFFFFFF), double(r & 0xFFFFFFFF));
    return "";
  }
};

struct all_of_alg {
  static constexpr const char* name = "all_of";
  static constexpr int streams = 1;
  static bool tally_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return tally::all_of(tally::device.on(ctx->stream), x, x + n, below_two{});
  }
  static bool thrust_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return thrust::all_of(thrust::cuda::par.on(ctx->stream), x, x + n, below_two{});
  }
  static std::string compare(inputs&, bool t, bool r) { return t == r && t ? "" : mismatch(name, t, r); }
};

struct any_of_alg {
  static constexpr const char* name = "any_of";
  static constexpr int streams = 1;
  static bool tally_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return tally::any_of(tally::device.on(ctx->stream), x, x + n, above_two{});
  }
  static bool thrust_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return thrust::any_of(thrust::cuda::par.on(ctx->stream), x, x + n, above_two{});
  }
  static std::string compare(inputs&, bool t, bool r) { return t == r && !t ? "" : mismatch(name, t, r); }
};

struct none_of_alg {
  static constexpr const char* name = "none_of";
  static constexpr int streams = 1;
  static bool tally_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return tally::none_of(tally::device.on(ctx->stream), x, x + n, above_two{});
  }
  static bool thrust_call(inputs& in, std::size_t n) {
    const float* x = in.x->next();
    return thrust::none_of(thrust::cuda::par.on(ctx->stream), x, x + n, above_two{});
  }
  static std::string compare(inputs&, bool t, bool r) { return t == r && t ? "" : mismatch(name, t, r); }
};

// tally's answer checked against Thrust's once per N, before tally's timing. The rotated
// buffers hold the same values, so the two calls may read different copies.
template <class Alg>
void roundtrip_tally(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  inputs& in = inputs_for(n);
  if (!checks_out(state, Alg::name, [&] { return Alg::compare(in, Alg::tally_call(in, n), Alg::thrust_call(in, n)); }))
    return;
  time_roundtrip(state, n * sizeof(float) * Alg::streams, [&] { return Alg::tally_call(in, n); });
}

template <class Alg>
void roundtrip_thrust(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  inputs& in = inputs_for(n);
  time_roundtrip(state, n * sizeof(float) * Alg::streams, [&] { return Alg::thrust_call(in, n); });
}

// ---- device views: the reduction each algorithm runs, with its answer left on the device ----

// check(answer, inputs, n) compares the view's answer with the public call's.
template <class Acc, class View, class Op, class Check>
void device_view(benchmark::State& state, int streams, View make_view, Acc init, Op op, Check check) {
  const auto n = static_cast<std::size_t>(state.range(0));
  inputs& in = inputs_for(n);
  const auto policy = tally::device.on(ctx->stream);
  Acc* out = static_cast<Acc*>(ctx->out);
  if (!checks_out(state, "device view", [&] {
        const auto [first, last] = make_view(in, n);
        tally::reduce_into(policy, first, last, out, init, op);
        return check(read_back<Acc>(out), in, n);
      }))
    return;
  time_device(state, n * sizeof(float) * streams, [&] {
    const auto [first, last] = make_view(in, n);
    tally::reduce_into(policy, first, last, out, init, op);
  });
}

// Each view below is the one tally's algorithm hands to the reduction (transform_reduce.cuh,
// extrema.cuh, logical.cuh), so that dispatch takes the same path as the public call.
void device_transform_reduce(benchmark::State& state) {
  device_view<float>(
      state, 1,
      [](inputs& in, std::size_t n) {
        const float* x = in.x->next();
        return std::pair{thrust::make_transform_iterator(x, square{}), thrust::make_transform_iterator(x + n, square{})};
      },
      0.0f, tally::plus<float>{},
      [](const float& got, inputs& in, std::size_t n) {
        const float want = transform_reduce_alg::tally_call(in, n);
        return got == want ? std::string() : mismatch("device transform_reduce", got, want);
      });
}

void device_inner_product(benchmark::State& state) {
  using pair_product = tally::detail::apply_to_pair<tally::multiplies<>>;
  device_view<float>(
      state, 2,
      [](inputs& in, std::size_t n) {
        const auto pairs = thrust::make_zip_iterator(thrust::make_tuple(in.x->next(), in.y->next()));
        const auto first = thrust::make_transform_iterator(pairs, pair_product{});
        return std::pair{first, first + static_cast<std::ptrdiff_t>(n)};
      },
      0.0f, tally::plus<float>{},
      [](const float& got, inputs& in, std::size_t n) {
        const float want = inner_product_alg::tally_call(in, n);
        return got == want ? std::string() : mismatch("device inner_product", got, want);
      });
}

void device_count_if(benchmark::State& state) {
  using predicate = tally::detail::count_predicate<below_half, std::ptrdiff_t>;
  device_view<std::ptrdiff_t>(
      state, 1,
      [](inputs& in, std::size_t n) {
        const float* x = in.x->next();
        return std::pair{thrust::make_transform_iterator(x, predicate{}),
                         thrust::make_transform_iterator(x + n, predicate{})};
      },
      std::ptrdiff_t{0}, tally::plus<std::ptrdiff_t>{},
      [](const std::ptrdiff_t& got, inputs& in, std::size_t n) {
        const std::ptrdiff_t want = count_if_alg::tally_call(in, n);
        return got == want ? std::string() : mismatch("device count_if", static_cast<double>(got), static_cast<double>(want));
      });
}

void device_min_element(benchmark::State& state) {
  using candidate = tally::detail::indexed_value<float>;
  using read = tally::detail::read_candidate<const float*, float>;
  using keep = tally::detail::keep_first_min<float, thrust::less<float>>;
  device_view<candidate>(
      state, 1,
      [](inputs& in, std::size_t n) {
        const read reader{in.x->next()};
        const thrust::counting_iterator<std::int64_t> i(0);
        return std::pair{thrust::make_transform_iterator(i, reader),
                         thrust::make_transform_iterator(i + static_cast<std::int64_t>(n), reader)};
      },
      tally::detail::no_candidate<float>(), keep{},
      [](const candidate& got, inputs& in, std::size_t n) {
        const std::ptrdiff_t want = min_element_alg::tally_call(in, n);
        return got.index == want ? std::string()
                                 : mismatch("device min_element", static_cast<double>(got.index), static_cast<double>(want));
      });
}

void device_minmax_element(benchmark::State& state) {
  using candidates = tally::detail::min_and_max<float>;
  using read = tally::detail::read_candidate_pair<const float*, float>;
  using keep = tally::detail::keep_min_and_max<float, thrust::less<float>>;
  device_view<candidates>(
      state, 1,
      [](inputs& in, std::size_t n) {
        const read reader{in.x->next()};
        const thrust::counting_iterator<std::int64_t> i(0);
        return std::pair{thrust::make_transform_iterator(i, reader),
                         thrust::make_transform_iterator(i + static_cast<std::int64_t>(n), reader)};
      },
      candidates{tally::detail::no_candidate<float>(), tally::detail::no_candidate<float>()}, keep{},
      [](const candidates& got, inputs& in, std::size_t n) {
        const std::int64_t want = minmax_element_alg::tally_call(in, n);
        const std::int64_t packed = (got.min.index << 32) + got.max.index;
        return packed == want ? std::string()
                              : mismatch("device minmax_element", static_cast<double>(packed), static_cast<double>(want));
      });
}

void device_any_of(benchmark::State& state) {
  using answer = tally::detail::predicate_answer<above_two, false>;
  device_view<unsigned>(
      state, 1,
      [](inputs& in, std::size_t n) {
        const float* x = in.x->next();
        return std::pair{thrust::make_transform_iterator(x, answer{}), thrust::make_transform_iterator(x + n, answer{})};
      },
      0u, tally::bit_or<unsigned>{},
      [](const unsigned& got, inputs& in, std::size_t n) {
        const bool want = any_of_alg::tally_call(in, n);
        return (got != 0u) == want ? std::string() : mismatch("device any_of", got, want);
      });
}

template <int Streams>
void device_read_ceiling(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  inputs& in = inputs_for(n);
  float* out = static_cast<float*>(ctx->out);
  time_device(state, n * sizeof(float) * Streams, [&] {
    ctx->ceiling->read_bytes(in.x->next(), n * sizeof(float), out, ctx->stream);
    if (Streams == 2) ctx->ceiling->read_bytes(in.y->next(), n * sizeof(float), out, ctx->stream);
  });
}

template <class F>
void register_family(const std::string& name, clock_kind clock, F fn) {
  bench::register_sizes(name, clock, clock == clock_kind::roundtrip ? roundtrip_repetitions : repetitions, min_time_s,
                        fn);
}

template <class Alg>
void register_roundtrips() {
  const std::string prefix = std::string("roundtrip/") + Alg::name + "/";
  register_family(prefix + "tally", clock_kind::roundtrip, roundtrip_tally<Alg>);
  register_family(prefix + "thrust", clock_kind::roundtrip, roundtrip_thrust<Alg>);
}

}  // namespace

int main(int argc, char** argv) {
  bool bad_arguments = false;
  if (!bench::start(&argc, argv, "bench_family", &bad_arguments)) return bad_arguments ? 1 : 0;

  context c;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  BENCH_CUDA_CHECK(cudaMalloc(&c.out, 256));
  c.ceiling = std::make_unique<bench::read_ceiling>();
  ctx = &c;

  register_family("device/transform_reduce/tally", clock_kind::device, device_transform_reduce);
  register_family("device/inner_product/tally", clock_kind::device, device_inner_product);
  register_family("device/count_if/tally", clock_kind::device, device_count_if);
  register_family("device/min_element/tally", clock_kind::device, device_min_element);
  register_family("device/minmax_element/tally", clock_kind::device, device_minmax_element);
  register_family("device/any_of/tally", clock_kind::device, device_any_of);
  register_family("device/read_ceiling_1/ceiling", clock_kind::device, device_read_ceiling<1>);
  register_family("device/read_ceiling_2/ceiling", clock_kind::device, device_read_ceiling<2>);
  register_roundtrips<transform_reduce_alg>();
  register_roundtrips<inner_product_alg>();
  register_roundtrips<count_if_alg>();
  register_roundtrips<count_alg>();
  register_roundtrips<min_element_alg>();
  register_roundtrips<max_element_alg>();
  register_roundtrips<minmax_element_alg>();
  register_roundtrips<all_of_alg>();
  register_roundtrips<any_of_alg>();
  register_roundtrips<none_of_alg>();

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  inputs_by_size.clear();
  c.ceiling.reset();
  BENCH_CUDA_CHECK(cudaFree(c.out));
  BENCH_CUDA_CHECK(cudaStreamDestroy(c.stream));
  ctx = nullptr;
  return 0;
}
