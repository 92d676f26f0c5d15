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

#include "tally/detail/plan.cuh"  // TALLY_HOST_DEVICE

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

// The special values an exact sum has met, besides its finite terms.
struct exact_specials {
  bool nan = false;
  bool plus_infinity = false;
  bool minus_infinity = false;
  bool only_negative_zeros = true;  // every term so far was -0 (none: true)
};

// The same facts as flags, for the device's exact sums (kernels/exact_kernels.cuh).
enum exact_flag : unsigned { exact_nan = 1, exact_plus_infinity = 2, exact_minus_infinity = 4, exact_nonzero_sign = 8 };

// One term of an exact sum, taken apart. A finite term is (-1)^negative * significand *
// 2^position units (T's smallest subnormal; significand 0 for the zeros); special holds
// exact_nan or an infinity's flag for the others; nonzero_sign is false only for -0.
struct exact_term {
  std::uint64_t significand = 0;
  unsigned position = 0;
  bool negative = false;
  bool nonzero_sign = true;
  unsigned special = 0;
};

template <class T>
TALLY_HOST_DEVICE exact_term decode_exact_term(T x) {
  using format = exact_format<T>;
  using bits_t = typename format::bits_t;
  constexpr int total_bits = int(sizeof(T) * 8);
  constexpr int fraction_bits = format::precision - 1;
  constexpr bits_t exponent_mask = (bits_t(1) << format::exponent_bits) - 1;
  bits_t bits;
  std::memcpy(&bits, &x, sizeof(T));
  exact_term term;
  term.negative = (bits >> (total_bits - 1)) != 0;
  const unsigned exponent = unsigned((bits >> fraction_bits) & exponent_mask);
  const bits_t fraction = bits & ((bits_t(1) << fraction_bits) - 1);
  if (exponent == unsigned(exponent_mask)) {
    term.special = fraction != 0 ? exact_nan : (term.negative ? exact_minus_infinity : exact_plus_infinity);
    return term;
  }
  term.nonzero_sign = !term.negative || exponent != 0 || fraction != 0;
  // A subnormal's unit is the smallest normal binade's: both count from position 0.
  term.significand = exponent == 0 ? std::uint64_t(fraction) : std::uint64_t(fraction) | (std::uint64_t(1) << fraction_bits);
  term.position = exponent == 0 ? 0u : exponent - 1u;
  return term;
}

// Brings each base-2^32 digit of d (digit k at d[k * stride]) back to [0, 2^32), its carry (a
// floor division, so that a negative digit borrows) moved to the next; the last digit keeps
// the sign.
TALLY_HOST_DEVICE inline void normalize_exact_digits(std::int64_t* d, int digits, unsigned stride = 1) {
  for (int k = 0; k + 1 < digits; ++k) {
    const std::int64_t carry = d[k * stride] >> 32;  // arithmetic: the floor of d[k] / 2^32
    d[k * stride] -= carry * (std::int64_t(1) << 32);
    d[(k + 1) * stride] += carry;
  }
}

// The same with each digit brought to [-2^31, 2^31) instead: a small negative number keeps its
// upper digits 0 (instead of 2^32 - 1), so that the device adds only the digits it has.
TALLY_HOST_DEVICE inline void balance_exact_digits(std::int64_t* d, int digits, unsigned stride = 1) {
  for (int k = 0; k + 1 < digits; ++k) {
    const std::int64_t carry = (d[k * stride] + (std::int64_t(1) << 31)) >> 32;
    d[k * stride] -= carry * (std::int64_t(1) << 32);
    d[(k + 1) * stride] += carry;
  }
}

