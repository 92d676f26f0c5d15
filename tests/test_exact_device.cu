// Exact sums on the device (tally::exact_plus; docs/exact.md): every result has the bits of the
// host backend's exact sum, which tests/test_exact_host.cu checks against MPFR. Inputs over the
// whole exponent range, cancellation, huge and tiny values together, subnormals, every special
// value, sizes from 1 to 2^31 + 1, misaligned starts, any grid, permutations, both forms, a
// transform, float into double sums, graphs and streams. Every test here skips without a GPU.
#include "support/test_support.cuh"
#include "tally/exact.cuh"
#include "tally/fields.cuh"
#include "tally/ranges.cuh"
#include "tally/reduce.cuh"
#include "tally/transform_reduce.cuh"

#include <cuda/std/tuple>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/copy.h>
#include <thrust/fill.h>

#include "tally/detail/dispatch/runtime.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using tally_test::any_finite;
using tally_test::bits_of;
using tally_test::device_buffer;
using tally_test::device_value;
using tally_test::seeded;

template <class T>
class exact_device : public tally_test::device_test {};
using exact_types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(exact_device, exact_types);

template <class T>
T host_exact(const std::vector<T>& v, T init) {
  return tally::reduce(tally::host, v.begin(), v.end(), init, tally::exact_plus<T>{});
}

// The device's sum of v (at `offset` elements past an aligned start) against the host's exact
// sum, bit for bit, under both forms.
template <class T>
void expect_device_equals_host(const std::vector<T>& v, T init, const std::string& what, std::size_t offset = 0) {
  SCOPED_TRACE(what + ", n = " + std::to_string(v.size()) + ", offset = " + std::to_string(offset));
  const T want = host_exact(v, init);
  device_buffer<T> d(v, offset);
  const T got = tally::reduce(tally::device, d.begin(), d.end(), init, tally::exact_plus<T>{});
  EXPECT_EQ(bits_of(got), bits_of(want)) << got << " against " << want;
  device_value<T> out;
  tally::reduce_into(tally::device, d.begin(), d.end(), out.get(), init, tally::exact_plus<T>{});
  TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(bits_of(out.read()), bits_of(want)) << "reduce_into";
}

TYPED_TEST(exact_device, random_values_over_the_whole_exponent_range_at_many_sizes_and_offsets) {
  using T = TypeParam;
  seeded s(3701);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(5), std::size_t(31),
                        std::size_t(32), std::size_t(33), std::size_t(1000), std::size_t(4099),
                        std::size_t(65536 + 3), tally_test::under_sanitizer() ? 65536 : (std::size_t(1) << 20) + 7}) {
    for (std::size_t offset : {std::size_t(0), std::size_t(1), std::size_t(3)}) {
      expect_device_equals_host(any_finite<T>(n, s.rng), any_finite<T>(1, s.rng)[0], "any finite values", offset);
    }
  }
  // Values of a narrow span of binades: sums that keep many bits.
  std::uniform_real_distribution<T> unit(-1, 1);
  std::vector<T> near(tally_test::under_sanitizer() ? 70001 : (std::size_t(1) << 22) + 1);
  for (auto& x : near) x = std::ldexp(unit(s.rng), int(s.rng() % 40) - 20);
  expect_device_equals_host(near, T(0.5), "values within 2^-20 .. 2^20", 1);
}

