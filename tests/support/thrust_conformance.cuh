#pragma once
// Differential conformance against Thrust (docs/thrust.md, "Conformance program"), the helpers
// of its test programs. Every algorithm tally shares with Thrust --
// reduce (three overloads), transform_reduce (Thrust's unary form), inner_product (four and six
// arguments), count, count_if, min_element, max_element, minmax_element, all_of, any_of,
// none_of -- is called through thrust:: and through tally:: with the same arguments on the same
// seeded inputs. Each call checks at compile time that both return the same type (decltype of
// the same call, unevaluated), and at run time that both return the same value: exactly for
// integers, positions and every floating-point result that is exact in any order of
// evaluation, and within a summation bound for the other floating-point sums
// (expect_sum_agrees, below). A difference from Thrust fails its check; the differences tally
// keeps on purpose are not called through both (docs/thrust.md lists them with the tests that
// pin them).
//
// Crossed, representatively rather than as a full product (each distinct call instantiates both
// libraries, kernels included; docs/thrust.md lists what each test covers):
// element types (8- to 64-bit integers, float, double, __half, __nv_bfloat16, a trivially
// copyable struct, a type with constructors of its own); init narrower and wider than the
// elements; operators (Thrust's, std::, cuda::std::, tally::, function objects with const and
// non-const operator(), host-only ones under host policies, __host__ __device__ and __device__
// lambdas); iterator kinds; Thrust's policies and tally's own; empty and one-element ranges.
//
// Two programs share these helpers: test_thrust_conformance_host
// (tests/test_thrust_conformance_host.cu), whose cases run everywhere (CI, valgrind, the
// sanitizers), and test_thrust_conformance_device, whose cases skip without a GPU and are spread
// over several translation units of similar weight, which compile in parallel
// (tests/test_thrust_conformance_device.cu lists them). So the helpers are in a named namespace,
// the non-template functions inline, and the device fixture is one class for all the device
// translation units (Google Test requires one fixture class per test suite).

#include "support/narrow_floats.cuh"
#include "support/test_support.cuh"
#include "tally/tally.cuh"

#include <cuda/functional>
#include <cuda/std/functional>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <thrust/count.h>
#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/extrema.h>
#include <thrust/functional.h>
#include <thrust/host_vector.h>
#include <thrust/inner_product.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/iterator_traits.h>
#include <thrust/iterator/permutation_iterator.h>
#include <thrust/iterator/reverse_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/logical.h>
#include <thrust/reduce.h>
#include <thrust/transform_reduce.h>
#include <thrust/tuple.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <iterator>
#include <limits>
#include <new>
#include <numeric>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace tally_test::conformance {

// ---- the same call through both libraries ----

template <class R>
struct outcome {
  R thrust;
  R tally;
};

