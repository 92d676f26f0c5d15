// The sums the library compiles once (include/tally/detail/dispatch/prebuilt_sums.cuh): which
// calls take them, and that they give the bits of the same call compiled at its call site,
// of the host backend and of an exact or accurate reference, for every type they cover, every
// plan shape, misaligned starts, forced grids and both forms. The device cases skip without a GPU.
#include "support/test_support.cuh"
#include "tally/reduce.cuh"

#include <thrust/device_vector.h>
#include <thrust/functional.h>

#include <cuda/std/functional>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace {

using tally::detail::runs_prebuilt_sum_v;
using tally_test::bits_of;
using tally_test::device_buffer;
using tally_test::device_value;
using tally_test::order_sensitive_values;
using tally_test::random_values;
using tally_test::reference_sum;
using tally_test::seeded;

using plain = tally::device_policy;
using forcing = tally::strategy_forcing_policy;

// Sums in the prebuilt types, through every spelling of plus a user writes.
static_assert(runs_prebuilt_sum_v<float, float, tally::plus<float>, float, plain>);
static_assert(runs_prebuilt_sum_v<double, double, thrust::plus<double>, double, plain>);
static_assert(runs_prebuilt_sum_v<int, int, std::plus<int>, int, plain>);
static_assert(runs_prebuilt_sum_v<unsigned, unsigned, tally::plus<void>, unsigned, plain>);
static_assert(runs_prebuilt_sum_v<long long, long long, cuda::std::plus<long long>, long long, plain>);
static_assert(runs_prebuilt_sum_v<unsigned long long, unsigned long long, thrust::plus<>, unsigned long long, plain>);
static_assert(runs_prebuilt_sum_v<std::int64_t, std::int64_t, tally::plus<std::int64_t>, std::int64_t, plain>);
static_assert(runs_prebuilt_sum_v<std::uint64_t, std::uint64_t, tally::plus<std::uint64_t>, std::uint64_t, plain>);
// Anything else compiles its kernels at the call site.
static_assert(!runs_prebuilt_sum_v<float, float, tally::plus<float>, float, forcing>);
static_assert(!runs_prebuilt_sum_v<float, float, tally::maximum<float>, float, plain>);
static_assert(!runs_prebuilt_sum_v<float, double, tally::plus<double>, double, plain>);  // widening
static_assert(!runs_prebuilt_sum_v<float, float, tally::plus<double>, float, plain>);    // computes in double
static_assert(!runs_prebuilt_sum_v<float, float, tally::plus<float>, double, plain>);    // converted output
static_assert(!runs_prebuilt_sum_v<short, short, tally::plus<short>, short, plain>);
static_assert(!runs_prebuilt_sum_v<char, char, tally::plus<char>, char, plain>);

// The same answers at run time, where a host-only build runs them too.
TEST(prebuilt_sums, are_taken_by_plain_sums_of_the_library_types_only) {
  EXPECT_TRUE((runs_prebuilt_sum_v<float, float, tally::plus<float>, float, plain>));
  EXPECT_TRUE((runs_prebuilt_sum_v<long, long, std::plus<long>, long, plain>));
  EXPECT_FALSE((runs_prebuilt_sum_v<float, float, tally::plus<float>, float, forcing>));
  EXPECT_FALSE((runs_prebuilt_sum_v<double, double, tally::minimum<double>, double, plain>));
  EXPECT_FALSE((runs_prebuilt_sum_v<signed char, int, tally::plus<int>, int, plain>));
}

#if !defined(TALLY_TEST_HOST_ONLY)

template <class T>
class prebuilt_sum : public tally_test::device_test {};
using prebuilt_types =
    ::testing::Types<float, double, int, unsigned, long long, unsigned long long, long, unsigned long>;
TYPED_TEST_SUITE(prebuilt_sum, prebuilt_types);

// Inputs whose sums' bits change with any change of order (floats), or wrap (integers).
template <class T>
std::vector<T> inputs(std::size_t n, seeded& s) {
  if constexpr (std::is_floating_point_v<T>) {
    return order_sensitive_values<T>(n, s.rng);
  } else {
    std::vector<T> v(n);
    std::uniform_int_distribution<unsigned long long> d;
    for (auto& x : v) x = static_cast<T>(d(s.rng));  // the whole range: sums wrap
    return v;
  }
}

