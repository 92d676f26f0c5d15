// Exact sums per segment on the device (tally::exact_plus through segmented_reduce, the matrix
// axes and reduce_by_key; docs/exact.md): every segment, row, column and key run has the bits of
// the host backend's exact sum over it alone (which tests/test_exact_host.cu checks against
// MPFR), whichever route the device took: a lane, a warp, pieces of a split segment over many
// blocks, or a block. Outputs are poisoned before each run. Every test here skips without a GPU.
#include "support/test_support.cuh"
#include "tally/exact.cuh"
#include "tally/fields.cuh"
#include "tally/ranges.cuh"
#include "tally/matrix_reduce.cuh"
#include "tally/reduce.cuh"
#include "tally/reduce_by_key.cuh"
#include "tally/segmented_reduce.cuh"

#include <cuda/std/tuple>
#include <thrust/device_vector.h>
#include <thrust/functional.h>

#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/kernels/exact_segment_kernels.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using tally_test::any_finite;
using tally_test::bits_of;
using tally_test::seeded;

template <class T>
class exact_segmented_device : public tally_test::device_test {};
using exact_types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(exact_segmented_device, exact_types);

// For CUDA calls off the test's thread and in helpers that return values.
void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}
#define TEST_CUDA_THROW(call) check_cuda((call), #call)

template <class T>
thrust::device_vector<T> poisoned_device(std::size_t n) {
  thrust::device_vector<T> d(n);
  if (n > 0) TEST_CUDA_THROW(cudaMemset(thrust::raw_pointer_cast(d.data()), 0xA5, n * sizeof(T)));
  TEST_CUDA_THROW(cudaDeviceSynchronize());
  return d;
}

template <class T>
T host_exact(const T* first, std::size_t n, T init) {
  return tally::reduce(tally::host, first, first + n, init, tally::exact_plus<T>{});
}

// out[s] against the host's exact sum of [begins[s], ends[s]) with init, bit for bit.
template <class T>
void expect_segments(const std::vector<T>& v, const std::vector<std::int64_t>& begins,
                     const std::vector<std::int64_t>& ends, const thrust::device_vector<T>& out, T init,
                     const std::string& what) {
  SCOPED_TRACE(what);
  std::vector<T> got(out.size());
  thrust::copy(out.begin(), out.end(), got.begin());
  ASSERT_EQ(got.size(), begins.size());
  for (std::size_t s = 0; s < got.size(); ++s) {
    const std::int64_t b = begins[s], e = ends[s];
    const T want = b < 0 || e < b ? init : host_exact(v.data() + b, std::size_t(e - b), init);
    ASSERT_EQ(bits_of(got[s]), bits_of(want)) << "segment " << s << " of " << (e - b) << " elements: " << got[s]
                                              << " against " << want;
  }
}

// Segments of the given sizes, one after another, through the offsets form and the begin/end form.
template <class T>
void expect_offsets_forms(const std::vector<T>& v, const std::vector<std::size_t>& sizes, T init,
                          const std::string& what) {
  std::vector<std::int64_t> offsets{0};
  for (std::size_t size : sizes) offsets.push_back(offsets.back() + std::int64_t(size));
  ASSERT_LE(std::size_t(offsets.back()), v.size());
  const thrust::device_vector<T> d(v.begin(), v.end());
  const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
  const std::vector<std::int64_t> begins(offsets.begin(), offsets.end() - 1), ends(offsets.begin() + 1, offsets.end());
  auto out = poisoned_device<T>(sizes.size());
  tally::segmented_reduce(tally::device, d.begin(), d_offsets.begin(), d_offsets.end(), out.begin(), init,
                          tally::exact_plus<T>{});
  TEST_CUDA(cudaDeviceSynchronize());
  expect_segments(v, begins, ends, out, init, what + ", offsets");
  // Begin/end pairs in reverse order, so that the segments' ids and places differ.
  std::vector<std::int64_t> rb(begins.rbegin(), begins.rend()), re(ends.rbegin(), ends.rend());
  const thrust::device_vector<std::int64_t> d_rb(rb.begin(), rb.end()), d_re(re.begin(), re.end());
  out = poisoned_device<T>(sizes.size());
  tally::segmented_reduce(tally::device, d.begin(), d_rb.begin(), d_rb.end(), d_re.begin(), out.begin(), init,
                          tally::exact_plus<T>{});
  TEST_CUDA(cudaDeviceSynchronize());
  expect_segments(v, rb, re, out, init, what + ", begin/end pairs reversed");
}

