// Exact sums on the host (issue 37): tally::exact_plus<T> and tally::exact_accumulator<T> against
// MPFR, an independent exact reference (each sum taken at enough precision to be exact, then
// rounded once to T by MPFR), bit for bit: random values over the whole exponent range,
// catastrophic cancellation, tiny values after a huge one, subnormals only, every special value;
// the same bits for every thread count, every split into pieces merged in any order, and
// permutations of the input; and through transform_reduce, inner_product and the segmented
// family.

#include "support/test_support.cuh"
#include "tally/exact.cuh"
#include "tally/fields.cuh"
#include "tally/matrix_reduce.cuh"
#include "tally/reduce_by_key.cuh"
#include "tally/segmented_reduce.cuh"
#include "tally/tally.cuh"

#include <gtest/gtest.h>
#include <mpfr.h>
#include <thrust/iterator/constant_iterator.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace tally_test;

// scripts/test also runs every test program under valgrind and the host tests under
// AddressSanitizer (unoptimized); the long cases shrink there.
bool under_valgrind() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#else
  const char* preload = std::getenv("LD_PRELOAD");
  return preload != nullptr && std::strstr(preload, "vgpreload") != nullptr;
#endif
}

// The exact sum of init and v, rounded once to T by MPFR.
template <class T>
T mpfr_sum(const std::vector<T>& v, T init) {
  mpfr_t sum, term;
  mpfr_init2(sum, 2400);  // 2098 bits span every double; the rest is room for the carries of 2^64 terms
  mpfr_init2(term, 64);
  mpfr_set_zero(sum, +1);
  bool first = true;
  const auto add = [&](T x) {
    if constexpr (std::is_same_v<T, float>) {
      mpfr_set_flt(term, x, MPFR_RNDN);
    } else {
      mpfr_set_d(term, x, MPFR_RNDN);
    }
    if (first) {
      mpfr_set(sum, term, MPFR_RNDN);  // keeps the sign of a first -0
      first = false;
    } else {
      mpfr_add(sum, sum, term, MPFR_RNDN);  // exact at this precision
    }
  };
  add(init);
  for (T x : v) add(x);
  T result;
  if constexpr (std::is_same_v<T, float>) {
    result = mpfr_get_flt(sum, MPFR_RNDN);
  } else {
    result = mpfr_get_d(sum, MPFR_RNDN);
  }
  mpfr_clear(sum);
  mpfr_clear(term);
  return result;
}

template <class T>
std::string describe(T x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.9g (bits %llx)", double(x), (unsigned long long)bits_of(x));
  return text;
}

template <class T>
::testing::AssertionResult same_bits(T got, T want) {
  if (std::isnan(got) && std::isnan(want)) return ::testing::AssertionSuccess();
  if (bits_of(got) == bits_of(want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << describe(got) << ", want " << describe(want);
}

template <class T>
T exact(const std::vector<T>& v, T init, unsigned threads = 0) {
  return tally::reduce(tally::host.threads(threads), v.begin(), v.end(), init, tally::exact_plus<T>{});
}

template <class T>
void check_against_mpfr(const std::vector<T>& v, T init, const char* what) {
  SCOPED_TRACE(what);
  const T want = mpfr_sum(v, init);
  ASSERT_TRUE(same_bits(exact(v, init, 1), want)) << "one thread";
  ASSERT_TRUE(same_bits(exact(v, init, 3), want)) << "three threads";
}

template <class T>
void random_inputs_over_the_whole_range(std::uint64_t salt) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : {0, 1, 2, 3, 17, 1000, 100000}) {
    const auto v = any_finite<T>(n, s.rng);
    check_against_mpfr(v, T(0), ("any finite values, n = " + std::to_string(n)).c_str());
  }
  // Values of one binade and of a narrow span of binades: sums that keep many bits.
  std::uniform_real_distribution<T> unit(-1, 1);
  std::vector<T> near(300000);
  for (auto& x : near) x = std::ldexp(unit(s.rng), int(s.rng() % 40) - 20);
  check_against_mpfr(near, T(0.5), "values within 2^-20 .. 2^20");
}

