// tally::reduce on the host backend: results, Thrust's semantics, policy-less dispatch.
#include "support/test_support.cuh"
#include "tally/reduce.cuh"

#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <type_traits>

// Order-sensitive, non-associative on purpose: any difference in the order of operations
// between the host backend and the plan changes the result. Marked commutative (a lie the
// test needs) so that it takes the commutative plan the oracle states. Outside the anonymous
// namespace: nvcc warns about static members there that only the library's traits read.
namespace reduce_host_test {
struct order_witness {
  static constexpr bool commutative = true;
  __host__ __device__ unsigned operator()(unsigned a, unsigned b) const { return a * 31u + b; }
};
}  // namespace reduce_host_test

namespace {

using reduce_host_test::order_witness;

using tally_test::bits_of;
using tally_test::random_values;
using tally_test::reference_sum;
using tally_test::seeded;

template <class T>
class host_reduce : public ::testing::Test {};
using value_types = ::testing::Types<int, unsigned, float, double>;
TYPED_TEST_SUITE(host_reduce, value_types);

TYPED_TEST(host_reduce, sum_min_max_at_every_boundary_size) {
  using T = TypeParam;
  for (std::size_t n : tally_test::boundary_sizes()) {
    seeded s(n);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const auto v = random_values<T>(n, s.rng);
    const T init = random_values<T>(1, s.rng)[0];

    const T sum = tally::reduce(tally::host, v.begin(), v.end(), init);
    if constexpr (std::is_floating_point_v<T>) {
      TALLY_EXPECT_SUM_NEAR(sum, reference_sum<T>(v, 0, n, init), tally_test::sum_error_bound(v, 0, n, init));
    } else {
      EXPECT_EQ(sum, reference_sum<T>(v, 0, n, init));
    }

    const T lo = tally::reduce(tally::host, v.begin(), v.end(), init, tally::minimum<T>{});
    const T hi = tally::reduce(tally::host, v.begin(), v.end(), init, tally::maximum<T>{});
    EXPECT_EQ(lo, std::min(init, n ? *std::min_element(v.begin(), v.end()) : init));
    EXPECT_EQ(hi, std::max(init, n ? *std::max_element(v.begin(), v.end()) : init));
  }
}

// The float check above is only as good as its bound: here, on positive inputs, the bound is
// below the sum of the last 2048 elements, and a float tile holds at least 8192, so a sum that
// lost any tile, or returned 0 or init alone, fails it.
TEST(host_reduce_semantics, float_sum_bound_rejects_a_sum_that_lost_a_tile) {
  for (std::size_t n : {std::size_t(8197), std::size_t(65539), std::size_t(1048583), std::size_t(2097152)}) {
    seeded s(n + 77);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    std::uniform_real_distribution<double> mantissa(0.5, 1.0);
    std::uniform_int_distribution<int> exponent(-4, 4);
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(std::ldexp(mantissa(s.rng), exponent(s.rng)));
    const float sum = tally::reduce(tally::host, v.begin(), v.end(), 0.0f);
    long double exact = 0, last_2048 = 0;
    for (std::size_t i = 0; i < n; ++i) exact += v[i];
    for (std::size_t i = n - 2048; i < n; ++i) last_2048 += v[i];
    const double bound = tally_test::sum_error_bound(v, 0, n, 0.0);
    TALLY_EXPECT_SUM_NEAR(sum, exact, bound);
    EXPECT_LT(bound, double(last_2048)) << "a sum without one tile would still pass";
  }
}

TEST(host_reduce_semantics, empty_range_returns_init) {
  std::vector<float> empty;
  EXPECT_EQ(tally::reduce(tally::host, empty.begin(), empty.end(), 7.5f), 7.5f);
  EXPECT_EQ(tally::reduce(empty.begin(), empty.end(), -3), -3);
  EXPECT_EQ(tally::reduce(empty.begin(), empty.end()), 0.0f);
}

TEST(host_reduce_semantics, init_enters_once_and_its_type_is_the_accumulator) {
  seeded s(11);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(5000, s.rng);
  const auto sum = tally::reduce(v.begin(), v.end(), 0.5);
  static_assert(std::is_same_v<decltype(sum), const double>, "init's type is the result's");
  EXPECT_EQ(sum, double(reference_sum<long long>(v, 0, v.size(), 0)) + 0.5);
  static_assert(std::is_same_v<decltype(tally::reduce(v.begin(), v.end())), int>, "no init: the value type");
  // Multiplication sees init exactly once.
  std::vector<long long> twos(20, 2);
  EXPECT_EQ(tally::reduce(twos.begin(), twos.end(), 3LL, std::multiplies<long long>{}), 3LL << 20);
}

TEST(host_reduce_semantics, unsigned_sums_wrap_in_the_init_type) {
  seeded s(12);
  SCOPED_TRACE(s.trace());
  std::vector<unsigned> v(100000);
  std::uniform_int_distribution<unsigned> d(1u << 30, ~0u);
  for (auto& x : v) x = d(s.rng);
  EXPECT_EQ(tally::reduce(v.begin(), v.end(), 0u), reference_sum<unsigned>(v, 0, v.size(), 0u));
}

TEST(host_reduce_semantics, result_bits_do_not_depend_on_the_thread_count) {
  seeded s(13);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<float>((1u << 21) + 13, s.rng);
  const float one = tally::reduce(tally::host.threads(1), v.begin(), v.end(), 0.0f);
  for (unsigned threads : {2u, 3u, 7u, 0u})
    EXPECT_EQ(bits_of(tally::reduce(tally::host.threads(threads), v.begin(), v.end(), 0.0f)), bits_of(one)) << threads;
}

TEST(host_reduce_semantics, accepts_thrust_policies_functors_and_lambdas) {
  seeded s(14);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(3000, s.rng);
  const int expected = reference_sum<int>(v, 0, v.size(), 1);
  EXPECT_EQ(tally::reduce(thrust::host, v.begin(), v.end(), 1), expected);
  EXPECT_EQ(tally::reduce(thrust::host, v.begin(), v.end(), 1, thrust::plus<int>{}), expected);
  EXPECT_EQ(tally::reduce(v.data(), v.data() + v.size(), 1, std::plus<>{}), expected);
  EXPECT_EQ(tally::reduce(v.begin(), v.end(), 1, [](int a, int b) { return a + b; }), expected);
  EXPECT_EQ(tally::reduce(v.begin(), v.end(), std::numeric_limits<int>::min(), thrust::maximum<int>{}),
            *std::max_element(v.begin(), v.end()));
}

// What each of Thrust's policies means to tally (docs/execution_policy.md): its own by name,
// allocator policies included; anything else derived from a Thrust policy is a user's system.
namespace policy_kinds {
using kind = tally::detail::thrust_policy_kind;
template <class P>
constexpr kind kind_of = tally::detail::thrust_policy_kind_v<P>;
struct users_system : thrust::device_execution_policy<users_system> {};
static_assert(kind_of<decltype(thrust::device)> == kind::device);
static_assert(kind_of<decltype(thrust::cuda::par.on(cudaStream_t{}))> == kind::device);
static_assert(kind_of<decltype(thrust::cuda::par_nosync.on(cudaStream_t{}))> == kind::device);
static_assert(kind_of<decltype(thrust::cuda::par(std::allocator<char>{}))> == kind::device);
static_assert(kind_of<decltype(thrust::host)> == kind::host);
static_assert(kind_of<decltype(thrust::seq)> == kind::sequential);
static_assert(kind_of<users_system> == kind::user_defined);
}  // namespace policy_kinds

// Whether a device policy may force a strategy is in its type (decision 0021): tally::device
// and what on, grid_size and nondeterministic make from it compile tally's own choice only;
// strategy() gives the kind that also compiles the other strategies, and a plain policy
// converts to it (keeping its stream, grid size and nondeterminism), never the reverse.
namespace device_policy_types {
using plain = tally::device_policy;
using forcing = tally::strategy_forcing_policy;
static_assert(std::is_same_v<std::remove_cv_t<decltype(tally::device)>, plain>);
static_assert(std::is_same_v<decltype(tally::device.on(cudaStream_t{}).grid_size(3).nondeterministic()), plain>);
static_assert(std::is_same_v<decltype(tally::device.strategy(tally::strategy::two_pass)), forcing>);
static_assert(std::is_same_v<decltype(tally::device.strategy(tally::strategy::two_pass).on(cudaStream_t{})), forcing>);
static_assert(!plain::may_force_strategy && forcing::may_force_strategy);
static_assert(std::is_convertible_v<plain, forcing> && !std::is_convertible_v<forcing, plain>);
static_assert(tally::is_execution_policy_v<plain> && tally::is_execution_policy_v<forcing>);
constexpr forcing converted = tally::device.grid_size(7).nondeterministic();
static_assert(converted.forced_grid_size() == 7 && converted.is_nondeterministic() &&
              converted.forced_strategy() == tally::strategy::automatic);
static_assert(tally::device.strategy(tally::strategy::warp_atomic).forced_strategy() == tally::strategy::warp_atomic);
}  // namespace device_policy_types

// Adds, and records which threads called it: each thread once, under a lock.
struct thread_recording_plus {
  std::mutex* lock;
  std::set<std::thread::id>* threads;
  int operator()(int a, int b) const {
    thread_local std::set<std::thread::id>* recorded_into = nullptr;
    if (recorded_into != threads) {
      std::lock_guard<std::mutex> guard(*lock);
      threads->insert(std::this_thread::get_id());
      recorded_into = threads;
    }
    return a + b;
  }
};

// thrust::seq means the calling thread alone, as Thrust runs it; thrust::host (like
// tally::host) may use the host backend's workers. Both give the plan's bits.
TEST(host_reduce_semantics, thrust_seq_runs_on_the_calling_thread_alone) {
  seeded s(15);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>((1u << 20) + 3, s.rng);
  const int expected = reference_sum<int>(v, 0, v.size(), 0);
  std::mutex lock;
  std::set<std::thread::id> seq_threads, host_threads;
  const auto seq_op = tally::commutative(thread_recording_plus{&lock, &seq_threads});
  EXPECT_EQ(tally::reduce(thrust::seq, v.begin(), v.end(), 0, seq_op), expected);
  EXPECT_EQ(seq_threads, std::set<std::thread::id>{std::this_thread::get_id()});
  const auto host_op = tally::commutative(thread_recording_plus{&lock, &host_threads});
  EXPECT_EQ(tally::reduce(thrust::host, v.begin(), v.end(), 0, host_op), expected);
  if (std::thread::hardware_concurrency() > 1) EXPECT_GT(host_threads.size(), 1u);
}

TEST(host_reduce_semantics, fancy_iterators_work_on_the_host) {
  thrust::counting_iterator<long long> first(0);
  const long long n = 1000003;
  EXPECT_EQ(tally::reduce(tally::host, first, first + n, 0LL), n * (n - 1) / 2);
}

TEST(host_reduce_semantics, reduce_into_writes_through_the_output_iterator) {
  seeded s(15);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(777, s.rng);
  std::vector<int> out(1, 0x5A5A5A5A);  // poisoned
  tally::reduce_into(tally::host, v.begin(), v.end(), out.begin(), 4, tally::plus<int>{});
  EXPECT_EQ(out[0], reference_sum<int>(v, 0, v.size(), 4));
}

TEST(host_reduce_semantics, reversed_range_throws_invalid_argument) {
  std::vector<int> v(10, 1);
  EXPECT_THROW(tally::reduce(tally::host, v.end(), v.begin(), 0), std::invalid_argument);
}

}  // namespace

