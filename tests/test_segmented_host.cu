// tally::segmented_reduce on the host (issue 36, branch work in progress): every segment has
// the bits of tally::reduce over that segment alone, whatever the mix of segment sizes and the
// thread count; integer segments equal an exact reference; an operator that is not commutative
// keeps each segment's left-to-right order; empty segments give init; bad offsets are refused
// before anything is written.

#include "support/test_support.cuh"
#include "tally/segmented_reduce.cuh"
#include "tally/tally.cuh"

#include <gtest/gtest.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace tally_test;

// Offsets for the size classes of issue 36: all 1, 4, 32, 256, 4096, one segment across a
// step boundary, random 1-64, and a tenth empty, mixed.
std::vector<std::int64_t> mixed_offsets(std::mt19937_64& rng, std::size_t segments) {
  const std::size_t classes[] = {0, 1, 4, 32, 256, 4096, 8193, 70000};
  std::uniform_int_distribution<std::size_t> pick(0, std::size(classes) - 1), small(1, 64), tenth(0, 9);
  std::vector<std::int64_t> offsets{0};
  for (std::size_t s = 0; s < segments; ++s) {
    std::size_t size = tenth(rng) == 0 ? 0 : (s % 3 == 0 ? small(rng) : classes[pick(rng)]);
    offsets.push_back(offsets.back() + static_cast<std::int64_t>(size));
  }
  return offsets;
}

template <class T>
void expect_each_segment_is_its_own_reduce(unsigned threads, std::uint64_t salt) {
  seeded s(salt);
  SCOPED_TRACE(s.trace() + ", threads " + std::to_string(threads));
  const auto offsets = mixed_offsets(s.rng, 300);
  const auto v = random_values<T>(static_cast<std::size_t>(offsets.back()), s.rng);
  const T init = static_cast<T>(3);
  std::vector<T> out(offsets.size() - 1, static_cast<T>(-12345));  // poisoned
  const auto end = tally::segmented_reduce(tally::host.threads(threads), v.begin(), offsets.begin(), offsets.end(),
                                           out.begin(), init, tally::plus<T>{});
  EXPECT_EQ(end, out.end());
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    const auto first = v.begin() + offsets[i], last = v.begin() + offsets[i + 1];
    const T alone = tally::reduce(tally::host, first, last, init, tally::plus<T>{});
    ASSERT_EQ(bits_of(out[i]), bits_of(alone)) << "segment " << i << " of " << (last - first) << " elements";
    if constexpr (std::is_integral_v<T>) {
      ASSERT_EQ(out[i], reference_sum<T>(v, std::size_t(offsets[i]), std::size_t(offsets[i + 1]), init))
          << "segment " << i;
    } else if (first == last) {
      ASSERT_EQ(bits_of(out[i]), bits_of(init)) << "empty segment " << i;
    }
  }
}

TEST(segmented_host, each_float_segment_has_the_bits_of_its_own_reduce) {
  expect_each_segment_is_its_own_reduce<float>(0, 11);
  expect_each_segment_is_its_own_reduce<float>(1, 11);
  expect_each_segment_is_its_own_reduce<float>(3, 11);
}

TEST(segmented_host, each_double_and_integer_segment_is_right) {
  expect_each_segment_is_its_own_reduce<double>(0, 12);
  expect_each_segment_is_its_own_reduce<int>(0, 13);
  expect_each_segment_is_its_own_reduce<long long>(2, 14);
}

// Affine maps x -> a x + b under composition, in unsigned arithmetic (exact, wrapping): an
// associative operator that is not commutative (nor marked so), so each segment takes the
// order-preserving plan and must equal the left fold of its maps.
struct affine {
  std::uint64_t a, b;
  bool operator==(const affine& o) const { return a == o.a && b == o.b; }
};
struct then_apply {  // first `first`, then `second`
  affine operator()(const affine& first, const affine& second) const {
    return {first.a * second.a, first.b * second.a + second.b};
  }
};

TEST(segmented_host, an_operator_that_is_not_commutative_keeps_each_segments_order) {
  seeded s(15);
  SCOPED_TRACE(s.trace());
  const auto offsets = mixed_offsets(s.rng, 120);
  std::vector<affine> v(static_cast<std::size_t>(offsets.back()));
  std::uniform_int_distribution<std::uint64_t> any;
  for (auto& m : v) m = {any(s.rng) | 1u, any(s.rng)};
  const affine identity{1, 0};
  std::vector<affine> out(offsets.size() - 1, affine{0, 0});
  tally::segmented_reduce(tally::host, v.begin(), offsets.begin(), offsets.end(), out.begin(), identity, then_apply{});
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    const affine want = std::accumulate(v.begin() + offsets[i], v.begin() + offsets[i + 1], identity, then_apply{});
    ASSERT_TRUE(out[i] == want) << "segment " << i << " of " << (offsets[i + 1] - offsets[i]) << " maps";
  }
}

