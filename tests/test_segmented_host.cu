// tally::segmented_reduce, reduce_by_key, reduce_rows and reduce_columns on the host (issue 36): every segment has
// the bits of tally::reduce over that segment alone, whatever the mix of segment sizes and the
// thread count; integer segments equal an exact reference; an operator that is not commutative
// keeps each segment's left-to-right order; empty segments give init; bad offsets are refused
// before anything is written.

#include "support/test_support.cuh"
#include "tally/matrix_reduce.cuh"
#include "tally/reduce_by_key.cuh"
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
  // reduce_by_key_into: the same runs, the count written.
  std::vector<int> into_keys(n, -1), into_values(n, -1);
  long long count = -1;
  tally::reduce_by_key_into(tally::host, keys.begin(), keys.end(), ints.begin(), into_keys.begin(), into_values.begin(),
                            &count);
  ASSERT_EQ(count, runs);
  for (std::ptrdiff_t r = 0; r < runs; ++r) {
    ASSERT_EQ(into_keys[r], thrust_keys[r]) << "run " << r;
    ASSERT_EQ(into_values[r], thrust_values[r]) << "run " << r;
  }
  tally::reduce_by_key_into(tally::host, keys.begin(), keys.begin(), ints.begin(), into_keys.begin(),
                            into_values.begin(), &count);
  EXPECT_EQ(count, 0);
}

// Rows and columns of a matrix with a leading dimension past cols: each row has the bits of
// tally::reduce over it, each column those of tally::reduce over a copy of it; integer results
// are exact; the transform_ forms have the bits of tally::transform_reduce over each row,
// segment and column; bad shapes are refused before anything is written.
TEST(segmented_host, rows_columns_and_transform_forms) {
  seeded s(18);
  SCOPED_TRACE(s.trace());
  const std::int64_t rows = 300, cols = 70, ld = 75;
  const auto v = random_values<float>(std::size_t((rows - 1) * ld + cols), s.rng);
  const auto ints = random_values<int>(v.size(), s.rng);
  std::vector<float> row_sums(rows, -1.0f), col_sums(cols, -1.0f);
  std::vector<int> int_rows(rows, -1), int_cols(cols, -1);
  EXPECT_EQ(tally::reduce_rows(tally::host, v.begin(), rows, cols, ld, row_sums.begin()), row_sums.end());
  EXPECT_EQ(tally::reduce_columns(tally::host.threads(3), v.begin(), rows, cols, ld, col_sums.begin()), col_sums.end());
  tally::reduce_rows(tally::host, ints.begin(), rows, cols, ld, int_rows.begin(), 5, tally::plus<int>{});
  tally::reduce_columns(tally::host, ints.begin(), rows, cols, ld, int_cols.begin(), 5, tally::plus<int>{});
  std::vector<double> square_rows(rows), square_cols(cols);
  const auto square = [](float x) { return double(x) * double(x); };
  tally::transform_reduce_rows(tally::host, v.begin(), rows, cols, ld, square_rows.begin(), square, 0.0,
                               tally::plus<double>{});
  tally::transform_reduce_columns(tally::host, v.begin(), rows, cols, ld, square_cols.begin(), square, 0.0,
                                  tally::plus<double>{});
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto b = v.begin() + i * ld;
    ASSERT_EQ(bits_of(row_sums[std::size_t(i)]), bits_of(tally::reduce(tally::host, b, b + cols))) << "row " << i;
    ASSERT_EQ(bits_of(square_rows[std::size_t(i)]),
              bits_of(tally::transform_reduce(tally::host, b, b + cols, square, 0.0, tally::plus<double>{})))
        << "row " << i;
    long long exact = 5;
    for (std::int64_t j = 0; j < cols; ++j) exact += ints[std::size_t(i * ld + j)];
    ASSERT_EQ(int_rows[std::size_t(i)], int(exact)) << "row " << i;
  }
  for (std::int64_t j = 0; j < cols; ++j) {
    std::vector<float> column;
    std::vector<double> squares;
    long long exact = 5;
    for (std::int64_t i = 0; i < rows; ++i) {
      column.push_back(v[std::size_t(i * ld + j)]);
      squares.push_back(square(column.back()));
      exact += ints[std::size_t(i * ld + j)];
    }
    ASSERT_EQ(bits_of(col_sums[std::size_t(j)]), bits_of(tally::reduce(tally::host, column.begin(), column.end())))
        << "column " << j;
    ASSERT_EQ(bits_of(square_cols[std::size_t(j)]),
              bits_of(tally::reduce(tally::host, squares.begin(), squares.end(), 0.0, tally::plus<double>{})))
        << "column " << j;
    ASSERT_EQ(int_cols[std::size_t(j)], int(exact)) << "column " << j;
  }
  const std::vector<std::int64_t> offsets{0, 3, 3, 100, 5000, 20000};
  std::vector<double> segments(offsets.size() - 1, -1.0);
  tally::transform_segmented_reduce(tally::host, v.begin(), offsets.begin(), offsets.end(), segments.begin(), square,
                                    0.0, tally::plus<double>{});
  for (std::size_t k = 0; k + 1 < offsets.size(); ++k)
    ASSERT_EQ(bits_of(segments[k]), bits_of(tally::transform_reduce(tally::host, v.begin() + offsets[k],
                                                                    v.begin() + offsets[k + 1], square, 0.0,
                                                                    tally::plus<double>{})))
        << "segment " << k;
  std::vector<float> untouched(10, -1.0f);
  EXPECT_THROW(tally::reduce_rows(tally::host, v.begin(), 10, 20, 19, untouched.begin()), std::invalid_argument);
  EXPECT_THROW(tally::reduce_columns(tally::host, v.begin(), 10, -1, 19, untouched.begin()), std::invalid_argument);
  for (float x : untouched) EXPECT_EQ(x, -1.0f) << "written before a refusal";
}

}  // namespace
