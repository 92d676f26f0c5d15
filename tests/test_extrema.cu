// min_element, max_element, minmax_element: the position each returns against the std::
// algorithm's, on inputs full of ties, on host and device.
#include "support/test_support.cuh"
#include "tally/extrema.cuh"

#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using tally_test::device_buffer;
using tally_test::random_values;
using tally_test::seeded;

struct greater_than {
  template <class T>
  __host__ __device__ bool operator()(const T& a, const T& b) const {
    return b < a;
  }
};

// Compares by the value modulo 4 only: many distinct values are equivalent under it.
struct less_modulo_four {
  __host__ __device__ bool operator()(int a, int b) const { return (a & 3) < (b & 3); }
};

// i -> (i * 37) % 11: a fancy input whose extremes repeat every 11 elements.
struct scattered_residue {
  __host__ __device__ int operator()(int i) const { return (i * 37) % 11; }
};

// Values 0..7: every extremum occurs many times, so the first- and last-occurrence rules
// decide the answer.
template <class T>
std::vector<T> few_distinct_values(std::size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(0, 7);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

template <class T>
std::vector<T> test_input(std::size_t n, bool with_ties, std::mt19937_64& rng) {
  return with_ties ? few_distinct_values<T>(n, rng) : random_values<T>(n, rng);
}

// Values in 100..199 with the minimum (0) and maximum (1000) planted at `copies` random
// positions each, which land in different tiles for large n.
std::vector<int> planted_extremes(std::size_t n, int copies, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> value(100, 199);
  std::vector<int> v(n);
  for (auto& x : v) x = value(rng);
  std::uniform_int_distribution<std::size_t> position(0, n - 1);
  for (int c = 0; c < copies; ++c) {
    v[position(rng)] = 0;
    v[position(rng)] = 1000;
  }
  return v;
}

struct positions {
  std::ptrdiff_t min, max, minmax_min, minmax_max;
};

template <class It, class Comp>
positions std_positions(It first, It last, Comp comp) {
  const auto both = tally_test::first_min_first_max(first, last, comp);
  return {std::min_element(first, last, comp) - first, std::max_element(first, last, comp) - first,
          both.first - first, both.second - first};
}

template <class Policy, class It, class Comp>
positions tally_positions(const Policy& policy, It first, It last, Comp comp) {
  const auto both = tally::minmax_element(policy, first, last, comp);
  return {tally::min_element(policy, first, last, comp) - first, tally::max_element(policy, first, last, comp) - first,
          both.first - first, both.second - first};
}

template <class Policy, class It>
positions tally_positions(const Policy& policy, It first, It last) {
  const auto both = tally::minmax_element(policy, first, last);
  return {tally::min_element(policy, first, last) - first, tally::max_element(policy, first, last) - first,
          both.first - first, both.second - first};
}

template <class It>
positions tally_positions_without_policy(It first, It last) {
  const auto both = tally::minmax_element(first, last);
  return {tally::min_element(first, last) - first, tally::max_element(first, last) - first, both.first - first,
          both.second - first};
}

void expect_same(const positions& actual, const positions& expected, const std::string& what) {
  EXPECT_EQ(actual.min, expected.min) << what << ": min_element";
  EXPECT_EQ(actual.max, expected.max) << what << ": max_element";
  EXPECT_EQ(actual.minmax_min, expected.minmax_min) << what << ": minmax_element's min";
  EXPECT_EQ(actual.minmax_max, expected.minmax_max) << what << ": minmax_element's max";
}

using value_types = ::testing::Types<int, float, double>;

// ---- the combine ----

// The fold is reproducible only if keeping a candidate is associative and commutative and
// "no candidate" is its identity; check that on candidates with many equivalent values.
template <class Keep>
void expect_associative_commutative_with_identity(Keep keep, std::mt19937_64& rng) {
  using candidate = tally::detail::indexed_value<int>;
  const candidate none = tally::detail::no_candidate<int>();
  std::uniform_int_distribution<int> value(0, 3);
  std::uniform_int_distribution<std::int64_t> index(0, 1000);
  auto same = [](const candidate& a, const candidate& b) { return a.value == b.value && a.index == b.index; };
  for (int trial = 0; trial < 20000; ++trial) {
    const candidate a{value(rng), index(rng)}, b{value(rng), index(rng) + 2000}, c{value(rng), index(rng) + 4000};
    ASSERT_TRUE(same(keep(a, b), keep(b, a))) << "trial " << trial;
    ASSERT_TRUE(same(keep(keep(a, b), c), keep(a, keep(b, c)))) << "trial " << trial;
    ASSERT_TRUE(same(keep(none, a), a) && same(keep(a, none), a)) << "trial " << trial;
  }
  EXPECT_LT(keep(none, none).index, 0);
}

TEST(extrema_combine, keeping_a_candidate_is_associative_and_commutative_with_an_identity) {
  seeded s(700);
  SCOPED_TRACE(s.trace());
  using less = thrust::less<int>;
  expect_associative_commutative_with_identity(tally::detail::keep_first_min<int, less>{less{}}, s.rng);
  expect_associative_commutative_with_identity(tally::detail::keep_first_max<int, less>{less{}}, s.rng);
  expect_associative_commutative_with_identity(tally::detail::keep_last_max<int, less>{less{}}, s.rng);
  expect_associative_commutative_with_identity(tally::detail::keep_first_min<int, greater_than>{greater_than{}}, s.rng);
}

TEST(extrema_combine, ties_go_to_the_first_or_last_index_as_the_rule_says) {
  using less = thrust::less<int>;
  const tally::detail::indexed_value<int> early{5, 3}, late{5, 9}, smaller{4, 20};
  EXPECT_EQ((tally::detail::keep_first_min<int, less>{less{}}(late, early).index), 3);
  EXPECT_EQ((tally::detail::keep_first_max<int, less>{less{}}(late, early).index), 3);
  EXPECT_EQ((tally::detail::keep_last_max<int, less>{less{}}(early, late).index), 9);
  EXPECT_EQ((tally::detail::keep_first_min<int, less>{less{}}(early, smaller).index), 20);
  EXPECT_EQ((tally::detail::keep_first_max<int, less>{less{}}(smaller, late).index), 9);
}

// A thread's fold and the block tree over a full tile carry 32-bit positions from the
// tile's first element (tile/commutative_tile.cuh, folds_local_positions): the combine must choose
// among such candidates exactly as among the same candidates with their 64-bit indices.
template <class Keep>
void expect_positions_choose_as_indices_do(Keep keep, std::mt19937_64& rng) {
  using local = tally::detail::indexed_value<int, std::uint32_t>;
  using global = tally::detail::indexed_value<int>;
  std::uniform_int_distribution<int> value(0, 3);
  std::uniform_int_distribution<std::uint32_t> position(0, 0xffffffffu);
  const std::int64_t tile_begin = std::int64_t(1) << 33;
  for (int trial = 0; trial < 20000; ++trial) {
    const local a{value(rng), position(rng)}, b{value(rng), position(rng)};
    const local kept = keep(a, b);
    const global expected = keep(global{a.value, tile_begin + a.index}, global{b.value, tile_begin + b.index});
    ASSERT_EQ(kept.value, expected.value) << "trial " << trial;
    ASSERT_EQ(tile_begin + std::int64_t(kept.index), expected.index) << "trial " << trial;
    if (b.index > a.index) {  // the fold's in-order combine: b follows a
      const local in_order = keep.combine_in_order(a, b);
      ASSERT_EQ(in_order.index, kept.index) << "trial " << trial;
    }
  }
}

TEST(extrema_combine, positions_within_a_tile_choose_as_indices_do) {
  seeded s(705);
  SCOPED_TRACE(s.trace());
  using less = thrust::less<int>;
  expect_positions_choose_as_indices_do(tally::detail::keep_first_min<int, less>{less{}}, s.rng);
  expect_positions_choose_as_indices_do(tally::detail::keep_first_max<int, less>{less{}}, s.rng);
  expect_positions_choose_as_indices_do(tally::detail::keep_last_max<int, less>{less{}}, s.rng);
}

TEST(extrema_combine, a_candidate_made_at_a_position_becomes_the_one_made_at_its_index) {
  const int values[] = {7, -2};
  const std::int64_t first_index = (std::int64_t(1) << 32) + 5;
  const tally::detail::read_candidate<const int*, int> one{values};
  const auto c = one.globalize(one.make_local(values[1], 0xfffffff0u), first_index);
  EXPECT_EQ(c.value, -2);
  EXPECT_EQ(c.index, first_index + 0xfffffff0);
  const tally::detail::read_candidate_pair<const int*, int> both{values};
  const auto p = both.globalize(both.make_local(values[0], 3u), first_index);
  EXPECT_EQ(p.min.value, 7);
  EXPECT_EQ(p.max.value, 7);
  EXPECT_EQ(p.min.index, first_index + 3);
  EXPECT_EQ(p.max.index, first_index + 3);
}

// A tile's partial goes through the scratch with positions from the tile's first element
// (tile/commutative_tile.cuh, position_codec): localize must undo globalize exactly, up to 2^32 - 1
// past the tile's first index, with the min and the max at different positions.
TEST(extrema_combine, a_partial_localized_to_its_tile_comes_back_unchanged) {
  const int values[] = {7, -2};
  const std::int64_t tile_first = (std::int64_t(3) << 32) + 11;
  const tally::detail::read_candidate<const int*, int> one{values};
  for (const std::uint32_t position : {0u, 1u, 0x7fffffffu, 0xffffffffu}) {
    const tally::detail::indexed_value<int> c{-2, tile_first + position};
    const auto local = one.localize(c, tile_first);
    EXPECT_EQ(local.index, position);
    const auto back = one.globalize(local, tile_first);
    EXPECT_EQ(back.value, c.value);
    EXPECT_EQ(back.index, c.index);
  }
  const tally::detail::read_candidate_pair<const int*, int> both{values};
  const tally::detail::min_and_max<int> p{{-2, tile_first + 0xfffffffe}, {7, tile_first + 4}};
  const auto local = both.localize(p, tile_first);
  EXPECT_EQ(local.min.index, 0xfffffffeu);
  EXPECT_EQ(local.max.index, 4u);
  const auto back = both.globalize(local, tile_first);
  EXPECT_EQ(back.min.value, -2);
  EXPECT_EQ(back.min.index, p.min.index);
  EXPECT_EQ(back.max.value, 7);
  EXPECT_EQ(back.max.index, p.max.index);
}

// ---- host ----

template <class T>
class extrema_host : public ::testing::Test {};
TYPED_TEST_SUITE(extrema_host, value_types);

TYPED_TEST(extrema_host, positions_match_std_at_every_boundary_size_with_and_without_ties) {
  using T = TypeParam;
  for (bool with_ties : {false, true}) {
    for (std::size_t n : tally_test::boundary_sizes()) {
      seeded s(n + 710 + (with_ties ? 100000 : 0));
      SCOPED_TRACE("n = " + std::to_string(n) + (with_ties ? ", values 0..7, " : ", ") + s.trace());
      const auto v = test_input<T>(n, with_ties, s.rng);
      const positions expected = std_positions(v.begin(), v.end(), std::less<T>{});
      expect_same(tally_positions(tally::host, v.begin(), v.end()), expected, "tally::host");
      expect_same(tally_positions(thrust::host, v.begin(), v.end(), thrust::less<T>{}), expected, "thrust::host");
      expect_same(tally_positions_without_policy(v.data(), v.data() + n), expected, "raw pointers, no policy");
      expect_same(tally_positions(tally::host, v.begin(), v.end(), greater_than{}),
                  std_positions(v.begin(), v.end(), greater_than{}), "greater_than");
    }
  }
}

TYPED_TEST(extrema_host, all_equal_values_give_the_first_position_as_thrust) {
  using T = TypeParam;
  const std::size_t n = (std::size_t(1) << 18) + 5;
  const std::vector<T> v(n, T(3));
  EXPECT_EQ(tally::min_element(tally::host, v.begin(), v.end()), v.begin());
  EXPECT_EQ(tally::max_element(tally::host, v.begin(), v.end()), v.begin());
  const auto both = tally::minmax_element(tally::host, v.begin(), v.end());
  EXPECT_EQ(both.first, v.begin());
  EXPECT_EQ(both.second, v.begin());  // the first of the largest, as thrust::minmax_element
}

TEST(extrema_host_semantics, planted_extremes_are_found_in_any_tile) {
  for (int copies : {1, 2, 5}) {
    seeded s(720 + copies);
    SCOPED_TRACE("copies = " + std::to_string(copies) + ", " + s.trace());
    const auto v = planted_extremes((std::size_t(1) << 20) + 7, copies, s.rng);
    expect_same(tally_positions(tally::host, v.begin(), v.end()), std_positions(v.begin(), v.end(), std::less<int>{}),
                "planted");
  }
}

TEST(extrema_host_semantics, empty_ranges_return_last) {
  const std::vector<double> v(4, 1.0);
  EXPECT_EQ(tally::min_element(tally::host, v.begin() + 2, v.begin() + 2), v.begin() + 2);
  EXPECT_EQ(tally::max_element(v.begin() + 3, v.begin() + 3, greater_than{}), v.begin() + 3);
  const auto both = tally::minmax_element(thrust::host, v.end(), v.end());
  EXPECT_EQ(both.first, v.end());
  EXPECT_EQ(both.second, v.end());
}

TEST(extrema_host_semantics, a_comparator_that_makes_distinct_values_equivalent) {
  seeded s(730);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(100003, s.rng);
  expect_same(tally_positions(tally::host, v.begin(), v.end(), less_modulo_four{}),
              std_positions(v.begin(), v.end(), less_modulo_four{}), "less_modulo_four");
}

TEST(extrema_host_semantics, host_lambda_comparators_run_under_a_host_policy) {
  seeded s(731);
  SCOPED_TRACE(s.trace());
  const auto v = few_distinct_values<int>(5000, s.rng);
  const auto by_distance_from_four = [](int a, int b) { return std::abs(a - 4) < std::abs(b - 4); };
  expect_same(tally_positions(tally::host, v.begin(), v.end(), by_distance_from_four),
              std_positions(v.begin(), v.end(), by_distance_from_four), "lambda");
}

TEST(extrema_host_semantics, fancy_iterators) {
  const thrust::counting_iterator<long long> count(5);
  for (long long n : {1LL, 2LL, 1000LL, 300001LL}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    EXPECT_EQ(tally::min_element(tally::host, count, count + n), count);
    EXPECT_EQ(tally::max_element(tally::host, count, count + n), count + (n - 1));
    const auto both = tally::minmax_element(thrust::host, count, count + n, greater_than{});
    EXPECT_EQ(both.first, count + (n - 1));
    EXPECT_EQ(both.second, count);

    const auto residues = thrust::make_transform_iterator(thrust::counting_iterator<int>(0), scattered_residue{});
    expect_same(tally_positions(tally::host, residues, residues + n),
                std_positions(residues, residues + n, std::less<int>{}), "transform_iterator");
  }
}

TEST(extrema_host_semantics, reversed_range_throws_invalid_argument) {
  const std::vector<int> v(10, 1);
  EXPECT_THROW(tally::min_element(tally::host, v.end(), v.begin()), std::invalid_argument);
  EXPECT_THROW(tally::max_element(tally::host, v.end(), v.begin()), std::invalid_argument);
  EXPECT_THROW(tally::minmax_element(tally::host, v.end(), v.begin()), std::invalid_argument);
}

// With NaNs under thrust::less the plan's tree decides the answer, so a std::vector's
// iterators must take the plan its pointer takes (and the device's: the device test below).
TEST(extrema_host_semantics, values_with_nans_give_the_same_positions_through_iterators_and_pointers) {
  for (std::size_t n : {std::size_t(1000), std::size_t(70001), std::size_t(1) << 20}) {
    seeded s(n + 780);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    auto v = random_values<float>(n, s.rng);
    std::uniform_int_distribution<std::size_t> position(0, n - 1);
    for (int k = 0; k < 50; ++k) v[position(s.rng)] = std::numeric_limits<float>::quiet_NaN();
    expect_same(tally_positions(tally::host, v.begin(), v.end()), tally_positions(tally::host, v.data(), v.data() + n),
                "std::vector iterators against pointers");
  }
}

// ---- device ----

template <class T>
class extrema_device : public tally_test::device_test {};
TYPED_TEST_SUITE(extrema_device, value_types);

TYPED_TEST(extrema_device, positions_match_std_at_every_boundary_size_with_and_without_ties) {
  using T = TypeParam;
  for (bool with_ties : {false, true}) {
    for (std::size_t n : tally_test::boundary_sizes()) {
      seeded s(n + 740 + (with_ties ? 100000 : 0));
      SCOPED_TRACE("n = " + std::to_string(n) + (with_ties ? ", values 0..7, " : ", ") + s.trace());
      const auto v = test_input<T>(n, with_ties, s.rng);
      const positions expected = std_positions(v.begin(), v.end(), std::less<T>{});
      thrust::device_vector<T> dv(v.begin(), v.end());
      expect_same(tally_positions(tally::device, dv.begin(), dv.end()), expected, "tally::device");
      expect_same(tally_positions(thrust::device, dv.begin(), dv.end(), thrust::less<T>{}), expected, "thrust::device");
      expect_same(tally_positions_without_policy(dv.begin(), dv.end()), expected, "device_vector, no policy");
      const device_buffer<T> misaligned(v, 1);
      expect_same(tally_positions(tally::device, misaligned.begin(), misaligned.end()), expected, "raw pointer");
      expect_same(tally_positions(tally::device, dv.begin(), dv.end(), greater_than{}),
                  std_positions(v.begin(), v.end(), greater_than{}), "greater_than");
    }
  }
}

TYPED_TEST(extrema_device, all_equal_values_give_the_first_position_as_thrust) {
  using T = TypeParam;
  const thrust::device_vector<T> dv((std::size_t(1) << 20) + 3, T(3));
  EXPECT_EQ(tally::min_element(tally::device, dv.begin(), dv.end()) - dv.begin(), 0);
  EXPECT_EQ(tally::max_element(dv.begin(), dv.end()) - dv.begin(), 0);
  const auto both = tally::minmax_element(tally::device, dv.begin(), dv.end());
  EXPECT_EQ(both.first - dv.begin(), 0);
  EXPECT_EQ(both.second - dv.begin(), 0);  // the first of the largest, as thrust::minmax_element
}

class extrema_device_semantics : public tally_test::device_test {};

TEST_F(extrema_device_semantics, planted_extremes_at_any_grid_size_and_strategy) {
  const std::size_t n = tally_test::under_sanitizer() ? 100003 : (std::size_t(1) << 22) + 7;
  for (int copies : {1, 3}) {
    seeded s(750 + copies);
    SCOPED_TRACE("copies = " + std::to_string(copies) + ", " + s.trace());
    const auto v = planted_extremes(n, copies, s.rng);
    const positions expected = std_positions(v.begin(), v.end(), std::less<int>{});
    const device_buffer<int> d(v);
    for (unsigned grid : {0u, 1u, 7u}) {
      expect_same(tally_positions(tally::device.grid_size(grid), d.begin(), d.end()), expected,
                  "grid " + std::to_string(grid));
    }
    expect_same(tally_positions(tally::device.strategy(tally::strategy::two_pass), d.begin(), d.end()), expected,
                "two pass");
  }
}

// Under thrust::less, a NaN is neither less nor greater than anything: the combine is not
// associative there, so the answer depends on the tree, which the plan fixes. The device
// must then give the host backend's positions (docs/extrema.md, Determinism), including
// where its full tiles fold 32-bit positions.
TEST_F(extrema_device_semantics, values_with_nans_give_the_host_backends_positions) {
  const std::size_t big = tally_test::under_sanitizer() ? 300007 : (std::size_t(1) << 22) + 5;
  for (std::size_t n : {std::size_t(1000), std::size_t(70001), big}) {
    for (int nans : {1, 50}) {
      seeded s(n + 760 + std::uint64_t(nans));
      SCOPED_TRACE("n = " + std::to_string(n) + ", nans = " + std::to_string(nans) + ", " + s.trace());
      auto v = random_values<float>(n, s.rng);
      std::uniform_int_distribution<std::size_t> position(0, n - 1);
      for (int k = 0; k < nans; ++k) v[position(s.rng)] = std::numeric_limits<float>::quiet_NaN();
      const positions expected = tally_positions(tally::host, v.begin(), v.end());
      const thrust::device_vector<float> dv(v.begin(), v.end());
      expect_same(tally_positions(tally::device, dv.begin(), dv.end()), expected, "device_vector");
      const device_buffer<float> misaligned(v, 1);
      expect_same(tally_positions(tally::device, misaligned.begin(), misaligned.end()), expected, "misaligned");
    }
  }
}

TEST_F(extrema_device_semantics, fancy_iterators_and_empty_ranges) {
  const thrust::counting_iterator<long long> count(5);
  for (long long n : {1LL, 2LL, 1000LL, 300001LL}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    EXPECT_EQ(tally::min_element(tally::device, count, count + n), count);
    EXPECT_EQ(tally::max_element(thrust::device, count, count + n), count + (n - 1));
    const auto both = tally::minmax_element(tally::device, count, count + n, greater_than{});
    EXPECT_EQ(both.first, count + (n - 1));
    EXPECT_EQ(both.second, count);

    const auto residues = thrust::make_transform_iterator(thrust::counting_iterator<int>(0), scattered_residue{});
    expect_same(tally_positions(tally::device, residues, residues + n),
                std_positions(residues, residues + n, std::less<int>{}), "transform_iterator");
  }
  thrust::device_vector<float> dv(3, 1.0f);
  EXPECT_EQ(tally::min_element(tally::device, dv.end(), dv.end()), dv.end());
  EXPECT_EQ(tally::max_element(dv.begin(), dv.begin()), dv.begin());
  const auto both = tally::minmax_element(thrust::device, dv.begin() + 1, dv.begin() + 1);
  EXPECT_EQ(both.first, dv.begin() + 1);
  EXPECT_EQ(both.second, dv.begin() + 1);
}

TEST_F(extrema_device_semantics, a_host_range_under_a_device_policy_is_refused_without_pageable_access) {
  int pageable = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0), cudaSuccess);
  std::vector<int> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = int(i % 97);
  if (pageable) {
    EXPECT_EQ(tally::max_element(tally::device, v.data(), v.data() + v.size()) - v.data(), 96);
  } else {
    EXPECT_THROW(tally::max_element(tally::device, v.data(), v.data() + v.size()), std::invalid_argument);
  }
}

}  // namespace
