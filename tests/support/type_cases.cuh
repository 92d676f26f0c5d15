#pragma once
// The cases tests/test_types.cu (host) and tests/test_types_device.cu (device) share: sizes,
// integer operators with references that do not use the operator under test, __half and
// __nv_bfloat16 values with their error bound, and trivially copyable structs of 6 to 160
// bytes with their operators (docs/types.md). Host and device tests live in two programs so
// that the host one, which the sanitized CI build compiles, instantiates no kernels.
#include "support/test_support.cuh"
#include "tally/functional.cuh"
#include "tally/operator_traits.cuh"
#include "tally/reduce.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace tally_test::types {

using tally_test::seeded;

// ---- sizes ----

// Boundary sizes (warp, block, tile, vector width) and a few random ones; on the device also
// one of several tiles per block. Fewer under compute-sanitizer, whose runs are slow.
inline std::vector<std::size_t> type_sizes(std::mt19937_64& rng, bool device = false) {
  // 4097, 16385 and 40000: plans of two tiles, reduced in one block (tile_pair_reduce_kernel),
  // for 8-, 2- and 1-byte values, and of three for 16- and 4-byte ones.
  if (tally_test::under_sanitizer()) return {0, 1, 17, 257, 4097, 16385, 65536 + 5};
  std::vector<std::size_t> sizes = {0, 1, 2, 3, 15, 16, 17, 31, 33, 255, 257, 1023, 4097, 16385, 40000, 65536 + 5};
  if (device) sizes.push_back((std::size_t(1) << 20) + 3);
  std::uniform_int_distribution<std::size_t> size(1, 100000);
  for (int i = 0; i < 2; ++i) sizes.push_back(size(rng));
  return sizes;
}

// ---- integers: the operators, with references computed in 64-bit unsigned arithmetic ----

enum class int_op { plus, multiplies, minimum, maximum, bit_and, bit_or, bit_xor, logical_and, logical_or };
const int_op every_int_op[] = {int_op::plus,   int_op::multiplies, int_op::minimum,     int_op::maximum,
                               int_op::bit_and, int_op::bit_or,    int_op::bit_xor,     int_op::logical_and,
                               int_op::logical_or};

inline const char* name_of(int_op op) {
  switch (op) {
    case int_op::plus: return "plus";
    case int_op::multiplies: return "multiplies";
    case int_op::minimum: return "minimum";
    case int_op::maximum: return "maximum";
    case int_op::bit_and: return "bit_and";
    case int_op::bit_or: return "bit_or";
    case int_op::bit_xor: return "bit_xor";
    case int_op::logical_and: return "logical_and";
    case int_op::logical_or: return "logical_or";
  }
  return "?";
}

// Calls f with the tally functor for op on T.
template <class T, class F>
void with_functor(int_op op, F&& f) {
  switch (op) {
    case int_op::plus: return f(tally::plus<T>{});
    case int_op::multiplies: return f(tally::multiplies<T>{});
    case int_op::minimum: return f(tally::minimum<T>{});
    case int_op::maximum: return f(tally::maximum<T>{});
    case int_op::bit_and: return f(tally::bit_and<T>{});
    case int_op::bit_or: return f(tally::bit_or<T>{});
    case int_op::bit_xor: return f(tally::bit_xor<T>{});
    case int_op::logical_and: return f(tally::logical_and<T>{});
    case int_op::logical_or: return f(tally::logical_or<T>{});
  }
}