std::size_t total_of(const std::vector<std::size_t>& sizes) {
  std::size_t total = 0;
  for (std::size_t size : sizes) total += size;
  return total;
}

TYPED_TEST(exact_segmented_device, every_route_at_its_edges_over_the_whole_exponent_range) {
  using T = TypeParam;
  namespace d = tally::detail;
  seeded s(3801);
  SCOPED_TRACE(s.trace());
  const std::size_t lane = d::exact_lane_segment_max, warp = d::exact_warp_segment_max;
  const std::size_t piece = d::exact_piece_elements<T>;
  std::vector<std::size_t> sizes = {0,        1,        2,         lane - 1,      lane,          lane + 1,
                                    lane + 2, 100,      warp - 1,  warp,          warp + 1,      warp + 2,
                                    piece - 1, piece,   piece + 1, 3 * piece + 5, 100000,        0,
                                    0,        7};
  if (!tally_test::under_sanitizer()) sizes.push_back((std::size_t(1) << 21) + 7);
  std::uniform_int_distribution<std::size_t> small(0, 80);
  for (int k = 0; k < 400; ++k) sizes.push_back(small(s.rng));
  std::shuffle(sizes.begin(), sizes.end(), s.rng);
  const auto v = any_finite<T>(total_of(sizes), s.rng);
  expect_offsets_forms(v, sizes, any_finite<T>(1, s.rng)[0], "any finite values");
  expect_offsets_forms(v, sizes, T(0), "init +0");
}

// More long segments than are split into pieces (exact_split_max): the rest take a block each.
TYPED_TEST(exact_segmented_device, long_segments_beyond_the_split_ones_take_a_block_each) {
  using T = TypeParam;
  namespace d = tally::detail;
  seeded s(3802);
  SCOPED_TRACE(s.trace());
  std::uniform_int_distribution<std::size_t> longish(d::exact_warp_segment_max + 1, d::exact_warp_segment_max + 300);
  std::vector<std::size_t> sizes;
  for (std::uint64_t k = 0; k < d::exact_split_max + 40; ++k) sizes.push_back(longish(s.rng));
  sizes.push_back(3);
  sizes.push_back(3 * d::exact_piece_elements<T> + 1);
  std::shuffle(sizes.begin(), sizes.end(), s.rng);
  std::uniform_real_distribution<T> unit(-1, 1);
  std::vector<T> v(total_of(sizes));
  for (auto& x : v) x = std::ldexp(unit(s.rng), int(s.rng() % 60) - 30);
  expect_offsets_forms(v, sizes, T(-0.25), "values within 2^-30 .. 2^30");
}

// Special values and cancellation spread over the pieces of split segments and the lanes of warps:
// NaN in one piece; +inf and -inf in different pieces (NaN); +inf alone; finite values whose sum
// overflows; x and -x pairs; subnormals only; -0 only with init -0 (-0).
TYPED_TEST(exact_segmented_device, special_values_and_cancellation_across_pieces_and_lanes) {
  using T = TypeParam;
  namespace d = tally::detail;
  seeded s(3803);
  SCOPED_TRACE(s.trace());
  const std::size_t piece = d::exact_piece_elements<T>;
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const T largest = std::numeric_limits<T>::max(), tiny = std::numeric_limits<T>::denorm_min();
  std::vector<T> v;
  std::vector<std::size_t> sizes;
  const auto segment = [&](std::size_t n, auto fill) {
    const std::size_t at = v.size();
    auto values = any_finite<T>(n, s.rng);
    fill(values);
    v.insert(v.end(), values.begin(), values.end());
    sizes.push_back(n);
    (void)at;
  };
  for (std::size_t n : {std::size_t(20), std::size_t(500), 3 * piece + 9}) {
    segment(n, [&](std::vector<T>& x) { x[n / 2] = nan; });
    segment(n, [&](std::vector<T>& x) { x[1] = inf, x[n - 1] = -inf; });
    segment(n, [&](std::vector<T>& x) { x[n - 2] = inf; });
    segment(n, [&](std::vector<T>& x) { std::fill(x.begin(), x.end(), largest); });
    segment(n, [&](std::vector<T>& x) { std::fill(x.begin(), x.end(), -largest); x[0] = largest; });
    segment(n, [&](std::vector<T>& x) {
      for (std::size_t k = 0; k + 1 < n; k += 2) x[k + 1] = -x[k];
      x[n - 1] = T(1);
    });
    segment(n, [&](std::vector<T>& x) {
      for (auto& y : x) y = tiny * T(s.rng() % 1000);
    });
    segment(n, [&](std::vector<T>& x) { std::fill(x.begin(), x.end(), -T(0)); });
    segment(n, [&](std::vector<T>& x) {
      std::fill(x.begin(), x.end(), T(1));
      x[0] = largest;
      x[n - 1] = -largest;
    });
  }
  expect_offsets_forms(v, sizes, -T(0), "specials, init -0");
  expect_offsets_forms(v, sizes, T(1), "specials, init 1");
  expect_offsets_forms(v, sizes, -inf, "specials, init -inf");
}

