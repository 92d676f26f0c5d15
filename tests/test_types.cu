// Every type a CUDA user reduces (docs/types.md): integers of every width, signed and
// unsigned, with every built-in operator, wrapping in init's type as Thrust's do; __half and
// __nv_bfloat16 loaded at their width and accumulated in init's type; CUDA vector types; and
// trivially copyable user structs up to 64 bytes, contiguous at any alignment. Each case runs
// on the host and on the device (device tests skip without a GPU) against references that do
// not use the operator under test.
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
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using tally_test::bits_of;
using tally_test::device_buffer;
using tally_test::device_value;
using tally_test::seeded;

// ---- sizes ----

// Boundary sizes (warp, block, tile, vector width) and a few random ones; on the device also
// one of several tiles per block. Fewer under compute-sanitizer, whose runs are slow.
std::vector<std::size_t> type_sizes(std::mt19937_64& rng, bool device = false) {
  if (tally_test::under_sanitizer()) return {0, 1, 17, 257, 4097, 65536 + 5};
  std::vector<std::size_t> sizes = {0, 1, 2, 3, 15, 16, 17, 31, 33, 255, 257, 1023, 4097, 65536 + 5};
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

const char* name_of(int_op op) {
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

template <class T>
class integer_types : public ::testing::Test {};
using every_integer = ::testing::Types<std::int8_t, std::uint8_t, std::int16_t, std::uint16_t, std::int32_t,
                                       std::uint32_t, std::int64_t, std::uint64_t>;
TYPED_TEST_SUITE(integer_types, every_integer);

template <class T>
class device_integer_types : public tally_test::device_test {};
TYPED_TEST_SUITE(device_integer_types, every_integer);

TYPED_TEST(integer_types, every_operator_on_the_host_wraps_in_inits_type) {
  using T = TypeParam;
  seeded s(400 + sizeof(T) * 2 + std::is_signed_v<T>);
  SCOPED_TRACE(s.trace());
  for (int_op op : every_int_op) {
    for (std::size_t n : type_sizes(s.rng)) {
      SCOPED_TRACE(std::string(name_of(op)) + ", n = " + std::to_string(n));
      const auto v = int_inputs<T>(op, n, s.rng);
      const T init = int_init<T>(op, s.rng);
      with_functor<T>(op, [&](auto f) {
        EXPECT_EQ(tally::reduce(tally::host, v.begin(), v.end(), init, f), int_reference(op, v, init));
        EXPECT_EQ(tally::reduce(tally::host.threads(3), v.begin(), v.end(), init, f), int_reference(op, v, init));
      });
    }
  }
}

TYPED_TEST(device_integer_types, every_operator_and_strategy_on_the_device_wraps_in_inits_type) {
  using T = TypeParam;
  seeded s(420 + sizeof(T) * 2 + std::is_signed_v<T>);
  SCOPED_TRACE(s.trace());
  for (int_op op : every_int_op) {
    for (std::size_t n : type_sizes(s.rng, true)) {
      const auto v = int_inputs<T>(op, n, s.rng);
      const T init = int_init<T>(op, s.rng);
      const T want = int_reference(op, v, init);
      for (std::size_t offset : {std::size_t(0), std::size_t(1), std::size_t(5)}) {
        SCOPED_TRACE(std::string(name_of(op)) + ", n = " + std::to_string(n) + ", offset = " + std::to_string(offset));
        device_buffer<T> d(v, offset);
        with_functor<T>(op, [&](auto f) {
          device_value<T> out;  // poisoned
          tally::reduce_into(tally::device, d.begin(), d.end(), out.get(), init, f);
          EXPECT_EQ(out.read(), want);
          EXPECT_EQ(tally::reduce(tally::device.strategy(tally::strategy::two_pass), d.begin(), d.end(), init, f),
                    want);
          // Exact integer operators may use atomics under the default policy where the
          // accumulator is a 4- or 8-byte word (plus, min, max and the bitwise ones).
          constexpr bool atomic_word = sizeof(T) == 4 || sizeof(T) == 8;
          if constexpr (atomic_word) {
            if (tally::detail::is_exact_integer_op_v<T, decltype(f)>) {
              for (auto st : {tally::strategy::block_atomic, tally::strategy::warp_atomic})
                EXPECT_EQ(tally::reduce(tally::device.strategy(st), d.begin(), d.end(), init, f), want)
                    << (st == tally::strategy::block_atomic ? "block_atomic" : "warp_atomic");
            }
          }
        });
      }
    }
  }
}

// Narrow values into a wide init: accumulated in init's type, as Thrust does.
template <class T, class Acc>
void expect_widened_sums(std::uint64_t salt, bool on_device) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : type_sizes(s.rng, on_device)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto v = int_inputs<T>(int_op::plus, n, s.rng);
    const Acc init = static_cast<Acc>(s.rng() % 1000);
    const Acc want = int_reference(int_op::plus, v, init);
    if (on_device) {
      device_buffer<T> d(v, 3);
      device_value<Acc> out;
      tally::reduce_into(tally::device, d.begin(), d.end(), out.get(), init, tally::plus<Acc>{});
      EXPECT_EQ(out.read(), want);
      EXPECT_EQ(tally::reduce(tally::device, d.begin(), d.end(), init), want);
    } else {
      EXPECT_EQ(tally::reduce(tally::host, v.begin(), v.end(), init, tally::plus<Acc>{}), want);
      EXPECT_EQ(tally::reduce(tally::host, v.begin(), v.end(), init), want);
    }
  }
}