TYPED_TEST(exact_device, cancellation_huge_and_tiny_values_and_subnormals) {
  using T = TypeParam;
  seeded s(3702);
  SCOPED_TRACE(s.trace());
  // x and -x in pairs, shuffled, around a few small values: the sum is the small values' sum.
  auto pairs = any_finite<T>(50000, s.rng);
  const std::size_t count = pairs.size();
  for (std::size_t i = 0; i < count; ++i) pairs.push_back(-pairs[i]);
  pairs.insert(pairs.end(), {T(1), T(3e-5), T(-7.25)});
  std::shuffle(pairs.begin(), pairs.end(), s.rng);
  expect_device_equals_host(pairs, T(0), "cancelling pairs");
  const T largest = std::numeric_limits<T>::max();
  expect_device_equals_host(std::vector<T>{largest, T(1), -largest}, T(0), "largest + 1 - largest");
  // A huge value, then a long run of tiny ones: all of them count.
  std::vector<T> huge_then_tiny(300000, std::numeric_limits<T>::denorm_min());
  huge_then_tiny[0] = T(1) / std::numeric_limits<T>::epsilon();
  expect_device_equals_host(huge_then_tiny, T(0), "a huge value and 300000 tiny ones");
  std::vector<T> subnormals(100000);
  for (auto& x : subnormals) {
    x = std::numeric_limits<T>::denorm_min() * T(s.rng() % 1000);
    if (s.rng() % 2) x = -x;
  }
  expect_device_equals_host(subnormals, T(0), "subnormals only");
  // Many additions of the largest magnitudes into one digit: overflow to infinity, and sums
  // whose digits would leave 64 bits without the threads' normalization.
  expect_device_equals_host(std::vector<T>(1 << 20, largest), T(0), "the largest value 2^20 times");
  std::vector<T> large_signs(1 << 20);
  for (auto& x : large_signs) x = (s.rng() % 2 ? largest : -largest) * T(0.75);
  expect_device_equals_host(large_signs, T(0), "large values of either sign");
}

TYPED_TEST(exact_device, special_values_as_the_exact_sum_gives_them) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> base(5000, T(1.5));
  const auto with = [&](std::initializer_list<std::pair<std::size_t, T>> changes) {
    std::vector<T> v = base;
    for (const auto& [at, x] : changes) v[at] = x;
    return v;
  };
  const auto expect_special = [](const std::vector<T>& v, T init, const char* what, T want) {
    device_buffer<T> d(v);
    const T got = tally::reduce(tally::device, d.begin(), d.end(), init, tally::exact_plus<T>{});
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << what << ": " << got;
    } else {
      EXPECT_EQ(bits_of(got), bits_of(want)) << what << ": " << got;
    }
    EXPECT_EQ(std::isnan(got), std::isnan(host_exact(v, init))) << what;
  };
  expect_special(with({{17, nan}}), T(0), "a NaN", nan);
  expect_special(with({{4000, inf}}), T(0), "+inf", inf);
  expect_special(with({{3, -inf}}), T(0), "-inf", -inf);
  expect_special(with({{3, -inf}, {4999, inf}}), T(0), "+inf and -inf", nan);
  expect_special(base, inf, "init +inf", inf);
  expect_special(base, -nan, "init NaN", nan);
  expect_special(std::vector<T>(3000, -T(0)), -T(0), "only -0", -T(0));
  expect_special(std::vector<T>(3000, -T(0)), T(0), "-0 and an init of +0", T(0));
}

TYPED_TEST(exact_device, every_grid_and_every_permutation_give_the_same_bits) {
  using T = TypeParam;
  seeded s(3703);
  SCOPED_TRACE(s.trace());
  auto v = any_finite<T>((std::size_t(1) << 18) + 5, s.rng);
  const T want = host_exact(v, T(0));
  device_buffer<T> d(v);
  for (unsigned grid : {1u, 2u, 7u, 131u, 1000u, 5000u}) {
    const T got = tally::reduce(tally::device.grid_size(grid), d.begin(), d.end(), T(0), tally::exact_plus<T>{});
    EXPECT_EQ(bits_of(got), bits_of(want)) << "grid " << grid;
  }
  for (int round = 0; round < 3; ++round) {
    std::shuffle(v.begin(), v.end(), s.rng);
    device_buffer<T> shuffled(v);
    EXPECT_EQ(bits_of(tally::reduce(tally::device, shuffled.begin(), shuffled.end(), T(0), tally::exact_plus<T>{})),
              bits_of(want))
        << "permutation " << round;
  }
}