// Runs of one and two values, where the device takes the IEEE sum of init and one element as
// the exact one: ties, overflow at the edge, subnormals, zeros of both signs, NaN payloads and
// opposite infinities, each against the host's exact sum.
TYPED_TEST(exact_segmented_device, pairs_and_single_values_at_the_edges_of_rounding) {
  using T = TypeParam;
  using bits_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  seeded s(3810);
  SCOPED_TRACE(s.trace());
  using limits = std::numeric_limits<T>;
  const T largest = limits::max(), tiny = limits::denorm_min(), inf = limits::infinity();
  const T half_ulp_of_one = limits::epsilon() / 2;
  const T half_ulp_of_largest = std::ldexp(T(1), limits::max_exponent - limits::digits - 1);
  // A NaN with a payload (signalling): the exact sums give the one quiet NaN whatever came in.
  const bits_t payload_bits = sizeof(T) == 4 ? bits_t(0x7FA00001u) : bits_t(0x7FF4000000000001ull);
  T payload_nan;
  std::memcpy(&payload_nan, &payload_bits, sizeof(T));
  const std::vector<std::pair<T, T>> pairs = {
      {T(1), half_ulp_of_one},        {T(1) + limits::epsilon(), half_ulp_of_one}, {T(1), -half_ulp_of_one / 2},
      {largest, largest},             {largest, half_ulp_of_largest},              {largest, half_ulp_of_largest / 2},
      {-largest, -half_ulp_of_largest}, {largest, -largest},                      {tiny, tiny},
      {limits::min(), -tiny},         {-T(0), -T(0)},                              {T(0), -T(0)},
      {-T(0), T(0)},                  {inf, -inf},                                 {-inf, T(1)},
      {payload_nan, T(1)},            {T(1), payload_nan},                         {T(3), -T(3)}};
  std::vector<int> keys;
  std::vector<T> v;
  int key = 0;
  for (const auto& [a, b] : pairs) {
    keys.insert(keys.end(), 2, key++);
    v.push_back(a);
    v.push_back(b);
  }
  for (T single : {payload_nan, -T(0), tiny, -inf}) {  // runs of one value: the exact sum of it alone
    keys.push_back(key++);
    v.push_back(single);
  }
  const auto random = any_finite<T>(2000, s.rng);  // and random pairs
  for (std::size_t k = 0; k < random.size(); ++k) keys.push_back(key + int(k / 2)), v.push_back(random[k]);
  const thrust::device_vector<int> dk(keys.begin(), keys.end());
  const thrust::device_vector<T> dv(v.begin(), v.end());
  thrust::device_vector<int> keys_out(keys.size());
  auto values_out = poisoned_device<T>(keys.size());
  const auto ends = tally::reduce_by_key(tally::device, dk.begin(), dk.end(), dv.begin(), keys_out.begin(),
                                         values_out.begin(), thrust::equal_to<int>{}, tally::exact_plus<T>{});
  std::vector<int> want_keys(keys.size());
  std::vector<T> want(keys.size());
  const auto want_ends = tally::reduce_by_key(tally::host, keys.begin(), keys.end(), v.begin(), want_keys.begin(),
                                              want.begin(), thrust::equal_to<int>{}, tally::exact_plus<T>{});
  const std::size_t count = std::size_t(ends.second - values_out.begin());
  ASSERT_EQ(count, std::size_t(want_ends.second - want.begin()));
  std::vector<T> got(count);
  thrust::copy(values_out.begin(), values_out.begin() + count, got.begin());
  for (std::size_t r = 0; r < count; ++r) ASSERT_EQ(bits_of(got[r]), bits_of(want[r])) << "run " << r;
  // The same pairs as init and a one-element segment.
  for (const auto& [a, b] : pairs) {
    const std::vector<T> one = {b};
    expect_offsets_forms(one, {1, 0}, a, "init and one element");
  }
}