TEST(widened_integers, narrow_values_accumulate_in_inits_type_on_the_host) {
  expect_widened_sums<std::int8_t, int>(440, false);
  expect_widened_sums<std::uint8_t, std::uint32_t>(441, false);
  expect_widened_sums<std::int16_t, long long>(442, false);
  expect_widened_sums<std::uint16_t, std::uint64_t>(443, false);
  expect_widened_sums<std::int32_t, std::int64_t>(444, false);
}

class device_widened_integers : public tally_test::device_test {};

TEST_F(device_widened_integers, narrow_values_accumulate_in_inits_type_on_the_device) {
  expect_widened_sums<std::int8_t, int>(450, true);
  expect_widened_sums<std::uint8_t, std::uint32_t>(451, true);
  expect_widened_sums<std::int16_t, long long>(452, true);
  expect_widened_sums<std::uint16_t, std::uint64_t>(453, true);
  expect_widened_sums<std::int32_t, std::int64_t>(454, true);
}

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

template <class H>
class narrow_floats : public ::testing::Test {};
using every_narrow_float = ::testing::Types<__half, __nv_bfloat16>;
TYPED_TEST_SUITE(narrow_floats, every_narrow_float);

template <class H>
class device_narrow_floats : public tally_test::device_test {};
TYPED_TEST_SUITE(device_narrow_floats, every_narrow_float);

TYPED_TEST(narrow_floats, sums_into_a_float_init_stay_within_the_bound_on_the_host) {
  using H = TypeParam;
  seeded s(460 + std::is_same_v<H, __half>);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : type_sizes(s.rng)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto v = narrow_values<H>(n, s.rng);
    const narrow_reference<H> ref(v, 0.25f);
    const float got = tally::reduce(tally::host, v.begin(), v.end(), 0.25f);
    EXPECT_NEAR(double(got), double(ref.sum), ref.bound(n, std::numeric_limits<float>::epsilon() / 2));
    EXPECT_EQ(bits_of(tally::reduce(tally::host.threads(3), v.begin(), v.end(), 0.25f)), bits_of(got));
  }
}

TYPED_TEST(narrow_floats, sums_in_their_own_type_stay_within_the_bound_and_min_max_are_exact_on_the_host) {
  using H = TypeParam;
  seeded s(462 + std::is_same_v<H, __half>);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : {std::size_t(1), std::size_t(33), std::size_t(1000), std::size_t(5000)}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    // Values of one sign, so the sum grows and rounding in H shows.
    auto v = narrow_values<H>(n, s.rng);
    for (auto& x : v) x = to_narrow<H>(std::fabs(static_cast<float>(x)));
    const narrow_reference<H> ref(v, 0.0f);
    const H got = tally::reduce(tally::host, v.begin(), v.end(), to_narrow<H>(0.0f), tally::plus<H>{});
    EXPECT_NEAR(double(static_cast<float>(got)), double(ref.sum), ref.bound(n, narrow_epsilon<H>));
    float lo = INFINITY, hi = -INFINITY;
    for (const H& x : v) lo = std::min(lo, static_cast<float>(x)), hi = std::max(hi, static_cast<float>(x));
    EXPECT_EQ(static_cast<float>(tally::reduce(tally::host, v.begin(), v.end(), to_narrow<H>(INFINITY),
                                               tally::minimum<H>{})),
              lo);
    EXPECT_EQ(static_cast<float>(tally::reduce(tally::host, v.begin(), v.end(), to_narrow<H>(-INFINITY),
                                               tally::maximum<H>{})),
              hi);
  }
}