// The prebuilt call (the plain policy) against the same call compiled here (a policy that may
// force a strategy, left to tally's choice, compiles the kernels at its call site), the host
// backend, and for integers the exact wrapped sum.
TYPED_TEST(prebuilt_sum, equals_the_call_compiled_here_and_the_host_bit_for_bit) {
  using T = TypeParam;
  std::vector<std::size_t> sizes = tally_test::boundary_sizes();
  sizes.push_back((std::size_t(1) << 22) + 5);
  for (std::size_t n : sizes) {
    if (n == 0) continue;
    for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {
      seeded s(n * 2 + offset + 700);
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset = " + std::to_string(offset) + ", " + s.trace());
      const auto v = inputs<T>(n, s);
      const T init = inputs<T>(1, s)[0];
      device_buffer<T> d(v, offset);
      const T prebuilt = tally::reduce(tally::device, d.begin(), d.end(), init);
      const T here = tally::reduce(tally::device.strategy(tally::strategy::automatic), d.begin(), d.end(), init);
      const T host = tally::reduce(tally::host, v.begin(), v.end(), init);
      EXPECT_EQ(bits_of(prebuilt), bits_of(here));
      EXPECT_EQ(bits_of(prebuilt), bits_of(host));
      if constexpr (std::is_floating_point_v<T>) {
        const auto bounded = random_values<T>(n, s.rng);
        device_buffer<T> b(bounded, offset);
        const T sum = tally::reduce(tally::device, b.begin(), b.end(), T(1));
        TALLY_EXPECT_SUM_NEAR(sum, reference_sum<T>(bounded, 0, n, T(1)),
                              tally_test::sum_error_bound(bounded, 0, n, 1.0));
      } else {
        EXPECT_EQ(prebuilt, reference_sum<T>(v, 0, n, init));
      }
    }
  }
}

// reduce_into writes the same bits into poisoned device memory, through every spelling of
// plus, on a stream of the caller's and under forced grids (the policy reaches the library
// whole).
TYPED_TEST(prebuilt_sum, reduce_into_any_plus_any_grid_and_stream_gives_the_same_bits) {
  using T = TypeParam;
  const std::size_t n = (std::size_t(1) << 18) + 3;
  seeded s(913);
  SCOPED_TRACE(s.trace());
  const auto v = inputs<T>(n, s);
  const T init = inputs<T>(1, s)[0];
  device_buffer<T> d(v);
  const T expected = tally::reduce(tally::host, v.begin(), v.end(), init);
  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  device_value<T> out;
  const auto check = [&](const char* what) {
    TEST_CUDA(cudaStreamSynchronize(stream));
    EXPECT_EQ(bits_of(out.read()), bits_of(expected)) << what;
    out.poison();
  };
  tally::reduce_into(tally::device.on(stream), d.begin(), d.end(), out.get(), init);
  check("tally::plus");
  tally::reduce_into(tally::device.on(stream), d.begin(), d.end(), out.get(), init, thrust::plus<T>{});
  check("thrust::plus");
  tally::reduce_into(tally::device.on(stream), d.begin(), d.end(), out.get(), init, std::plus<>{});
  check("std::plus<>");
  tally::reduce_into(tally::device.on(stream), d.begin(), d.end(), out.get(), init, cuda::std::plus<T>{});
  check("cuda::std::plus");
  for (unsigned grid : {1u, 2u, 3u, 17u, 1000u}) {
    tally::reduce_into(tally::device.on(stream).grid_size(grid), d.begin(), d.end(), out.get(), init);
    check(("grid " + std::to_string(grid)).c_str());
  }
  thrust::device_vector<T> dv(v.begin(), v.end());
  EXPECT_EQ(bits_of(tally::reduce(dv.begin(), dv.end(), init)), bits_of(expected)) << "a device_vector, no policy";
  TEST_CUDA(cudaStreamDestroy(stream));
}

// The library's errors name the algorithm the user called, as a call site's own do.
TEST(prebuilt_sum_errors, name_the_algorithm_the_user_called) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  float* null_input = nullptr;
  try {
    tally::reduce(tally::device, null_input, null_input + 10, 0.0f);
    ADD_FAILURE() << "a null input was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tally::reduce"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("null pointer"), std::string::npos) << e.what();
  }
  std::vector<double> pageable(10, 1.0);
  device_value<double> out;
  try {
    tally::reduce_into(tally::device, null_input, null_input + 10, reinterpret_cast<float*>(out.get()), 0.0f);
    ADD_FAILURE() << "a null input was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tally::reduce_into"), std::string::npos) << e.what();
  }
  // The context stays usable.
  device_buffer<double> d(pageable);
  EXPECT_EQ(tally::reduce(tally::device, d.begin(), d.end(), 0.5), 10.5);
}

#endif

}  // namespace