// One segment of 2^27 doubles just below 4: each term's high piece, near 2^52, goes to the same
// digit, so that a thread holding the 33 or more pieces this gives each block overflows that
// digit after 2048 terms unless it balances its digits as it goes.
TEST(exact_segmented_device_forms, a_thread_balances_its_digits_over_many_pieces) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  if (tally_test::under_sanitizer()) GTEST_SKIP() << "2^27 elements: too many under the sanitizer";
  const std::uint64_t bits = 0x400FFFFFFFFFFFFFull;  // 4 - 2^-51: its significand is all ones
  double x;
  std::memcpy(&x, &bits, sizeof x);
  const std::size_t n = std::size_t(1) << 27;
  std::vector<double> v(n, x);
  v[12345] = -1.0;
  const thrust::device_vector<double> dv(v.begin(), v.end());
  auto out = poisoned_device<double>(2);
  tally::segmented_reduce(tally::device, dv.begin(), std::int64_t(1), std::int64_t(n), out.begin(), 0.0,
                          tally::exact_plus<double>{});
  TEST_CUDA(cudaDeviceSynchronize());
  const double want = tally::reduce(tally::host, v.begin(), v.end(), 0.0, tally::exact_plus<double>{});
  const double got = out[0];
  EXPECT_EQ(bits_of(got), bits_of(want)) << got << " against " << want;
}

// Offsets in device memory that decrease or are negative give init and read nothing.
TYPED_TEST(exact_segmented_device, bad_offsets_in_device_memory_give_init) {
  using T = TypeParam;
  seeded s(3804);
  SCOPED_TRACE(s.trace());
  const auto v = any_finite<T>(10000, s.rng);
  const std::vector<std::int64_t> begins = {0, 50, -5, 9000, 10, 200};
  const std::vector<std::int64_t> ends = {40, 20, 30, 10000, 10, 6000};
  const thrust::device_vector<T> dv(v.begin(), v.end());
  const thrust::device_vector<std::int64_t> db(begins.begin(), begins.end()), de(ends.begin(), ends.end());
  auto out = poisoned_device<T>(begins.size());
  tally::segmented_reduce(tally::device, dv.begin(), db.begin(), db.end(), de.begin(), out.begin(), T(2),
                          tally::exact_plus<T>{});
  TEST_CUDA(cudaDeviceSynchronize());
  expect_segments(v, begins, ends, out, T(2), "decreasing and negative bounds");
}

// Fixed-size segments, rows and columns of a row-major matrix with a leading dimension, and the
// transform form (float squares into double sums: exact products).
TYPED_TEST(exact_segmented_device, fixed_size_segments_rows_columns_and_transforms) {
  using T = TypeParam;
  seeded s(3805);
  SCOPED_TRACE(s.trace());
  for (std::size_t size : {std::size_t(1), std::size_t(40), std::size_t(5000), std::size_t(70001)}) {
    const std::size_t segments = std::max<std::size_t>(3, 300000 / size);
    const auto v = any_finite<T>(size * segments, s.rng);
    const thrust::device_vector<T> dv(v.begin(), v.end());
    auto out = poisoned_device<T>(segments);
    tally::segmented_reduce(tally::device, dv.begin(), std::int64_t(segments), std::int64_t(size), out.begin(), T(0),
                            tally::exact_plus<T>{});
    TEST_CUDA(cudaDeviceSynchronize());
    std::vector<std::int64_t> begins, ends;
    for (std::size_t k = 0; k < segments; ++k) begins.push_back(std::int64_t(k * size)), ends.push_back(std::int64_t((k + 1) * size));
    expect_segments(v, begins, ends, out, T(0), "fixed size " + std::to_string(size));
  }
  for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1000, 70}, {7, 9000}, {20000, 3}}) {
    const std::int64_t ld = cols + 5;
    const auto v = any_finite<T>(std::size_t(rows * ld), s.rng);
    const thrust::device_vector<T> dv(v.begin(), v.end());
    auto by_row = poisoned_device<T>(std::size_t(rows));
    tally::reduce_rows(tally::device, dv.begin(), rows, cols, ld, by_row.begin(), T(0), tally::exact_plus<T>{});
    auto by_column = poisoned_device<T>(std::size_t(cols));
    tally::reduce_columns(tally::device, dv.begin(), rows, cols, ld, by_column.begin(), T(0), tally::exact_plus<T>{});
    std::vector<T> want_rows(rows), want_columns(cols), got_rows(rows), got_columns(cols);
    tally::reduce_rows(tally::host, v.begin(), rows, cols, ld, want_rows.begin(), T(0), tally::exact_plus<T>{});
    tally::reduce_columns(tally::host, v.begin(), rows, cols, ld, want_columns.begin(), T(0), tally::exact_plus<T>{});
    thrust::copy(by_row.begin(), by_row.end(), got_rows.begin());
    thrust::copy(by_column.begin(), by_column.end(), got_columns.begin());
    for (std::int64_t r = 0; r < rows; ++r) ASSERT_EQ(bits_of(got_rows[r]), bits_of(want_rows[r])) << "row " << r;
    for (std::int64_t c = 0; c < cols; ++c) ASSERT_EQ(bits_of(got_columns[c]), bits_of(want_columns[c])) << "column " << c;
  }
}