TYPED_TEST(device_narrow_floats, device_sums_equal_the_host_bit_for_bit_whatever_the_grid) {
  using H = TypeParam;
  seeded s(470 + std::is_same_v<H, __half>);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : type_sizes(s.rng, true)) {
    for (std::size_t offset : {std::size_t(0), std::size_t(3)}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset = " + std::to_string(offset));
      const auto v = narrow_values<H>(n, s.rng);
      const narrow_reference<H> ref(v, 0.25f);
      const float host = tally::reduce(tally::host, v.begin(), v.end(), 0.25f);
      device_buffer<H> d(v, offset);
      device_value<float> out;
      tally::reduce_into(tally::device, d.begin(), d.end(), out.get(), 0.25f, tally::plus<float>{});
      EXPECT_EQ(bits_of(out.read()), bits_of(host));
      EXPECT_NEAR(double(out.read()), double(ref.sum), ref.bound(n, std::numeric_limits<float>::epsilon() / 2));
      for (unsigned grid : {1u, 7u, 500u})
        EXPECT_EQ(bits_of(tally::reduce(tally::device.grid_size(grid), d.begin(), d.end(), 0.25f)), bits_of(host))
            << "grid " << grid;
      // In H itself: the device's H adds round as the host's do.
      if (n <= 5000) {
        const H zero = to_narrow<H>(0.0f);
        EXPECT_EQ(bits_of(tally::reduce(tally::device, d.begin(), d.end(), zero, tally::plus<H>{})),
                  bits_of(tally::reduce(tally::host, v.begin(), v.end(), zero, tally::plus<H>{})));
        EXPECT_EQ(bits_of(tally::reduce(tally::device, d.begin(), d.end(), to_narrow<H>(INFINITY), tally::minimum<H>{})),
                  bits_of(tally::reduce(tally::host, v.begin(), v.end(), to_narrow<H>(INFINITY), tally::minimum<H>{})));
      }
    }
  }
}

// ---- CUDA vector types ----

template <class V>
bool same_fields(const V& a, const V& b) {
  return std::memcmp(&a, &b, sizeof(V)) == 0;
}

TEST(vector_types, fieldwise_operators_on_the_host) {
  seeded s(480);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : type_sizes(s.rng)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<uchar4> bytes(n);
    std::vector<short2> shorts(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t r = s.rng();
      bytes[i] = make_uchar4(static_cast<unsigned char>(r), static_cast<unsigned char>(r >> 8),
                              static_cast<unsigned char>(r >> 16), static_cast<unsigned char>(r >> 24));
      shorts[i] = make_short2(short(r >> 32), short(r >> 48));
    }
    uchar4 sum = make_uchar4(1, 2, 3, 4);
    short2 lo = make_short2(SHRT_MAX, SHRT_MAX);
    for (std::size_t i = 0; i < n; ++i) {
      sum = make_uchar4(sum.x + bytes[i].x, sum.y + bytes[i].y, sum.z + bytes[i].z, sum.w + bytes[i].w);
      lo = make_short2(std::min(lo.x, shorts[i].x), std::min(lo.y, shorts[i].y));
    }
    EXPECT_TRUE(same_fields(tally::reduce(tally::host, bytes.begin(), bytes.end(), make_uchar4(1, 2, 3, 4),
                                          tally::plus<uchar4>{}),
                            sum));
    EXPECT_TRUE(same_fields(tally::reduce(tally::host, shorts.begin(), shorts.end(), make_short2(SHRT_MAX, SHRT_MAX),
                                          tally::minimum<short2>{}),
                            lo));
  }
}

class device_vector_types : public tally_test::device_test {};