double square_as_double(float x) { return double(x) * double(x); }
struct square_to_double {
  __host__ __device__ double operator()(float x) const { return double(x) * double(x); }
};

TEST(exact_device_forms, float_into_double_a_transform_and_a_device_vector) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  seeded s(3704);
  SCOPED_TRACE(s.trace());
  const auto v = any_finite<float>(200003, s.rng);
  thrust::device_vector<float> dv(v.begin(), v.end());
  const double wide = tally::reduce(tally::device, dv.begin(), dv.end(), 0.25, tally::exact_plus<double>{});
  EXPECT_EQ(bits_of(wide), bits_of(tally::reduce(tally::host, v.begin(), v.end(), 0.25, tally::exact_plus<double>{})));
  const double squares =
      tally::transform_reduce(tally::device, dv.begin(), dv.end(), square_to_double{}, 0.0, tally::exact_plus<double>{});
  std::vector<double> host_squares(v.size());
  std::transform(v.begin(), v.end(), host_squares.begin(), square_as_double);
  EXPECT_EQ(bits_of(squares), bits_of(host_exact(host_squares, 0.0)));
  const float narrow = tally::reduce(dv.begin(), dv.end(), -1.0f, tally::exact_plus<float>{});
  EXPECT_EQ(bits_of(narrow), bits_of(host_exact(v, -1.0f)));
}

// A captured reduce_into replays on other streams with the exact sum of what the input holds at
// each replay; the waiting form is refused inside a capture before anything is enqueued.
TEST(exact_device_forms, reduce_into_captured_and_replayed_on_other_streams) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  seeded s(3705);
  SCOPED_TRACE(s.trace());
  const auto first = any_finite<float>(100000, s.rng), second = any_finite<float>(100000, s.rng);
  device_buffer<float> d(first);
  device_value<float> out;
  cudaStream_t capture, replay;
  TEST_CUDA(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking));
  TEST_CUDA(cudaStreamCreateWithFlags(&replay, cudaStreamNonBlocking));
  cudaGraph_t graph;
  TEST_CUDA(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
  tally::reduce_into(tally::device.on(capture), d.begin(), d.end(), out.get(), 0.0f, tally::exact_plus<float>{});
  EXPECT_THROW(tally::reduce(tally::device.on(capture), d.begin(), d.end(), 0.0f, tally::exact_plus<float>{}),
               std::invalid_argument);
  TEST_CUDA(cudaStreamEndCapture(capture, &graph));
  cudaGraphExec_t exec;
  TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  TEST_CUDA(cudaStreamDestroy(capture));
  TEST_CUDA(cudaGraphLaunch(exec, replay));
  TEST_CUDA(cudaStreamSynchronize(replay));
  EXPECT_EQ(bits_of(out.read()), bits_of(host_exact(first, 0.0f)));
  TEST_CUDA(cudaMemcpy(d.data(), second.data(), second.size() * sizeof(float), cudaMemcpyHostToDevice));
  out.poison();
  TEST_CUDA(cudaGraphLaunch(exec, replay));
  TEST_CUDA(cudaStreamSynchronize(replay));
  EXPECT_EQ(bits_of(out.read()), bits_of(host_exact(second, 0.0f)));
  TEST_CUDA(cudaGraphExecDestroy(exec));
  TEST_CUDA(cudaGraphDestroy(graph));
  TEST_CUDA(cudaStreamDestroy(replay));
}

TEST(exact_device_forms, a_null_input_is_refused_and_the_context_stays_usable) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  const double* null_input = nullptr;
  try {
    tally::reduce(tally::device, null_input, null_input + 4, 0.0, tally::exact_plus<double>{});
    ADD_FAILURE() << "a null input was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tally::reduce"), std::string::npos) << e.what();
  }
  device_buffer<double> d(std::vector<double>(10, 0.1));
  EXPECT_EQ(bits_of(tally::reduce(tally::device, d.begin(), d.end(), 0.0, tally::exact_plus<double>{})),
            bits_of(host_exact(std::vector<double>(10, 0.1), 0.0)));
}