// Inputs that keep each operator's answer informative: odd factors (a product of even ones
// is soon zero), values with one bit cleared for and (one bit set for or), mostly non-zero
// values with a few zeros for the logical operators; full-range random values otherwise, so
// sums wrap.
template <class T>
std::vector<T> int_inputs(int_op op, std::size_t n, std::mt19937_64& rng) {
  constexpr int bits = int(sizeof(T) * 8);
  std::uniform_int_distribution<int> bit(0, bits - 1);
  std::uniform_int_distribution<std::size_t> at(0, n ? n - 1 : 0);
  std::vector<T> v(n);
  for (auto& x : v) {
    const std::uint64_t r = rng();
    switch (op) {
      case int_op::multiplies: x = static_cast<T>(r | 1u); break;
      case int_op::bit_and: x = static_cast<T>(~(std::uint64_t(1) << bit(rng))); break;
      case int_op::bit_or: x = static_cast<T>(std::uint64_t(1) << bit(rng)); break;
      case int_op::logical_and:
      case int_op::logical_or: x = static_cast<T>((r % 7) + 1); break;
      default: x = static_cast<T>(r); break;
    }
  }
  if (n && (op == int_op::logical_and || op == int_op::logical_or))
    for (int k = 0; k < 2; ++k) v[at(rng)] = T(0);  // may or may not decide the answer
  return v;
}

// The left fold of v into init, in unsigned 64-bit arithmetic converted to Acc per step:
// the value Thrust's reduce gives (wrap-around in init's type).
template <class Acc, class T>
Acc int_reference(int_op op, const std::vector<T>& v, Acc init) {
  Acc acc = init;
  for (const T& raw : v) {
    const Acc x = static_cast<Acc>(raw);
    const auto a = static_cast<std::uint64_t>(acc), b = static_cast<std::uint64_t>(x);
    switch (op) {
      case int_op::plus: acc = static_cast<Acc>(a + b); break;
      case int_op::multiplies: acc = static_cast<Acc>(a * b); break;
      case int_op::minimum: acc = std::min(acc, x); break;
      case int_op::maximum: acc = std::max(acc, x); break;
      case int_op::bit_and: acc = static_cast<Acc>(a & b); break;
      case int_op::bit_or: acc = static_cast<Acc>(a | b); break;
      case int_op::bit_xor: acc = static_cast<Acc>(a ^ b); break;
      case int_op::logical_and: acc = static_cast<Acc>(acc != 0 && x != 0); break;
      case int_op::logical_or: acc = static_cast<Acc>(acc != 0 || x != 0); break;
    }
  }
  return acc;
}

template <class Acc>
Acc int_init(int_op op, std::mt19937_64& rng) {
  switch (op) {
    case int_op::multiplies: return static_cast<Acc>(rng() | 1u);
    case int_op::bit_and: return static_cast<Acc>(~Acc(0));
    case int_op::bit_or: return Acc(0);
    case int_op::logical_and:
    case int_op::logical_or: return Acc(1);
    default: return static_cast<Acc>(rng());
  }
}

using every_integer = ::testing::Types<std::int8_t, std::uint8_t, std::int16_t, std::uint16_t, std::int32_t,
                                       std::uint32_t, std::int64_t, std::uint64_t>;

// ---- __half and __nv_bfloat16 ----

template <class H>
H to_narrow(float x) {
  if constexpr (std::is_same_v<H, __half>) {
    return __float2half_rn(x);
  } else {
    return __float2bfloat16_rn(x);
  }
}

// Mixed signs and magnitudes, each exactly representable in H.
template <class H>
std::vector<H> narrow_values(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-4, 4);
  std::vector<H> v(n);
  for (auto& x : v) x = to_narrow<H>(std::ldexp(mantissa(rng), exponent(rng)));
  return v;
}

// Unit roundoff of H: 2^-11 for half, 2^-8 for bfloat16.
template <class H>
constexpr double narrow_epsilon = std::is_same_v<H, __half> ? 1.0 / 2048 : 1.0 / 256;

// The exact sum (in long double) and the bound n * u * (|init| + sum |x|) that any order of
// summation in an accumulator of unit roundoff u stays within (docs/types.md).
template <class H>
struct narrow_reference {
  long double sum = 0, abs_sum = 0;
  narrow_reference(const std::vector<H>& v, float init) : sum(init), abs_sum(std::fabs(init)) {
    for (const H& x : v) {
      sum += static_cast<float>(x);
      abs_sum += std::fabs(static_cast<float>(x));
    }
  }
  double bound(std::size_t n, double u) const { return double(n + 1) * u * double(abs_sum); }
};