TEST_F(device_vector_types, fieldwise_operators_equal_the_host) {
  seeded s(481);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : type_sizes(s.rng, true)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<uchar4> bytes(n);
    std::vector<float4> floats(n);
    std::vector<double2> doubles(n);
    std::uniform_real_distribution<double> real(-1.0, 1.0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t r = s.rng();
      bytes[i] = make_uchar4(static_cast<unsigned char>(r), static_cast<unsigned char>(r >> 8),
                              static_cast<unsigned char>(r >> 16), static_cast<unsigned char>(r >> 24));
      floats[i] = make_float4(real(s.rng), real(s.rng), real(s.rng), real(s.rng));
      doubles[i] = make_double2(real(s.rng), real(s.rng));
    }
    const uchar4 b0 = make_uchar4(9, 8, 7, 6);
    const float4 f0 = make_float4(0.5f, -0.5f, 1.0f, 0.0f);
    const double2 d0 = make_double2(0.25, -0.25);
    device_buffer<uchar4> db(bytes, 1);
    device_buffer<float4> df(floats);
    device_buffer<double2> dd(doubles, 1);
    EXPECT_TRUE(same_fields(tally::reduce(tally::device, db.begin(), db.end(), b0, tally::plus<uchar4>{}),
                            tally::reduce(tally::host, bytes.begin(), bytes.end(), b0, tally::plus<uchar4>{})));
    EXPECT_TRUE(same_fields(tally::reduce(tally::device, df.begin(), df.end(), f0, tally::plus<float4>{}),
                            tally::reduce(tally::host, floats.begin(), floats.end(), f0, tally::plus<float4>{})));
    EXPECT_TRUE(same_fields(tally::reduce(tally::device, dd.begin(), dd.end(), d0, tally::maximum<double2>{}),
                            tally::reduce(tally::host, doubles.begin(), doubles.end(), d0, tally::maximum<double2>{})));
  }
}

// ---- trivially copyable user structs, 6 to 64 bytes ----

// 64 bytes: sixteen counters added lane by lane (mod 2^32), a commutative operator that the
// library cannot know to be one unless told.
struct counters16 {
  std::uint32_t c[16];
};
struct add_counters {
  __host__ __device__ counters16 operator()(const counters16& a, const counters16& b) const {
    counters16 out;
    for (int i = 0; i < 16; ++i) out.c[i] = a.c[i] + b.c[i];
    return out;
  }
};
static_assert(sizeof(counters16) == 64);
static_assert(!tally::is_commutative_v<add_counters>, "an unmarked functor takes the ordered path");

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

template <class S, class Op>
void expect_structs(std::uint64_t salt, Op op, bool on_device, bool exact_any_order) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : type_sizes(s.rng, on_device)) {
    const auto v = random_structs<S>(n, s.rng);
    const S init = random_structs<S>(1, s.rng)[0];
    const S host = tally::reduce(tally::host, v.begin(), v.end(), init, op);
    // Integer operators (and the ordered path) give the left fold exactly; the float block
    // sums are reproducible, so the device must equal the host.
    if (exact_any_order) EXPECT_TRUE(same_fields(host, left_fold(v, init, op))) << "host, n = " << n;
    if (!on_device) continue;
    for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset = " + std::to_string(offset));
      device_buffer<S> d(v, offset);
      device_value<S> out;
      tally::reduce_into(tally::device, d.begin(), d.end(), out.get(), init, op);
      EXPECT_TRUE(same_fields(out.read(), host));
      EXPECT_TRUE(same_fields(tally::reduce(tally::device.strategy(tally::strategy::two_pass), d.begin(), d.end(),
                                            init, op),
                              host));
    }
  }
}

TEST(user_structs, up_to_64_bytes_on_the_host) {
  expect_structs<counters16>(490, add_counters{}, false, true);
  expect_structs<counters16>(491, tally::commutative(add_counters{}), false, true);
  expect_structs<rgb16>(492, brightest{}, false, true);
  expect_structs<quad16>(493, quad_max{}, false, true);
  expect_structs<block3x4>(494, add_blocks{}, false, false);
}

class device_user_structs : public tally_test::device_test {};

TEST_F(device_user_structs, up_to_64_bytes_equal_the_host) {
  expect_structs<counters16>(495, add_counters{}, true, true);
  expect_structs<counters16>(496, tally::commutative(add_counters{}), true, true);
  expect_structs<rgb16>(497, brightest{}, true, true);
  expect_structs<quad16>(498, quad_max{}, true, true);
  expect_structs<block3x4>(499, add_blocks{}, true, false);
}

}  // namespace