struct widen_square {
  __host__ __device__ double operator()(float x) const { return double(x) * double(x); }
};

TEST(exact_segmented_device_forms, a_transform_of_float_squares_into_double_sums) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  seeded s(3806);
  SCOPED_TRACE(s.trace());
  const std::vector<std::size_t> sizes = {0, 3, 33, 4097, 20000, 1, 9000};
  const auto v = any_finite<float>(total_of(sizes), s.rng);
  std::vector<std::int64_t> offsets{0};
  for (std::size_t size : sizes) offsets.push_back(offsets.back() + std::int64_t(size));
  const thrust::device_vector<float> dv(v.begin(), v.end());
  const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
  auto out = poisoned_device<double>(sizes.size());
  tally::transform_segmented_reduce(tally::device, dv.begin(), d_offsets.begin(), d_offsets.end(), out.begin(),
                                    widen_square{}, 0.0, tally::exact_plus<double>{});
  std::vector<double> want(sizes.size()), got(sizes.size());
  tally::transform_segmented_reduce(tally::host, v.begin(), offsets.begin(), offsets.end(), want.begin(),
                                    widen_square{}, 0.0, tally::exact_plus<double>{});
  thrust::copy(out.begin(), out.end(), got.begin());
  for (std::size_t k = 0; k < sizes.size(); ++k) EXPECT_EQ(bits_of(got[k]), bits_of(want[k])) << "segment " << k;
}

// Runs of equal keys: short runs, runs around the routes' edges and runs of a few hundred
// thousand; keys, values and the run count as the host's.
TYPED_TEST(exact_segmented_device, reduce_by_key_sums_each_run_exactly) {
  using T = TypeParam;
  namespace d = tally::detail;
  seeded s(3807);
  SCOPED_TRACE(s.trace());
  std::vector<std::size_t> runs = {1, 2, d::exact_lane_segment_max + 1, d::exact_warp_segment_max + 1,
                                   d::exact_warp_segment_max + 2, 3 * d::exact_piece_elements<T> + 2, 300000};
  std::uniform_int_distribution<std::size_t> small(1, 60);
  for (int k = 0; k < 3000; ++k) runs.push_back(small(s.rng));
  std::shuffle(runs.begin(), runs.end(), s.rng);
  std::vector<int> keys;
  for (std::size_t r = 0; r < runs.size(); ++r) keys.insert(keys.end(), runs[r], int(r % 7));  // neighbours differ
  const auto v = any_finite<T>(keys.size(), s.rng);
  const thrust::device_vector<int> dk(keys.begin(), keys.end());
  const thrust::device_vector<T> dv(v.begin(), v.end());
  thrust::device_vector<int> keys_out(keys.size(), -1);
  auto values_out = poisoned_device<T>(keys.size());
  const auto ends = tally::reduce_by_key(tally::device, dk.begin(), dk.end(), dv.begin(), keys_out.begin(),
                                         values_out.begin(), thrust::equal_to<int>{}, tally::exact_plus<T>{});
  std::vector<int> want_keys(keys.size());
  std::vector<T> want_values(keys.size());
  const auto want_ends = tally::reduce_by_key(tally::host, keys.begin(), keys.end(), v.begin(), want_keys.begin(),
                                              want_values.begin(), thrust::equal_to<int>{}, tally::exact_plus<T>{});
  const std::size_t count = std::size_t(ends.second - values_out.begin());
  ASSERT_EQ(count, runs.size());
  ASSERT_EQ(count, std::size_t(want_ends.second - want_values.begin()));
  std::vector<T> got(count);
  thrust::copy(values_out.begin(), values_out.begin() + count, got.begin());
  for (std::size_t r = 0; r < count; ++r)
    ASSERT_EQ(bits_of(got[r]), bits_of(want_values[r])) << "run " << r << " of " << runs[r] << " values";
  // The asynchronous form, its count in device memory.
  thrust::device_vector<unsigned long long> run_count(1, 0);
  values_out = poisoned_device<T>(keys.size());
  tally::reduce_by_key_into(tally::device, dk.begin(), dk.end(), dv.begin(), keys_out.begin(), values_out.begin(),
                            run_count.begin(), thrust::equal_to<int>{}, tally::exact_plus<T>{});
  TEST_CUDA(cudaDeviceSynchronize());
  ASSERT_EQ(std::size_t(run_count[0]), count);
  thrust::copy(values_out.begin(), values_out.begin() + count, got.begin());
  for (std::size_t r = 0; r < count; ++r) ASSERT_EQ(bits_of(got[r]), bits_of(want_values[r])) << "run " << r << " (into)";
}

