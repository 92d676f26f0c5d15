// A tuning probe, not part of the benchmark suite: tools/tune builds it once per variant of
// the knobs in include/tally/detail/tuning.cuh (or of the plan's constants) and runs the
// variants one after another in one session, so their figures can be compared. For each N
// it prints the median device time per call (events around back-to-back calls on a held
// stream, inputs rotated) of tally::reduce_into, CUB's Sum and the streaming-read ceiling;
// the same two calls each behind an ordinary empty kernel (without the overlap of
// back-to-back tally calls); then the host time one enqueue costs at small N.
//
// Usage: tune_reduce VARIANT_NAME [LARGEST_LOG2_N [SMALLEST_LOG2_N]]
// The value type summed is float, or TUNE_VALUE_TYPE (double or int) where defined.

#include "support/timing.cuh"
#include "tally/tally.cuh"

#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/reduce.h>

#include <cub/device/device_reduce.cuh>
#include <cuda/atomic>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#ifndef TUNE_VALUE_TYPE
#define TUNE_VALUE_TYPE float
#endif

namespace {

using value_t = TUNE_VALUE_TYPE;

__global__ void empty_kernel() {}

// Hand-over probes: how a kernel's one value reaches a host that spins on mapped pinned
// memory. Fenced: the value, a system fence, then a flag (tally::reduce before fc09b09).
// Released: the value, then the flag by a release store at system scope. Tagged: each
// 8-byte word carries 4 bytes of the value and a nonzero tag in its high half, written by
// one relaxed store each, no fence (tally::reduce now): the host waits until every word
// shows the tag.
__global__ void hand_over_fenced(float value, float* out, unsigned int* flag) {
  *reinterpret_cast<volatile float*>(out) = value;
  __threadfence_system();
  *reinterpret_cast<volatile unsigned int*>(flag) = 1;
}
__global__ void hand_over_released(float value, float* out, unsigned int* flag) {
  *reinterpret_cast<volatile float*>(out) = value;
  cuda::atomic_ref<unsigned int, cuda::thread_scope_system>(*flag).store(1, cuda::std::memory_order_release);
}
template <class T>
__global__ void hand_over_tagged(T value, tally::detail::host_handoff* handoff) {
  tally::detail::publish(static_cast<T*>(nullptr), value, handoff);  // tally::reduce's own hand-over
}

// The views transform_reduce (of x * x) and inner_product hand to the reduction
// (transform_reduce.cuh), as bench_family's device timings enqueue them.
struct square_of {
  __host__ __device__ value_t operator()(value_t x) const { return x * x; }
};
using pair_product = tally::detail::apply_to_pair<tally::multiplies<>>;

// A sum without tally's commutative mark: it takes the order-preserving path.
struct sum_in_order {
  __host__ __device__ value_t operator()(value_t a, value_t b) const { return a + b; }
};

using bench::median_device_us;

// Host wall time of one enqueue, in µs: the median of batches of k enqueues, each batch
// followed by a synchronize that is not timed.
template <class F>
double median_enqueue_us(cudaStream_t stream, int k, int samples, F&& enqueue) {
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < k; ++i) enqueue();
    const auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / k);
  }
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const char* variant = argc > 1 ? argv[1] : "default";
  const int largest_log2n = argc > 2 ? std::atoi(argv[2]) : 28;
  const int smallest_log2n = argc > 3 ? std::atoi(argv[3]) : 0;  // a profiler's run of one size
  cudaStream_t stream = nullptr;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  value_t* out = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&out, sizeof(value_t)));
  float* ceiling_out = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&ceiling_out, sizeof(float)));
  bench::read_ceiling ceiling;
  const auto policy = tally::device.on(stream);
  // An ordinary launch of an empty kernel: the launch floor, and a predecessor that lets
  // nothing start early.
  const auto launch_empty = [&] {
    empty_kernel<<<1, 32, 0, stream>>>();
    BENCH_CUDA_CHECK(cudaGetLastError());
  };

  {
    // Hand-over probes, interleaved so that drift hits them alike: median and 10th percentile.
    void* mapped = nullptr;
    BENCH_CUDA_CHECK(cudaHostAlloc(&mapped, 128 + sizeof(tally::detail::host_handoff), cudaHostAllocMapped));
    auto* value = static_cast<float*>(mapped);
    auto* flag = reinterpret_cast<unsigned int*>(static_cast<char*>(mapped) + 64);
    auto* handoff = reinterpret_cast<tally::detail::host_handoff*>(static_cast<char*>(mapped) + 128);
    auto* words = handoff->word;
    const auto spin = [&](auto done) {
      for (long spins = 1; !done(); ++spins)
        if (spins % (1 << 22) == 0) BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    };
    std::vector<double> t[5];
    float v = 1.0f;
    for (int i = 0; i < 3000; ++i) {
      for (int kind = 0; kind < 5; ++kind) {
        v += 1.0f;
        *reinterpret_cast<volatile unsigned int*>(flag) = 0;
        reinterpret_cast<volatile unsigned long long*>(words)[0] = 0;
        reinterpret_cast<volatile unsigned long long*>(words)[1] = 0;
        const auto t0 = std::chrono::steady_clock::now();
        if (kind == 0 || kind == 1) {
          if (kind == 0) hand_over_fenced<<<1, 1, 0, stream>>>(v, value, flag);
          else hand_over_released<<<1, 1, 0, stream>>>(v, value, flag);
          spin([&] { return *reinterpret_cast<volatile unsigned int*>(flag) != 0; });
        } else if (kind == 2 || kind == 3) {
          const int n_words = kind == 2 ? 1 : 2;
          if (n_words == 1) hand_over_tagged<<<1, 1, 0, stream>>>(v, handoff);  // a float: one word
          else hand_over_tagged<<<1, 1, 0, stream>>>(double(v), handoff);      // a double: two
          spin([&] {
            for (int w = 0; w < n_words; ++w)
              if ((reinterpret_cast<volatile unsigned long long*>(words)[w] >> 32) == 0) return false;
            return true;
          });
        } else {
          hand_over_fenced<<<1, 1, 0, stream>>>(v, value, flag);
          BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
        }
        t[kind].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
      }
    }
    const char* names[5] = {"fenced flag", "released flag", "tagged 1 word", "tagged 2 words", "sync"};
    for (int kind = 0; kind < 5; ++kind) {
      std::sort(t[kind].begin(), t[kind].end());
      std::printf("%-8s hand-over %-15s median %.2f us  p10 %.2f  p90 %.2f\n", variant, names[kind],
                  t[kind][t[kind].size() / 2], t[kind][t[kind].size() / 10], t[kind][t[kind].size() * 9 / 10]);
    }
    BENCH_CUDA_CHECK(cudaFreeHost(mapped));
  }

  for (int log2n : {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 24, 25, 26, 28}) {
    if (log2n > largest_log2n) break;
    if (log2n < smallest_log2n) continue;
    const std::size_t n = std::size_t{1} << log2n;
    bench::basic_rotating_input<value_t> input(n, 1234 + n);
    // Correctness guard: tally's sum against a float64 sum of the same values.
    std::vector<value_t> host(n);
    BENCH_CUDA_CHECK(cudaMemcpy(host.data(), input.first(), n * sizeof(value_t), cudaMemcpyDeviceToHost));
    double want = 0;
    for (value_t v : host) want += double(v);
    const value_t got = tally::reduce(policy, input.first(), input.first() + n, value_t{});
    if (std::fabs(double(got) - want) > 1e-5 * std::fabs(want)) {
      std::printf("%s N=2^%d WRONG: %.9g vs %.9g\n", variant, log2n, double(got), want);
      return 1;
    }

    // And the extrema's positions against std::'s on the same values.
    {
      const value_t* d = input.first();
      const auto want_min = std::min_element(host.begin(), host.end()) - host.begin();
      const auto want_minmax = std::make_pair(std::min_element(host.begin(), host.end()), std::max_element(host.begin(), host.end()));  // Thrust's rule, which tally follows
      const auto got_min = tally::min_element(policy, d, d + n) - d;
      const auto got_minmax = tally::minmax_element(policy, d, d + n);
      if ((got_min != want_min || got_minmax.first - d != want_minmax.first - host.begin() ||
          got_minmax.second - d != want_minmax.second - host.begin())) {
        std::printf("%s N=2^%d WRONG extrema: min %lld vs %lld\n", variant, log2n, (long long)got_min, (long long)want_min);
        return 1;
      }
    }

    std::size_t cub_bytes = 0;
    BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, cub_bytes, input.first(), out, static_cast<int>(n), stream));
    void* cub_temp = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&cub_temp, std::max<std::size_t>(cub_bytes, 1)));

    const int k = n <= (std::size_t{1} << 20) ? 20 : 5;
    const int samples = 41;
    const double tally_us = median_device_us(stream, k, samples, [&] {
      const value_t* in = input.next();
      tally::reduce_into(policy, in, in + n, out, value_t{}, tally::plus<value_t>{});
    });
    const double cub_us = median_device_us(stream, k, samples, [&] {
      BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(cub_temp, cub_bytes, input.next(), out, static_cast<int>(n), stream));
    });
    const double ceiling_us = median_device_us(stream, k, samples, [&] { ceiling.read_bytes(input.next(), input.bytes(), ceiling_out, stream); });
    auto strategy_us = [&](tally::strategy_forcing_policy p) {
      return median_device_us(stream, k, samples, [&] {
        const value_t* in = input.next();
        tally::reduce_into(p, in, in + n, out, value_t{}, tally::plus<value_t>{});
      });
    };
    const double two_pass_us = strategy_us(policy.strategy(tally::strategy::two_pass));
    const double block_atomic_us = strategy_us(policy.nondeterministic().strategy(tally::strategy::block_atomic));
    const double warp_atomic_us = strategy_us(policy.nondeterministic().strategy(tally::strategy::warp_atomic));
    const double ordered_us = median_device_us(stream, k, samples, [&] {
      const value_t* in = input.next();
      tally::reduce_into(policy, in, in + n, out, value_t{}, sum_in_order{});
    });
    {
      // The extrema's reductions, enqueued as tally::min_element and minmax_element run them
      // (as bench_family's device timings do).
      const thrust::counting_iterator<std::int64_t> index(0);
      const auto n64 = static_cast<std::int64_t>(n);
      tally::detail::indexed_value<value_t>* min_out = nullptr;
      tally::detail::min_and_max<value_t>* minmax_out = nullptr;
      BENCH_CUDA_CHECK(cudaMalloc(&min_out, sizeof(*min_out)));
      BENCH_CUDA_CHECK(cudaMalloc(&minmax_out, sizeof(*minmax_out)));
      const double min_us = median_device_us(stream, k, samples, [&] {
        const tally::detail::read_candidate<const value_t*, value_t> reader{input.next()};
        tally::reduce_into(policy, thrust::make_transform_iterator(index, reader),
                           thrust::make_transform_iterator(index + n64, reader), min_out,
                           tally::detail::no_candidate<value_t>(), tally::detail::keep_first_min<value_t, thrust::less<value_t>>{});
      });
      const double minmax_us = median_device_us(stream, k, samples, [&] {
        const tally::detail::read_candidate_pair<const value_t*, value_t> reader{input.next()};
        tally::reduce_into(policy, thrust::make_transform_iterator(index, reader),
                           thrust::make_transform_iterator(index + n64, reader), minmax_out,
                           tally::detail::min_and_max<value_t>{tally::detail::no_candidate<value_t>(),
                                                             tally::detail::no_candidate<value_t>()},
                           tally::detail::keep_min_and_max<value_t, thrust::less<value_t>>{});
      });
      std::printf("%-8s N=2^%-2d min_element %7.2f us (%5.1f%% of ceiling)  minmax_element %7.2f us (%5.1f%%)\n",
                  variant, log2n, min_us, 100.0 * ceiling_us / min_us, minmax_us, 100.0 * ceiling_us / minmax_us);
      BENCH_CUDA_CHECK(cudaFree(min_out));
      BENCH_CUDA_CHECK(cudaFree(minmax_out));
    }
    if (log2n >= 14) {
      // transform_reduce of x * x and inner_product of x and a second input, checked first.
      bench::basic_rotating_input<value_t> second(n, 4321 + n);
      std::vector<value_t> host_y(n);
      BENCH_CUDA_CHECK(cudaMemcpy(host_y.data(), second.first(), n * sizeof(value_t), cudaMemcpyDeviceToHost));
      double want_squares = 0, want_products = 0;
      for (std::size_t i = 0; i < n; ++i) {
        want_squares += double(host[i]) * double(host[i]);
        want_products += double(host[i]) * double(host_y[i]);
      }
      const auto squares = [&](const value_t* x) {
        return std::pair{thrust::make_transform_iterator(x, square_of{}), thrust::make_transform_iterator(x + n, square_of{})};
      };
      const auto products = [&](const value_t* x, const value_t* y) {
        const auto first = thrust::make_transform_iterator(thrust::make_zip_iterator(thrust::make_tuple(x, y)), pair_product{});
        return std::pair{first, first + static_cast<std::ptrdiff_t>(n)};
      };
      const auto [sq_first, sq_last] = squares(input.first());
      const auto [ip_first, ip_last] = products(input.first(), second.first());
      const double got_squares = double(tally::reduce(policy, sq_first, sq_last, value_t{}, tally::plus<value_t>{}));
      const double got_products = double(tally::reduce(policy, ip_first, ip_last, value_t{}, tally::plus<value_t>{}));
      if ((std::fabs(got_squares - want_squares) > 1e-5 * want_squares ||
                                    std::fabs(got_products - want_products) > 1e-5 * want_products)) {
        std::printf("%s N=2^%d WRONG transform_reduce %.9g vs %.9g or inner_product %.9g vs %.9g\n", variant, log2n,
                    got_squares, want_squares, got_products, want_products);
        return 1;
      }
      const double squares_us = median_device_us(stream, k, samples, [&] {
        const auto [first, last] = squares(input.next());
        tally::reduce_into(policy, first, last, out, value_t{}, tally::plus<value_t>{});
      });
      const double products_us = median_device_us(stream, k, samples, [&] {
        const auto [first, last] = products(input.next(), second.next());
        tally::reduce_into(policy, first, last, out, value_t{}, tally::plus<value_t>{});
      });
      std::printf("%-8s N=2^%-2d transform_reduce(x*x) %7.2f us  inner_product %7.2f us  (sum %7.2f us)\n", variant,
                  log2n, squares_us, products_us, tally_us);
    }
    {
      // Each call behind an ordinary launch of an empty kernel, which lets nothing start early:
      // the pair's time less the empty kernel's alone is a call's time without the overlap of
      // back-to-back calls (programmatic dependent launch, launch.cuh), for tally and CUB alike.
      const double empty_us = median_device_us(stream, k, samples, launch_empty);
      const double tally_behind_us = median_device_us(stream, k, samples, [&] {
        launch_empty();
        const value_t* in = input.next();
        tally::reduce_into(policy, in, in + n, out, value_t{}, tally::plus<value_t>{});
      }) - empty_us;
      const double cub_behind_us = median_device_us(stream, k, samples, [&] {
        launch_empty();
        BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(cub_temp, cub_bytes, input.next(), out, static_cast<int>(n), stream));
      }) - empty_us;
      std::printf("%-8s N=2^%-2d behind an ordinary kernel (pair less the empty kernel's %.2f us): tally %7.2f  cub %7.2f us  "
                  "cub/tally %5.3fx\n",
                  variant, log2n, empty_us, tally_behind_us, cub_behind_us, cub_behind_us / tally_behind_us);
    }
    std::printf("%-8s N=2^%-2d tally %7.2f  cub %7.2f  ceiling %7.2f us  tally/ceiling %5.1f%%  cub/tally %5.3fx | "
                "two_pass %7.2f  block_atomic %7.2f  warp_atomic %7.2f  ordered %7.2f us (%5.1f%% of tally)\n",
                variant, log2n, tally_us, cub_us, ceiling_us, 100.0 * ceiling_us / tally_us, cub_us / tally_us,
                two_pass_us, block_atomic_us, warp_atomic_us, ordered_us, 100.0 * tally_us / ordered_us);

    if (log2n >= 20) {
      // Round trips, tally::reduce and thrust::reduce interleaved (host clock), inputs rotated.
      std::vector<double> rt_tally, rt_thrust;
      for (int s = 0; s < 300; ++s) {
        const value_t* in = input.next();
        auto t0 = std::chrono::steady_clock::now();
        volatile value_t r1 = tally::reduce(policy, in, in + n, value_t{});
        rt_tally.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        in = input.next();
        t0 = std::chrono::steady_clock::now();
        volatile value_t r2 = thrust::reduce(thrust::cuda::par.on(stream), in, in + n, value_t{});
        rt_thrust.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        (void)r1;
        (void)r2;
      }
      std::sort(rt_tally.begin(), rt_tally.end());
      std::sort(rt_thrust.begin(), rt_thrust.end());
      const double a = rt_tally[rt_tally.size() / 2], b = rt_thrust[rt_thrust.size() / 2];
      std::printf("%-8s N=2^%-2d round trip tally %7.2f  thrust %7.2f us  thrust/tally %5.3fx\n", variant, log2n, a, b,
                  b / a);
    }
    if (log2n == 10) {
      const int kk = 50, ss = 21;
      const double e_empty = median_enqueue_us(stream, kk, ss, launch_empty);
      const double e_ceiling = median_enqueue_us(stream, kk, ss, [&] { ceiling.read_bytes(input.next(), input.bytes(), ceiling_out, stream); });
      const double e_cub = median_enqueue_us(stream, kk, ss, [&] {
        BENCH_CUDA_CHECK(cub::DeviceReduce::Sum(cub_temp, cub_bytes, input.next(), out, static_cast<int>(n), stream));
      });
      const double e_tally = median_enqueue_us(stream, kk, ss, [&] {
        const value_t* in = input.next();
        tally::reduce_into(policy, in, in + n, out, value_t{}, tally::plus<value_t>{});
      });
      const double d_empty = median_device_us(stream, 20, samples, launch_empty);
      std::printf("%-12s enqueue us/call at 2^10: empty %.2f  ceiling %.2f  cub %.2f  tally %.2f; empty kernel device %.2f us\n",
                  variant, e_empty, e_ceiling, e_cub, e_tally, d_empty);
      // Round trip of tally::reduce at 2^10 (host clock).
      std::vector<double> rt{0.0};
      for (int s = 0; s < 200; ++s) {
        const value_t* in = input.next();
        const auto t0 = std::chrono::steady_clock::now();
        volatile value_t r = tally::reduce(policy, in, in + n, value_t{});
        (void)r;
        rt.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(rt.begin(), rt.end());
      std::printf("%-12s round trip tally::reduce at 2^10: median %.2f us\n", variant, rt[rt.size() / 2]);
    }
    BENCH_CUDA_CHECK(cudaFree(cub_temp));
  }
  BENCH_CUDA_CHECK(cudaFree(out));
  BENCH_CUDA_CHECK(cudaFree(ceiling_out));
  BENCH_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
