// all_of, any_of, none_of against std::, and the range overloads of the whole reduction
// family against the iterator overloads and std::, on host and device.
#include "support/test_support.cuh"
#include "tally/ranges.cuh"

#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/host_vector.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using tally_test::bits_of;
using tally_test::random_values;
using tally_test::seeded;

struct is_negative {
  template <class T>
  __host__ __device__ bool operator()(const T& x) const {
    return x < T(0);
  }
};
struct below {
  double bound;
  template <class T>
  __host__ __device__ bool operator()(const T& x) const {
    return double(x) < bound;
  }
};
struct never {
  template <class T>
  __host__ __device__ bool operator()(const T&) const {
    return false;
  }
};
struct always {
  template <class T>
  __host__ __device__ bool operator()(const T&) const {
    return true;
  }
};
// Returns an int, not a bool: the answer is converted.
struct equals_as_int {
  long long target;
  __host__ __device__ int operator()(long long x) const { return x == target ? 7 : 0; }
};
struct square {
  template <class T>
  __host__ __device__ T operator()(const T& x) const {
    return x * x;
  }
};
struct greater_than {
  template <class T>
  __host__ __device__ bool operator()(const T& a, const T& b) const {
    return b < a;
  }
};

struct logical_answers {
  bool all, any, none;
};

template <class It, class Pred>
logical_answers std_answers(It first, It last, Pred pred) {
  return {std::all_of(first, last, pred), std::any_of(first, last, pred), std::none_of(first, last, pred)};
}

template <class Policy, class It, class Pred>
logical_answers tally_answers(const Policy& policy, It first, It last, Pred pred) {
  return {tally::all_of(policy, first, last, pred), tally::any_of(policy, first, last, pred),
          tally::none_of(policy, first, last, pred)};
}

template <class It, class Pred>
logical_answers tally_answers_without_policy(It first, It last, Pred pred) {
  return {tally::all_of(first, last, pred), tally::any_of(first, last, pred), tally::none_of(first, last, pred)};
}

void expect_same(const logical_answers& actual, const logical_answers& expected, const std::string& what) {
  EXPECT_EQ(actual.all, expected.all) << what << ": all_of";
  EXPECT_EQ(actual.any, expected.any) << what << ": any_of";
  EXPECT_EQ(actual.none, expected.none) << what << ": none_of";
}

// A bound that some elements fall below and others not (an element of v), or 0 if empty.
template <class T>
below some_below(const std::vector<T>& v) {
  return below{v.empty() ? 0.0 : double(v[v.size() / 3])};
}

// The inputs for one size: random values, then all made non-negative (is_negative true
// nowhere), then all negative (true everywhere).
template <class T>
std::vector<std::vector<T>> logical_inputs(std::size_t n, std::mt19937_64& rng) {
  auto mixed = random_values<T>(n, rng);
  auto non_negative = mixed, negative = mixed;
  for (auto& x : non_negative) x = x < T(0) ? T(-x) : x;
  for (auto& x : negative) x = x < T(0) ? x : T(-x - T(1));
  return {mixed, non_negative, negative};
}

using value_types = ::testing::Types<int, float, double>;

// ---- all_of, any_of, none_of: host ----

template <class T>
class logical_host : public ::testing::Test {};
TYPED_TEST_SUITE(logical_host, value_types);

TYPED_TEST(logical_host, answers_match_std_at_every_boundary_size) {
  using T = TypeParam;
  for (std::size_t n : tally_test::boundary_sizes()) {
    seeded s(n + 800);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    for (const auto& v : logical_inputs<T>(n, s.rng)) {
      const auto expected = std_answers(v.begin(), v.end(), is_negative{});
      expect_same(tally_answers(tally::host, v.begin(), v.end(), is_negative{}), expected, "tally::host");
      expect_same(tally_answers(thrust::host, v.begin(), v.end(), is_negative{}), expected, "thrust::host");
      expect_same(tally_answers_without_policy(v.data(), v.data() + n, is_negative{}), expected, "no policy");
      expect_same(tally_answers(tally::host, v.begin(), v.end(), some_below(v)),
                  std_answers(v.begin(), v.end(), some_below(v)), "below");
    }
  }
}

TEST(logical_host_semantics, empty_ranges_and_predicates_true_nowhere_and_everywhere) {
  const std::vector<int> v(100001, 5);
  expect_same(tally_answers(tally::host, v.begin(), v.begin(), always{}), {true, false, true}, "empty, always");
  expect_same(tally_answers(tally::host, v.end(), v.end(), never{}), {true, false, true}, "empty, never");
  expect_same(tally_answers(tally::host, v.begin(), v.end(), always{}), {true, true, false}, "always");
  expect_same(tally_answers(tally::host, v.begin(), v.end(), never{}), {false, false, true}, "never");
}