#include "support/plan_cases.cuh"
#include "support/plan_oracle.cuh"

// The oracle states the plan with constants of its own, so that a change to the library's
// plan is a difference the tests see; these say which change it was.
static_assert(tally_test::oracle::block_threads == std::uint64_t(tally::detail::block_threads), "the plan's block");
static_assert(tally_test::oracle::warp_lanes == std::uint64_t(tally::detail::warp_threads), "the plan's warp");
static_assert(tally_test::oracle::loads_per_step == std::uint64_t(tally::detail::loads_per_step), "the plan's step");
static_assert(tally_test::oracle::chunk_width(1) == tally::detail::vector_width_v<std::uint8_t> &&
                  tally_test::oracle::chunk_width(12) == tally::detail::vector_width_v<float3>,
              "the plan's 16-byte chunks");
static_assert(tally_test::oracle::wide_chunk_bytes == std::uint64_t(tally::detail::wide_chunk_bytes),
              "the plan's 48-byte chunks");
static_assert(tally_test::oracle::max_tiles == tally::detail::plan_max_tiles, "the plan's tile cap");
static_assert(tally_test::oracle::order_free_max_tiles == tally::detail::order_free_max_tiles,
              "the order-free plan's tile cap");

namespace {

namespace oracle = tally_test::oracle;
namespace plan_cases = tally_test::plan_cases;

TEST(host_backend_follows_the_plan, same_bits_as_the_plan_oracle) {
  seeded s(16);
  SCOPED_TRACE(s.trace());
  std::vector<std::size_t> sizes = tally_test::boundary_sizes();
  std::uniform_int_distribution<std::size_t> size(1, 200000);
  for (int i = 0; i < 12; ++i) sizes.push_back(size(s.rng));
  for (std::size_t n : sizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto f = random_values<float>(n, s.rng);
    EXPECT_EQ(bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.25f)),
              bits_of(oracle::commutative(f, oracle::chunk_width(sizeof(float)), 0.25f, std::plus<float>{})));
    const auto d = random_values<double>(n, s.rng);
    EXPECT_EQ(bits_of(tally::reduce(tally::host, d.begin(), d.end(), -1.5)),
              bits_of(oracle::commutative(d, oracle::chunk_width(sizeof(double)), -1.5, std::plus<double>{})));
    const auto u = random_values<unsigned>(n, s.rng);
    EXPECT_EQ(tally::reduce(tally::host, u.begin(), u.end(), 7u, order_witness{}),
              oracle::commutative(u, oracle::chunk_width(sizeof(unsigned)), 7u, order_witness{}));
  }
}