// Exact x/y/z sums per segment (tally::fields of exact_plus): over a zip of device arrays in the
// offsets form, and over the rows of an array of float3 in the fixed-size form; each
// segment's fields with the host's bits, the other fields of out left as each pass wrote them.
TEST(exact_segmented_device_forms, exact_sums_of_fields_per_segment) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  seeded s(3811);
  SCOPED_TRACE(s.trace());
  const std::vector<std::size_t> sizes = {0, 1, 5, 64, 65, 4097, 30000, 3, 100};
  std::vector<std::int64_t> offsets{0};
  for (std::size_t size : sizes) offsets.push_back(offsets.back() + std::int64_t(size));
  const std::size_t n = std::size_t(offsets.back());
  const auto x = any_finite<float>(n, s.rng), y = any_finite<float>(n, s.rng), z = any_finite<float>(n, s.rng);
  using xyz = cuda::std::tuple<float, float, float>;
  const auto exact3 = tally::fields(tally::exact_plus<float>{}, tally::exact_plus<float>{}, tally::exact_plus<float>{});
  const xyz init(0.5f, -0.0f, 2.0f);
  std::vector<xyz> want(sizes.size());
  const auto host_points = tally::zip(x.begin(), y.begin(), z.begin());
  tally::segmented_reduce(tally::host, host_points, offsets.begin(), offsets.end(), want.begin(), init, exact3);
  const thrust::device_vector<float> dx(x.begin(), x.end()), dy(y.begin(), y.end()), dz(z.begin(), z.end());
  const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
  thrust::device_vector<xyz> out(sizes.size());
  TEST_CUDA(cudaMemset(thrust::raw_pointer_cast(out.data()), 0xA5, sizes.size() * sizeof(xyz)));
  const auto points = tally::zip(dx.begin(), dy.begin(), dz.begin());
  tally::segmented_reduce(tally::device, points, d_offsets.begin(), d_offsets.end(), out.begin(), init, exact3);
  TEST_CUDA(cudaDeviceSynchronize());
  std::vector<xyz> got(sizes.size());
  thrust::copy(out.begin(), out.end(), got.begin());
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    EXPECT_EQ(bits_of(cuda::std::get<0>(got[k])), bits_of(cuda::std::get<0>(want[k]))) << "segment " << k << ": x";
    EXPECT_EQ(bits_of(cuda::std::get<1>(got[k])), bits_of(cuda::std::get<1>(want[k]))) << "segment " << k << ": y";
    EXPECT_EQ(bits_of(cuda::std::get<2>(got[k])), bits_of(cuda::std::get<2>(want[k]))) << "segment " << k << ": z";
    EXPECT_EQ(bits_of(cuda::std::get<0>(got[k])),
              bits_of(host_exact(x.data() + offsets[k], sizes[k], 0.5f))) << "segment " << k << ": x alone";
  }
  // Rows of an array of float3.
  const std::size_t rows = 700, cols = 70;
  std::vector<float3> aos(rows * cols);
  for (std::size_t i = 0; i < aos.size(); ++i) aos[i] = float3{x[i % n], y[(i * 7) % n], z[(i * 13) % n]};
  const thrust::device_vector<float3> daos(aos.begin(), aos.end());
  thrust::device_vector<float3> row_sums(rows);
  TEST_CUDA(cudaMemset(thrust::raw_pointer_cast(row_sums.data()), 0xA5, rows * sizeof(float3)));
  tally::segmented_reduce(tally::device, daos.begin(), std::int64_t(rows), std::int64_t(cols), row_sums.begin(),
                          float3{0.0f, 1.0f, -0.0f}, exact3);
  std::vector<float3> want_rows(rows), got_rows(rows);
  tally::segmented_reduce(tally::host, aos.begin(), std::int64_t(rows), std::int64_t(cols), want_rows.begin(),
                          float3{0.0f, 1.0f, -0.0f}, exact3);
  thrust::copy(row_sums.begin(), row_sums.end(), got_rows.begin());
  for (std::size_t r = 0; r < rows; ++r) {
    ASSERT_EQ(bits_of(got_rows[r].x), bits_of(want_rows[r].x)) << "row " << r;
    ASSERT_EQ(bits_of(got_rows[r].y), bits_of(want_rows[r].y)) << "row " << r;
    ASSERT_EQ(bits_of(got_rows[r].z), bits_of(want_rows[r].z)) << "row " << r;
  }
}