TEST(logical_host_semantics, one_matching_element_anywhere_is_seen) {
  seeded s(810);
  SCOPED_TRACE(s.trace());
  const std::size_t n = (std::size_t(1) << 20) + 7;
  std::vector<int> v(n, 1);
  std::uniform_int_distribution<std::size_t> position(0, n - 1);
  for (std::size_t at : {std::size_t(0), n - 1, position(s.rng), position(s.rng)}) {
    SCOPED_TRACE("at = " + std::to_string(at));
    v[at] = -1;
    expect_same(tally_answers(tally::host, v.begin(), v.end(), is_negative{}), {false, true, false}, "one negative");
    v[at] = 1;
  }
}

TEST(logical_host_semantics, host_lambda_predicates_run_under_a_host_policy) {
  seeded s(811);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(70001, s.rng);
  const int bound = v[100];
  const auto above_bound = [bound](int x) { return x > bound; };
  expect_same(tally_answers(tally::host, v.begin(), v.end(), above_bound), std_answers(v.begin(), v.end(), above_bound),
              "lambda");
}

TEST(logical_host_semantics, fancy_iterators_and_non_bool_predicates) {
  const thrust::counting_iterator<long long> count(0);
  for (long long n : {1LL, 33LL, 300001LL}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    expect_same(tally_answers(tally::host, count, count + n, below{double(n)}), {true, true, false}, "all below");
    expect_same(tally_answers(tally::host, count, count + n, equals_as_int{n - 1}), {n == 1, true, false}, "last");
    expect_same(tally_answers(tally::host, count, count + n, equals_as_int{n}), {false, false, true}, "past the end");
    const auto negated = thrust::make_transform_iterator(count, thrust::negate<long long>{});
    expect_same(tally_answers(tally::host, negated, negated + n, is_negative{}),
                std_answers(negated, negated + n, is_negative{}), "transform_iterator");
  }
}

TEST(logical_host_semantics, reversed_range_throws_invalid_argument) {
  const std::vector<int> v(10, 1);
  EXPECT_THROW(tally::all_of(tally::host, v.end(), v.begin(), always{}), std::invalid_argument);
  EXPECT_THROW(tally::any_of(tally::host, v.end(), v.begin(), always{}), std::invalid_argument);
  EXPECT_THROW(tally::none_of(tally::host, v.end(), v.begin(), always{}), std::invalid_argument);
}

// ---- all_of, any_of, none_of: device ----

template <class T>
class logical_device : public tally_test::device_test {};
TYPED_TEST_SUITE(logical_device, value_types);

TYPED_TEST(logical_device, answers_match_std_at_every_boundary_size) {
  using T = TypeParam;
  for (std::size_t n : tally_test::boundary_sizes()) {
    seeded s(n + 820);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    for (const auto& v : logical_inputs<T>(n, s.rng)) {
      const auto expected = std_answers(v.begin(), v.end(), is_negative{});
      thrust::device_vector<T> dv(v.begin(), v.end());
      expect_same(tally_answers(tally::device, dv.begin(), dv.end(), is_negative{}), expected, "tally::device");
      expect_same(tally_answers(thrust::device, dv.begin(), dv.end(), is_negative{}), expected, "thrust::device");
      expect_same(tally_answers_without_policy(dv.begin(), dv.end(), is_negative{}), expected, "no policy");
      const tally_test::device_buffer<T> misaligned(v, 1);
      expect_same(tally_answers(tally::device, misaligned.begin(), misaligned.end(), some_below(v)),
                  std_answers(v.begin(), v.end(), some_below(v)), "raw pointer, below");
    }
  }
}

class logical_device_semantics : public tally_test::device_test {};

TEST_F(logical_device_semantics, empty_ranges_one_match_and_fancy_iterators) {
  const std::size_t n = (std::size_t(1) << 20) + 7;
  thrust::device_vector<int> dv(n, 1);
  expect_same(tally_answers(tally::device, dv.begin(), dv.begin(), always{}), {true, false, true}, "empty");
  expect_same(tally_answers(tally::device, dv.begin(), dv.end(), always{}), {true, true, false}, "always");
  expect_same(tally_answers(tally::device, dv.begin(), dv.end(), never{}), {false, false, true}, "never");
  for (std::size_t at : {std::size_t(0), n / 2 + 1, n - 1}) {
    SCOPED_TRACE("at = " + std::to_string(at));
    dv[at] = -1;
    expect_same(tally_answers(tally::device, dv.begin(), dv.end(), is_negative{}), {false, true, false}, "one");
    dv[at] = 1;
  }
  const thrust::counting_iterator<long long> count(0);
  for (long long m : {1LL, 33LL, 300001LL}) {
    SCOPED_TRACE("m = " + std::to_string(m));
    expect_same(tally_answers(tally::device, count, count + m, equals_as_int{m - 1}), {m == 1, true, false}, "last");
    const auto negated = thrust::make_transform_iterator(count, thrust::negate<long long>{});
    expect_same(tally_answers(tally::device, negated, negated + m, is_negative{}),
                std_answers(negated, negated + m, is_negative{}), "transform_iterator");
  }
}