using every_narrow_float = ::testing::Types<__half, __nv_bfloat16>;

// ---- CUDA vector types and structs ----

template <class V>
bool same_fields(const V& a, const V& b) {
  return std::memcmp(&a, &b, sizeof(V)) == 0;
}

// ---- trivially copyable user structs, 6 to 160 bytes ----

// K counters added lane by lane (mod 2^32), a commutative operator that the library cannot
// know to be one unless told.
template <int K>
struct counters_of {
  std::uint32_t c[K];
};
template <int K>
struct add_counters_of {
  __host__ __device__ counters_of<K> operator()(const counters_of<K>& a, const counters_of<K>& b) const {
    counters_of<K> out;
    for (int i = 0; i < K; ++i) out.c[i] = a.c[i] + b.c[i];
    return out;
  }
};
// 64 bytes.
using counters16 = counters_of<16>;
using add_counters = add_counters_of<16>;
static_assert(sizeof(counters16) == 64);
static_assert(!tally::is_commutative_v<add_counters>, "an unmarked functor takes the ordered path");
// 160 bytes: larger than the accumulators whose tile partials travel as flagged 64-bit
// words (partials.cuh), so its partials take the cells with one released flag.
using counters40 = counters_of<40>;
using add_counters40 = add_counters_of<40>;
static_assert(sizeof(counters40) > tally::detail::packed_cell_max_bytes);

// 6 bytes, 2-byte aligned: no vector loads (16 is not a multiple of 6).
struct rgb16 {
  std::uint16_t r, g, b;
};
struct brightest {  // the larger sum of channels, the earlier on ties: not commutative
  __host__ __device__ rgb16 operator()(const rgb16& x, const rgb16& y) const {
    return int(y.r) + y.g + y.b > int(x.r) + x.g + x.b ? y : x;
  }
};

// 8 bytes, 2-byte aligned: two per 16-byte load where the start is 16-byte aligned.
struct quad16 {
  std::int16_t v[4];
};
struct quad_max {
  static constexpr bool commutative = true;
  __host__ __device__ quad16 operator()(const quad16& a, const quad16& b) const {
    quad16 out;
    for (int i = 0; i < 4; ++i) out.v[i] = a.v[i] < b.v[i] ? b.v[i] : a.v[i];
    return out;
  }
};

// 48 bytes, 16-byte aligned: a 3x4 float block added elementwise.
struct alignas(16) block3x4 {
  float m[12];
};
struct add_blocks {
  static constexpr bool commutative = true;
  __host__ __device__ block3x4 operator()(const block3x4& a, const block3x4& b) const {
    block3x4 out;
    for (int i = 0; i < 12; ++i) out.m[i] = a.m[i] + b.m[i];
    return out;
  }
};

static_assert(tally::is_commutative_v<quad_max> && tally::is_commutative_v<add_blocks>);

template <class S>
std::vector<S> random_structs(std::size_t n, std::mt19937_64& rng) {
  static_assert(std::is_trivially_copyable_v<S>);
  std::vector<S> v(n);
  for (auto& x : v) {
    unsigned char bytes[sizeof(S)];
    for (auto& b : bytes) b = static_cast<unsigned char>(rng() & 0x3F);  // small, so float fields stay finite
    std::memcpy(&x, bytes, sizeof(S));
  }
  if constexpr (std::is_same_v<S, block3x4>)
    for (auto& x : v)
      for (float& f : x.m) f = float(std::int32_t(rng() % 2001) - 1000) / 64;
  return v;
}

template <class S, class Op>
S left_fold(const std::vector<S>& v, S init, Op op) {
  for (const S& x : v) init = op(init, x);
  return init;
}

}  // namespace tally_test::types