// 2^31 + 1 floats: 2^31 ones and one -(2^31 - 128). The exact sum is 128; a float sum in any
// order loses the ones long before the end.
TEST(exact_device_forms, more_than_two_to_the_31_elements) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  if (tally_test::under_sanitizer()) GTEST_SKIP() << "8 GiB of input under the sanitizer";
  const std::size_t n = (std::size_t(1) << 31) + 1;
  float* data = nullptr;
  if (cudaMalloc(&data, n * sizeof(float)) != cudaSuccess) {
    cudaGetLastError();
    GTEST_SKIP() << "no 8 GiB of device memory";
  }
  thrust::fill(thrust::device, data, data + n - 1, 1.0f);
  thrust::fill(thrust::device, data + n - 1, data + n, -2147483520.0f);
  const float sum = tally::reduce(tally::device, data, data + n, 0.0f, tally::exact_plus<float>{});
  const double wide = tally::reduce(tally::device, data, data + n, 0.0, tally::exact_plus<double>{});
  TEST_CUDA(cudaFree(data));
  EXPECT_EQ(sum, 128.0f);
  EXPECT_EQ(wide, 128.0);
}


// One block of 128 threads sums 2^22 + 2^16 + 2 floats of one bin (binades 120-127, unit
// 2^-30): 2^22 + 2^16 copies of 2 - 2^-23, then 2^-7 + 2^-30 and 1. In units the exact sum is
// 2^53 + 2^47 + 2^29 + 1: one unit past a tie between two floats, whose even neighbour is
// below. A bin that added all of them at once would pass 2^53 units and round that unit away,
// and the tie would round down to 8519680; the exact sum rounds up to 8519681. The block must
// merge its bins before 2^22 terms (a round), as it does.
TEST(exact_device_forms, a_block_merges_its_float_bins_before_they_could_round) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  // One block through 4 million elements of shared-memory additions: minutes under racecheck.
  if (tally_test::under_sanitizer()) GTEST_SKIP() << "one block through 2^22 elements under the sanitizer";
  const std::size_t copies = (std::size_t(1) << 22) + (std::size_t(1) << 16);
  std::vector<float> v(copies, std::ldexp(float((1 << 24) - 1), -23));
  v.push_back(std::ldexp(float((1 << 23) + 1), -30));
  v.push_back(1.0f);
  const float want = host_exact(v, 0.0f);
  ASSERT_EQ(want, 8519681.0f) << "the construction";
  device_buffer<float> d(v);
  for (unsigned grid : {1u, 2u, 0u}) {
    const auto policy = grid == 0 ? tally::device : tally::device.grid_size(grid);
    EXPECT_EQ(bits_of(tally::reduce(policy, d.begin(), d.end(), 0.0f, tally::exact_plus<float>{})), bits_of(want))
        << "grid " << grid;
  }
}

// One block of 64 threads sums 3000 doubles a thread, each placing 2^53 - 1 at bit 31 of a
// digit: its high piece (about 2^52) goes to the next digit 3000 times, past 2^63 unless the
// thread brings its digits back to 32 bits every round of 1024 terms, as it does.
TEST(exact_device_forms, a_thread_balances_its_double_digits_before_they_could_overflow) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  const double widest_at_bit_31 = std::ldexp(double((std::uint64_t(1) << 53) - 1), 32 - 1075);
  for (const double x : {widest_at_bit_31, -widest_at_bit_31}) {
    const std::vector<double> v(64 * 3000, x);
    const double want = host_exact(v, 0.0);
    ASSERT_EQ(want, x * double(v.size())) << "the construction: an exact product";
    device_buffer<double> d(v);
    EXPECT_EQ(bits_of(tally::reduce(tally::device.grid_size(1), d.begin(), d.end(), 0.0, tally::exact_plus<double>{})),
              bits_of(want));
  }
}