// ---- range overloads ----

TEST(ranges_dispatch, containers_are_ranges_and_iterators_and_policies_are_not) {
  using tally::detail::is_range_v;
  static_assert(is_range_v<std::vector<int>&> && is_range_v<const std::vector<float>&> && is_range_v<int (&)[4]>);
  static_assert(is_range_v<thrust::device_vector<int>&> && is_range_v<thrust::host_vector<int>>);
  static_assert(!is_range_v<std::vector<int>::iterator> && !is_range_v<int*> &&
                !is_range_v<thrust::device_vector<int>::iterator> && !is_range_v<thrust::counting_iterator<int>>);
  static_assert(!is_range_v<tally::host_policy> && !is_range_v<decltype(thrust::device)>);
  constexpr bool device_vector_runs_on_the_device = std::is_same_v<
      decltype(tally::detail::policy_for_range<thrust::device_vector<int>&>()), tally::device_policy>;
  constexpr bool std_vector_runs_on_the_host =
      std::is_same_v<decltype(tally::detail::policy_for_range<const std::vector<int>&>()), tally::host_policy>;
  EXPECT_TRUE(device_vector_runs_on_the_device);
  EXPECT_TRUE(std_vector_runs_on_the_host);
  // The iterator overloads still resolve to themselves beside the range overloads.
  static_assert(std::is_same_v<decltype(tally::reduce(tally::host, std::declval<int*>(), std::declval<int*>())), int>);
  static_assert(std::is_same_v<decltype(tally::min_element(std::declval<float*>(), std::declval<float*>())), float*>);
  static_assert(std::is_same_v<decltype(tally::count(std::declval<int*>(), std::declval<int*>(), 3)), std::ptrdiff_t>);
}

// Every range overload on a host container equals the iterator overload (bits for
// floating point) and std::.
template <class Policy, class Range>
void expect_range_forms_match(const Policy& policy, Range& range, const std::vector<double>& reference) {
  using T = typename std::iterator_traits<decltype(std::begin(range))>::value_type;
  const auto first = std::begin(range), last = std::end(range);
  const auto ref_first = reference.begin(), ref_last = reference.end();
  const std::ptrdiff_t n = last - first;
  EXPECT_EQ(bits_of(tally::reduce(policy, range)), bits_of(tally::reduce(policy, first, last)));
  EXPECT_EQ(bits_of(tally::reduce(policy, range, 1.5)), bits_of(tally::reduce(policy, first, last, 1.5)));
  EXPECT_EQ(tally::reduce(policy, range, T(-1e9), thrust::maximum<T>{}),
            n ? T(*std::max_element(ref_first, ref_last)) : T(-1e9));
  EXPECT_EQ(bits_of(tally::transform_reduce(policy, range, square{}, 0.0, thrust::plus<double>{})),
            bits_of(tally::transform_reduce(policy, first, last, square{}, 0.0, thrust::plus<double>{})));
  const T probe = n ? T(reference[n / 2]) : T(0);
  EXPECT_EQ(tally::count(policy, range, probe), std::count(ref_first, ref_last, double(probe)));
  EXPECT_EQ(tally::count_if(policy, range, is_negative{}), std::count_if(ref_first, ref_last, is_negative{}));
  EXPECT_EQ(tally::min_element(policy, range) - first, std::min_element(ref_first, ref_last) - ref_first);
  EXPECT_EQ(tally::max_element(policy, range) - first, std::max_element(ref_first, ref_last) - ref_first);
  EXPECT_EQ(tally::max_element(policy, range, greater_than{}) - first,
            std::max_element(ref_first, ref_last, greater_than{}) - ref_first);
  const auto both = tally::minmax_element(policy, range);
  const auto expected_both = tally_test::first_min_first_max(ref_first, ref_last);
  EXPECT_EQ(both.first - first, expected_both.first - ref_first);
  EXPECT_EQ(both.second - first, expected_both.second - ref_first);
  expect_same({tally::all_of(policy, range, is_negative{}), tally::any_of(policy, range, is_negative{}),
               tally::none_of(policy, range, is_negative{})},
              std_answers(ref_first, ref_last, is_negative{}), "range");
}