TEST(exact_host, random_float_inputs_over_the_whole_exponent_range) { random_inputs_over_the_whole_range<float>(1); }
TEST(exact_host, random_double_inputs_over_the_whole_exponent_range) { random_inputs_over_the_whole_range<double>(2); }

// The device's last block rounds only the window of nonzero digits (round_exact_sum's first and
// end), and its threads keep balanced digits (balance_exact_digits, each in [-2^31, 2^31)). Both
// must give MPFR's bits: sums of every sign, cancellations to 0 and to subnormals, and windows
// from one digit to all of them, the integer first balanced or left as the additions made it.
template <class T>
void windowed_rounding_and_balanced_digits(std::uint64_t salt) {
  using access = tally::detail::exact_accumulator_access<T>;
  constexpr int count = tally::detail::exact_format<T>::digits;
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  std::uniform_real_distribution<T> unit(-1, 1);
  std::vector<std::vector<T>> inputs;
  for (std::size_t n : {1, 2, 5, 100, 5000}) inputs.push_back(any_finite<T>(n, s.rng));
  for (int binades : {1, 4, 40}) {
    std::vector<T> near(3000);
    for (auto& x : near) x = std::ldexp(unit(s.rng), int(s.rng() % binades) - binades / 2);
    inputs.push_back(near);
  }
  // Ties, where a stray bit below the window would decide the rounding.
  const T half_ulp = std::numeric_limits<T>::epsilon() / 2;
  inputs.push_back({T(1), half_ulp});                                                // down to even
  inputs.push_back({T(1) + 2 * half_ulp, half_ulp});                                 // up to even
  inputs.push_back({T(-1), -half_ulp, std::ldexp(T(1), 70), -std::ldexp(T(1), 70)});  // down, negative
  std::vector<T> cancel = any_finite<T>(200, s.rng);
  for (std::size_t k = 0, size = cancel.size(); k < size; ++k) cancel.push_back(-cancel[k]);
  inputs.push_back(cancel);  // exactly 0
  cancel.push_back(std::numeric_limits<T>::denorm_min() * T(3));
  inputs.push_back(cancel);  // a subnormal
  cancel.push_back(-std::numeric_limits<T>::max());
  inputs.push_back(cancel);  // the largest negative value
  for (const auto& v : inputs) {
    tally::exact_accumulator<T> acc;
    for (T x : v) acc.add(x);
    const T want = mpfr_sum(v, T(0));
    ASSERT_TRUE(same_bits(acc.value(), want)) << "n = " << v.size();
    for (bool balanced : {false, true}) {
      std::int64_t d[count];
      std::copy(access::digits(acc), access::digits(acc) + count, d);
      if (balanced) tally::detail::balance_exact_digits(d, count);
      int lowest = count, highest = -1;
      for (int k = 0; k < count; ++k)
        if (d[k] != 0) lowest = std::min(lowest, k), highest = std::max(highest, k);
      tally::detail::exact_specials specials;
      specials.only_negative_zeros = false;
      const int end = std::min(highest + 3, count);
      // Outside the window the digits are garbage: round_exact_sum must not read them.
      std::int64_t window[count];
      for (int k = 0; k < count; ++k) window[k] = k >= lowest && k < end ? d[k] : std::int64_t(0x5A5A5A5A5A5A5A5A);
      ASSERT_TRUE(same_bits(tally::detail::round_exact_sum<T>(window, specials, lowest, end), want))
          << "n = " << v.size() << (balanced ? ", balanced" : "") << ", digits " << lowest << " to " << end;
      std::copy(d, d + count, window);
      ASSERT_TRUE(same_bits(tally::detail::round_exact_sum<T>(window, specials), want))
          << "n = " << v.size() << (balanced ? ", balanced" : "") << ", every digit";
    }
  }
}

TEST(exact_host, windowed_rounding_and_balanced_digits_float) { windowed_rounding_and_balanced_digits<float>(12); }
TEST(exact_host, windowed_rounding_and_balanced_digits_double) { windowed_rounding_and_balanced_digits<double>(13); }