// An exact sum keeps its accumulator in the stream's control block and leaves it zero, so that
// the next call on the stream (an exact sum or another strategy) starts from nothing.
TEST(exact_device_forms, the_control_block_is_left_zero) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  seeded s(3706);
  SCOPED_TRACE(s.trace());
  int device = 0;
  TEST_CUDA(cudaGetDevice(&device));
  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto f = any_finite<float>(300001, s.rng);
  const auto g = any_finite<double>(300001, s.rng);
  device_buffer<float> df(f);
  device_buffer<double> dg(g);
  for (int call = 0; call < 3; ++call) {
    EXPECT_EQ(bits_of(tally::reduce(tally::device.on(stream), df.begin(), df.end(), 0.0f, tally::exact_plus<float>{})),
              bits_of(host_exact(f, 0.0f)));
    EXPECT_EQ(bits_of(tally::reduce(tally::device.on(stream), dg.begin(), dg.end(), 0.0, tally::exact_plus<double>{})),
              bits_of(host_exact(g, 0.0)));
  }
  TEST_CUDA(cudaStreamSynchronize(stream));
  namespace word = tally::detail::control_word;
  const int first_digit_word = int(word::exact_digits_byte / 4);
  std::vector<int> words = {word::exact_flags, word::exact_blocks_done};
  for (int w = first_digit_word; w < first_digit_word + 2 * tally::detail::exact_format<double>::digits; ++w) words.push_back(w);
  for (int w : words) EXPECT_EQ(tally::detail::stream_control_word(device, stream, w), 0u) << "control word " << w;
  TEST_CUDA(cudaStreamDestroy(stream));
}

// Host threads summing at once: each on its own stream, all on one shared stream, on the legacy
// and the per-thread default streams; every result has the host's bits. (gpu-check runs the
// concurrent_calls cases under memcheck only.)
TEST(exact_device_forms, concurrent_calls_from_host_threads_on_their_own_streams_and_on_one) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  seeded s(3707);
  SCOPED_TRACE(s.trace());
  const auto f = any_finite<float>(200003, s.rng);
  const auto g = any_finite<double>(100003, s.rng);
  const float want_f = host_exact(f, 0.0f);
  const double want_g = host_exact(g, 0.0);
  device_buffer<float> df(f);
  device_buffer<double> dg(g);
  cudaStream_t shared;
  TEST_CUDA(cudaStreamCreateWithFlags(&shared, cudaStreamNonBlocking));
  constexpr int threads = 6;
  std::vector<int> wrong(threads, 0), failed(threads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        cudaStream_t own = nullptr;
        if (t % 3 == 0 && cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) != cudaSuccess) throw std::runtime_error("stream");
        const cudaStream_t stream = t % 3 == 0 ? own : t % 3 == 1 ? shared : (t % 2 ? cudaStreamPerThread : cudaStreamLegacy);
        for (int call = 0; call < 20; ++call) {
          if (bits_of(tally::reduce(tally::device.on(stream), df.begin(), df.end(), 0.0f, tally::exact_plus<float>{})) !=
              bits_of(want_f))
            ++wrong[t];
          if (bits_of(tally::reduce(tally::device.on(stream), dg.begin(), dg.end(), 0.0, tally::exact_plus<double>{})) !=
              bits_of(want_g))
            ++wrong[t];
        }
        if (own) cudaStreamDestroy(own);
      } catch (...) {
        failed[t] = 1;
      }
    });
  }
  for (auto& w : workers) w.join();
  for (int t = 0; t < threads; ++t) {
    EXPECT_EQ(wrong[t], 0) << "thread " << t;
    EXPECT_EQ(failed[t], 0) << "thread " << t;
  }
  TEST_CUDA(cudaStreamDestroy(shared));
}


