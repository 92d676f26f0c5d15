// Special values in float, double, __half and __nv_bfloat16 inputs: NaN, signed zeros,
// infinities, subnormals and the type's extremes, on the host backend and the device.
//
// What IEEE 754 fixes whatever the order of the additions is checked against references that
// share nothing with tally: a sum of subnormals and zeros is exact (every partial sum is a
// multiple of the smallest subnormal below 2^24 of them), so it equals its integer shadow; a
// NaN anywhere, or +inf beside -inf, gives NaN; an infinity with only finite values beside it
// gives that infinity; two of the largest finite values of one sign and nothing of the other
// overflow to the infinity of that sign; zeros that are all -0 sum to -0, and any +0 among
// them gives +0. What depends on the order (where a NaN ends up under minimum, which of two
// equal zeros a minimum keeps) is the plan's, so there the device must give the host
// backend's bits. A sum's NaN is compared as a NaN only: the GPU's adder returns its one
// canonical NaN where the host's keeps an operand's payload (docs/determinism.md).
#include "support/narrow_floats.cuh"
#include "support/test_support.cuh"
#include "tally/reduce.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using tally_test::bits_of;
using tally_test::from_double;
using tally_test::to_double;
using tally_test::seeded;

// Sizes of one tile (up to a step; 1000 ends on a whole 16-byte chunk of a partial step), of
// the tile pair (16383 floats), of a few tiles and, on the device, of many. (The host backend
// follows the same plan at every size; scripts/test runs the host cases under valgrind, where
// a million elements per case would cost minutes.)
std::vector<std::size_t> special_sizes(bool many_tiles = false) {
  std::vector<std::size_t> sizes{1, 2, 7, 33, 1000, 4096 + 3, 16383, 16384 + 1, 65536 + 3};
  if (many_tiles) sizes.push_back((std::size_t(1) << 20) + 7);
  return sizes;
}

// The value's float image (the accumulator of narrow inputs), exactly.
// V's largest finite value. (std::numeric_limits is not specialized for the narrow types.)
template <class V>
double largest_finite() {
  if constexpr (std::is_same_v<V, __half>) return 65504.0;
  if constexpr (std::is_same_v<V, __nv_bfloat16>) return std::ldexp(255.0 / 128.0, 127);
  return double(std::numeric_limits<V>::max());
}

// Values V and their accumulator: narrow floats sum in float (docs/types.md).
template <class V>
using accumulator_of = std::conditional_t<std::is_same_v<V, __half> || std::is_same_v<V, __nv_bfloat16>, float, V>;

// log2 of V's smallest subnormal, and the most significant bits below which a sum of its
// multiples stays exact in the accumulator (its significand).
template <class V>
constexpr int smallest_subnormal_log2() {
  if constexpr (std::is_same_v<V, __half>) return -24;
  if constexpr (std::is_same_v<V, __nv_bfloat16>) return -133;
  if constexpr (std::is_same_v<V, float>) return -149;
  return -1074;
}
// The largest multiplier k a value k * 2^smallest may take in a case of n values: it stays
// one of V's subnormals (bf16 keeps 7 bits of significand, half 10, float 23, double 52), and
// n + 1 of them sum to less than 2^24 in magnitude, so that every partial sum, in any order,
// is exact in float (the accumulator of narrow inputs) and in double.
template <class V>
long long largest_subnormal_multiple(std::size_t n) {
  const long long by_type = std::is_same_v<V, __nv_bfloat16> ? 127 : 1023;
  const long long by_size = static_cast<long long>(((1ull << 24) - 1) / (n + 1));
  return by_type < by_size ? by_type : by_size;
}

template <class V>
class special_values : public ::testing::Test {};
using special_value_types = ::testing::Types<float, double, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(special_values, special_value_types);


// Subnormal multiples of V's smallest subnormal and signed zeros (one in eight), with their
// integer shadow: the exact sum, as a multiple, of init and every value.
template <class V>
struct subnormal_case {
  std::vector<V> values;
  V init;
  long long shadow = 0;
};

