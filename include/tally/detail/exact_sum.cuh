#pragma once
// Exact sums (issue 37): tally::exact_plus<T> and tally::exact_accumulator<T>, for T = float or
// double. The accumulator holds the real-number sum of everything added to it, exactly, as a
// fixed-point integer whose unit is T's smallest subnormal, so the order, grouping and split of
// the additions cannot change it; value() rounds it once, to nearest with ties to even.
//
// The integer is kept in base 2^32 digits stored in 64-bit words: an addition adds at most
// 2^32 - 1 to (or subtracts it from) each of up to three words with no carry, and the words are
// normalized (each brought back to [0, 2^32), the carry moved up) every 2^30 additions, long
// before one could overflow. A float needs 277 bits of digits (2^-149 .. 2^128) and a double 2098;
// 64 more bits of headroom let any count of additions that fits in 64 bits be summed.
//
// IEEE special values, as the exact sum gives them: any NaN gives NaN; +inf and -inf together
// give NaN; one infinity gives itself; a finite sum beyond the largest finite T rounds to the
// infinity of its sign. Subnormals are exact. An exact sum of 0 is -0 only when every term was
// -0 (as IEEE addition gives), else +0.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace tally {
namespace detail {

template <class T>
struct exact_format;
template <>
struct exact_format<float> {
  using bits_t = std::uint32_t;
  static constexpr int precision = 24;          // significand bits, the hidden one included
  static constexpr int quantum_exponent = -149;  // the smallest subnormal is 2^quantum_exponent
  static constexpr int exponent_bits = 8;
  static constexpr int digits = 11;  // 352 bits: 277 for the values, the rest headroom
};
template <>
struct exact_format<double> {
  using bits_t = std::uint64_t;
  static constexpr int precision = 53;
  static constexpr int quantum_exponent = -1074;
  static constexpr int exponent_bits = 11;
  static constexpr int digits = 68;  // 2176 bits: 2098 for the values, the rest headroom
};

}  // namespace detail

// The accumulator of an exact sum: add values, merge accumulators, take the correctly rounded
// value. Copyable; the state is a few hundred bytes (float) or about 550 bytes (double).
template <class T>
class exact_accumulator {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "tally::exact_accumulator<T>: T must be float or double");
  using format = detail::exact_format<T>;
  using bits_t = typename format::bits_t;
  static constexpr std::uint32_t normalize_every = std::uint32_t(1) << 30;

 public:
  using value_type = T;
  exact_accumulator() = default;

  // Adds x exactly.
  void add(T x) {
    bits_t bits;
    std::memcpy(&bits, &x, sizeof(T));
    constexpr int total_bits = int(sizeof(T) * 8);
    constexpr int fraction_bits = format::precision - 1;
    constexpr bits_t exponent_mask = (bits_t(1) << format::exponent_bits) - 1;
    const bool negative = (bits >> (total_bits - 1)) != 0;
    const bits_t exponent = (bits >> fraction_bits) & exponent_mask;
    const bits_t fraction = bits & ((bits_t(1) << fraction_bits) - 1);
    if (exponent == exponent_mask) {  // infinity or NaN
      if (fraction != 0) {
        nan_ = true;
      } else if (negative) {
        minus_infinity_ = true;
      } else {
        plus_infinity_ = true;
      }
      return;
    }
    if (!negative || exponent != 0 || fraction != 0) only_negative_zeros_ = false;
    if (exponent == 0 && fraction == 0) return;
    // x = significand * 2^(quantum_exponent + position)
    const std::uint64_t significand = exponent == 0 ? std::uint64_t(fraction)
                                                    : std::uint64_t(fraction) | (std::uint64_t(1) << fraction_bits);
    const unsigned position = exponent == 0 ? 0u : unsigned(exponent) - 1u;
    const unsigned word = position / 32, shift = position % 32;
    const unsigned __int128 placed = static_cast<unsigned __int128>(significand) << shift;  // at most 84 bits
    const std::int64_t pieces[3] = {std::int64_t(placed & 0xFFFFFFFFu), std::int64_t((placed >> 32) & 0xFFFFFFFFu),
                                    std::int64_t(placed >> 64)};
    for (unsigned k = 0; k < 3 && word + k < unsigned(format::digits); ++k)
      digits_[word + k] += negative ? -pieces[k] : pieces[k];
    if (++pending_ == normalize_every) normalize();
  }

  // Adds everything `other` holds.
  void merge(const exact_accumulator& other) {
    exact_accumulator copy = other;
    copy.normalize();
    normalize();
    for (int k = 0; k < format::digits; ++k) digits_[k] += copy.digits_[k];
    pending_ = 2;  // each word now holds at most what two additions would add to it
    nan_ = nan_ || other.nan_;
    plus_infinity_ = plus_infinity_ || other.plus_infinity_;
    minus_infinity_ = minus_infinity_ || other.minus_infinity_;
    only_negative_zeros_ = only_negative_zeros_ && other.only_negative_zeros_;
  }

  // The exact sum, rounded once to nearest with ties to even (see the header for special values).
  T value() const {
    if (nan_ || (plus_infinity_ && minus_infinity_)) return std::numeric_limits<T>::quiet_NaN();
    if (plus_infinity_) return std::numeric_limits<T>::infinity();
    if (minus_infinity_) return -std::numeric_limits<T>::infinity();
    exact_accumulator magnitude = *this;
    magnitude.normalize();
    const bool negative = magnitude.digits_[format::digits - 1] < 0;
    if (negative) {
      for (int k = 0; k < format::digits; ++k) magnitude.digits_[k] = -magnitude.digits_[k];
      magnitude.normalize();
    }
    const std::int64_t* d = magnitude.digits_;
    int top = format::digits - 1;
    while (top >= 0 && d[top] == 0) --top;
    if (top < 0) return only_negative_zeros_ ? -T(0) : T(0);
    const int msb = top * 32 + (63 - __builtin_clzll(std::uint64_t(d[top])));
    const auto bit = [d](int i) { return i >= 0 && ((std::uint64_t(d[i / 32]) >> (i % 32)) & 1u) != 0; };
    std::uint64_t significand = 0;
    int exponent = format::quantum_exponent;
    if (msb < format::precision) {
      // Within T's precision at the subnormal quantum: exact.
      for (int i = msb; i >= 0; --i) significand = (significand << 1) | std::uint64_t(bit(i));
    } else {
      const int shift = msb - (format::precision - 1);
      for (int i = msb; i >= shift; --i) significand = (significand << 1) | std::uint64_t(bit(i));
      const bool guard = bit(shift - 1);
      bool sticky = false;
      for (int i = shift - 2; i >= 0 && !sticky; --i) {
        if (i % 32 == 31 && d[i / 32] == 0) {  // a whole zero word below
          i -= 31;
          continue;
        }
        sticky = bit(i);
      }
      if (guard && (sticky || (significand & 1u) != 0)) ++significand;  // ties to even
      exponent += shift;
      if (significand == (std::uint64_t(1) << format::precision)) {  // rounded up to the next power of two
        significand >>= 1;
        ++exponent;
      }
    }
    // significand < 2^precision is exact in T; ldexp is exact, or gives the infinity of overflow.
    const T result = std::ldexp(static_cast<T>(significand), exponent);
    return negative ? -result : result;
  }

 private:
  // Each word back to [0, 2^32), its carry (a floor division, so that negative words borrow)
  // moved to the next; the last word keeps the sign.
  void normalize() {
    for (int k = 0; k + 1 < format::digits; ++k) {
      const std::int64_t carry = digits_[k] >> 32;  // arithmetic: the floor of digits_[k] / 2^32
      digits_[k] -= carry * (std::int64_t(1) << 32);
      digits_[k + 1] += carry;
    }
    pending_ = 0;
  }

  std::int64_t digits_[format::digits] = {};
  std::uint32_t pending_ = 0;  // additions since the last normalization
  bool nan_ = false;
  bool plus_infinity_ = false;
  bool minus_infinity_ = false;
  bool only_negative_zeros_ = true;
};