// An exact_accumulator in device memory, added to by reduce_into under a device policy.
template <class T>
class device_accumulator {
 public:
  device_accumulator() {
    EXPECT_EQ(cudaMalloc(&p_, sizeof(tally::exact_accumulator<T>)), cudaSuccess);
    reset();
  }
  ~device_accumulator() { cudaFree(p_); }
  device_accumulator(const device_accumulator&) = delete;
  device_accumulator& operator=(const device_accumulator&) = delete;
  tally::exact_accumulator<T>* get() const { return p_; }
  void reset() {
    const tally::exact_accumulator<T> empty;
    EXPECT_EQ(cudaMemcpy(p_, &empty, sizeof(empty), cudaMemcpyHostToDevice), cudaSuccess);
  }
  tally::exact_accumulator<T> read() const {
    tally::exact_accumulator<T> held;
    EXPECT_EQ(cudaMemcpy(&held, p_, sizeof(held), cudaMemcpyDeviceToHost), cudaSuccess);
    return held;
  }

 private:
  tally::exact_accumulator<T>* p_ = nullptr;
};

// A sum that arrives in pieces, added on the device into one accumulator (or into one per piece,
// merged on the host in a random order), has the one-call sum's bits; so does a piece added on
// the host into the accumulator the device added to.
TYPED_TEST(exact_device, an_accumulator_in_device_memory_takes_pieces_in_any_split) {
  using T = TypeParam;
  seeded s(3708);
  SCOPED_TRACE(s.trace());
  const auto v = any_finite<T>(300007, s.rng);
  const T want = host_exact(v, T(0));
  device_buffer<T> d(v);
  for (std::size_t pieces : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(100)}) {
    SCOPED_TRACE("pieces " + std::to_string(pieces));
    std::vector<std::size_t> cuts = {0, v.size()};
    while (cuts.size() < pieces + 1) cuts.push_back(s.rng() % v.size());
    std::sort(cuts.begin(), cuts.end());
    device_accumulator<T> one;
    std::vector<std::unique_ptr<device_accumulator<T>>> each;
    for (std::size_t k = 0; k < pieces; ++k) {
      tally::reduce_into(tally::device, d.begin() + cuts[k], d.begin() + cuts[k + 1], one.get());
      each.push_back(std::make_unique<device_accumulator<T>>());
      tally::reduce_into(tally::device.grid_size(unsigned(1 + k % 7)), d.begin() + cuts[k], d.begin() + cuts[k + 1],
                         each.back()->get());
    }
    TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_EQ(bits_of(one.read().value()), bits_of(want)) << "one accumulator";
    std::vector<std::size_t> order(pieces);
    for (std::size_t k = 0; k < pieces; ++k) order[k] = k;
    std::shuffle(order.begin(), order.end(), s.rng);
    tally::exact_accumulator<T> merged;
    for (std::size_t k : order) merged.merge(each[k]->read());
    EXPECT_EQ(bits_of(merged.value()), bits_of(want)) << "one accumulator a piece, merged on the host";
  }
  // Half on the host, into the accumulator the device added the other half to.
  device_accumulator<T> mixed;
  const std::size_t half = v.size() / 2;
  tally::reduce_into(tally::device, d.begin(), d.begin() + half, mixed.get());
  TEST_CUDA(cudaDeviceSynchronize());
  tally::exact_accumulator<T> held = mixed.read();
  tally::reduce_into(tally::host, v.begin() + std::ptrdiff_t(half), v.end(), &held);
  EXPECT_EQ(bits_of(held.value()), bits_of(want)) << "device then host";
}