TEST(host_backend_follows_the_plan, multi_step_tiles_match_the_oracle) {
  // Past plan_max_tiles steps, tiles take several steps each: 8-byte values, 2 per chunk.
  seeded s(17);
  SCOPED_TRACE(s.trace());
  const std::size_t n = std::size_t(4) * tally::detail::plan_max_tiles * 2048 + 12345;
  const auto u = random_values<unsigned long long>(n, s.rng);
  ASSERT_GT(tally::detail::make_plan_for<unsigned long long>(n).steps_per_tile, 1u);
  const auto op = [](unsigned long long a, unsigned long long b) { return a * 1000003ull + b; };
  EXPECT_EQ(tally::reduce(tally::host, u.begin(), u.end(), 3ull, tally::commutative(op)),
            oracle::commutative(u, oracle::chunk_width(sizeof(unsigned long long)), 3ull, op));
}

// The oracle's cases (support/plan_cases.cuh) on the host backend; test_reduce_device.cu runs
// the same on the device. Under a sanitizer only the small sizes.
struct host_side {
  // The vector's own iterators: the float and double sums then share their instantiations
  // with the tests above.
  template <class E>
  struct buffer {
    typename std::vector<E>::const_iterator first;
    buffer(const std::vector<E>& values, std::size_t) : first(values.begin()) {}
    typename std::vector<E>::const_iterator begin() const { return first; }
  };
  // The host backend reads every input element by element; alignment means nothing to it.
  static std::vector<std::size_t> offsets() { return {0}; }
  template <class It, class T, class Op>
  static T reduce(It first, It last, T init, Op op) {
    return tally::reduce(tally::host, first, last, init, op);
  }
  template <class It>
  static std::int64_t min_element_index(It first, It last) {
    return tally::min_element(tally::host, first, last) - first;
  }
};

TEST(host_backend_follows_the_plan, commutative_sums_match_the_oracle) {
  plan_cases::commutative_sums<host_side>(!tally_test::under_sanitizer());
}

TEST(host_backend_follows_the_plan, ordered_operator_matches_the_oracle) {
  plan_cases::ordered_operator<host_side>(!tally_test::under_sanitizer());
}

TEST(host_backend_follows_the_plan, order_free_operators_match_the_oracle) {
  plan_cases::order_free_operators<host_side>(!tally_test::under_sanitizer());
}

TEST(host_backend_follows_the_plan, every_loader_matches_the_oracle) {
  plan_cases::every_loader<host_side>(!tally_test::under_sanitizer());
}

}  // namespace
