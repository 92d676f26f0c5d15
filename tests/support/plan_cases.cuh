#pragma once
// The cases that compare tally::reduce with the plan oracle (plan_oracle.cuh) bit for bit:
// every plan kind (commutative, ordered, order-free) and every loader (16-byte vectors,
// element by element, 48-byte chunks, a zip, a transform, narrow types). A Side runs the
// reductions: tests/test_reduce_host.cu's on the host backend, tests/test_reduce_device.cu's
// on the device, both against the same oracle. The operators and inputs are chosen so that a
// difference in the order of the combines shows in the result's bits: operators that are
// order-sensitive in every bit (integer witnesses, a difference), and float sums of values of
// both signs and mixed magnitudes (order_sensitive), which a given change of order alters in
// most runs, not all.
//
// A Side provides
//   template <class E> buffer        buffer<E>(values, offset): the values where the side
//                                    reads them, `offset` elements past an aligned start
//                                    (the device's misaligned starts); begin() is a pointer
//   static offsets()                 the offsets to try
//   static reduce(first, last, init, op)
//   static min_element_index(first, last)

#include "support/plan_oracle.cuh"
#include "support/test_support.cuh"
#include "tally/extrema.cuh"
#include "tally/functional.cuh"
#include "tally/reduce.cuh"

#include <cuda/std/tuple>
#include <cuda_fp16.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>

#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tally_test::plan_cases {

// ---- operators (at namespace scope: nvcc warns about static members of types in an
// anonymous namespace that only the library's traits read) ----

// Not commutative, so it takes the order-preserving plan; and in its values neither
// commutative (swapped operands flip the sign) nor associative, so any other tree than the
// plan's, or any operand order, changes the bits.
struct ordered_difference {
  __host__ __device__ float operator()(float a, float b) const { return a - b; }
};

// An operator that says it is order-free (a lie the test needs): a*31 + b, wrapping, whose
// every bit depends on the order. It takes the order-free plan, and a tile cap or tree other
// than that plan's changes the result.
struct order_free_witness {
  static constexpr bool order_free = true;
  static constexpr bool commutative = true;
  __host__ __device__ unsigned operator()(unsigned a, unsigned b) const { return a * 31u + b; }
};

// Marked commutative (another lie) and order-sensitive in every bit: a*31 + b, wrapping.
struct int_order_witness {
  static constexpr bool commutative = true;
  __host__ __device__ int operator()(int a, int b) const { return int(unsigned(a) * 31u + unsigned(b)); }
};

using float_pair = cuda::std::tuple<float, float>;

// A user operator over a zip's tuples.
struct pair_sum {
  static constexpr bool commutative = true;
  __host__ __device__ float_pair operator()(const float_pair& a, const float_pair& b) const {
    return float_pair(cuda::std::get<0>(a) + cuda::std::get<0>(b), cuda::std::get<1>(a) + cuda::std::get<1>(b));
  }
};

// A 48-byte trivially copyable struct, and its fieldwise sum.
struct twelve_floats {
  float f[12];
};
struct twelve_sums {
  static constexpr bool commutative = true;
  __host__ __device__ twelve_floats operator()(const twelve_floats& a, const twelve_floats& b) const {
    twelve_floats r;
    for (int k = 0; k < 12; ++k) r.f[k] = a.f[k] + b.f[k];
    return r;
  }
};

// A transform from a narrow base to a wider value: the plan's W is the base's (8), not the
// value's (4).
struct widen_half {
  __host__ __device__ float operator()(const __half& h) const { return __half2float(h) * 3.0f; }
};

// The extrema's selection, transcribed from docs/extrema.md: keep the smaller value under
// thrust::less; of equivalent values (NaNs are equivalent to everything) the smaller index;
// a negative index is no element. Under NaNs it is not associative, so the answer is the
// plan's tree's.
struct candidate {
  float value;
  std::int64_t index;
};
struct keep_first_min {
  candidate operator()(const candidate& a, const candidate& b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    if (a.value < b.value) return a;
    if (b.value < a.value) return b;
    return a.index < b.index ? a : b;
  }
};

// ---- inputs ----

// One tile (a one-tile kernel on the device), two (the tile-pair kernels), several (block 0
// folds at most 32 partials), more than 32.
inline std::vector<std::size_t> small_sizes() { return {1, 255, 4097, 8192 + 4097, 3 * 8192 + 5, 70001}; }