TYPED_TEST(exact_device, an_accumulator_keeps_special_values_and_negative_zero_across_pieces) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity();
  const auto accumulate = [](std::initializer_list<std::vector<T>> pieces) {
    device_accumulator<T> acc;
    std::vector<std::unique_ptr<device_buffer<T>>> held;
    for (const auto& piece : pieces) {
      held.push_back(std::make_unique<device_buffer<T>>(piece));
      tally::reduce_into(tally::device, held.back()->begin(), held.back()->end(), acc.get());
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return acc.read().value();
  };
  EXPECT_TRUE(std::isnan(accumulate({std::vector<T>(100, T(1)), std::vector<T>(3, std::numeric_limits<T>::quiet_NaN())})));
  EXPECT_TRUE(std::isnan(accumulate({std::vector<T>(10, inf), std::vector<T>(10, -inf)}))) << "+inf, then -inf";
  EXPECT_EQ(bits_of(accumulate({std::vector<T>(10, -inf), std::vector<T>(5, T(2))})), bits_of(-inf));
  EXPECT_EQ(bits_of(accumulate({std::vector<T>(7, -T(0)), std::vector<T>(9, -T(0))})), bits_of(-T(0)));
  EXPECT_EQ(bits_of(accumulate({std::vector<T>(7, -T(0)), std::vector<T>(1, T(0))})), bits_of(T(0)));
  EXPECT_EQ(bits_of(accumulate({std::vector<T>(1000, T(0.1)), std::vector<T>(1000, T(-0.1))})), bits_of(T(0)));
}

// Captured, reduce_into an accumulator adds at every replay; a null accumulator is refused.
TEST(exact_device_forms, an_accumulator_captured_adds_at_every_replay) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  seeded s(3709);
  SCOPED_TRACE(s.trace());
  const auto v = any_finite<double>(70001, s.rng);
  device_buffer<double> d(v);
  device_accumulator<double> acc;
  cudaStream_t capture, replay;
  TEST_CUDA(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking));
  TEST_CUDA(cudaStreamCreateWithFlags(&replay, cudaStreamNonBlocking));
  cudaGraph_t graph;
  TEST_CUDA(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
  tally::reduce_into(tally::device.on(capture), d.begin(), d.end(), acc.get());
  TEST_CUDA(cudaStreamEndCapture(capture, &graph));
  cudaGraphExec_t exec;
  TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  TEST_CUDA(cudaStreamDestroy(capture));
  std::vector<double> twice = v;
  twice.insert(twice.end(), v.begin(), v.end());
  TEST_CUDA(cudaGraphLaunch(exec, replay));
  TEST_CUDA(cudaGraphLaunch(exec, replay));
  TEST_CUDA(cudaStreamSynchronize(replay));
  EXPECT_EQ(bits_of(acc.read().value()), bits_of(host_exact(twice, 0.0)));
  TEST_CUDA(cudaGraphExecDestroy(exec));
  TEST_CUDA(cudaGraphDestroy(graph));
  TEST_CUDA(cudaStreamDestroy(replay));
  tally::exact_accumulator<double>* null_accumulator = nullptr;
  EXPECT_THROW(tally::reduce_into(tally::device, d.begin(), d.end(), null_accumulator), std::invalid_argument);
}