// The same without a policy: the range's iterators decide.
template <class Range>
void expect_policy_free_range_forms_match(Range& range, const std::vector<double>& reference) {
  using T = typename std::iterator_traits<decltype(std::begin(range))>::value_type;
  const auto first = std::begin(range), last = std::end(range);
  const auto ref_first = reference.begin(), ref_last = reference.end();
  EXPECT_EQ(bits_of(tally::reduce(range)), bits_of(tally::reduce(first, last)));
  EXPECT_EQ(bits_of(tally::reduce(range, 0.25)), bits_of(tally::reduce(first, last, 0.25)));
  EXPECT_EQ(bits_of(tally::reduce(range, T(0), thrust::plus<T>{})), bits_of(tally::reduce(first, last, T(0))));
  EXPECT_EQ(bits_of(tally::transform_reduce(range, square{}, 0.0, thrust::plus<double>{})),
            bits_of(tally::transform_reduce(first, last, square{}, 0.0, thrust::plus<double>{})));
  EXPECT_EQ(tally::count(range, T(7)), std::count(ref_first, ref_last, 7.0));
  EXPECT_EQ(tally::count_if(range, is_negative{}), std::count_if(ref_first, ref_last, is_negative{}));
  EXPECT_EQ(tally::min_element(range) - first, std::min_element(ref_first, ref_last) - ref_first);
  EXPECT_EQ(tally::min_element(range, greater_than{}) - first,
            std::min_element(ref_first, ref_last, greater_than{}) - ref_first);
  EXPECT_EQ(tally::max_element(range) - first, std::max_element(ref_first, ref_last) - ref_first);
  const auto both = tally::minmax_element(range, greater_than{});
  const auto expected_both = tally_test::first_min_first_max(ref_first, ref_last, greater_than{});
  EXPECT_EQ(both.first - first, expected_both.first - ref_first);
  EXPECT_EQ(both.second - first, expected_both.second - ref_first);
  expect_same({tally::all_of(range, is_negative{}), tally::any_of(range, is_negative{}),
               tally::none_of(range, is_negative{})},
              std_answers(ref_first, ref_last, is_negative{}), "range, no policy");
}

// Values -8..8: ties for the extrema, and 7 occurs for count.
template <class T>
std::vector<T> small_signed_values(std::size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<T> v(n);
  for (auto& x : v) x = T(d(rng));
  return v;
}

template <class T>
class ranges_host : public ::testing::Test {};
TYPED_TEST_SUITE(ranges_host, value_types);

TYPED_TEST(ranges_host, every_range_form_matches_the_iterator_form_and_std) {
  using T = TypeParam;
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(257), std::size_t(65539)}) {
    seeded s(n + 830);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    std::vector<T> v = small_signed_values<T>(n, s.rng);
    const std::vector<double> reference(v.begin(), v.end());
    expect_range_forms_match(tally::host, v, reference);
    expect_range_forms_match(thrust::host, std::as_const(v), reference);
    expect_policy_free_range_forms_match(v, reference);
    thrust::host_vector<T> hv(v.begin(), v.end());
    expect_policy_free_range_forms_match(hv, reference);
  }
}

TEST(ranges_host_semantics, arrays_and_temporaries) {
  int array[5] = {4, -2, 9, -2, 9};
  EXPECT_EQ(tally::reduce(array), 18);
  EXPECT_EQ(tally::min_element(array), array + 1);
  EXPECT_EQ(tally::minmax_element(tally::host, array).second, array + 2);  // the first 9, as Thrust
  EXPECT_EQ(tally::count(array, 9), 2);
  EXPECT_EQ(tally::reduce(tally::host, std::vector<int>{1, 2, 3}, 10), 16);
  EXPECT_TRUE(tally::all_of(std::vector<float>(10, -1.0f), is_negative{}));
  EXPECT_EQ(tally::count_if(thrust::host, std::vector<int>{-1, 2, -3}, is_negative{}), 2);
}

template <class T>
class ranges_device : public tally_test::device_test {};
TYPED_TEST_SUITE(ranges_device, value_types);

TYPED_TEST(ranges_device, every_range_form_on_a_device_vector_matches_std_and_the_host) {
  using T = TypeParam;
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(257), std::size_t(65539)}) {
    seeded s(n + 840);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const std::vector<T> v = small_signed_values<T>(n, s.rng);
    const std::vector<double> reference(v.begin(), v.end());
    thrust::device_vector<T> dv(v.begin(), v.end());
    expect_range_forms_match(tally::device, dv, reference);
    expect_range_forms_match(thrust::device, std::as_const(dv), reference);
    expect_policy_free_range_forms_match(dv, reference);
    // Device and host agree bit for bit on the range forms too.
    EXPECT_EQ(bits_of(tally::reduce(dv, T(0))), bits_of(tally::reduce(v, T(0))));
  }
}

}  // namespace