// x and -x in pairs, shuffled, around a few small values: the sum is the small values' sum.
template <class T>
void cancellation(std::uint64_t salt) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  auto v = any_finite<T>(20000, s.rng);
  const std::size_t pairs = v.size();
  for (std::size_t i = 0; i < pairs; ++i) v.push_back(-v[i]);
  const std::vector<T> small{T(1), T(3e-5), T(-7.25)};
  v.insert(v.end(), small.begin(), small.end());
  std::shuffle(v.begin(), v.end(), s.rng);
  const T want = mpfr_sum(small, T(0));
  EXPECT_TRUE(same_bits(exact(v, T(0), 1), want));
  EXPECT_TRUE(same_bits(exact(v, T(0), 4), want));
  EXPECT_TRUE(same_bits(mpfr_sum(v, T(0)), want)) << "the reference itself";
}

TEST(exact_host, catastrophic_cancellation_float) { cancellation<float>(3); }
TEST(exact_host, catastrophic_cancellation_double) { cancellation<double>(4); }

TEST(exact_host, the_textbook_cases) {
  EXPECT_EQ(exact(std::vector<double>{1e308, 1.0, -1e308}, 0.0), 1.0);
  EXPECT_EQ(exact(std::vector<float>{1e30f, 1.0f, -1e30f}, 0.0f), 1.0f);
  EXPECT_EQ(exact(std::vector<double>{0.1, 0.2, -0.3}, 0.0), mpfr_sum(std::vector<double>{0.1, 0.2, -0.3}, 0.0));
  // A long run of tiny values after a huge one, which a float sum would lose entirely.
  std::vector<float> v{1e20f};
  v.insert(v.end(), 100000, 1e-3f);
  v.push_back(-1e20f);
  EXPECT_TRUE(same_bits(exact(v, 0.0f), mpfr_sum(v, 0.0f)));
  EXPECT_NEAR(double(exact(v, 0.0f)), 100.0, 0.01);
  // Ties to even: 2^24 + 1 in float is a tie between 2^24 and 2^24 + 2.
  EXPECT_EQ(exact(std::vector<float>{16777216.0f, 1.0f}, 0.0f), 16777216.0f);
  EXPECT_EQ(exact(std::vector<float>{16777216.0f, 1.0f, 1.0f, 1.0f}, 0.0f), 16777220.0f);
  EXPECT_EQ(exact(std::vector<float>{16777216.0f, 1.0f, 0x1p-100f}, 0.0f), 16777218.0f) << "just above the tie";
}

template <class T>
void subnormals_only(std::uint64_t salt) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  using bits_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  constexpr int fraction_bits = std::numeric_limits<T>::digits - 1;
  std::vector<T> v(50000);
  for (auto& x : v) {
    const bits_t bits = (static_cast<bits_t>(s.rng()) & ((bits_t(1) << fraction_bits) - 1)) |
                        (s.rng() % 2 ? bits_t(1) << (sizeof(T) * 8 - 1) : 0);
    std::memcpy(&x, &bits, sizeof x);
  }
  check_against_mpfr(v, T(0), "subnormals");
  const std::vector<T> few{std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::denorm_min()};
  EXPECT_EQ(exact(few, T(0)), 2 * std::numeric_limits<T>::denorm_min());
}

TEST(exact_host, subnormals_only_float) { subnormals_only<float>(5); }
TEST(exact_host, subnormals_only_double) { subnormals_only<double>(6); }