// Sizes of multi-step tiles for W = 4 (floats): cap + 1 steps of 8192 elements make tiles of
// two steps; the last one holds 5003 elements, more than one piece of the ordered plan (1024)
// and less than one step, its last chunk partial.
inline std::size_t two_step_size(std::uint64_t cap) { return std::size_t(cap * 8192 + 5003); }

// Floats of both signs and magnitudes from 2^-9 to 2^8, of mean zero. A float sum's bits show
// a change in the order of its additions only where the differences it makes in the partial
// sums outweigh the rounding of the last additions. Partial sums of values of mean zero grow
// as the square root of their length, so that is so in most runs: a tile cap of 2048 instead
// of 256 changed the sum of about 2^21 such floats in 24 of 30 seeds (27 of 30 for a swap of
// two threads' chunks). test_support's random_values lean positive, for the error bounds'
// sake; their partial sums grow with their length, and the same changes showed in 3 and 4.
template <class T>
std::vector<T> order_sensitive(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-8, 8);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(std::ldexp(mantissa(rng), exponent(rng)));
  return v;
}

// The largest float input, made once per program (128 MiB): 4097 steps, so tiles of three
// steps (1366 of them) and a last tile of two, the second partial. Its prefixes give the
// other large float cases.
inline const std::vector<float>& big_floats() {
  static const std::vector<float> v = [] {
    seeded s(2048);
    std::printf("plan cases: large float input from seed %llu\n", static_cast<unsigned long long>(s.seed));
    return order_sensitive<float>(2 * oracle::max_tiles * 8192 + 5003, s.rng);
  }();
  return v;
}

template <class T>
std::vector<T> prefix(const std::vector<T>& v, std::size_t n) {
  return {v.begin(), v.begin() + n};
}

template <class T>
std::string bytes_of(const T& x) {
  static_assert(std::is_trivially_copyable_v<T>, "compared by its bytes");
  unsigned char b[sizeof(T)];
  std::memcpy(b, &x, sizeof(T));
  std::string out;
  char hex[4];
  for (unsigned char c : b) {
    std::snprintf(hex, sizeof(hex), "%02x", unsigned(c));
    out += hex;
  }
  return out;
}

// tally::reduce over each offset's copy of `input` (read through `view`, which makes the
// side's iterator from its pointer) against the oracle's `expected`, byte for byte.
template <class Side, class E, class View, class Acc, class Op>
void expect_plan_bytes(const std::vector<E>& input, View view, Acc init, Op op, const Acc& expected) {
  for (std::size_t offset : Side::offsets()) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    typename Side::template buffer<E> b(input, offset);
    const auto first = view(b.begin());
    EXPECT_EQ(bytes_of(Side::reduce(first, first + input.size(), init, op)), bytes_of(expected));
  }
}

// The iterator a Side reads a vector of E through.
template <class Side, class E>
using side_iterator = decltype(std::declval<const typename Side::template buffer<E>&>().begin());

struct as_is {
  template <class P>
  P operator()(P p) const {
    return p;
  }
};

template <class Side, class T>
void expect_sum_follows_the_plan(const std::vector<T>& v, T init) {
  SCOPED_TRACE("n = " + std::to_string(v.size()) + (sizeof(T) == 4 ? ", float" : ", double"));
  const T expected = oracle::commutative(v, oracle::chunk_width(sizeof(T)), init, tally::plus<T>{});
  expect_plan_bytes<Side>(v, as_is{}, init, tally::plus<T>{}, expected);
}

// ---- the cases ----

// Float and double sums of contiguous ranges, aligned and misaligned: the commutative plan, at
// one tile, two, several, more than 256 (block 0's threads fold several partials each),
// exactly 2048 one-step tiles, and tiles of two and three steps.
template <class Side>
void commutative_sums(bool large) {
  for (std::size_t n : small_sizes()) {
    seeded s(n + 1100);
    SCOPED_TRACE(s.trace());
    const auto f = order_sensitive<float>(n, s.rng);
    expect_sum_follows_the_plan<Side>(f, order_sensitive<float>(1, s.rng)[0]);
    const auto d = order_sensitive<double>(n, s.rng);
    expect_sum_follows_the_plan<Side>(d, order_sensitive<double>(1, s.rng)[0]);
  }
  if (!large) return;
  expect_sum_follows_the_plan<Side>(big_floats(), 0.25f);
  expect_sum_follows_the_plan<Side>(prefix(big_floats(), two_step_size(oracle::max_tiles)), 0.25f);
  expect_sum_follows_the_plan<Side>(prefix(big_floats(), oracle::max_tiles * 8192), 0.25f);
  seeded s(1101);
  SCOPED_TRACE(s.trace());
  // Doubles: 4096 per step, so this many make 2049 steps, tiles of two.
  expect_sum_follows_the_plan<Side>(order_sensitive<double>(oracle::max_tiles * 4096 + 5003, s.rng), -1.5);
}