TEST(segmented_host, fixed_size_segments_are_the_rows_of_a_matrix) {
  seeded s(16);
  SCOPED_TRACE(s.trace());
  const int rows = 37, columns = 1000;
  const auto v = random_values<float>(std::size_t(rows) * columns, s.rng);
  std::vector<float> out(rows, -1.0f);
  const auto end = tally::segmented_reduce(tally::host, v.begin(), rows, columns, out.begin(), 0.5f, tally::plus<float>{});
  EXPECT_EQ(end, out.end());
  for (int r = 0; r < rows; ++r) {
    const float alone = tally::reduce(tally::host, v.begin() + r * columns, v.begin() + (r + 1) * columns, 0.5f);
    EXPECT_EQ(bits_of(out[r]), bits_of(alone)) << "row " << r;
  }
  // No segments, and segments of no elements.
  EXPECT_EQ(tally::segmented_reduce(tally::host, v.begin(), 0, columns, out.begin(), 0.5f, tally::plus<float>{}),
            out.begin());
  tally::segmented_reduce(tally::host, v.begin(), 3, 0, out.begin(), 0.5f, tally::plus<float>{});
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[2], 0.5f);
}

TEST(segmented_host, decreasing_negative_or_missing_offsets_are_refused_before_anything_is_written) {
  const std::vector<int> v(100, 1);
  std::vector<int> out(4, -7);
  const std::vector<int> decreasing{0, 10, 5, 20};
  const std::vector<int> negative{-1, 10};
  const std::vector<int> none;
  auto expect_refused = [&](const std::vector<int>& offsets, const char* words) {
    try {
      tally::segmented_reduce(tally::host, v.begin(), offsets.begin(), offsets.end(), out.begin(), 0, tally::plus<int>{});
      ADD_FAILURE() << "accepted offsets that should be refused (" << words << ")";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("segmented_reduce"), std::string::npos) << what;
      EXPECT_NE(what.find(words), std::string::npos) << what;
    }
    for (int x : out) EXPECT_EQ(x, -7) << "written before the refusal";
  };
  expect_refused(decreasing, "decrease");
  expect_refused(negative, "negative");
  expect_refused(none, "empty");
}

// Keys in runs of the issue's size classes; integer values against thrust::reduce_by_key on
// the host (exact), float values against tally::reduce over each run alone (bits).
TEST(segmented_host, reduce_by_key_gives_thrusts_runs_and_each_runs_own_reduce) {
  seeded s(17);
  SCOPED_TRACE(s.trace());
  const auto offsets = mixed_offsets(s.rng, 200);
  const std::size_t n = static_cast<std::size_t>(offsets.back());
  std::vector<int> keys(n);
  int key = 5;
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    if (offsets[i] == offsets[i + 1]) continue;
    key += 1 + int(i % 3);  // neighbouring runs never share a key
    for (auto j = offsets[i]; j < offsets[i + 1]; ++j) keys[std::size_t(j)] = key;
  }
  const auto ints = random_values<int>(n, s.rng);
  std::vector<int> keys_out(n, -1), values_out(n, -1), thrust_keys(n), thrust_values(n);
  const auto ends = tally::reduce_by_key(tally::host, keys.begin(), keys.end(), ints.begin(), keys_out.begin(),
                                         values_out.begin());
  const auto thrust_ends = thrust::reduce_by_key(thrust::host, keys.begin(), keys.end(), ints.begin(),
                                                 thrust_keys.begin(), thrust_values.begin());
  ASSERT_EQ(ends.first - keys_out.begin(), thrust_ends.first - thrust_keys.begin());
  ASSERT_EQ(ends.second - values_out.begin(), thrust_ends.second - thrust_values.begin());
  const auto runs = ends.first - keys_out.begin();
  ASSERT_GT(runs, 100);
  for (std::ptrdiff_t r = 0; r < runs; ++r) {
    ASSERT_EQ(keys_out[r], thrust_keys[r]) << "run " << r;
    ASSERT_EQ(values_out[r], thrust_values[r]) << "run " << r;
  }
  const auto floats = random_values<float>(n, s.rng);
  std::vector<float> float_out(n, -1.0f);
  tally::reduce_by_key(tally::host.threads(2), keys.begin(), keys.end(), floats.begin(), keys_out.begin(),
                       float_out.begin());
  std::size_t run_begin = 0;
  for (std::ptrdiff_t r = 0; r < runs; ++r) {
    std::size_t run_end = run_begin + 1;
    while (run_end < n && keys[run_end] == keys[run_begin]) ++run_end;
    const float alone = tally::reduce(tally::host, floats.begin() + std::ptrdiff_t(run_begin) + 1,
                                      floats.begin() + std::ptrdiff_t(run_end), floats[run_begin]);
    ASSERT_EQ(bits_of(float_out[r]), bits_of(alone)) << "run " << r << " of " << (run_end - run_begin);
    run_begin = run_end;
  }
  EXPECT_EQ(run_begin, n);
  // Empty input: no runs.
  const auto none = tally::reduce_by_key(tally::host, keys.begin(), keys.begin(), ints.begin(), keys_out.begin(),
                                         values_out.begin());
  EXPECT_EQ(none.first, keys_out.begin());
  EXPECT_EQ(none.second, values_out.begin());
}

}  // namespace