template <class T>
void special_values() {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const T big = std::numeric_limits<T>::max();
  EXPECT_TRUE(std::isnan(exact(std::vector<T>{1, nan, 2}, T(0))));
  EXPECT_TRUE(std::isnan(exact(std::vector<T>{1, 2}, nan))) << "a NaN init";
  EXPECT_TRUE(std::isnan(exact(std::vector<T>{inf, 1, -inf}, T(0))));
  EXPECT_EQ(exact(std::vector<T>{inf, 1, inf}, T(0)), inf);
  EXPECT_EQ(exact(std::vector<T>{-inf, big}, T(0)), -inf);
  EXPECT_EQ(exact(std::vector<T>{big, big}, T(0)), inf) << "an exact sum beyond the range rounds to infinity";
  EXPECT_EQ(exact(std::vector<T>{-big, -big}, T(0)), -inf);
  EXPECT_EQ(exact(std::vector<T>{big, big, -big}, T(0)), big) << "no overflow on the way";
  EXPECT_TRUE(same_bits(exact(std::vector<T>{-T(0), -T(0)}, -T(0)), -T(0))) << "only -0: -0";
  EXPECT_TRUE(same_bits(exact(std::vector<T>{-T(0), T(0)}, -T(0)), T(0))) << "+0 among them: +0";
  EXPECT_TRUE(same_bits(exact(std::vector<T>{T(1), T(-1)}, -T(0)), T(0))) << "an exact 0: +0";
  EXPECT_TRUE(same_bits(exact(std::vector<T>{}, -T(0)), -T(0))) << "no values: init";
  // The largest finite value plus half an ulp ties to even, upwards, into infinity; less stays.
  const T half_ulp = std::ldexp(T(1), std::numeric_limits<T>::max_exponent - std::numeric_limits<T>::digits - 1);
  EXPECT_EQ(exact(std::vector<T>{big, half_ulp}, T(0)), inf);
  EXPECT_EQ(exact(std::vector<T>{big, half_ulp, -std::numeric_limits<T>::denorm_min()}, T(0)), big);
  for (const auto& v : {std::vector<T>{big, half_ulp}, std::vector<T>{big, big, -big}, std::vector<T>{-big, -big}})
    EXPECT_TRUE(same_bits(exact(v, T(0)), mpfr_sum(v, T(0))));
  // Special values met in different pieces, merged.
  const auto merged = [](T x, T y) {
    tally::exact_accumulator<T> a, b;
    a.add(x);
    b.add(y);
    a.merge(b);
    return a.value();
  };
  EXPECT_TRUE(std::isnan(merged(inf, -inf)));
  EXPECT_TRUE(std::isnan(merged(T(1), nan)));
  EXPECT_EQ(merged(T(1), -inf), -inf);
  EXPECT_EQ(merged(inf, T(1)), inf);
  EXPECT_TRUE(same_bits(merged(-T(0), -T(0)), -T(0)));
  EXPECT_TRUE(same_bits(merged(-T(0), T(0)), T(0)));
  // And across threads: the specials in the last thread's piece.
  std::vector<T> many(1 << 19, T(1));
  many.back() = -inf;
  EXPECT_EQ(exact(many, T(0), 4), -inf);
  many[many.size() / 2] = inf;
  EXPECT_TRUE(std::isnan(exact(many, T(0), 4)));
}

TEST(exact_host, special_values_float) { special_values<float>(); }
TEST(exact_host, special_values_double) { special_values<double>(); }