// An operator that is not commutative: the order-preserving plan, over a contiguous range,
// aligned and misaligned; at the large size the last tile has two steps where the others have
// three, so its warp regions are two pieces long, not three. (Against tiles of two steps and
// a last one of one, regions of one piece or two give the same tree: a warp's fold of two
// pieces is the ordered tree's first level.)
template <class Side>
void ordered_operator(bool large) {
  const auto check = [](const std::vector<float>& v, float init) {
    SCOPED_TRACE("n = " + std::to_string(v.size()));
    const float expected = oracle::ordered(v, oracle::chunk_width(sizeof(float)), init, ordered_difference{});
    expect_plan_bytes<Side>(v, as_is{}, init, ordered_difference{}, expected);
  };
  for (std::size_t n : small_sizes()) {
    seeded s(n + 1200);
    SCOPED_TRACE(s.trace());
    check(order_sensitive<float>(n, s.rng), 0.75f);
  }
  if (large) check(big_floats(), -0.5f);
}

// Order-free operators: their plan caps the tiles at 256. A witness that claims to be
// order-free shows every difference in its bits: two-step tiles, a last tile of two steps
// where the others have three, and tiles of nine steps. tally::min_element over floats with
// NaNs (its candidate combine is then not associative) shows differences in the tree in the
// position it returns.
template <class Side>
void order_free_operators(bool large) {
  const auto witness = [](const std::vector<unsigned>& v) {
    SCOPED_TRACE("order-free witness, n = " + std::to_string(v.size()));
    const unsigned expected = oracle::order_free(v, oracle::chunk_width(sizeof(unsigned)), 5u, order_free_witness{});
    expect_plan_bytes<Side>(v, as_is{}, 5u, order_free_witness{}, expected);
  };
  const auto min_with_nans = [](std::vector<float> v, std::mt19937_64& rng) {
    SCOPED_TRACE("min_element with NaNs, n = " + std::to_string(v.size()));
    std::uniform_int_distribution<std::size_t> position(0, v.size() - 1);
    for (std::size_t k = 0; k < v.size() / 50 + 1; ++k) v[position(rng)] = std::numeric_limits<float>::quiet_NaN();
    std::vector<candidate> candidates(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) candidates[i] = {v[i], std::int64_t(i)};
    // extrema over a contiguous range: 16-byte chunks of the elements (plan_oracle.cuh).
    const candidate best =
        oracle::order_free(candidates, oracle::chunk_width(sizeof(float)), candidate{0.0f, -1}, keep_first_min{});
    for (std::size_t offset : Side::offsets()) {
      typename Side::template buffer<float> b(v, offset);
      EXPECT_EQ(Side::min_element_index(b.begin(), b.begin() + v.size()), best.index) << "offset " << offset;
    }
  };
  for (std::size_t n : small_sizes()) {
    seeded s(n + 1300);
    SCOPED_TRACE(s.trace());
    witness(random_values<unsigned>(n, s.rng));
    min_with_nans(order_sensitive<float>(n, s.rng), s.rng);
  }
  if (!large) return;
  const std::uint64_t cap = oracle::order_free_max_tiles;
  seeded s(1301);
  SCOPED_TRACE(s.trace());
  const auto u = random_values<unsigned>(two_step_size(oracle::max_tiles), s.rng);
  witness(prefix(u, two_step_size(cap)));
  witness(prefix(u, (cap * 3 - 2) * 8192 + 5));  // 767 steps: tiles of three, the last of two
  witness(u);                                    // 2049 steps: tiles of nine
  min_with_nans(prefix(big_floats(), (cap * 3 - 2) * 8192 + 5), s.rng);
}