// Exact x/y/z sums: tally::fields of exact_plus over a zip of three device arrays, over an array
// of float3, and float fields into double sums, through reduce and reduce_into; each field has
// the bits of the host backend's exact sum of that field (test_exact_host checks those against
// MPFR), and a field of a captured reduce_into is replayed with the input's new values.
TEST(exact_device_forms, exact_sums_of_fields) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  seeded s(3710);
  SCOPED_TRACE(s.trace());
  const std::size_t n = 200003;
  const auto x = any_finite<float>(n, s.rng), y = any_finite<float>(n, s.rng);
  std::vector<float> z(n);
  std::uniform_real_distribution<float> unit(-1, 1);
  for (auto& v : z) v = unit(s.rng);
  using xyz = cuda::std::tuple<float, float, float>;
  const auto exact3 = tally::fields(tally::exact_plus<float>{}, tally::exact_plus<float>{}, tally::exact_plus<float>{});
  const xyz init(0.0f, -0.0f, -0.5f);
  const auto host_points = tally::zip(x.begin(), y.begin(), z.begin());
  const xyz want = tally::reduce(tally::host, host_points, host_points + std::ptrdiff_t(n), init, exact3);
  EXPECT_EQ(bits_of(cuda::std::get<2>(want)), bits_of(host_exact(z, -0.5f))) << "the host's fields";
  const auto expect_fields = [&](const xyz& got, const char* what) {
    EXPECT_EQ(bits_of(cuda::std::get<0>(got)), bits_of(cuda::std::get<0>(want))) << what << ": x";
    EXPECT_EQ(bits_of(cuda::std::get<1>(got)), bits_of(cuda::std::get<1>(want))) << what << ": y";
    EXPECT_EQ(bits_of(cuda::std::get<2>(got)), bits_of(cuda::std::get<2>(want))) << what << ": z";
  };
  thrust::device_vector<float> dx(x.begin(), x.end()), dy(y.begin(), y.end()), dz(z.begin(), z.end());
  const auto points = tally::zip(dx.begin(), dy.begin(), dz.begin());
  expect_fields(tally::reduce(tally::device, points, points + std::ptrdiff_t(n), init, exact3), "zip, reduce");
  device_value<xyz> out;
  tally::reduce_into(tally::device, points, points + std::ptrdiff_t(n), out.get(), init, exact3);
  TEST_CUDA(cudaDeviceSynchronize());
  expect_fields(out.read(), "zip, reduce_into");
  // An array of float3.
  std::vector<float3> aos(n);
  for (std::size_t i = 0; i < n; ++i) aos[i] = float3{x[i], y[i], z[i]};
  device_buffer<float3> daos(aos);
  const float3 sum3 = tally::reduce(tally::device, daos.begin(), daos.end(), float3{0.0f, -0.0f, -0.5f}, exact3);
  expect_fields(xyz(sum3.x, sum3.y, sum3.z), "float3");
  // Float fields into double sums.
  using wide = cuda::std::tuple<double, double>;
  const auto exact2 = tally::fields(tally::exact_plus<double>{}, tally::exact_plus<double>{});
  const wide sum2 = tally::reduce(tally::device, tally::zip(dx.begin(), dz.begin()), tally::zip(dx.end(), dz.end()),
                                  wide(0.25, 0.0), exact2);
  EXPECT_EQ(bits_of(cuda::std::get<0>(sum2)),
            bits_of(host_exact(std::vector<double>(x.begin(), x.end()), 0.25)));
  EXPECT_EQ(bits_of(cuda::std::get<1>(sum2)), bits_of(host_exact(std::vector<double>(z.begin(), z.end()), 0.0)));
  // Captured, replayed after the input changed.
  cudaStream_t capture;
  TEST_CUDA(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking));
  cudaGraph_t graph;
  out.poison();
  TEST_CUDA(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
  tally::reduce_into(tally::device.on(capture), points, points + std::ptrdiff_t(n), out.get(), init, exact3);
  TEST_CUDA(cudaStreamEndCapture(capture, &graph));
  cudaGraphExec_t exec;
  TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  thrust::copy(dy.begin(), dy.end(), dz.begin());  // z now holds y
  TEST_CUDA(cudaGraphLaunch(exec, capture));
  TEST_CUDA(cudaStreamSynchronize(capture));
  const xyz replayed = out.read();
  EXPECT_EQ(bits_of(cuda::std::get<2>(replayed)), bits_of(host_exact(y, -0.5f))) << "replay with z := y";
  EXPECT_EQ(bits_of(cuda::std::get<0>(replayed)), bits_of(cuda::std::get<0>(want))) << "replay: x";
  TEST_CUDA(cudaGraphExecDestroy(exec));
  TEST_CUDA(cudaGraphDestroy(graph));
  TEST_CUDA(cudaStreamDestroy(capture));
}

}  // namespace