// The same bits for every split: threads, pieces merged in any order through reduce_into, and
// permutations of the input.
template <class T>
void independent_of_order_and_split(std::uint64_t salt) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  auto v = any_finite<T>(under_valgrind() ? 30000 : 300000, s.rng);
  const T init = T(-2.5);
  const T want = mpfr_sum(v, init);
  for (unsigned threads : {1u, 2u, 3u, 7u}) ASSERT_TRUE(same_bits(exact(v, init, threads), want)) << threads << " threads";
  for (std::size_t pieces : {1, 2, 3, 100}) {
    std::vector<std::size_t> cuts{0, v.size()};
    while (cuts.size() < pieces + 1) cuts.push_back(s.rng() % (v.size() + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<tally::exact_accumulator<T>> parts(pieces);
    for (std::size_t k = 0; k < pieces; ++k)
      tally::reduce_into(tally::host, v.begin() + std::ptrdiff_t(cuts[k]), v.begin() + std::ptrdiff_t(cuts[k + 1]),
                         &parts[k]);
    std::shuffle(parts.begin(), parts.end(), s.rng);
    tally::exact_accumulator<T> total;
    total.add(init);
    for (const auto& part : parts) total.merge(part);
    ASSERT_TRUE(same_bits(total.value(), want)) << pieces << " pieces";
  }
  std::shuffle(v.begin(), v.end(), s.rng);
  ASSERT_TRUE(same_bits(exact(v, init), want)) << "a permutation";
  std::reverse(v.begin(), v.end());
  ASSERT_TRUE(same_bits(exact(v, init), want)) << "reversed";
}

TEST(exact_host, independent_of_order_and_split_float) { independent_of_order_and_split<float>(7); }
TEST(exact_host, independent_of_order_and_split_double) { independent_of_order_and_split<double>(8); }

// N up to past 2^31 through an iterator: 2^31 + 1 ones sum to 2^31 + 1, which float rounds to
// 2^31 and double keeps.
TEST(exact_host, past_two_to_the_31_values) {
  const long long n = under_valgrind() ? (1ll << 20) + 1 : (1ll << 31) + 1;
  const auto ones = thrust::constant_iterator<float>(1.0f);
  const double want = double(n);
  EXPECT_EQ(tally::reduce(tally::host, ones, ones + n, 0.0f, tally::exact_plus<float>{}), float(want));
  EXPECT_EQ(tally::reduce(tally::host, ones, ones + n, 0.0, tally::exact_plus<double>{}), want);
}

// Through the algorithms that take an operator: transform_reduce, inner_product (the exact sum of
// the products rounded to T), segmented_reduce, reduce_by_key, reduce_rows and reduce_columns.
struct square {
  double operator()(double x) const { return x * x; }
};

TEST(exact_host, through_the_algorithms_that_take_an_operator) {
  seeded s(9);
  SCOPED_TRACE(s.trace());
  const auto v = any_finite<double>(4000, s.rng);
  std::vector<double> scaled(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) scaled[i] = std::ldexp(v[i], -std::max(0, std::ilogb(v[i]) / 2));
  std::vector<double> squares(scaled.size()), products(scaled.size());
  for (std::size_t i = 0; i < scaled.size(); ++i) {
    squares[i] = scaled[i] * scaled[i];
    products[i] = scaled[i] * v[i];
  }
  EXPECT_TRUE(same_bits(tally::transform_reduce(tally::host, scaled.begin(), scaled.end(), square{}, 0.0,
                                                tally::exact_plus<double>{}),
                        mpfr_sum(squares, 0.0)));
  EXPECT_TRUE(same_bits(tally::inner_product(tally::host, scaled.begin(), scaled.end(), v.begin(), 0.0,
                                             tally::exact_plus<double>{}, tally::multiplies<double>{}),
                        mpfr_sum(products, 0.0)));
  const std::vector<int> offsets{0, 0, 1, 7, 1000, 4000};
  std::vector<double> segments(offsets.size() - 1);
  tally::segmented_reduce(tally::host, v.begin(), offsets.begin(), offsets.end(), segments.begin(), 0.0,
                          tally::exact_plus<double>{});
  for (std::size_t k = 0; k + 1 < offsets.size(); ++k)
    EXPECT_TRUE(same_bits(segments[k], mpfr_sum(std::vector<double>(v.begin() + offsets[k], v.begin() + offsets[k + 1]),
                                                0.0)))
        << "segment " << k;
  std::vector<int> keys(v.size());
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = int(i / 1000);
  std::vector<int> keys_out(4);
  std::vector<double> by_key(4);
  tally::reduce_by_key(tally::host, keys.begin(), keys.end(), v.begin(), keys_out.begin(), by_key.begin(),
                       std::equal_to<>{}, tally::exact_plus<double>{});
  for (std::size_t r = 0; r < 4; ++r)
    EXPECT_TRUE(same_bits(by_key[r], mpfr_sum(std::vector<double>(v.begin() + std::ptrdiff_t(r * 1000) + 1,
                                                                  v.begin() + std::ptrdiff_t((r + 1) * 1000)),
                                              v[r * 1000])))
        << "run " << r;
  std::vector<double> columns(40);
  tally::reduce_columns(tally::host, v.begin(), 100, 40, 40, columns.begin(), 0.0, tally::exact_plus<double>{});
  for (std::size_t j = 0; j < 40; ++j) {
    std::vector<double> column;
    for (std::size_t i = 0; i < 100; ++i) column.push_back(v[i * 40 + j]);
    EXPECT_TRUE(same_bits(columns[j], mpfr_sum(column, 0.0))) << "column " << j;
  }
}

// Exact x/y/z sums in one pass: tally::fields of exact_plus over a zip of three arrays and over an
// array of float3; each field's sum is that field's exact sum.
TEST(exact_host, fields_of_exact_sums) {
  seeded s(11);
  SCOPED_TRACE(s.trace());
  const std::size_t n = under_valgrind() ? 20000 : 300000;
  const auto x = any_finite<float>(n, s.rng), y = any_finite<float>(n, s.rng);
  std::vector<float> z(n);
  std::uniform_real_distribution<float> unit(-1, 1);
  for (auto& v : z) v = unit(s.rng);
  const auto points = tally::zip(x.begin(), y.begin(), z.begin());
  using xyz = cuda::std::tuple<float, float, float>;
  const auto exact3 = tally::fields(tally::exact_plus<float>{}, tally::exact_plus<float>{}, tally::exact_plus<float>{});
  for (unsigned threads : {1u, 3u}) {
    const xyz sum = tally::reduce(tally::host.threads(threads), points, points + std::ptrdiff_t(n),
                                  xyz(0.0f, 0.0f, -0.5f), exact3);
    EXPECT_TRUE(same_bits(cuda::std::get<0>(sum), mpfr_sum(x, 0.0f))) << threads << " threads";
    EXPECT_TRUE(same_bits(cuda::std::get<1>(sum), mpfr_sum(y, 0.0f))) << threads << " threads";
    EXPECT_TRUE(same_bits(cuda::std::get<2>(sum), mpfr_sum(z, -0.5f))) << threads << " threads";
  }
  std::vector<float3> aos(n);
  for (std::size_t i = 0; i < n; ++i) aos[i] = float3{x[i], y[i], z[i]};
  const float3 sum3 = tally::reduce(tally::host, aos.begin(), aos.end(), float3{0, 0, 0}, exact3);
  EXPECT_TRUE(same_bits(sum3.x, mpfr_sum(x, 0.0f)));
  EXPECT_TRUE(same_bits(sum3.y, mpfr_sum(y, 0.0f)));
  EXPECT_TRUE(same_bits(sum3.z, mpfr_sum(z, 0.0f)));
  // Float fields into double sums.
  using wide = cuda::std::tuple<double, double>;
  const wide sum2 = tally::reduce(tally::host, tally::zip(x.begin(), z.begin()), tally::zip(x.end(), z.end()),
                                  wide(0.0, 0.0), tally::fields(tally::exact_plus<double>{}, tally::exact_plus<double>{}));
  EXPECT_TRUE(same_bits(cuda::std::get<0>(sum2), mpfr_sum(std::vector<double>(x.begin(), x.end()), 0.0)));
  EXPECT_TRUE(same_bits(cuda::std::get<1>(sum2), mpfr_sum(std::vector<double>(z.begin(), z.end()), 0.0)));
}

// Half and bf16 inputs into a float sum, float into a double sum: converted exactly first.
TEST(exact_host, narrower_inputs_convert_exactly) {
  seeded s(10);
  SCOPED_TRACE(s.trace());
  const auto floats = any_finite<float>(5000, s.rng);
  const std::vector<double> widened(floats.begin(), floats.end());
  EXPECT_TRUE(same_bits(tally::reduce(tally::host, floats.begin(), floats.end(), 0.0, tally::exact_plus<double>{}),
                        mpfr_sum(widened, 0.0)));
  std::vector<__half> halves;
  std::vector<float> half_values;
  for (int i = 0; i < 3000; ++i) {
    const float x = std::ldexp(float(int(s.rng() % 2048) - 1024), int(s.rng() % 30) - 24);
    halves.push_back(__float2half(x));
    half_values.push_back(__half2float(halves.back()));
  }
  EXPECT_TRUE(same_bits(tally::reduce(tally::host, halves.begin(), halves.end(), 0.0f, tally::exact_plus<float>{}),
                        mpfr_sum(half_values, 0.0f)));
}

}  // namespace