// thrust::algorithm(thrust_policy, args...) and tally::algorithm(tally_policy, args...): the
// result types must be the same (a compile-time check on the unevaluated calls); returns both
// results. The tally policy is Thrust's own in most cases (a user swapping the namespace), or
// tally's tally::host / tally::device against Thrust's equivalent.
#define TALLY_CONFORM(algorithm, thrust_policy, tally_policy, ...)                                     \
  ([&] {                                                                                               \
    using thrust_result_t = decltype(thrust::algorithm(thrust_policy, __VA_ARGS__));                   \
    static_assert(std::is_same_v<thrust_result_t, decltype(tally::algorithm(tally_policy, __VA_ARGS__))>, \
                  "tally::" #algorithm " returns another type than thrust::" #algorithm);              \
    thrust_result_t from_thrust = thrust::algorithm(thrust_policy, __VA_ARGS__);                       \
    thrust_result_t from_tally = tally::algorithm(tally_policy, __VA_ARGS__);                          \
    return outcome<thrust_result_t>{from_thrust, from_tally};                                          \
  }())

// The same without a policy: each library picks the system from the iterators.
#define TALLY_CONFORM_NO_POLICY(algorithm, ...)                                                        \
  ([&] {                                                                                               \
    using thrust_result_t = decltype(thrust::algorithm(__VA_ARGS__));                                  \
    static_assert(std::is_same_v<thrust_result_t, decltype(tally::algorithm(__VA_ARGS__))>,            \
                  "tally::" #algorithm " returns another type than thrust::" #algorithm);              \
    thrust_result_t from_thrust = thrust::algorithm(__VA_ARGS__);                                      \
    thrust_result_t from_tally = tally::algorithm(__VA_ARGS__);                                        \
    return outcome<thrust_result_t>{from_thrust, from_tally};                                          \
  }())

// ---- floating-point values ----

template <class T>
inline constexpr bool is_float_like_v =
    std::is_floating_point_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// Bits of significand (with the implicit one) and the machine epsilon of a float-like type.
template <class T>
constexpr int digits_of() {
  if constexpr (std::is_same_v<T, __half>) {
    return 11;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return 8;
  } else {
    return std::numeric_limits<T>::digits;
  }
}
template <class T>
double epsilon_of() {
  return std::ldexp(1.0, 1 - digits_of<T>());
}

// The exponent of x's lowest set bit: x is an odd multiple of 2^that (INT_MAX for 0).
inline int lowest_bit_exponent(double x) {
  if (x == 0) return INT_MAX;
  int e = 0;
  const double m = std::frexp(std::fabs(x), &e);  // x = m 2^e, m in [0.5, 1)
  const auto bits = static_cast<unsigned long long>(std::ldexp(m, 53));
  return e - 53 + __builtin_ctzll(bits);
}

// The terms a floating-point sum adds, init included, each already rounded to the
// accumulator's type as both libraries form it.
struct float_sum {
  double abs_sum = 0;              // sum of |term|
  tally_test::accurate_sum exact;  // the exact sum (as near as the references need)
  std::size_t count = 0;           // terms, init included
  int granule = INT_MAX;           // every term is a multiple of 2^granule

  void add(double term) {
    abs_sum += std::fabs(term);
    exact.add(term);
    ++count;
    granule = std::min(granule, lowest_bit_exponent(term));
  }
  // Exact in any order: every partial sum is a multiple of 2^granule no larger in magnitude
  // than abs_sum, which fits the significand.
  template <class R>
  bool exact_in_any_order() const {
    return granule == INT_MAX || std::ldexp(abs_sum, -granule) <= std::ldexp(1.0, digits_of<R>());
  }
};

template <class R>
std::string show(const R& x) {
  std::ostringstream out;
  if constexpr (is_float_like_v<R>) {
    out << std::setprecision(17) << to_double(x);
  } else if constexpr (std::is_integral_v<R> && sizeof(R) == 1) {
    out << int(x);
  } else {
    out << x;
  }
  return out.str();
}

// ---- comparing results ----

// Results that must be equal whatever the order of evaluation: integers (wrapping in their
// type), bools, user types, and floating-point maxima, minima and other exact operations.
template <class R>
void expect_agree(const outcome<R>& o, const std::string& what) {
  if constexpr (is_float_like_v<R>) {
    EXPECT_EQ(to_double(o.tally), to_double(o.thrust)) << what << ": tally " << show(o.tally) << ", Thrust " << show(o.thrust);
  } else {
    EXPECT_TRUE(o.tally == o.thrust) << what << ": tally " << show(o.tally) << ", Thrust " << show(o.thrust);
  }
}

// A sum of init and n terms, term(i) being the i-th term as the accumulator's type R has it.
// Integers: equal (both wrap in R). Floating point: equal where the sum is exact in any order
// (and then equal to the exact sum, which checks the premise); otherwise within
// 2 * count * eps * sum |term| of each other -- each library's error is at most about
// count * (eps / 2) * sum |term| whatever the order of its additions (Higham's bound with the
// longest possible chain, that of a sequential fold) -- and the bound must be below the
// magnitude of the sum, so that the check tells a right sum from 0, init alone, or a lost tile.
template <class R, class Term>
void expect_sum_agrees(const outcome<R>& o, const std::string& what, const R& init, std::size_t n, Term term) {
  if constexpr (!is_float_like_v<R>) {
    expect_agree(o, what);
  } else {
    float_sum s;
    s.add(to_double(init));
    for (std::size_t i = 0; i < n; ++i) s.add(to_double(static_cast<R>(term(i))));
    const double from_thrust = to_double(o.thrust), from_tally = to_double(o.tally), exact = double(s.exact.value());
    if (s.exact_in_any_order<R>()) {
      EXPECT_EQ(from_tally, from_thrust) << what << ": an exact sum, and tally's differs from Thrust's";
      EXPECT_EQ(from_thrust, exact) << what << ": the test's premise (an exact sum) is wrong";
    } else {
      const double bound = 2.0 * double(s.count) * epsilon_of<R>() * s.abs_sum;
      EXPECT_LT(bound, std::fabs(exact)) << what << std::setprecision(17) << ": the bound " << bound
                                         << " cannot tell the sum " << exact << " from 0";
      EXPECT_LE(std::fabs(from_tally - from_thrust), bound)
          << what << std::setprecision(17) << ": tally " << from_tally << ", Thrust " << from_thrust << " (exact "
          << exact << "), more than " << bound << " apart";
    }
  }
}

template <class It>
void expect_same_position(const outcome<It>& o, It first, const std::string& what) {
  EXPECT_EQ(o.tally - first, o.thrust - first) << what << ": the position tally returns differs from Thrust's";
}

template <class It>
void expect_same_positions(const outcome<thrust::pair<It, It>>& o, It first, const std::string& what) {
  EXPECT_EQ(o.tally.first - first, o.thrust.first - first) << what << ": .first differs from Thrust's";
  EXPECT_EQ(o.tally.second - first, o.thrust.second - first) << what << ": .second differs from Thrust's";
}

// ---- function objects ----

// Typed: a generic operator() would deduce thrust::device_reference from a device_vector's
// transform_iterator.
template <class T>
struct twice {
  __host__ __device__ T operator()(const T& x) const { return static_cast<T>(x + x); }
};

// lo <= x <= hi: nowhere where lo > hi.
template <class T>
struct in_range {
  T lo, hi;
  __host__ __device__ bool operator()(const T& x) const { return !(x < lo) && !(hi < x); }
};

// Operators of each kind Thrust users pass, all computing a sum (or, for comparators and
// predicates, an order and a test) on int, so that every one gives the same exact answer.
struct const_plus {
  __host__ __device__ int operator()(int a, int b) const { return a + b; }
};
// operator() not const, as Thrust accepts (each counts its calls: state of its own copy).
struct mutable_plus {
  int calls = 0;
  __host__ __device__ int operator()(int a, int b) {
    ++calls;
    return a + b;
  }
};
struct mutable_negate {
  int calls = 0;
  __host__ __device__ int operator()(int x) {
    ++calls;
    return -x;
  }
};
struct mutable_is_odd {
  int calls = 0;
  __host__ __device__ bool operator()(int x) {
    ++calls;
    return x % 2 != 0;
  }
};
struct mutable_less {
  int calls = 0;
  __host__ __device__ bool operator()(int a, int b) {
    ++calls;
    return a < b;
  }
};
// Host-only function objects (no __host__ __device__): under host policies only; the program
// compiles with warnings as errors, so nvcc's warnings 20011/20014 would fail it.
struct host_plus {
  int operator()(int a, int b) const { return a + b; }
};
struct host_negate {
  int operator()(int x) const { return -x; }
};
struct host_is_odd {
  bool operator()(int x) const { return x % 2 != 0; }
};
struct host_less {
  bool operator()(int a, int b) const { return a < b; }
};

// ---- user types ----

// A trivially copyable struct with operators of its own.
struct tally_point {
  int count;
  long long total;
};
__host__ __device__ inline tally_point operator+(const tally_point& a, const tally_point& b) {
  return {a.count + b.count, a.total + b.total};
}
__host__ __device__ inline bool operator==(const tally_point& a, const tally_point& b) {
  return a.count == b.count && a.total == b.total;
}
inline std::ostream& operator<<(std::ostream& out, const tally_point& p) { return out << "{" << p.count << ", " << p.total << "}"; }
struct add_points {  // the user's operator (not marked commutative: tally keeps the order)
  __host__ __device__ tally_point operator()(const tally_point& a, const tally_point& b) const { return a + b; }
};
struct by_count {
  __host__ __device__ bool operator()(const tally_point& a, const tally_point& b) const { return a.count < b.count; }
};
static_assert(std::is_trivially_copyable_v<tally_point>);

// A value type with constructors of its own (user-provided default, converting and copy
// constructors), so not trivially copyable, but owning nothing (trivially destructible).
class cents {
 public:
  __host__ __device__ cents() : value_(0) {}
  __host__ __device__ cents(long long value) : value_(value) {}  // converting, on purpose
  __host__ __device__ cents(const cents& other) : value_(other.value_) {}
  __host__ __device__ cents& operator=(const cents& other) {
    value_ = other.value_;
    return *this;
  }
  friend __host__ __device__ cents operator+(const cents& a, const cents& b) { return cents(a.value_ + b.value_); }
  friend __host__ __device__ cents operator*(const cents& a, const cents& b) { return cents(a.value_ * b.value_); }
  friend __host__ __device__ bool operator<(const cents& a, const cents& b) { return a.value_ < b.value_; }
  friend __host__ __device__ bool operator==(const cents& a, const cents& b) { return a.value_ == b.value_; }
  friend std::ostream& operator<<(std::ostream& out, const cents& c) { return out << c.value_ << " cents"; }

 private:
  long long value_;
};
static_assert(!std::is_trivially_copyable_v<cents> && std::is_trivially_destructible_v<cents>);

// A type whose default constructor does not make its zero. Thrust's reduce(first, last) starts
// from value_type(0) (its documentation: "uses 0 as the initial value of the reduction").
class one_by_default {
 public:
  __host__ __device__ one_by_default() : value_(1) {}
  __host__ __device__ one_by_default(int value) : value_(value) {}  // converting, on purpose
  friend __host__ __device__ one_by_default operator+(const one_by_default& a, const one_by_default& b) {
    return one_by_default(a.value_ + b.value_);
  }
  friend __host__ __device__ bool operator==(const one_by_default& a, const one_by_default& b) {
    return a.value_ == b.value_;
  }
  friend std::ostream& operator<<(std::ostream& out, const one_by_default& x) { return out << x.value_; }

 private:
  int value_;
};

// ---- inputs ----

// Integers of T: the whole range of the narrow types (their sums wrap, as both libraries'
// do); uint16 below 40000 (65535 * 65535 overflows int, to which uint16 promotes); int32 small
// enough that no sum of n products of two of them, or of their doubles, overflows int (signed
// overflow is undefined on the host, where it could not be compared); int64 up to 10^6, whose
// products summed 2^20 times stay in range; uint32 and uint64 any bits (they wrap, defined).
template <class T>
std::vector<T> integers(std::size_t n, std::mt19937_64& rng) {
  long long lo = 0, hi = 0;
  if constexpr (std::is_same_v<T, std::uint16_t>) {
    hi = 40000;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    hi = std::clamp(static_cast<long long>(std::sqrt(double(1 << 28) / double(n + 1))), 1LL, 1000000LL);
    lo = -hi;
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    hi = 1000000;
    lo = -hi;
  } else if constexpr (sizeof(T) < 4) {
    lo = static_cast<long long>(std::numeric_limits<T>::min());
    hi = static_cast<long long>(std::numeric_limits<T>::max());
  }
  std::vector<T> v(n);
  if (hi == 0) {  // uint32, uint64: any bits
    for (auto& x : v) x = static_cast<T>(rng());
  } else {
    std::uniform_int_distribution<long long> d(lo, hi);
    for (auto& x : v) x = static_cast<T>(d(rng));
  }
  return v;
}

// Multiples of 1/8 in [-1/2, 15/8], leaning positive: sums of up to 2^20 of them are exact in
// float in any order (2^20 * 15/8 is below 2^24 granules of 1/8), and so is each product of two.
template <class T>
std::vector<T> eighths(std::size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(-4, 15);
  std::vector<T> v(n);
  for (auto& x : v) x = from_double<T>(d(rng) / 8.0);
  return v;
}

// Small integers in [-2, 3] for __half and __nv_bfloat16, zero once their magnitudes would add
// up to more than `cap`: every sum of them (or of their products with another such range, up to
// 3 * cap), in any order, is then exact in the type where 3 * cap + 1 fits its significand.
template <class T>
std::vector<T> capped_small_integers(std::size_t n, std::mt19937_64& rng, double cap) {
  std::uniform_int_distribution<int> d(-2, 3);
  std::bernoulli_distribution keep(std::min(1.0, 200.0 / double(n + 1)));
  std::vector<T> v(n, from_double<T>(0));
  double total = 0;
  for (auto& x : v) {
    const int k = keep(rng) ? d(rng) : 0;
    if (total + std::abs(k) > cap) continue;
    total += std::abs(k);
    x = from_double<T>(k);
  }
  return v;
}

// ints up to 10^6, whose products overflow int (for init's type to decide), as large as the
// family's own int sum of n of them allows (reduce(first, last) sums in int).
inline std::vector<int> products_overflowing_int(std::size_t n, std::mt19937_64& rng) {
  const int m = static_cast<int>(std::min<std::size_t>(1000000, (std::size_t(1) << 31) / (n + 1) - 1));
  std::uniform_int_distribution<int> d(-m, m);
  std::vector<int> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Floats whose products need 26 bits or more (exact in double, rounded in float), leaning
// positive, and an all-positive second range.
inline std::vector<float> wide_floats(std::size_t n, std::mt19937_64& rng, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = float(d(rng));
  return v;
}

// ---- checks on one range, each the same call through both libraries ----
// Each distinct call (iterator, value, init and operator types) is a template instantiation of
// both libraries, kernels included on the device: the tests pick their calls so that the
// cross stays representative at a moderate compile time (docs/thrust.md, "Conformance program").

// reduce(first, last) and reduce(first, last, init): one instantiation where init has the
// elements' type.
template <class TP, class YP, class It, class V, class Init>
void expect_reduce_agrees(const TP& thrust_policy, const YP& tally_policy, It first, const std::vector<V>& a, Init init,
                          const std::string& what) {
  using value_t = typename std::iterator_traits<It>::value_type;
  const std::size_t n = a.size();
  const It last = first + static_cast<std::ptrdiff_t>(n);
  const auto value = [&](std::size_t i) { return static_cast<value_t>(a[i]); };
  expect_sum_agrees(TALLY_CONFORM(reduce, thrust_policy, tally_policy, first, last),
                    what + ", n = " + std::to_string(n) + ": reduce(first, last)", value_t(0), n, value);
  expect_sum_agrees(TALLY_CONFORM(reduce, thrust_policy, tally_policy, first, last, init),
                    what + ", n = " + std::to_string(n) + ": reduce(first, last, init)", init, n, value);
}

// inner_product(first1, last1, first2, init): products in init's type (thrust::multiplies<Init>).
template <class TP, class YP, class It, class It2, class V, class V2, class Init>
void expect_inner_product_agrees(const TP& thrust_policy, const YP& tally_policy, It first, It2 first2,
                                 const std::vector<V>& a, const std::vector<V2>& b, Init init, const std::string& what) {
  const std::size_t n = a.size();
  const It last = first + static_cast<std::ptrdiff_t>(n);
  expect_sum_agrees(TALLY_CONFORM(inner_product, thrust_policy, tally_policy, first, last, first2, init),
                    what + ", n = " + std::to_string(n) + ": inner_product(first1, last1, first2, init)", init, n,
                    [&](std::size_t i) {
                      return thrust::multiplies<Init>{}(static_cast<Init>(a[i]), static_cast<Init>(b[i]));
                    });
}

template <class TP, class YP, class It, class V, class Init>
void expect_transform_reduce_agrees(const TP& thrust_policy, const YP& tally_policy, It first, const std::vector<V>& a,
                                    Init init, const std::string& what) {
  using value_t = typename std::iterator_traits<It>::value_type;
  const std::size_t n = a.size();
  const It last = first + static_cast<std::ptrdiff_t>(n);
  expect_sum_agrees(TALLY_CONFORM(transform_reduce, thrust_policy, tally_policy, first, last, twice<value_t>{}, init,
                                  thrust::plus<Init>{}),
                    what + ", n = " + std::to_string(n) + ": transform_reduce", init, n,
                    [&](std::size_t i) { return twice<value_t>{}(static_cast<value_t>(a[i])); });
}

template <class TP, class YP, class It>
void expect_minmax_agrees(const TP& thrust_policy, const YP& tally_policy, It first, std::size_t n,
                          const std::string& what) {
  expect_same_positions(TALLY_CONFORM(minmax_element, thrust_policy, tally_policy, first,
                                      first + static_cast<std::ptrdiff_t>(n)),
                        first, what + ", n = " + std::to_string(n) + ": minmax_element");
}

// Every algorithm and overload on [first, first + a.size()) and [first2, ...), whose values
// are a and b, with an init of the elements' type or another.
template <class TP, class YP, class It, class It2, class V, class V2, class Init>
void expect_family_agrees(const TP& thrust_policy, const YP& tally_policy, It first, It2 first2,
                          const std::vector<V>& a, const std::vector<V2>& b, Init init, const std::string& what) {
  using value_t = typename std::iterator_traits<It>::value_type;
  const std::size_t n = a.size();
  SCOPED_TRACE(what + ", n = " + std::to_string(n));
  const It last = first + static_cast<std::ptrdiff_t>(n);
  const auto value = [&](std::size_t i) { return static_cast<value_t>(a[i]); };

  expect_reduce_agrees(thrust_policy, tally_policy, first, a, init, what);
  expect_sum_agrees(TALLY_CONFORM(reduce, thrust_policy, tally_policy, first, last, init, thrust::plus<Init>{}),
                    "reduce(first, last, init, thrust::plus)", init, n, value);
  expect_agree(TALLY_CONFORM(reduce, thrust_policy, tally_policy, first, last, init, thrust::maximum<Init>{}),
               "reduce(first, last, init, thrust::maximum)");
  expect_transform_reduce_agrees(thrust_policy, tally_policy, first, a, init, what);
  expect_inner_product_agrees(thrust_policy, tally_policy, first, first2, a, b, init, what);
  expect_agree(TALLY_CONFORM(inner_product, thrust_policy, tally_policy, first, last, first2, init,
                             thrust::maximum<Init>{}, thrust::minus<Init>{}),
               "inner_product(first1, last1, first2, init, thrust::maximum, thrust::minus)");

  const value_t probe = n ? value(n / 2) : value_t{};
  expect_agree(TALLY_CONFORM(count, thrust_policy, tally_policy, first, last, probe), "count");
  // A range of values between two of the elements, for the predicates.
  value_t lo = n ? value(n / 3) : value_t{}, hi = n ? value(2 * n / 3) : value_t{};
  if (hi < lo) std::swap(lo, hi);
  const in_range<value_t> some{lo, hi};
  const in_range<value_t> none{from_double<value_t>(1), from_double<value_t>(0)};
  expect_agree(TALLY_CONFORM(count_if, thrust_policy, tally_policy, first, last, some), "count_if");

  expect_same_position(TALLY_CONFORM(min_element, thrust_policy, tally_policy, first, last), first, "min_element");
  expect_same_position(TALLY_CONFORM(max_element, thrust_policy, tally_policy, first, last), first, "max_element");
  expect_minmax_agrees(thrust_policy, tally_policy, first, n, what);
  expect_same_positions(
      TALLY_CONFORM(minmax_element, thrust_policy, tally_policy, first, last, thrust::greater<value_t>{}), first,
      "minmax_element(thrust::greater)");

  expect_agree(TALLY_CONFORM(all_of, thrust_policy, tally_policy, first, last, some), "all_of (some)");
  expect_agree(TALLY_CONFORM(any_of, thrust_policy, tally_policy, first, last, some), "any_of (some)");
  expect_agree(TALLY_CONFORM(none_of, thrust_policy, tally_policy, first, last, some), "none_of (some)");
  expect_agree(TALLY_CONFORM(all_of, thrust_policy, tally_policy, first, last, none), "all_of (none)");
  expect_agree(TALLY_CONFORM(any_of, thrust_policy, tally_policy, first, last, none), "any_of (none)");
  expect_agree(TALLY_CONFORM(none_of, thrust_policy, tally_policy, first, last, none), "none_of (none)");
}

// The comparator slot with a function object whose operator() is not const.
template <class TP, class It>
void expect_mutable_comparator_agrees(const TP& thrust_policy, It first, std::size_t n, const std::string& what) {
  // Found by this program and fixed (29278a2): the extrema keep the comparator mutable.
  const auto last = first + static_cast<std::ptrdiff_t>(n);
  expect_same_position(TALLY_CONFORM(min_element, thrust_policy, thrust_policy, first, last, mutable_less{}), first,
                       what + ": min_element");
  expect_same_position(TALLY_CONFORM(max_element, thrust_policy, thrust_policy, first, last, mutable_less{}), first,
                       what + ": max_element");
  expect_same_positions(TALLY_CONFORM(minmax_element, thrust_policy, thrust_policy, first, last, mutable_less{}),
                        first, what + ": minmax_element");
}

// ---- zip iterators: tuples ----

struct product_and_sum {
  __host__ __device__ thrust::tuple<long long, long long> operator()(const thrust::tuple<int, int>& t) const {
    return thrust::make_tuple(1LL * thrust::get<0>(t) * thrust::get<1>(t), 1LL * thrust::get<0>(t) + thrust::get<1>(t));
  }
};
struct add_tuples {
  __host__ __device__ thrust::tuple<long long, long long> operator()(const thrust::tuple<long long, long long>& a,
                                                                     const thrust::tuple<long long, long long>& b) const {
    return thrust::make_tuple(thrust::get<0>(a) + thrust::get<0>(b), thrust::get<1>(a) + thrust::get<1>(b));
  }
};
struct by_pair_sum {
  __host__ __device__ bool operator()(const thrust::tuple<int, int>& a, const thrust::tuple<int, int>& b) const {
    return thrust::get<0>(a) + thrust::get<1>(a) < thrust::get<0>(b) + thrust::get<1>(b);
  }
};

// A tuple-returning transform_reduce and min_element by a comparator over a zip of two ranges.
template <class TP, class YP, class ZipIt>
void expect_zip_agrees(const TP& thrust_policy, const YP& tally_policy, ZipIt first, std::size_t n,
                       const std::string& what) {
  SCOPED_TRACE(what + ", n = " + std::to_string(n));
  const ZipIt last = first + static_cast<std::ptrdiff_t>(n);
  const auto sums = TALLY_CONFORM(transform_reduce, thrust_policy, tally_policy, first, last, product_and_sum{},
                                  thrust::make_tuple(3LL, -3LL), add_tuples{});
  EXPECT_EQ(thrust::get<0>(sums.tally), thrust::get<0>(sums.thrust)) << "transform_reduce to a tuple: field 0";
  EXPECT_EQ(thrust::get<1>(sums.tally), thrust::get<1>(sums.thrust)) << "transform_reduce to a tuple: field 1";
  expect_same_position(TALLY_CONFORM(min_element, thrust_policy, tally_policy, first, last, by_pair_sum{}), first,
                       "min_element over tuples, by a comparator");
}

// ---- repeated extremes ----

// Values from a handful (0, 1, 2, 3, with -0.0 beside 0.0 for floats): the smallest and the
// largest repeat many times, and minmax_element's .first and .second must name Thrust's.
template <class T>
std::vector<T> many_ties(std::size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(0, 3);
  std::vector<T> v(n);
  for (auto& x : v) {
    const int k = d(rng);
    if constexpr (std::is_floating_point_v<T>) {
      x = k == 0 && (rng() & 1) ? T(-0.0) : T(k);
    } else {
      x = T(k);
    }
  }
  return v;
}

template <class TP, class YP, class It>
void expect_ties_agree(const TP& thrust_policy, const YP& tally_policy, It first, std::size_t n,
                       const std::string& what) {
  using value_t = typename std::iterator_traits<It>::value_type;
  SCOPED_TRACE(what + ", n = " + std::to_string(n));
  const It last = first + static_cast<std::ptrdiff_t>(n);
  expect_same_positions(TALLY_CONFORM(minmax_element, thrust_policy, tally_policy, first, last), first,
                        "minmax_element, repeated extremes");
  expect_same_positions(
      TALLY_CONFORM(minmax_element, thrust_policy, tally_policy, first, last, thrust::greater<value_t>{}), first,
      "minmax_element(thrust::greater), repeated extremes");
  expect_same_position(TALLY_CONFORM(min_element, thrust_policy, tally_policy, first, last), first,
                       "min_element, repeated extremes");
  expect_same_position(TALLY_CONFORM(max_element, thrust_policy, tally_policy, first, last), first,
                       "max_element, repeated extremes");
}

template <class T>
std::vector<long long> widen(const std::vector<T>& v) {
  return std::vector<long long>(v.begin(), v.end());
}

inline std::vector<int> random_permutation(std::size_t n, std::mt19937_64& rng) {
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

// ---- device ----

// Device tests derive from this (it skips them, with the reason, where no GPU is present); the
// device program's translation units share it.
class thrust_conformance_device : public device_test {};

// Around a warp, a one-tile plan, two tiles in one block, several tiles, and many.
inline std::vector<std::size_t> device_sizes() {
  std::vector<std::size_t> sizes{0, 1, 1000, std::size_t(1) << 13, (std::size_t(1) << 14) + 3};
  if (!under_sanitizer()) sizes.push_back((std::size_t(1) << 20) + 7);
  return sizes;
}

}  // namespace tally_test::conformance