template <class V>
subnormal_case<V> make_subnormal_case(std::size_t n, std::mt19937_64& rng) {
  const long long k_max = largest_subnormal_multiple<V>(n);
  std::uniform_int_distribution<long long> multiple(-k_max, k_max);
  std::uniform_int_distribution<int> one_in_eight(0, 7);
  const double unit = std::ldexp(1.0, smallest_subnormal_log2<V>());
  subnormal_case<V> c;
  c.values.resize(n);
  for (auto& x : c.values) {
    const long long k = one_in_eight(rng) == 0 ? 0 : multiple(rng);
    x = k == 0 ? from_double<V>(one_in_eight(rng) < 4 ? -0.0 : 0.0) : from_double<V>(double(k) * unit);
    c.shadow += k;
  }
  // init is never 0, so that a sum that drops it or adds it twice differs, and the exact sum
  // is never 0, which could not tell a sum from nothing.
  long long k0 = std::uniform_int_distribution<long long>(1, k_max)(rng) * (one_in_eight(rng) < 4 ? -1 : 1);
  if (c.shadow + k0 == 0) k0 = -k0;
  c.init = from_double<V>(double(k0) * unit);
  c.shadow += k0;
  return c;
}

// The exact sum of a subnormal case, in the accumulator.
template <class V>
accumulator_of<V> exact_sum(const subnormal_case<V>& c) {
  return static_cast<accumulator_of<V>>(std::ldexp(double(c.shadow), smallest_subnormal_log2<V>()));
}

template <class V, bool OnDevice>
void expect_subnormal_case_exact(std::size_t n, std::uint64_t salt) {
  using Acc = accumulator_of<V>;
  seeded s(salt + n);
  SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
  const auto c = make_subnormal_case<V>(n, s.rng);
  const Acc init = static_cast<Acc>(to_double(c.init));
  const Acc want = exact_sum(c);
  ASSERT_NE(want, Acc(0));
  const Acc host = tally::reduce(tally::host, c.values.begin(), c.values.end(), init);
  EXPECT_EQ(host, want) << "host";
  if constexpr (OnDevice) {
    for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {
      tally_test::device_buffer<V> d(c.values, offset);
      const Acc device = tally::reduce(tally::device, d.begin(), d.end(), init);
      EXPECT_EQ(device, want) << "device, " << offset << " elements past an aligned start";
      EXPECT_EQ(bits_of(device), bits_of(host)) << "device, " << offset << " elements past an aligned start";
    }
  }
}

TYPED_TEST(special_values, subnormal_sums_equal_their_integer_shadow) {
  for (std::size_t n : special_sizes()) expect_subnormal_case_exact<TypeParam, false>(n, 7100);
}

// What a sum of V's with planted special values must be, by IEEE 754 and in any order.
enum class planted { one_nan, negative_nan, plus_infinity, minus_infinity, both_infinities, overflow_up, overflow_down };

const char* name_of(planted p) {
  constexpr const char* names[] = {"a NaN",          "a negative NaN with a payload",  "+inf", "-inf",
                                   "+inf and -inf", "two of the largest positive", "two of the lowest"};
  return names[int(p)];
}

// Finite values of mixed signs, with the planted values at the first, the last and random
// positions (a tile's first and last elements among them for the larger sizes).
template <class V>
std::vector<V> with_planted(std::size_t n, planted p, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-6, 6);
  std::vector<V> v(n);
  for (auto& x : v) x = from_double<V>(std::ldexp(mantissa(rng), exponent(rng)));
  const double inf = std::numeric_limits<double>::infinity();
  const double largest = largest_finite<V>();
  std::uniform_int_distribution<std::size_t> position(0, n - 1);
  const auto plant = [&](double x) { v[position(rng)] = from_double<V>(x); };
  switch (p) {
    case planted::one_nan: v[position(rng)] = from_double<V>(std::numeric_limits<double>::quiet_NaN()); break;
    case planted::negative_nan: {
      // A negative quiet NaN with payload bits set: the sign and payload must not matter.
      double x = -std::numeric_limits<double>::quiet_NaN();
      std::uint64_t bits;
      std::memcpy(&bits, &x, 8);
      bits |= 0x5a5a5ull;
      std::memcpy(&x, &bits, 8);
      v[n - 1] = from_double<V>(x);
      break;
    }
    case planted::plus_infinity: v[0] = from_double<V>(inf); plant(inf); break;
    case planted::minus_infinity: v[n - 1] = from_double<V>(-inf); break;
    case planted::both_infinities:  // n >= 2
      plant(inf);
      v[0] = from_double<V>(inf);
      v[n - 1] = from_double<V>(-inf);
      break;
    case planted::overflow_up:
    case planted::overflow_down: {
      // Every value of one sign: the two largest then overflow in any order of additions.
      const double sign = p == planted::overflow_up ? 1.0 : -1.0;
      for (auto& x : v) x = from_double<V>(sign * std::fabs(to_double(x)));
      v[0] = from_double<V>(sign * largest);
      v[n - 1] = from_double<V>(sign * largest);
      break;
    }
  }
  return v;
}