// Exact x/y sums per key run (tally::fields of exact_plus through reduce_by_key): a zip of device
// arrays, runs at every route's edges; keys, count and every field as the host's.
TEST(exact_segmented_device_forms, exact_sums_of_fields_per_key_run) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  seeded s(3812);
  SCOPED_TRACE(s.trace());
  std::vector<std::size_t> runs = {1, 2, 3, 65, 66, 4097, 4098, 20000};
  std::uniform_int_distribution<std::size_t> small(1, 40);
  for (int k = 0; k < 500; ++k) runs.push_back(small(s.rng));
  std::shuffle(runs.begin(), runs.end(), s.rng);
  std::vector<int> keys;
  for (std::size_t r = 0; r < runs.size(); ++r) keys.insert(keys.end(), runs[r], int(r % 5));
  const std::size_t n = keys.size();
  const auto x = any_finite<float>(n, s.rng), y = any_finite<float>(n, s.rng);
  const auto exact2 = tally::fields(tally::exact_plus<float>{}, tally::exact_plus<float>{});
  const auto host_values = tally::zip(x.begin(), y.begin());
  using V = typename std::iterator_traits<decltype(host_values)>::value_type;
  std::vector<int> want_keys(n);
  std::vector<V> want(n);
  const auto want_ends = tally::reduce_by_key(tally::host, keys.begin(), keys.end(), host_values, want_keys.begin(),
                                              want.begin(), thrust::equal_to<int>{}, exact2);
  const thrust::device_vector<int> dk(keys.begin(), keys.end());
  const thrust::device_vector<float> dx(x.begin(), x.end()), dy(y.begin(), y.end());
  thrust::device_vector<int> keys_out(n);
  thrust::device_vector<V> values_out(n);
  TEST_CUDA(cudaMemset(thrust::raw_pointer_cast(values_out.data()), 0xA5, n * sizeof(V)));
  const auto ends = tally::reduce_by_key(tally::device, dk.begin(), dk.end(), tally::zip(dx.begin(), dy.begin()),
                                         keys_out.begin(), values_out.begin(), thrust::equal_to<int>{}, exact2);
  const std::size_t count = std::size_t(ends.second - values_out.begin());
  ASSERT_EQ(count, runs.size());
  ASSERT_EQ(count, std::size_t(want_ends.second - want.begin()));
  std::vector<V> got(count);
  thrust::copy(values_out.begin(), values_out.begin() + count, got.begin());
  std::vector<int> got_keys(count);
  thrust::copy(keys_out.begin(), keys_out.begin() + count, got_keys.begin());
  for (std::size_t r = 0; r < count; ++r) {
    ASSERT_EQ(got_keys[r], want_keys[r]) << "run " << r;
    ASSERT_EQ(bits_of(cuda::std::get<0>(got[r])), bits_of(cuda::std::get<0>(want[r]))) << "run " << r << ": x";
    ASSERT_EQ(bits_of(cuda::std::get<1>(got[r])), bits_of(cuda::std::get<1>(want[r]))) << "run " << r << ": y";
  }
}