// tally::reduce(policy, first, last, T init, tally::exact_plus<T>{}) returns the real-number sum
// of init and every element, rounded once (docs/exact.md). The values must convert to T exactly:
// T itself, or float, half or bf16 into double, half or bf16 into float. tally's algorithms take
// it as a marker and sum exactly; it is not an ordinary binary operator, so a path that would
// call it on two values (one not built for exact sums yet) fails to compile.
template <class T>
struct exact_plus {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "tally::exact_plus<T>: T must be float or double");
  using accumulator_type = exact_accumulator<T>;
  template <class U = T>
  T operator()(const U&, const U&) const {
    static_assert(sizeof(U) == 0,
                  "tally::exact_plus: this algorithm or backend does not take exact sums yet (issue 37): "
                  "tally::reduce, transform_reduce, inner_product and the segmented family take them under "
                  "tally::host");
    return T{};
  }
};

namespace detail {

template <class Op>
inline constexpr bool is_exact_plus_v = false;
template <class T>
inline constexpr bool is_exact_plus_v<exact_plus<T>> = true;

// Whether Op is tally::fields of exact_plus operators only (fields_op says so by its
// exact_fields member); the host backend checks that they match init's fields.
template <class Op, class = void>
struct declares_exact_fields : std::false_type {};
template <class Op>
struct declares_exact_fields<Op, std::enable_if_t<Op::exact_fields>> : std::true_type {};

// Whether every value of V is a value of T (so that converting it first keeps the sum exact).
template <class V, class T>
constexpr bool converts_exactly() {
  using U = std::remove_cv_t<V>;
  if constexpr (std::is_same_v<U, T>) {
    return true;
  } else if constexpr (std::is_same_v<T, double> && std::is_same_v<U, float>) {
    return true;
  } else if constexpr (sizeof(U) == 2 && !std::is_integral_v<U> && std::is_convertible_v<U, float>) {
    return true;  // __half and __nv_bfloat16: 11 and 8 significant bits, exponents within float's
  } else {
    return false;
  }
}

}  // namespace detail
}  // namespace tally