template <class T, class Bits>
TALLY_HOST_DEVICE T value_of_bits(Bits bits) {
  static_assert(sizeof(T) == sizeof(Bits));
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// The exact sum of the fixed-point integer d (base-2^32 digits whose unit is T's smallest
// subnormal; d is normalized here, in place) and the special values, rounded once to nearest
// with ties to even. The host accumulator and the device's exact sums both end here. Only the
// digits [first, end) are read: the caller vouches that the others are 0 and that the
// integer's carries and sign fit below `end` (two digits above the highest nonzero one do).
template <class T>
TALLY_HOST_DEVICE T round_exact_sum(std::int64_t* d, const exact_specials& specials, int first = 0,
                                    int end = exact_format<T>::digits) {
  using format = exact_format<T>;
  using bits_t = typename format::bits_t;
  constexpr int total_bits = int(sizeof(T) * 8);
  constexpr int fraction_bits = format::precision - 1;
  constexpr bits_t sign_bit = bits_t(1) << (total_bits - 1);
  constexpr bits_t infinity_bits = ((bits_t(1) << format::exponent_bits) - 1) << fraction_bits;
  constexpr bits_t quiet_nan_bits = infinity_bits | (bits_t(1) << (fraction_bits - 1));
  if (specials.nan || (specials.plus_infinity && specials.minus_infinity)) return value_of_bits<T>(quiet_nan_bits);
  if (specials.plus_infinity) return value_of_bits<T>(infinity_bits);
  if (specials.minus_infinity) return value_of_bits<T>(bits_t(infinity_bits | sign_bit));
  const bits_t zero = specials.only_negative_zeros ? sign_bit : bits_t(0);
  if (first >= end) return value_of_bits<T>(zero);
  normalize_exact_digits(d + first, end - first);
  const bool negative = d[end - 1] < 0;
  if (negative) {
    for (int k = first; k < end; ++k) d[k] = -d[k];
    normalize_exact_digits(d + first, end - first);
  }
  int top = end - 1;
  while (top >= first && d[top] == 0) --top;
  if (top < first) return value_of_bits<T>(zero);
  // Word by word, not bit by bit: one GPU thread rounds the device's sums.
  int top_bit = 0;  // the highest set bit of d[top], which is below 2^32 now
  for (int half = 16; half > 0; half /= 2)
    if ((std::uint64_t(d[top]) >> (top_bit + half)) != 0) top_bit += half;
  const int msb = top * 32 + top_bit;
  // Bits [lowest, lowest + 64) of the integer (bits past the top read as 0).
  const auto bits_from = [d, first, end](int lowest) {
    const int word = lowest / 32, offset = lowest % 32;
    const auto digit = [d, first, end](int k) { return k >= first && k < end ? std::uint64_t(d[k]) : std::uint64_t(0); };
    std::uint64_t window = (digit(word) >> offset) | (digit(word + 1) << (32 - offset));
    if (offset != 0) window |= digit(word + 2) << (64 - offset);
    return window;
  };
  std::uint64_t significand = 0;
  int shift = 0;  // the value is significand * 2^(quantum_exponent + shift)
  if (msb < format::precision) {
    // Within T's precision at the subnormal quantum: exact.
    significand = bits_from(0);
  } else {
    shift = msb - (format::precision - 1);
    significand = bits_from(shift) & ((std::uint64_t(1) << format::precision) - 1);
    const int guard_index = shift - 1;
    const std::uint64_t guard_word = guard_index / 32 >= first ? std::uint64_t(d[guard_index / 32]) : 0;
    const bool guard = ((guard_word >> (guard_index % 32)) & 1u) != 0;
    // Sticky: any bit below the guard bit.
    bool sticky = (guard_word & ((std::uint64_t(1) << (guard_index % 32)) - 1)) != 0;
    for (int k = guard_index / 32 - 1; k >= first && !sticky; --k) sticky = d[k] != 0;
    if (guard && (sticky || (significand & 1u) != 0)) ++significand;  // ties to even
    if (significand == (std::uint64_t(1) << format::precision)) {  // rounded up to the next power of two
      significand >>= 1;
      ++shift;
    }
  }
  // significand * 2^(quantum_exponent + shift) with significand < 2^precision: T's bits are the
  // significand (its leading bit, where it has one, lands in the exponent field as +1) plus
  // shift in the exponent field; from the infinity's pattern up the sum overflowed.
  const std::uint64_t magnitude = (std::uint64_t(shift) << fraction_bits) + significand;
  const bits_t bits = magnitude >= std::uint64_t(infinity_bits) ? infinity_bits : bits_t(magnitude);
  return value_of_bits<T>(negative ? bits_t(bits | sign_bit) : bits);
}

}  // namespace detail