// A captured call replayed on other streams, after the input changed, and the control-block words
// the launches use left zero for the next call.
TEST(exact_segmented_device_forms, captured_and_replayed_on_other_streams_leaving_the_control_block_zero) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  seeded s(3808);
  SCOPED_TRACE(s.trace());
  const std::vector<std::size_t> sizes = {5, 0, 70000, 4097, 33, 200000, 1};
  std::vector<std::int64_t> offsets{0};
  for (std::size_t size : sizes) offsets.push_back(offsets.back() + std::int64_t(size));
  auto v = any_finite<double>(std::size_t(offsets.back()), s.rng);
  thrust::device_vector<double> dv(v.begin(), v.end());
  const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
  auto out = poisoned_device<double>(sizes.size());
  const std::vector<std::int64_t> begins(offsets.begin(), offsets.end() - 1), ends(offsets.begin() + 1, offsets.end());
  cudaStream_t capturing, other;
  TEST_CUDA(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking));
  TEST_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  TEST_CUDA(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeThreadLocal));
  tally::segmented_reduce(tally::device.on(capturing), dv.begin(), d_offsets.begin(), d_offsets.end(), out.begin(),
                          0.5, tally::exact_plus<double>{});
  TEST_CUDA(cudaStreamEndCapture(capturing, &graph));
  TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  TEST_CUDA(cudaStreamDestroy(capturing));
  for (int replay = 0; replay < 2; ++replay) {
    v = any_finite<double>(v.size(), s.rng);
    thrust::copy(v.begin(), v.end(), dv.begin());
    TEST_CUDA(cudaDeviceSynchronize());
    TEST_CUDA(cudaGraphLaunch(exec, other));
    TEST_CUDA(cudaStreamSynchronize(other));
    expect_segments(v, begins, ends, out, 0.5, "replay " + std::to_string(replay));
  }
  // A direct call on the other stream, then its control block.
  tally::segmented_reduce(tally::device.on(other), dv.begin(), d_offsets.begin(), d_offsets.end(), out.begin(), 0.5,
                          tally::exact_plus<double>{});
  TEST_CUDA(cudaStreamSynchronize(other));
  expect_segments(v, begins, ends, out, 0.5, "direct");
  int device = 0;
  TEST_CUDA(cudaGetDevice(&device));
  namespace word = tally::detail::control_word;
  for (int w : {word::exact_blocks_done, int(word::long_segments_byte / 4), int(word::long_segments_byte / 4) + 1})
    EXPECT_EQ(tally::detail::stream_control_word(device, other, w), 0u) << "control word " << w;
  TEST_CUDA(cudaGraphExecDestroy(exec));
  TEST_CUDA(cudaGraphDestroy(graph));
  TEST_CUDA(cudaStreamDestroy(other));
}

// Host threads at once, each on its own stream, and all on one.
TEST(exact_segmented_device_forms, concurrent_calls_from_host_threads) {
  if (!tally_test::gpu_available()) GTEST_SKIP() << "no GPU";
  seeded s(3809);
  SCOPED_TRACE(s.trace());
  const std::vector<std::size_t> sizes = {3000, 9000, 1, 0, 40, 100000};
  std::vector<std::int64_t> offsets{0};
  for (std::size_t size : sizes) offsets.push_back(offsets.back() + std::int64_t(size));
  const auto v = any_finite<float>(std::size_t(offsets.back()), s.rng);
  const thrust::device_vector<float> dv(v.begin(), v.end());
  const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
  std::vector<float> want(sizes.size());
  for (std::size_t k = 0; k < sizes.size(); ++k) want[k] = host_exact(v.data() + offsets[k], sizes[k], 1.0f);
  cudaStream_t shared;
  TEST_CUDA(cudaStreamCreateWithFlags(&shared, cudaStreamNonBlocking));
  for (bool one_stream : {false, true}) {
    constexpr int threads = 6;
    std::vector<std::vector<float>> got(threads);
    std::vector<std::string> errors(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        try {
          cudaStream_t stream = shared;
          if (!one_stream) TEST_CUDA_THROW(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
          thrust::device_vector<float> out(sizes.size());
          for (int call = 0; call < 5; ++call)
            tally::segmented_reduce(tally::device.on(stream), dv.begin(), d_offsets.begin(), d_offsets.end(),
                                    out.begin(), 1.0f, tally::exact_plus<float>{});
          TEST_CUDA_THROW(cudaStreamSynchronize(stream));
          got[t].resize(sizes.size());
          thrust::copy(out.begin(), out.end(), got[t].begin());
          if (!one_stream) TEST_CUDA_THROW(cudaStreamDestroy(stream));
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    }
    for (auto& w : workers) w.join();
    for (int t = 0; t < threads; ++t) {
      ASSERT_EQ(errors[t], "") << "thread " << t;
      for (std::size_t k = 0; k < sizes.size(); ++k)
        EXPECT_EQ(bits_of(got[t][k]), bits_of(want[k])) << "thread " << t << ", segment " << k << ", one stream " << one_stream;
    }
  }
  TEST_CUDA(cudaStreamDestroy(shared));
}

}  // namespace