// The loaders other than a plain float or double range, each with the W that
// plan_oracle.cuh's rules give it, at the small sizes: a zip of two float ranges (one of them
// misaligned at offset 1) under a user operator over tuples, a contiguous float3 array
// (48-byte chunks of 4), a 48-byte struct (W = 1), int8 into int, __half into float, and a
// transform_iterator from __half to float.
template <class Side>
void every_loader(bool) {
  for (std::size_t n : small_sizes()) {
    seeded s(n + 1400);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const auto x = order_sensitive<float>(n, s.rng);
    const auto y = order_sensitive<float>(n, s.rng);
    {
      SCOPED_TRACE("zip of two float ranges");
      std::vector<float_pair> delivered(n);
      for (std::size_t i = 0; i < n; ++i) delivered[i] = float_pair(x[i], y[i]);
      const float_pair init(0.5f, -0.25f);
      const float_pair expected = oracle::commutative(delivered, oracle::chunk_width(sizeof(float)), init, pair_sum{});
      typename Side::template buffer<float> b(y, 0);
      const auto second = b.begin();
      const auto zip_with_y = [second](auto first) { return thrust::make_zip_iterator(first, second); };
      EXPECT_EQ(tally::detail::plan_vector_width_v<decltype(zip_with_y(second))>, oracle::chunk_width(sizeof(float)));
      expect_plan_bytes<Side>(x, zip_with_y, init, pair_sum{}, expected);
    }
    {
      SCOPED_TRACE("float3 array");
      std::vector<float3> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = float3{x[i], y[i], x[i] * 0.5f};
      const int w = oracle::array_width(sizeof(float3), alignof(float3), std::is_trivially_copyable_v<float3>);
      EXPECT_EQ((tally::detail::plan_vector_width_v<side_iterator<Side, float3>>), w);
      const float3 init{1.0f, 2.0f, 3.0f};
      expect_plan_bytes<Side>(v, as_is{}, init, tally::plus<float3>{},
                              oracle::commutative(v, w, init, tally::plus<float3>{}));
    }
    {
      SCOPED_TRACE("48-byte struct");
      std::vector<twelve_floats> v(n);
      for (std::size_t i = 0; i < n; ++i)
        for (int k = 0; k < 12; ++k) v[i].f[k] = k % 2 ? x[(i + std::size_t(k)) % n] : y[(i * 7 + std::size_t(k)) % n];
      const int w = oracle::array_width(sizeof(twelve_floats), alignof(twelve_floats),
                                        std::is_trivially_copyable_v<twelve_floats>);
      EXPECT_EQ((tally::detail::plan_vector_width_v<side_iterator<Side, twelve_floats>>), w);
      twelve_floats init{};
      init.f[3] = 0.5f;
      expect_plan_bytes<Side>(v, as_is{}, init, twelve_sums{}, oracle::commutative(v, w, init, twelve_sums{}));
    }
    {
      SCOPED_TRACE("int8 into int");
      std::vector<std::int8_t> v(n);
      std::uniform_int_distribution<int> byte(-128, 127);
      for (auto& b : v) b = static_cast<std::int8_t>(byte(s.rng));
      const std::vector<int> delivered(v.begin(), v.end());
      const int w = oracle::chunk_width(sizeof(std::int8_t));
      EXPECT_EQ((tally::detail::plan_vector_width_v<side_iterator<Side, std::int8_t>>), w);
      expect_plan_bytes<Side>(v, as_is{}, 7, int_order_witness{},
                              oracle::commutative(delivered, w, 7, int_order_witness{}));
    }
    {
      SCOPED_TRACE("__half into float, directly and through a transform_iterator");
      std::vector<__half> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = __float2half(x[i]);
      std::vector<float> delivered(n), transformed(n);
      for (std::size_t i = 0; i < n; ++i) {
        delivered[i] = __half2float(v[i]);
        transformed[i] = widen_half{}(v[i]);
      }
      const int w = oracle::chunk_width(sizeof(__half));
      EXPECT_EQ((tally::detail::plan_vector_width_v<side_iterator<Side, __half>>), w);
      expect_plan_bytes<Side>(v, as_is{}, 0.125f, tally::plus<float>{},
                              oracle::commutative(delivered, w, 0.125f, tally::plus<float>{}));
      const auto widened = [](auto first) { return thrust::make_transform_iterator(first, widen_half{}); };
      const int tw = oracle::array_width(sizeof(__half), alignof(__half), true);  // the base's W
      EXPECT_EQ(tally::detail::plan_vector_width_v<decltype(widened(std::declval<side_iterator<Side, __half>>()))>, tw);
      expect_plan_bytes<Side>(v, widened, 0.125f, tally::plus<float>{},
                              oracle::commutative(transformed, tw, 0.125f, tally::plus<float>{}));
    }
  }
}

}  // namespace tally_test::plan_cases