template <class V, bool OnDevice>
void expect_planted_sum(std::size_t n, planted p) {
  using Acc = accumulator_of<V>;
  if (n < 2 && (p == planted::both_infinities || p == planted::overflow_up || p == planted::overflow_down)) return;
  seeded s(8100 + n * 8 + std::size_t(p));
  SCOPED_TRACE("n = " + std::to_string(n) + ", " + name_of(p) + ", " + s.trace());
  const auto v = with_planted<V>(n, p, s.rng);
  // Twice the largest finite V overflows the accumulator unless it is wider: half's largest
  // is far inside float's range, so a half sum stays finite (and at least twice it).
  const bool overflows = 2 * largest_finite<V>() > double(std::numeric_limits<Acc>::max());
  const Acc init = Acc(p == planted::overflow_down ? -0.25 : 0.25);  // of the overflow's sign
  const Acc host = tally::reduce(tally::host, v.begin(), v.end(), init);
  const auto expect_ieee = [&](Acc got, const char* where) {
    switch (p) {
      case planted::one_nan:
      case planted::negative_nan:
      case planted::both_infinities: EXPECT_TRUE(std::isnan(double(got))) << where << ": " << got; break;
      case planted::plus_infinity: EXPECT_EQ(double(got), std::numeric_limits<double>::infinity()) << where; break;
      case planted::minus_infinity: EXPECT_EQ(double(got), -std::numeric_limits<double>::infinity()) << where; break;
      case planted::overflow_up:
        if (overflows) EXPECT_EQ(double(got), std::numeric_limits<double>::infinity()) << where;
        else EXPECT_GE(double(got), 2 * largest_finite<V>()) << where;
        break;
      case planted::overflow_down:
        if (overflows) EXPECT_EQ(double(got), -std::numeric_limits<double>::infinity()) << where;
        else EXPECT_LE(double(got), -2 * largest_finite<V>()) << where;
        break;
    }
  };
  expect_ieee(host, "host");
  if constexpr (OnDevice) {
    tally_test::device_buffer<V> d(v, n % 2);
    const Acc device = tally::reduce(tally::device, d.begin(), d.end(), init);
    expect_ieee(device, "device");
    if (!std::isnan(double(host))) EXPECT_EQ(bits_of(device), bits_of(host)) << "device against the host backend";
  }
}

constexpr planted every_planting[] = {planted::one_nan,         planted::negative_nan, planted::plus_infinity,
                                      planted::minus_infinity,  planted::both_infinities, planted::overflow_up,
                                      planted::overflow_down};

TYPED_TEST(special_values, nans_infinities_and_overflow_follow_ieee) {
  for (std::size_t n : special_sizes())
    for (planted p : every_planting) expect_planted_sum<TypeParam, false>(n, p);
}

// Zeros alone: -0 only when every zero, init included, is -0; +0 as soon as one is +0.
template <class V, bool OnDevice>
void expect_signed_zeros(std::size_t n) {
  using Acc = accumulator_of<V>;
  seeded s(9100 + n);
  SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
  std::vector<V> v(n, from_double<V>(-0.0));
  const Acc minus_zero = Acc(-0.0), plus_zero = Acc(0.0);
  const auto check = [&](const std::vector<V>& values, Acc init, Acc want, const char* what) {
    const Acc host = tally::reduce(tally::host, values.begin(), values.end(), init);
    EXPECT_EQ(bits_of(host), bits_of(want)) << what << ", host";
    if constexpr (OnDevice) {
      tally_test::device_buffer<V> d(values, n % 2);
      EXPECT_EQ(bits_of(tally::reduce(tally::device, d.begin(), d.end(), init)), bits_of(want)) << what << ", device";
    }
  };
  check(v, minus_zero, minus_zero, "every zero -0");
  check(v, plus_zero, plus_zero, "a +0 init");
  std::uniform_int_distribution<std::size_t> position(0, n - 1);
  v[position(s.rng)] = from_double<V>(0.0);
  check(v, minus_zero, plus_zero, "one +0 value");
}

TYPED_TEST(special_values, zeros_keep_their_ieee_sign) {
  for (std::size_t n : special_sizes()) expect_signed_zeros<TypeParam, false>(n);
}