template <class T>
class exact_accumulator;

namespace detail {
// What the device's exact sums (kernels/exact_kernels.cuh) add to an exact_accumulator in device
// memory: its digits and its special values, from device code.
template <class T>
struct exact_accumulator_access {
  static TALLY_HOST_DEVICE std::int64_t* digits(exact_accumulator<T>& a) { return a.digits_; }
  static TALLY_HOST_DEVICE exact_specials specials(const exact_accumulator<T>& a) {
    exact_specials s;
    s.nan = a.nan_;
    s.plus_infinity = a.plus_infinity_;
    s.minus_infinity = a.minus_infinity_;
    s.only_negative_zeros = a.only_negative_zeros_;
    return s;
  }
  // After the device has added to the digits and normalized them.
  static TALLY_HOST_DEVICE void after_device_addition(exact_accumulator<T>& a, bool nan, bool plus_infinity,
                                                      bool minus_infinity, bool nonzero_sign) {
    a.pending_ = 0;
    a.nan_ = a.nan_ || nan;
    a.plus_infinity_ = a.plus_infinity_ || plus_infinity;
    a.minus_infinity_ = a.minus_infinity_ || minus_infinity;
    a.only_negative_zeros_ = a.only_negative_zeros_ && !nonzero_sign;
  }
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
    const detail::exact_term term = detail::decode_exact_term(x);
    if (term.special != 0) {  // infinity or NaN
      nan_ = nan_ || term.special == detail::exact_nan;
      plus_infinity_ = plus_infinity_ || term.special == detail::exact_plus_infinity;
      minus_infinity_ = minus_infinity_ || term.special == detail::exact_minus_infinity;
      return;
    }
    if (term.nonzero_sign) only_negative_zeros_ = false;
    if (term.significand == 0) return;
    const unsigned word = term.position / 32, shift = term.position % 32;
    const unsigned __int128 placed = static_cast<unsigned __int128>(term.significand) << shift;  // at most 84 bits
    const std::int64_t pieces[3] = {std::int64_t(placed & 0xFFFFFFFFu), std::int64_t((placed >> 32) & 0xFFFFFFFFu),
                                    std::int64_t(placed >> 64)};
    for (unsigned k = 0; k < 3 && word + k < unsigned(format::digits); ++k)
      digits_[word + k] += term.negative ? -pieces[k] : pieces[k];
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
    std::int64_t digits[format::digits];
    for (int k = 0; k < format::digits; ++k) digits[k] = digits_[k];
    return detail::round_exact_sum<T>(digits, {nan_, plus_infinity_, minus_infinity_, only_negative_zeros_});
  }

 private:
  friend struct detail::exact_accumulator_access<T>;
  // Each word back to [0, 2^32), its carry moved to the next (normalize_exact_digits).
  void normalize() {
    detail::normalize_exact_digits(digits_, format::digits);
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
                  "tally::reduce, transform_reduce, inner_product and fields take them under both policies, "
                  "the segmented family under tally::host");
    return T{};
  }
};

namespace detail {

template <class Op>
inline constexpr bool is_exact_plus_v = false;
template <class T>
inline constexpr bool is_exact_plus_v<exact_plus<T>> = true;

// The T of exact_plus<T>; Otherwise for any other operator.
template <class Op, class Otherwise>
struct exact_sum_type {
  using type = Otherwise;
};
template <class T, class Otherwise>
struct exact_sum_type<exact_plus<T>, Otherwise> {
  using type = T;
};
template <class Op, class Otherwise>
using exact_sum_type_t = typename exact_sum_type<Op, Otherwise>::type;

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