// The sanitized host build (scripts/test) defines TALLY_TEST_HOST_ONLY and compiles no kernel tests.
#if !defined(TALLY_TEST_HOST_ONLY)

template <class V>
class special_values_on_device : public tally_test::device_test {};
TYPED_TEST_SUITE(special_values_on_device, special_value_types);

TYPED_TEST(special_values_on_device, subnormal_sums_equal_their_integer_shadow) {
  for (std::size_t n : special_sizes(!tally_test::under_sanitizer())) expect_subnormal_case_exact<TypeParam, true>(n, 7100);
}

TYPED_TEST(special_values_on_device, nans_infinities_and_overflow_follow_ieee) {
  for (std::size_t n : special_sizes(!tally_test::under_sanitizer()))
    for (planted p : every_planting) expect_planted_sum<TypeParam, true>(n, p);
}

TYPED_TEST(special_values_on_device, zeros_keep_their_ieee_sign) {
  for (std::size_t n : special_sizes(!tally_test::under_sanitizer())) expect_signed_zeros<TypeParam, true>(n);
}

// Minimum and maximum of float and double with every special value mixed in. Without NaNs
// the answer is fixed (the infinities, or the type's extremes); with NaNs it follows the
// plan's order of comparisons, so the device must give the host backend's bits.
template <class T>
std::vector<T> mixed_specials(std::size_t n, std::mt19937_64& rng, bool with_nans) {
  std::vector<T> v = tally_test::random_values<T>(n, rng);
  const T specials[] = {T(-0.0),
                        T(0.0),
                        std::numeric_limits<T>::denorm_min(),
                        -std::numeric_limits<T>::denorm_min(),
                        std::numeric_limits<T>::min(),
                        std::numeric_limits<T>::max(),
                        std::numeric_limits<T>::lowest(),
                        std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity(),
                        std::numeric_limits<T>::quiet_NaN()};
  const int kinds = with_nans ? 10 : 9;
  std::uniform_int_distribution<int> kind(0, kinds - 1);
  std::uniform_int_distribution<int> one_in(0, 15);
  for (auto& x : v)
    if (one_in(rng) == 0) x = specials[kind(rng)];
  return v;
}

template <class T>
class special_extrema : public tally_test::device_test {};
using float_types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(special_extrema, float_types);

TYPED_TEST(special_extrema, minimum_and_maximum_with_every_special_value) {
  using T = TypeParam;
  for (std::size_t n : special_sizes(!tally_test::under_sanitizer())) {
    for (bool with_nans : {false, true}) {
      seeded s(9700 + n * 2 + with_nans);
      SCOPED_TRACE("n = " + std::to_string(n) + (with_nans ? ", with NaNs, " : ", ") + s.trace());
      auto v = mixed_specials<T>(n, s.rng, with_nans);
      if (!with_nans && n >= 2) {
        v[0] = std::numeric_limits<T>::infinity();
        v[n - 1] = -std::numeric_limits<T>::infinity();
      }
      const T init = T(1);
      const T host_lo = tally::reduce(tally::host, v.begin(), v.end(), init, tally::minimum<T>{});
      const T host_hi = tally::reduce(tally::host, v.begin(), v.end(), init, tally::maximum<T>{});
      if (!with_nans && n >= 2) {
        EXPECT_EQ(host_lo, -std::numeric_limits<T>::infinity());
        EXPECT_EQ(host_hi, std::numeric_limits<T>::infinity());
      }
      tally_test::device_buffer<T> d(v, n % 2);
      EXPECT_EQ(bits_of(tally::reduce(tally::device, d.begin(), d.end(), init, tally::minimum<T>{})), bits_of(host_lo));
      EXPECT_EQ(bits_of(tally::reduce(tally::device, d.begin(), d.end(), init, tally::maximum<T>{})), bits_of(host_hi));
      // The sum with every special value: NaN with NaNs or both infinities present.
      const T host_sum = tally::reduce(tally::host, v.begin(), v.end(), init);
      const T device_sum = tally::reduce(tally::device, d.begin(), d.end(), init);
      EXPECT_EQ(std::isnan(device_sum), std::isnan(host_sum));
      if (!std::isnan(host_sum)) EXPECT_EQ(bits_of(device_sum), bits_of(host_sum));
      if (!with_nans && n >= 2) EXPECT_TRUE(std::isnan(host_sum)) << "+inf and -inf are both present";
    }
  }
}

#endif  // !TALLY_TEST_HOST_ONLY

}  // namespace
