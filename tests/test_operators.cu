// Operators (tally/operator_traits.cuh, docs/operators.md): which are commutative, and the
// order-preserving plan every other operator takes. Non-commutative operators here change
// their result under any reordering, so each is checked against std::accumulate's left
// fold, on the host and on the device (device tests skip without a GPU).
#include "support/test_support.cuh"
#include "tally/block/reduce.cuh"
#include "tally/fields.cuh"
#include "tally/functional.cuh"
#include "tally/operator_traits.cuh"
#include "tally/reduce.cuh"
#include "tally/tally.cuh"
#include "tally/warp/reduce.cuh"

#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/permutation_iterator.h>
#include <thrust/iterator/reverse_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cuda/functional>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/std/functional>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

using tally_test::bits_of;
using tally_test::device_buffer;
using tally_test::device_value;
using tally_test::random_values;
using tally_test::seeded;

// ---- non-commutative, associative operators ----

// 2x2 matrices of integers mod 2^32 (unsigned wrap-around): a ring, so the product is
// associative; random matrices almost never commute. 16 bytes: one per chunk.
struct mat2 {
  std::uint32_t a, b, c, d;
  bool operator==(const mat2& o) const { return a == o.a && b == o.b && c == o.c && d == o.d; }
};
struct mat2_product {
  __host__ __device__ mat2 operator()(const mat2& x, const mat2& y) const {
    return {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c, x.c * y.b + x.d * y.d};
  }
};

// Affine maps x -> mul * x + add mod 2^32; then(f, g) applies f, then g. 8 bytes: two per chunk.
struct affine {
  std::uint32_t mul, add;
  bool operator==(const affine& o) const { return mul == o.mul && add == o.add; }
};
struct affine_then {
  __host__ __device__ affine operator()(const affine& f, const affine& g) const {
    return {g.mul * f.mul, g.mul * f.add + g.add};
  }
};

// The first value that is not `none`: four per chunk.
inline constexpr int none = -1;
struct first_valid {
  __host__ __device__ int operator()(int a, int b) const { return a != none ? a : b; }
};

// The first 16 bytes of the concatenation: a 20-byte value, one per chunk.
struct text16 {
  unsigned char bytes[16];
  std::uint32_t length;
  bool operator==(const text16& o) const { return length == o.length && std::memcmp(bytes, o.bytes, length) == 0; }
};
struct concatenate {
  __host__ __device__ text16 operator()(const text16& a, const text16& b) const {
    text16 out = a;
    for (std::uint32_t i = 0; i < b.length && out.length < 16; ++i) out.bytes[out.length++] = b.bytes[i];
    return out;
  }
};

// Float addition the library cannot know to be commutative: it takes the ordered plan.
struct unmarked_float_plus {
  __host__ __device__ float operator()(float a, float b) const { return a + b; }
};

std::ostream& operator<<(std::ostream& os, const mat2& m) {
  return os << "[" << m.a << " " << m.b << "; " << m.c << " " << m.d << "]";
}
std::ostream& operator<<(std::ostream& os, const affine& f) { return os << f.mul << "x+" << f.add; }
std::ostream& operator<<(std::ostream& os, const text16& t) {
  os << t.length << ":";
  for (std::uint32_t i = 0; i < t.length && i < 16; ++i) os << int(t.bytes[i]) << ",";
  return os;
}

// ---- inputs from the seeded generator ----

// Invertible mod 2^32 (odd determinant): a long product of arbitrary matrices collects
// factors of two until it is the zero matrix, whatever the order, and would prove nothing.
std::vector<mat2> random_matrices(std::size_t n, std::mt19937_64& rng) {
  std::vector<mat2> v(n);
  for (auto& m : v) {
    do {
      m = {std::uint32_t(rng()), std::uint32_t(rng()), std::uint32_t(rng()), std::uint32_t(rng())};
    } while (((m.a * m.d - m.b * m.c) & 1u) == 0);
  }
  return v;
}

std::vector<affine> random_maps(std::size_t n, std::mt19937_64& rng) {
  std::vector<affine> v(n);
  for (auto& f : v) f = {std::uint32_t(rng()) | 1u, std::uint32_t(rng())};  // odd multipliers: bijections
  return v;
}

// Mostly `none`, a few values at random positions: a reordering picks another value.
std::vector<int> sparse_values(std::size_t n, std::mt19937_64& rng) {
  std::vector<int> v(n, none);
  if (n == 0) return v;
  std::uniform_int_distribution<std::size_t> at(0, n - 1);
  for (int k = 0; k < 12; ++k) v[at(rng)] = int(rng() % 1000000);
  return v;
}

// Mostly empty texts and a few short ones at random positions.
std::vector<text16> sparse_texts(std::size_t n, std::mt19937_64& rng) {
  std::vector<text16> v(n);
  for (auto& t : v) t = text16{{}, 0};
  if (n == 0) return v;
  std::uniform_int_distribution<std::size_t> at(0, n - 1);
  for (int k = 0; k < 10; ++k) {
    text16& t = v[at(rng)];
    t.length = 1 + std::uint32_t(rng() % 3);
    for (std::uint32_t i = 0; i < t.length; ++i) t.bytes[i] = static_cast<unsigned char>(1 + rng() % 250);
  }
  return v;
}

template <class T, class Op>
T left_fold(const std::vector<T>& v, std::size_t first, T init, Op op) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(first), v.end(), init, op);
}

// Every size class, and the ordered plan's own boundaries for an element of `vector_width`
// per chunk: a lane's run, a warp's piece, a tile (one step), multi-step tiles.
std::vector<std::size_t> operator_sizes(int vector_width, std::mt19937_64& rng) {
  std::vector<std::size_t> sizes = tally_test::boundary_sizes();
  const std::size_t run = std::size_t(tally::detail::loads_per_step) * vector_width;
  const std::size_t piece = run * tally::detail::warp_threads;
  const std::size_t step = piece * (tally::detail::block_threads / tally::detail::warp_threads);
  for (std::size_t base : {run, piece, step, 2 * step, 7 * step})
    for (std::size_t delta : {std::size_t(0), std::size_t(1), base - 1}) sizes.push_back(base + delta);
  std::uniform_int_distribution<std::size_t> size(1, 300000);
  for (int i = 0; i < 8; ++i) sizes.push_back(size(rng));
  return sizes;
}

// Past plan_max_tiles steps, tiles take several steps (several pieces per warp).
std::size_t multi_step_size(int vector_width) {
  return std::size_t(tally::detail::plan_max_tiles) * tally::detail::block_threads * tally::detail::loads_per_step *
             vector_width +
         3 * tally::detail::block_threads * vector_width + 5;
}

// ---- the trait ----

struct user_functor {  // keeps the later operand: associative, not commutative
  __host__ __device__ int operator()(int, int b) const { return b; }
};
struct declares_itself {
  static constexpr bool commutative = true;
  __host__ __device__ int operator()(int a, int b) const { return a + b; }
};
struct declares_not {
  static constexpr bool commutative = false;
  __host__ __device__ int operator()(int a, int b) const { return a + b; }
};

static_assert(tally::is_commutative_v<tally::plus<int>> && tally::is_commutative_v<tally::plus<>>);
static_assert(tally::is_commutative_v<tally::multiplies<float>> && tally::is_commutative_v<tally::multiplies<>>);
static_assert(tally::is_commutative_v<tally::minimum<double>> && tally::is_commutative_v<tally::maximum<>>);
static_assert(tally::is_commutative_v<tally::bit_and<unsigned>> && tally::is_commutative_v<tally::bit_or<>> &&
              tally::is_commutative_v<tally::bit_xor<long>>);
static_assert(tally::is_commutative_v<tally::logical_and<bool>> && tally::is_commutative_v<tally::logical_or<>>);
static_assert(tally::is_commutative_v<thrust::plus<int>> && tally::is_commutative_v<thrust::multiplies<int>> &&
              tally::is_commutative_v<thrust::minimum<int>> && tally::is_commutative_v<thrust::maximum<float>> &&
              tally::is_commutative_v<thrust::bit_and<int>> && tally::is_commutative_v<thrust::bit_or<int>> &&
              tally::is_commutative_v<thrust::bit_xor<int>> && tally::is_commutative_v<thrust::logical_and<bool>> &&
              tally::is_commutative_v<thrust::logical_or<bool>>);
static_assert(tally::is_commutative_v<cuda::std::plus<>> && tally::is_commutative_v<cuda::std::multiplies<int>> &&
              tally::is_commutative_v<cuda::minimum<>> && tally::is_commutative_v<cuda::maximum<int>> &&
              tally::is_commutative_v<cuda::std::bit_xor<>> && tally::is_commutative_v<cuda::std::logical_or<>>);
static_assert(tally::is_commutative_v<std::plus<int>> && tally::is_commutative_v<std::plus<>> &&
              tally::is_commutative_v<std::multiplies<double>> && tally::is_commutative_v<std::bit_and<>> &&
              tally::is_commutative_v<std::bit_or<int>> && tally::is_commutative_v<std::bit_xor<int>> &&
              tally::is_commutative_v<std::logical_and<>> && tally::is_commutative_v<std::logical_or<bool>>);
static_assert(tally::is_commutative_v<const tally::plus<int>>, "cv-qualifiers do not matter");
// Not commutative: subtraction, user functors, and what the library cannot see into.
static_assert(!tally::is_commutative_v<std::minus<int>> && !tally::is_commutative_v<thrust::minus<int>>);
static_assert(!tally::is_commutative_v<user_functor> && !tally::is_commutative_v<mat2_product>);
static_assert(!tally::is_commutative_v<declares_not>);
static_assert(tally::is_commutative_v<declares_itself>);
static_assert(tally::is_commutative_v<decltype(tally::commutative(user_functor{}))>);
// tally::fields is as commutative as its least commutative field operator.
static_assert(tally::is_commutative_v<decltype(tally::fields(tally::plus<>{}, tally::maximum<>{}))>);
static_assert(!tally::is_commutative_v<decltype(tally::fields(tally::plus<>{}, first_valid{}))>);
// The library's own operators keep the fastest plan.
static_assert(tally::is_commutative_v<tally::detail::keep_first_min<int, thrust::less<int>>> &&
              tally::is_commutative_v<tally::detail::keep_last_max<float, thrust::less<float>>> &&
              tally::is_commutative_v<tally::detail::keep_min_and_max<int, thrust::less<int>>>);

TEST(operator_traits, lambdas_are_not_commutative_unless_marked) {
  auto subtract = [](int a, int b) { return a - b; };
  static_assert(!tally::is_commutative_v<decltype(subtract)>);
  const auto marked = tally::commutative(subtract);
  static_assert(tally::is_commutative_v<decltype(marked)>);
  EXPECT_EQ(marked(10, 3), 7);  // calls are forwarded, operands in order
  EXPECT_EQ(tally::commutative(mat2_product{})(mat2{1, 2, 3, 4}, mat2{0, 1, 1, 0}), (mat2{2, 1, 4, 3}));
  // Whichever plan they take, the operators' results are the fold's.
  const std::vector<int> v = {5, 1, 2};
  EXPECT_EQ(tally::reduce(tally::host, v.begin(), v.end(), 20, user_functor{}), 2);
  EXPECT_EQ(tally::reduce(tally::host, v.begin(), v.end(), 20, declares_itself{}), 28);
  EXPECT_EQ(tally::reduce(tally::host, v.begin(), v.end(), 20, declares_not{}), 28);
  static_assert(declares_itself::commutative && !declares_not::commutative);
}

TEST(operator_traits, the_new_functors_compute_what_they_are_named) {
  EXPECT_TRUE(tally::logical_and<bool>{}(true, true));
  EXPECT_FALSE(tally::logical_and<>{}(true, false));
  EXPECT_TRUE(tally::logical_or<bool>{}(false, true));
  EXPECT_FALSE(tally::logical_or<>{}(false, false));
}

// ---- identities ----

// Known in constant expressions, so also in device code.
static_assert(tally::identity_of<int>(tally::plus<>{}) == 0);
static_assert(tally::identity_of<long long>(tally::multiplies<long long>{}) == 1);
static_assert(tally::identity_of<unsigned char>(tally::bit_and<>{}) == 0xFF);
static_assert(tally::identity_of<short>(tally::minimum<>{}) == SHRT_MAX);
static_assert(tally::identity_of<std::uint64_t>(tally::maximum<>{}) == 0);
static_assert(tally::identity_of<float>(tally::minimum<>{}) == INFINITY);
static_assert(tally::identity_of<double>(tally::maximum<>{}) == -INFINITY);
static_assert(tally::identity_of<bool>(tally::logical_and<>{}) && !tally::identity_of<bool>(tally::logical_or<>{}));

// op(e, x) == x == op(x, e) for random x, for every operator and some types of each kind.
template <class T, class Op>
void expect_identity(Op op, const std::vector<T>& values) {
  const T e = tally::identity_of<T>(op);
  for (const T& x : values) {
    EXPECT_EQ(bits_of(static_cast<T>(op(e, x))), bits_of(x)) << "op(e, x), x = " << +x;
    EXPECT_EQ(bits_of(static_cast<T>(op(x, e))), bits_of(x)) << "op(x, e), x = " << +x;
  }
}

template <class T>
void expect_every_identity(std::mt19937_64& rng) {
  const auto v = random_values<T>(64, rng);
  expect_identity(tally::plus<T>{}, v);
  expect_identity(tally::multiplies<T>{}, v);
  expect_identity(tally::minimum<T>{}, v);
  expect_identity(tally::maximum<T>{}, v);
  if constexpr (std::is_integral_v<T>) {
    expect_identity(tally::bit_and<T>{}, v);
    expect_identity(tally::bit_or<T>{}, v);
    expect_identity(tally::bit_xor<T>{}, v);
    std::vector<T> truth(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) truth[i] = T(v[i] & 1);  // 0 and 1: logical values
    expect_identity(tally::logical_and<T>{}, truth);
    expect_identity(tally::logical_or<T>{}, truth);
  }
}

TEST(identities, every_operator_leaves_the_other_operand_unchanged) {
  seeded s(320);
  SCOPED_TRACE(s.trace());
  expect_every_identity<std::int8_t>(s.rng);
  expect_every_identity<std::uint16_t>(s.rng);
  expect_every_identity<int>(s.rng);
  expect_every_identity<unsigned long long>(s.rng);
  expect_every_identity<float>(s.rng);
  expect_every_identity<double>(s.rng);
}

// CUDA's 16-bit floating-point types: +0, 1 and the infinities, as for float, and each leaves
// every finite and infinite value of the type unchanged (compared through float, which holds
// every half and bfloat16 value exactly).
template <class H>
void expect_half_identities(float (*to_float)(H), H (*from_float)(float)) {
  EXPECT_EQ(bits_of(to_float(tally::identity_of<H>(tally::plus<>{}))), bits_of(0.0f));
  EXPECT_EQ(to_float(tally::identity_of<H>(tally::multiplies<>{})), 1.0f);
  EXPECT_EQ(to_float(tally::identity_of<H>(tally::minimum<>{})), INFINITY);
  EXPECT_EQ(to_float(tally::identity_of<H>(tally::maximum<>{})), -INFINITY);
  for (float x : {-3.5f, -0.0f, 0.0f, 1.0f, 0.125f, 65504.0f, -INFINITY, INFINITY}) {
    const H h = from_float(x);
    EXPECT_EQ(bits_of(to_float(tally::plus<>{}(tally::identity_of<H>(tally::plus<>{}), h))),
              bits_of(x == 0.0f ? 0.0f : to_float(h)))  // +0 + -0 is +0
        << x;
    EXPECT_EQ(to_float(tally::minimum<>{}(tally::identity_of<H>(tally::minimum<>{}), h)), to_float(h)) << x;
    EXPECT_EQ(to_float(tally::maximum<>{}(tally::identity_of<H>(tally::maximum<>{}), h)), to_float(h)) << x;
  }
}

TEST(identities, half_and_bfloat16_take_floats_identities) {
  expect_half_identities<__half>([](__half h) { return __half2float(h); }, [](float x) { return __float2half(x); });
  expect_half_identities<__nv_bfloat16>([](__nv_bfloat16 h) { return __bfloat162float(h); },
                                        [](float x) { return __float2bfloat16(x); });
}

TEST(identities, tuple_likes_take_each_fields_identity) {
  const auto lo = tally::identity_of<float3>(tally::minimum<float3>{});
  EXPECT_EQ(lo.x, INFINITY);
  EXPECT_EQ(lo.z, INFINITY);
  const auto hi = tally::identity_of<cuda::std::tuple<int, double>>(tally::maximum<>{});
  EXPECT_EQ(cuda::std::get<0>(hi), INT_MIN);
  EXPECT_EQ(cuda::std::get<1>(hi), -INFINITY);
  const auto ones = tally::identity_of<uchar4>(tally::bit_and<uchar4>{});
  EXPECT_EQ(ones.x, 0xFF);
  EXPECT_EQ(ones.w, 0xFF);
  const float3 p = make_float3(1.5f, -2.0f, 0.25f);
  const float3 same = tally::plus<float3>{}(p, tally::identity_of<float3>(tally::plus<float3>{}));
  EXPECT_EQ(same.x, p.x);
  EXPECT_EQ(same.y, p.y);
  EXPECT_EQ(same.z, p.z);
}

// ---- the ordered plan's geometry ----

TEST(ordered_plan, lane_runs_cover_every_tile_once_in_order) {
  for (int vw : {1, 2, 4, 16}) {
    for (std::uint64_t n : {std::uint64_t(1), std::uint64_t(255), std::uint64_t(4097), std::uint64_t(2048) * 16 * 3 + 7,
                            std::uint64_t(multi_step_size(vw))}) {
      SCOPED_TRACE("vw = " + std::to_string(vw) + ", n = " + std::to_string(n));
      const auto plan = tally::detail::make_plan(n, vw);
      std::uint64_t expected = 0;  // the next index, if every run follows the previous one
      for (std::uint64_t tile = 0; tile < plan.tiles; ++tile) {
        const auto shape = tally::detail::ordered_tile_of(plan, tile);
        ASSERT_EQ(shape.begin, expected);
        for (int w = 0; w < tally::detail::block_threads / tally::detail::warp_threads; ++w)
          for (std::uint64_t piece = 0; piece < shape.steps; ++piece)
            for (int lane = 0; lane < tally::detail::warp_threads; ++lane) {
              const std::uint64_t run_begin = shape.piece_begin(w, piece) + lane * shape.run_items;
              if (run_begin >= shape.end) continue;
              ASSERT_EQ(run_begin, expected) << "tile " << tile << " warp " << w << " piece " << piece << " lane " << lane;
              expected = std::min(shape.end, run_begin + shape.run_items);
            }
        ASSERT_EQ(expected, shape.end);
      }
      EXPECT_EQ(expected, n);
    }
  }
}

// ---- host ----

template <class T, class Op>
void expect_host_left_fold(const std::vector<T>& v, T init, Op op, std::size_t first = 0) {
  const T want = left_fold(v, first, init, op);
  EXPECT_EQ(tally::reduce(tally::host, v.begin() + static_cast<std::ptrdiff_t>(first), v.end(), init, op), want);
  std::vector<T> out(1, init);
  tally::reduce_into(tally::host, v.begin() + static_cast<std::ptrdiff_t>(first), v.end(), out.begin(), init, op);
  EXPECT_EQ(out[0], want);
}

TEST(host_ordered, matrix_products_equal_the_left_fold) {
  seeded s(201);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : operator_sizes(tally::detail::vector_width_v<mat2>, s.rng)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto v = random_matrices(n + 1, s.rng);
    const mat2 init = random_matrices(1, s.rng)[0];
    expect_host_left_fold(v, init, mat2_product{}, 1);  // from the second element: a shifted start
  }
}

TEST(host_ordered, affine_compositions_equal_the_left_fold) {
  seeded s(202);
  SCOPED_TRACE(s.trace());
  std::vector<std::size_t> sizes = operator_sizes(tally::detail::vector_width_v<affine>, s.rng);
  sizes.push_back(multi_step_size(tally::detail::vector_width_v<affine>));
  for (std::size_t n : sizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto v = random_maps(n, s.rng);
    expect_host_left_fold(v, affine{3u, 7u}, affine_then{});
  }
}

TEST(host_ordered, first_valid_value_is_the_first_one) {
  seeded s(203);
  SCOPED_TRACE(s.trace());
  std::vector<std::size_t> sizes = operator_sizes(tally::detail::vector_width_v<int>, s.rng);
  sizes.push_back(multi_step_size(tally::detail::vector_width_v<int>));
  for (std::size_t n : sizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto v = sparse_values(n + 3, s.rng);
    expect_host_left_fold(v, none, first_valid{}, 3);
    EXPECT_EQ(tally::reduce(tally::host, v.begin(), v.end(), 42, first_valid{}), 42);  // init comes first
  }
}

TEST(host_ordered, concatenation_keeps_the_first_sixteen_bytes_in_order) {
  seeded s(204);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : operator_sizes(tally::detail::vector_width_v<text16>, s.rng)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto v = sparse_texts(n, s.rng);
    expect_host_left_fold(v, text16{{9}, 1}, concatenate{});
  }
}

TEST(host_ordered, a_user_lambda_keeps_left_to_right_order) {
  seeded s(205);
  SCOPED_TRACE(s.trace());
  const auto v = random_matrices(100003, s.rng);
  const auto product = [](const mat2& x, const mat2& y) { return mat2_product{}(x, y); };
  EXPECT_EQ(tally::reduce(tally::host, v.begin(), v.end(), mat2{1, 0, 0, 1}, product),
            left_fold(v, 0, mat2{1, 0, 0, 1}, product));
  EXPECT_EQ(tally::reduce(v.begin(), v.end(), mat2{1, 0, 0, 1}, product), left_fold(v, 0, mat2{1, 0, 0, 1}, product));
}

TEST(host_ordered, bits_do_not_depend_on_the_thread_count) {
  seeded s(206);
  SCOPED_TRACE(s.trace());
  const auto f = random_values<float>((std::size_t(1) << 21) + 13, s.rng);
  const float one = tally::reduce(tally::host.threads(1), f.begin(), f.end(), 0.0f, unmarked_float_plus{});
  for (unsigned threads : {2u, 3u, 0u})
    EXPECT_EQ(bits_of(tally::reduce(tally::host.threads(threads), f.begin(), f.end(), 0.0f, unmarked_float_plus{})),
              bits_of(one))
        << threads;
}

TEST(host_ordered, commutative_operators_keep_their_plan) {
  // A float sum by tally::plus and the same sum marked commutative take one plan; an
  // unmarked sum takes the ordered one, which rounds differently on some of these inputs.
  seeded s(207);
  SCOPED_TRACE(s.trace());
  // Mixed signs of zero mean over 24 binades: the partial sums cancel and round in every
  // step, so that two orders of addition give other bits in nearly every round.
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-12, 12);
  int ordered_sums_that_differ = 0;
  for (int round = 0; round < 8; ++round) {
    std::vector<float> f(100003);
    for (auto& x : f) x = static_cast<float>(std::ldexp(mantissa(s.rng), exponent(s.rng)));
    const float fast = tally::reduce(tally::host, f.begin(), f.end(), 0.0f, tally::plus<float>{});
    EXPECT_EQ(bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.0f, tally::commutative(unmarked_float_plus{}))),
              bits_of(fast));
    EXPECT_EQ(bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.0f, std::plus<>{})), bits_of(fast));
    EXPECT_EQ(bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.0f, thrust::plus<float>{})), bits_of(fast));
    if (bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.0f, unmarked_float_plus{})) != bits_of(fast))
      ++ordered_sums_that_differ;
  }
  EXPECT_GT(ordered_sums_that_differ, 0) << "the unmarked operator seems to take the commutative plan";
}

// ---- every algorithm that takes an operator, over every iterator kind it accepts ----
//
// reduce, reduce_into, transform_reduce (one range and two), inner_product, their range and
// policy-free forms, and tally::fields with an order-preserving field, over every iterator
// kind: each against std::accumulate's left fold of the values the kind yields. One value
// type and one operator serve them all (and tuples of it for the field reductions), so that
// each kind costs its own loader's kernels and little else to compile.

// affine with constructors: from a multiplier and an addend, or from an integer by a hash
// (splitmix64's finalizer), which is how a counting range yields maps: tally converts each
// value to init's type as it reads it. Consecutive integers then give unrelated maps. Maps
// read off the integers themselves (multiplier and addend packed in a word) would share one
// multiplier and have addends in arithmetic progression: a fold of 3 * 2^20 of them did not
// change when two adjacent tiles (4096 maps each) were swapped, in any of 600 trials.
// Multipliers are odd (the maps are bijections), so a long fold never collapses to a constant
// map.
struct map_value : affine {
  map_value() = default;
  __host__ __device__ constexpr map_value(std::uint32_t m, std::uint32_t a) : affine{m, a} {}
  __host__ __device__ constexpr map_value(std::uint64_t seed) : affine{0, 0} {
    std::uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    mul = std::uint32_t(z >> 32) | 1u;
    add = std::uint32_t(z);
  }
  bool operator!=(const map_value& o) const { return !(*this == o); }
};

struct map_then {  // affine_then: f, then g
  __host__ __device__ map_value operator()(const map_value& f, const map_value& g) const {
    const affine h = affine_then{}(f, g);
    return {h.mul, h.add};
  }
};
static_assert(!tally::is_commutative_v<map_then> && std::is_trivially_copyable_v<map_value>);

// Transforms that make maps: of a 32-bit value, of an index, of a multiplier and an addend
// (the two-range forms' transform_op: swapping its operands gives other maps), of a zip's
// tuple of them, and none.
struct map_of_value {
  __host__ __device__ map_value operator()(std::uint32_t x) const { return {x | 1u, x * 0x9E3779B9u}; }
};
struct map_of_index {
  __host__ __device__ map_value operator()(std::uint64_t i) const { return map_value(~i); }
};
struct map_of_pair {
  __host__ __device__ map_value operator()(std::uint32_t mul, std::uint32_t add) const { return {mul | 1u, add}; }
};
struct map_of_tuple {
  template <class Tuple>
  __host__ __device__ map_value operator()(const Tuple& t) const {
    return map_of_pair{}(cuda::std::get<0>(t), cuda::std::get<1>(t));
  }
};
struct same_map {
  __host__ __device__ map_value operator()(const map_value& f) const { return f; }
};

// Field reductions: the map field folded in order beside commutative fields, as a structure
// of arrays (a zip), as an array of 24-byte tuples (read in 48-byte chunks on the device) and
// as tuples made by transform_reduce.
using weighted_map = cuda::std::tuple<map_value, std::uint64_t>;
using tagged_map = cuda::std::tuple<map_value, std::uint64_t, std::uint64_t>;
const auto map_and_sum = tally::fields(map_then{}, tally::plus<>{});
const auto map_sum_and_max = tally::fields(map_then{}, tally::plus<>{}, tally::maximum<>{});
static_assert(!tally::is_commutative_v<decltype(map_and_sum)> && !tally::is_commutative_v<decltype(map_sum_and_max)>);
static_assert(sizeof(tagged_map) == 24 && tally::detail::array_chunk_width_v<tagged_map> == 2, "48-byte chunks");
struct weigh_by_one {
  __host__ __device__ weighted_map operator()(const map_value& f) const { return weighted_map(f, 1); }
};

// Results as std:: values, which compare and print.
inline map_value comparable(const map_value& f) { return f; }
inline std::tuple<map_value, std::uint64_t> comparable(const weighted_map& t) {
  return {cuda::std::get<0>(t), cuda::std::get<1>(t)};
}
inline std::tuple<map_value, std::uint64_t, std::uint64_t> comparable(const tagged_map& t) {
  return {cuda::std::get<0>(t), cuda::std::get<1>(t), cuda::std::get<2>(t)};
}

// One size's inputs: n random maps, whole and as their halves, a permutation, and where the
// counting and constant ranges start.
struct map_inputs {
  map_value init;
  std::vector<map_value> maps;
  std::vector<std::uint32_t> muls, adds;  // maps[i] == map_value(muls[i], adds[i])
  std::vector<std::uint32_t> perm;
  std::uint64_t counting_first = 0, index_first = 0;
  map_value constant;
  std::uint32_t second_first = 0, second_constant = 0;  // the two-range forms' second range
};

map_inputs make_map_inputs(std::size_t n, std::mt19937_64& rng) {
  map_inputs in;
  in.init = map_value(rng());
  in.constant = map_value(rng());
  in.maps.resize(n);
  in.muls.resize(n);
  in.adds.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    in.maps[i] = map_value(rng());
    in.muls[i] = in.maps[i].mul;
    in.adds[i] = in.maps[i].add;
  }
  // A permutation within blocks of 1024 (the last, partial one reversed): as good a test of
  // the permutation_iterator as a random one, and cheap to make and to read at every size.
  const std::uint32_t stride = std::uint32_t(rng() % 512) * 2 + 1, offset = std::uint32_t(rng() % 1024);
  in.perm.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t base = i / 1024 * 1024;
    in.perm[i] = std::uint32_t(base + 1024 <= n ? base + (std::uint32_t(i - base) * stride + offset) % 1024
                                                : n - 1 - (i - base));
  }
  in.counting_first = rng();
  in.index_first = rng();
  in.second_first = std::uint32_t(rng());
  in.second_constant = std::uint32_t(rng());
  return in;
}

// std::accumulate's left fold of value(0), ..., value(n - 1) from init: what a kind that
// yields those values must give. Up to 2^16 + 3 values it also checks that folding with the
// operands swapped gives another result: the operator does not commute on these inputs, so a
// check against the fold sees the operands of any combination swapped (init's included). The
// largest size's inputs come from the same generators.
template <class Value>
map_value fold_of(std::size_t n, const map_value& init, Value value) {
  std::vector<map_value> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value(i);
  const map_value fold = std::accumulate(v.begin(), v.end(), init, map_then{});
  const auto swapped = [](const map_value& a, const map_value& b) { return map_then{}(b, a); };
  if (n > 0 && n <= (std::size_t(1) << 16) + 3)
    EXPECT_NE(std::accumulate(v.begin(), v.end(), init, swapped), fold) << "the operator commutes on these inputs";
  return fold;
}

// The left folds of every kind's values.
struct map_folds {
  map_value maps, values, counting, indexed, constant, permuted, reversed, counting_second, constant_second;
};

map_folds folds_of(const map_inputs& in) {
  const std::size_t n = in.maps.size();
  map_folds f;
  f.maps = fold_of(n, in.init, [&](std::size_t i) { return in.maps[i]; });
  f.values = fold_of(n, in.init, [&](std::size_t i) { return map_of_value{}(in.muls[i]); });
  f.counting = fold_of(n, in.init, [&](std::size_t i) { return map_value(in.counting_first + i); });
  f.indexed = fold_of(n, in.init, [&](std::size_t i) { return map_of_index{}(in.index_first + i); });
  f.constant = fold_of(n, in.init, [&](std::size_t) { return in.constant; });
  f.permuted = fold_of(n, in.init, [&](std::size_t i) { return in.maps[in.perm[i]]; });
  f.reversed = fold_of(n, in.init, [&](std::size_t i) { return in.maps[n - 1 - i]; });
  f.counting_second = fold_of(n, in.init, [&](std::size_t i) {
    return map_of_pair{}(in.muls[i], in.second_first + static_cast<std::uint32_t>(i));
  });
  f.constant_second = fold_of(n, in.init, [&](std::size_t i) { return map_of_pair{}(in.muls[i], in.second_constant); });
  return f;
}

// Empty; one tile, of one piece and of several; two tiles; several; then `many` (0: none).
// A tile is 4096 maps, 8192 for the kinds made from 32-bit ranges (their plan follows the
// base's element size). Every ordered kernel takes part: the one-block kernel of one and two
// tiles, the single pass and the two pass.
std::vector<std::size_t> kind_sizes(std::size_t many) {
  std::vector<std::size_t> sizes = {0, 1, 1000, 5000, (std::size_t(1) << 13) + 17, (std::size_t(1) << 16) + 3};
  if (many != 0) sizes.push_back(many);
  return sizes;
}
// Many tiles: more than 256, so that the fold of the tile partials gives each thread several.
// On the host 257 tiles of maps and no more: CI runs the host cases under valgrind and, at
// -O0, under ASan and UBSan, where every element costs (with 3 * 2^20 + 5 maps, as on the
// device, this program's sanitized run took 42 s instead of 8).
constexpr std::size_t host_many_tiles = (std::size_t(1) << 20) + 5;

// The field reductions' inputs and left folds.
struct field_inputs {
  std::vector<std::uint64_t> weights;
  std::vector<tagged_map> tagged;  // (maps[i], weights[i], weights[i] ^ i)
  weighted_map weighted_init;
  tagged_map tagged_init;
  weighted_map weighted_fold, indexed_fold, ones_fold;
  tagged_map tagged_fold;
};

field_inputs make_field_inputs(const map_inputs& in, std::mt19937_64& rng) {
  const std::size_t n = in.maps.size();
  field_inputs f;
  f.weighted_init = weighted_map(in.init, 5);
  f.tagged_init = tagged_map(in.init, 5, 0);
  std::vector<weighted_map> weighted(n), indexed(n), ones(n);
  f.weights.resize(n);
  f.tagged.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    f.weights[i] = rng() >> 8;
    f.tagged[i] = tagged_map(in.maps[i], f.weights[i], f.weights[i] ^ i);
    weighted[i] = weighted_map(in.maps[i], f.weights[i]);
    indexed[i] = weighted_map(in.maps[i], i);
    ones[i] = weighted_map(in.maps[i], 1);
  }
  f.weighted_fold = std::accumulate(weighted.begin(), weighted.end(), f.weighted_init, map_and_sum);
  f.indexed_fold = std::accumulate(indexed.begin(), indexed.end(), f.weighted_init, map_and_sum);
  f.ones_fold = std::accumulate(ones.begin(), ones.end(), f.weighted_init, map_and_sum);
  f.tagged_fold = std::accumulate(f.tagged.begin(), f.tagged.end(), f.tagged_init, map_sum_and_max);
  return f;
}

// reduce and reduce_into on the host over [first, first + n).
template <class It, class Acc, class Op>
void expect_host_reduce(It first, std::size_t n, const Acc& init, Op op, const Acc& want, const char* kind) {
  SCOPED_TRACE(kind);
  const It last = first + static_cast<std::ptrdiff_t>(n);
  EXPECT_EQ(comparable(tally::reduce(tally::host, first, last, init, op)), comparable(want)) << "reduce";
  std::vector<Acc> out(1);
  tally::reduce_into(tally::host, first, last, out.begin(), init, op);
  EXPECT_EQ(comparable(out[0]), comparable(want)) << "reduce_into";
}

TEST(host_ordered, every_algorithm_folds_in_order_over_every_iterator_kind) {
  seeded s(208);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : kind_sizes(host_many_tiles)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const map_inputs in = make_map_inputs(n, s.rng);
    const map_folds want = folds_of(in);
    const map_then op;
    const auto maps = in.maps.begin(), maps_end = in.maps.end();
    const auto muls = in.muls.begin(), muls_end = in.muls.end();
    const thrust::counting_iterator<std::uint64_t> indices(in.index_first);

    expect_host_reduce(maps, n, in.init, op, want.maps, "std::vector iterator");
    expect_host_reduce(in.maps.data(), n, in.init, op, want.maps, "pointer");
    expect_host_reduce(thrust::counting_iterator<std::uint64_t>(in.counting_first), n, in.init, op, want.counting,
                       "counting_iterator");
    // Powers of one map commute: a constant range can only show where init goes.
    expect_host_reduce(thrust::constant_iterator<map_value>(in.constant), n, in.init, op, want.constant,
                       "constant_iterator");
    expect_host_reduce(thrust::make_transform_iterator(muls, map_of_value{}), n, in.init, op, want.values,
                       "transform_iterator");
    expect_host_reduce(thrust::make_transform_iterator(indices, map_of_index{}), n, in.init, op, want.indexed,
                       "transform_iterator over a counting_iterator");
    expect_host_reduce(thrust::make_transform_iterator(tally::zip(muls, in.adds.begin()), map_of_tuple{}), n, in.init,
                       op, want.maps, "transform_iterator over a zip_iterator");
    expect_host_reduce(thrust::make_permutation_iterator(maps, in.perm.begin()), n, in.init, op, want.permuted,
                       "permutation_iterator");
    expect_host_reduce(in.maps.rbegin(), n, in.init, op, want.reversed, "std::reverse_iterator");
    EXPECT_EQ(tally::reduce(thrust::host, maps, maps_end, in.init, op), want.maps) << "thrust::host";

    // transform_reduce: its transform_iterator over each kind of base.
    EXPECT_EQ(tally::transform_reduce(tally::host, muls, muls_end, map_of_value{}, in.init, op), want.values);
    EXPECT_EQ(tally::transform_reduce(tally::host, indices, indices + n, map_of_index{}, in.init, op), want.indexed)
        << "counting_iterator";
    const auto pairs = tally::zip(muls, in.adds.begin());
    EXPECT_EQ(tally::transform_reduce(tally::host, pairs, pairs + n, map_of_tuple{}, in.init, op), want.maps)
        << "zip_iterator";
    EXPECT_EQ(tally::transform_reduce(tally::host, in.maps.rbegin(), in.maps.rend(), same_map{}, in.init, op),
              want.reversed)
        << "std::reverse_iterator";

    // Two ranges: transform_op pairs them in order, reduce_op (inner_product's op1) folds.
    const thrust::counting_iterator<std::uint32_t> counting_second(in.second_first);
    const thrust::constant_iterator<std::uint32_t> constant_second(in.second_constant);
    EXPECT_EQ(tally::transform_reduce(tally::host, muls, muls_end, in.adds.begin(), in.init, op, map_of_pair{}),
              want.maps);
    EXPECT_EQ(tally::inner_product(tally::host, muls, muls_end, in.adds.begin(), in.init, op, map_of_pair{}),
              want.maps);
    EXPECT_EQ(tally::transform_reduce(tally::host, muls, muls_end, counting_second, in.init, op, map_of_pair{}),
              want.counting_second);
    EXPECT_EQ(tally::inner_product(tally::host, muls, muls_end, counting_second, in.init, op, map_of_pair{}),
              want.counting_second);
    EXPECT_EQ(tally::transform_reduce(tally::host, muls, muls_end, constant_second, in.init, op, map_of_pair{}),
              want.constant_second);
    EXPECT_EQ(tally::inner_product(tally::host, muls, muls_end, constant_second, in.init, op, map_of_pair{}),
              want.constant_second);

    // Ranges, and the forms without a policy (std::vector: the host).
    EXPECT_EQ(tally::reduce(tally::host, in.maps, in.init, op), want.maps);
    EXPECT_EQ(tally::reduce(in.maps, in.init, op), want.maps);
    EXPECT_EQ(tally::transform_reduce(tally::host, in.muls, map_of_value{}, in.init, op), want.values);
    EXPECT_EQ(tally::transform_reduce(in.muls, map_of_value{}, in.init, op), want.values);
    EXPECT_EQ(tally::reduce(maps, maps_end, in.init, op), want.maps);
    EXPECT_EQ(tally::transform_reduce(muls, muls_end, map_of_value{}, in.init, op), want.values);
    EXPECT_EQ(tally::transform_reduce(muls, muls_end, in.adds.begin(), in.init, op, map_of_pair{}), want.maps);
    EXPECT_EQ(tally::inner_product(muls, muls_end, in.adds.begin(), in.init, op, map_of_pair{}), want.maps);
  }
}

TEST(host_ordered, field_reductions_fold_an_order_preserving_field_in_order) {
  seeded s(209);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : kind_sizes(host_many_tiles)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const map_inputs in = make_map_inputs(n, s.rng);
    const field_inputs f = make_field_inputs(in, s.rng);
    const auto maps = in.maps.begin();
    expect_host_reduce(tally::zip(maps, f.weights.begin()), n, f.weighted_init, map_and_sum, f.weighted_fold,
                       "zip of two ranges");
    expect_host_reduce(tally::zip(maps, thrust::counting_iterator<std::uint64_t>(0)), n, f.weighted_init, map_and_sum,
                       f.indexed_fold, "zip of a range and a counting_iterator");
    expect_host_reduce(f.tagged.begin(), n, f.tagged_init, map_sum_and_max, f.tagged_fold, "array of tuples");
    EXPECT_EQ(comparable(tally::transform_reduce(tally::host, maps, in.maps.end(), weigh_by_one{}, f.weighted_init,
                                                 map_and_sum)),
              comparable(f.ones_fold))
        << "transform_reduce making tuples";
  }
}

// ---- device ----

// The sanitized host build (scripts/test) defines TALLY_TEST_HOST_ONLY and compiles no kernel tests.
#if !defined(TALLY_TEST_HOST_ONLY)
class device_ordered : public tally_test::device_test {};

template <class T, class Op>
void expect_device_left_fold(const std::vector<T>& v, T init, Op op, std::size_t offset) {
  const T want = left_fold(v, 0, init, op);
  device_buffer<T> d(v, offset);
  for (auto st : {tally::strategy::single_pass, tally::strategy::two_pass}) {
    SCOPED_TRACE(st == tally::strategy::two_pass ? "two pass" : "single pass");
    device_value<T> out;  // poisoned
    tally::reduce_into(tally::device.strategy(st), d.begin(), d.end(), out.get(), init, op);
    EXPECT_EQ(out.read(), want);
    EXPECT_EQ(tally::reduce(tally::device.strategy(st), d.begin(), d.end(), init, op), want);
  }
}

TEST_F(device_ordered, matrix_products_equal_the_left_fold) {
  seeded s(301);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : operator_sizes(tally::detail::vector_width_v<mat2>, s.rng)) {
    for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset = " + std::to_string(offset));
      expect_device_left_fold(random_matrices(n, s.rng), mat2{5, 6, 7, 8}, mat2_product{}, offset);
    }
  }
}

TEST_F(device_ordered, affine_compositions_equal_the_left_fold) {
  seeded s(302);
  SCOPED_TRACE(s.trace());
  std::vector<std::size_t> sizes = operator_sizes(tally::detail::vector_width_v<affine>, s.rng);
  if (!tally_test::under_sanitizer()) sizes.push_back(multi_step_size(tally::detail::vector_width_v<affine>));
  for (std::size_t n : sizes) {
    for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset = " + std::to_string(offset));
      expect_device_left_fold(random_maps(n, s.rng), affine{3u, 7u}, affine_then{}, offset);
    }
  }
}

TEST_F(device_ordered, first_valid_value_is_the_first_one) {
  seeded s(303);
  SCOPED_TRACE(s.trace());
  std::vector<std::size_t> sizes = operator_sizes(tally::detail::vector_width_v<int>, s.rng);
  if (!tally_test::under_sanitizer()) sizes.push_back(multi_step_size(tally::detail::vector_width_v<int>));
  for (std::size_t n : sizes) {
    for (std::size_t offset : {std::size_t(0), std::size_t(3)}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset = " + std::to_string(offset));
      expect_device_left_fold(sparse_values(n, s.rng), none, first_valid{}, offset);
    }
  }
}

TEST_F(device_ordered, concatenation_keeps_the_first_sixteen_bytes_in_order) {
  seeded s(304);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : operator_sizes(tally::detail::vector_width_v<text16>, s.rng)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    expect_device_left_fold(sparse_texts(n, s.rng), text16{{9}, 1}, concatenate{}, 0);
  }
}

TEST_F(device_ordered, float_sums_through_the_ordered_plan_equal_the_host_bit_for_bit) {
  seeded s(305);
  SCOPED_TRACE(s.trace());
  std::vector<std::size_t> sizes = operator_sizes(tally::detail::vector_width_v<float>, s.rng);
  if (!tally_test::under_sanitizer()) {
    sizes.push_back(multi_step_size(tally::detail::vector_width_v<float>));
    sizes.push_back((std::size_t(1) << 24) + 1);
  }
  for (std::size_t n : sizes) {
    for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset = " + std::to_string(offset));
      const auto f = random_values<float>(n, s.rng);
      const auto want = bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.5f, unmarked_float_plus{}));
      device_buffer<float> d(f, offset);
      device_value<float> out;
      tally::reduce_into(tally::device, d.begin(), d.end(), out.get(), 0.5f, unmarked_float_plus{});
      EXPECT_EQ(bits_of(out.read()), want);
      for (unsigned grid : {1u, 3u, 1000u})
        EXPECT_EQ(bits_of(tally::reduce(tally::device.grid_size(grid), d.begin(), d.end(), 0.5f, unmarked_float_plus{})),
                  want)
            << "grid " << grid;
      EXPECT_EQ(bits_of(tally::reduce(tally::device.strategy(tally::strategy::two_pass), d.begin(), d.end(), 0.5f,
                                      unmarked_float_plus{})),
                want);
    }
  }
}

TEST_F(device_ordered, atomic_strategies_refuse_operators_that_are_not_commutative) {
  const std::vector<int> v = {1, none, 3};
  device_buffer<int> d(v);
  for (auto st : {tally::strategy::block_atomic, tally::strategy::warp_atomic}) {
    try {
      tally::reduce(tally::device.nondeterministic().strategy(st), d.begin(), d.end(), none, first_valid{});
      ADD_FAILURE() << "an atomic strategy accepted a non-commutative operator";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("commutative"), std::string::npos) << e.what();
    }
    // The next call works.
    EXPECT_EQ(tally::reduce(tally::device, d.begin(), d.end(), none, first_valid{}), 1);
  }
}

// The public building blocks in a user's kernel: each block folds 256 matrices, each warp
// 32 of them, in thread order; lanes whose index is a multiple of 3 hold nothing in the
// second fold.
__global__ void ordered_building_blocks(const mat2* in, mat2* block_out, mat2* warp_out, mat2* sparse_out) {
  const unsigned i = blockIdx.x * 256 + threadIdx.x;
  const mat2 total = tally::block::reduce_ordered<256>(in[i], mat2_product{});
  const mat2 warp_total = tally::warp::reduce_ordered(in[i], mat2_product{});
  bool valid = threadIdx.x % 3 != 0;
  const mat2 sparse = tally::block::reduce_ordered<256>(in[i], valid, mat2_product{});
  if (threadIdx.x == 0) {
    block_out[blockIdx.x] = total;
    sparse_out[blockIdx.x] = sparse;
  }
  if (threadIdx.x % 32 == 0) warp_out[i / 32] = warp_total;
}

TEST_F(device_ordered, warp_and_block_building_blocks_fold_in_thread_order) {
  seeded s(306);
  SCOPED_TRACE(s.trace());
  constexpr int blocks = 5;
  const auto v = random_matrices(blocks * 256, s.rng);
  device_buffer<mat2> d(v);
  std::vector<mat2> poison(blocks * 8, mat2{0xA5A5A5A5u, 0xA5A5A5A5u, 0xA5A5A5A5u, 0xA5A5A5A5u});
  device_buffer<mat2> block_out(poison), warp_out(poison), sparse_out(poison);
  ordered_building_blocks<<<blocks, 256>>>(d.data(), block_out.data(), warp_out.data(), sparse_out.data());
  TEST_CUDA(cudaGetLastError());
  TEST_CUDA(cudaDeviceSynchronize());
  std::vector<mat2> got_block(blocks * 8), got_warp(blocks * 8), got_sparse(blocks * 8);
  TEST_CUDA(cudaMemcpy(got_block.data(), block_out.data(), got_block.size() * sizeof(mat2), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(got_warp.data(), warp_out.data(), got_warp.size() * sizeof(mat2), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(got_sparse.data(), sparse_out.data(), got_sparse.size() * sizeof(mat2), cudaMemcpyDeviceToHost));
  const mat2 identity{1, 0, 0, 1};
  for (int b = 0; b < blocks; ++b) {
    const auto first = v.begin() + b * 256;
    EXPECT_EQ(got_block[b], std::accumulate(first, first + 256, identity, mat2_product{})) << "block " << b;
    mat2 sparse = identity;
    for (int t = 0; t < 256; ++t)
      if (t % 3 != 0) sparse = mat2_product{}(sparse, first[t]);
    EXPECT_EQ(got_sparse[b], sparse) << "block " << b;
    for (int w = 0; w < 8; ++w)
      EXPECT_EQ(got_warp[b * 8 + w], std::accumulate(first + w * 32, first + w * 32 + 32, identity, mat2_product{}))
          << "block " << b << " warp " << w;
  }
}

// ---- every algorithm that takes an operator, over every iterator kind it accepts ----

// reduce and reduce_into on the device over [first, first + n).
template <class It, class Acc, class Op>
void expect_device_reduce(const tally::strategy_forcing_policy& policy, It first, std::size_t n, const Acc& init, Op op,
                          const Acc& want, const char* kind) {
  SCOPED_TRACE(kind);
  const It last = first + static_cast<std::ptrdiff_t>(n);
  EXPECT_EQ(comparable(tally::reduce(policy, first, last, init, op)), comparable(want)) << "reduce";
  device_value<Acc> out;  // poisoned
  tally::reduce_into(policy, first, last, out.get(), init, op);
  EXPECT_EQ(comparable(out.read()), comparable(want)) << "reduce_into";
}

// 769 tiles of maps, 385 of the kinds made from 32-bit ranges.
constexpr std::size_t device_many_tiles = 3 * (std::size_t(1) << 20) + 5;

// The order-preserving plan's two strategies.
const tally::strategy_forcing_policy ordered_strategies[] = {tally::device, tally::device.strategy(tally::strategy::two_pass)};

std::string strategy_name(const tally::strategy_forcing_policy& policy) {
  return policy.forced_strategy() == tally::strategy::two_pass ? "two pass" : "single pass";
}

TEST_F(device_ordered, every_algorithm_folds_in_order_over_every_iterator_kind) {
  seeded s(307);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : kind_sizes(tally_test::under_sanitizer() ? 0 : device_many_tiles)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const map_inputs in = make_map_inputs(n, s.rng);
    const map_folds want = folds_of(in);
    const map_then op;
    const device_buffer<map_value> maps(in.maps), maps_misaligned(in.maps, 1);
    const device_buffer<std::uint32_t> muls(in.muls), muls_misaligned(in.muls, 1), adds(in.adds),
        adds_misaligned(in.adds, 3), perm(in.perm);
    const thrust::device_vector<map_value> maps_vector(in.maps.begin(), in.maps.end());
    const thrust::device_vector<std::uint32_t> muls_vector(in.muls.begin(), in.muls.end());
    const thrust::device_vector<std::uint32_t> adds_vector(in.adds.begin(), in.adds.end());
    const thrust::counting_iterator<std::uint64_t> indices(in.index_first);
    const thrust::counting_iterator<std::uint32_t> counting_second(in.second_first);
    const thrust::constant_iterator<std::uint32_t> constant_second(in.second_constant);

    for (const tally::strategy_forcing_policy& policy : ordered_strategies) {
      SCOPED_TRACE(strategy_name(policy));
      expect_device_reduce(policy, maps.data(), n, in.init, op, want.maps, "pointer");
      expect_device_reduce(policy, maps_misaligned.data(), n, in.init, op, want.maps, "pointer, misaligned");
      expect_device_reduce(policy, thrust::device_pointer_cast(maps.data()), n, in.init, op, want.maps,
                           "thrust::device_ptr");
      expect_device_reduce(policy, maps_vector.begin(), n, in.init, op, want.maps, "device_vector iterator");
      expect_device_reduce(policy, thrust::counting_iterator<std::uint64_t>(in.counting_first), n, in.init, op,
                           want.counting, "counting_iterator");
      expect_device_reduce(policy, thrust::constant_iterator<map_value>(in.constant), n, in.init, op, want.constant,
                           "constant_iterator");
      expect_device_reduce(policy, thrust::make_transform_iterator(muls.data(), map_of_value{}), n, in.init, op,
                           want.values, "transform_iterator");
      expect_device_reduce(policy, thrust::make_transform_iterator(muls_misaligned.data(), map_of_value{}), n, in.init,
                           op, want.values, "transform_iterator, misaligned");
      expect_device_reduce(policy, thrust::make_transform_iterator(indices, map_of_index{}), n, in.init, op,
                           want.indexed, "transform_iterator over a counting_iterator");
      for (std::uint32_t* first : {muls.data(), muls_misaligned.data()}) {
        expect_device_reduce(policy, thrust::make_transform_iterator(tally::zip(first, adds.data()), map_of_tuple{}), n,
                             in.init, op, want.maps,
                             first == muls.data() ? "transform_iterator over a zip_iterator"
                                                  : "transform_iterator over a zip_iterator, one base misaligned");
      }
      expect_device_reduce(policy, thrust::make_permutation_iterator(maps.data(), perm.data()), n, in.init, op,
                           want.permuted, "permutation_iterator");
      expect_device_reduce(policy, thrust::make_reverse_iterator(maps.end()), n, in.init, op, want.reversed,
                           "thrust::reverse_iterator");

      // transform_reduce: its transform_iterator over each kind of base.
      EXPECT_EQ(tally::transform_reduce(policy, muls.begin(), muls.end(), map_of_value{}, in.init, op), want.values)
          << "pointer";
      EXPECT_EQ(tally::transform_reduce(policy, muls_misaligned.begin(), muls_misaligned.end(), map_of_value{}, in.init,
                                        op),
                want.values)
          << "pointer, misaligned";
      EXPECT_EQ(tally::transform_reduce(policy, indices, indices + n, map_of_index{}, in.init, op), want.indexed)
          << "counting_iterator";
      for (std::uint32_t* first : {muls.data(), muls_misaligned.data()}) {
        const auto pairs = tally::zip(first, adds.data());
        EXPECT_EQ(tally::transform_reduce(policy, pairs, pairs + n, map_of_tuple{}, in.init, op), want.maps)
            << "zip_iterator, " << (first == muls.data() ? "aligned" : "one base misaligned");
      }
      EXPECT_EQ(tally::transform_reduce(policy, thrust::make_reverse_iterator(maps.end()),
                                        thrust::make_reverse_iterator(maps.begin()), same_map{}, in.init, op),
                want.reversed)
          << "thrust::reverse_iterator";

      // Two ranges, both aligned (16-byte loads of each) or not (element by element), or a
      // second range of counting or constant values; transform_reduce and inner_product.
      for (std::uint32_t* first : {muls.data(), muls_misaligned.data()}) {
        for (std::uint32_t* second : {adds.data(), adds_misaligned.data()}) {
          SCOPED_TRACE(std::string(first == muls.data() ? "first aligned" : "first misaligned") +
                       (second == adds.data() ? ", second aligned" : ", second misaligned"));
          EXPECT_EQ(tally::transform_reduce(policy, first, first + n, second, in.init, op, map_of_pair{}), want.maps);
          EXPECT_EQ(tally::inner_product(policy, first, first + n, second, in.init, op, map_of_pair{}), want.maps);
        }
      }
      EXPECT_EQ(tally::transform_reduce(policy, muls.begin(), muls.end(), counting_second, in.init, op, map_of_pair{}),
                want.counting_second);
      EXPECT_EQ(tally::inner_product(policy, muls.begin(), muls.end(), counting_second, in.init, op, map_of_pair{}),
                want.counting_second);
      EXPECT_EQ(tally::transform_reduce(policy, muls.begin(), muls.end(), constant_second, in.init, op, map_of_pair{}),
                want.constant_second);
      EXPECT_EQ(tally::inner_product(policy, muls.begin(), muls.end(), constant_second, in.init, op, map_of_pair{}),
                want.constant_second);
    }

    // Ranges, and the forms without a policy (device_vector: the device; a device range beside
    // a counting range, of any system: the device).
    EXPECT_EQ(tally::reduce(thrust::device, maps.begin(), maps.end(), in.init, op), want.maps) << "thrust::device";
    EXPECT_EQ(tally::reduce(tally::device, maps_vector, in.init, op), want.maps);
    EXPECT_EQ(tally::reduce(maps_vector, in.init, op), want.maps);
    EXPECT_EQ(tally::transform_reduce(tally::device, muls_vector, map_of_value{}, in.init, op), want.values);
    EXPECT_EQ(tally::transform_reduce(muls_vector, map_of_value{}, in.init, op), want.values);
    EXPECT_EQ(tally::reduce(maps_vector.begin(), maps_vector.end(), in.init, op), want.maps);
    EXPECT_EQ(tally::transform_reduce(muls_vector.begin(), muls_vector.end(), map_of_value{}, in.init, op),
              want.values);
    EXPECT_EQ(tally::transform_reduce(muls_vector.begin(), muls_vector.end(), adds_vector.begin(), in.init, op,
                                      map_of_pair{}),
              want.maps);
    EXPECT_EQ(tally::inner_product(muls_vector.begin(), muls_vector.end(), adds_vector.begin(), in.init, op,
                                   map_of_pair{}),
              want.maps);
    EXPECT_EQ(tally::inner_product(muls_vector.begin(), muls_vector.end(), counting_second, in.init, op, map_of_pair{}),
              want.counting_second);
  }
}

TEST_F(device_ordered, field_reductions_fold_an_order_preserving_field_in_order) {
  seeded s(308);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : kind_sizes(tally_test::under_sanitizer() ? 0 : device_many_tiles)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const map_inputs in = make_map_inputs(n, s.rng);
    const field_inputs f = make_field_inputs(in, s.rng);
    const device_buffer<map_value> maps(in.maps), maps_misaligned(in.maps, 1);
    const device_buffer<std::uint64_t> weights(f.weights);
    const device_buffer<tagged_map> tagged(f.tagged), tagged_misaligned(f.tagged, 1);
    for (const tally::strategy_forcing_policy& policy : ordered_strategies) {
      SCOPED_TRACE(strategy_name(policy));
      expect_device_reduce(policy, tally::zip(maps.data(), weights.data()), n, f.weighted_init, map_and_sum,
                           f.weighted_fold, "zip of two ranges");
      expect_device_reduce(policy, tally::zip(maps_misaligned.data(), weights.data()), n, f.weighted_init, map_and_sum,
                           f.weighted_fold, "zip of two ranges, one misaligned");
      expect_device_reduce(policy, tally::zip(maps.data(), thrust::counting_iterator<std::uint64_t>(0)), n,
                           f.weighted_init, map_and_sum, f.indexed_fold, "zip of a range and a counting_iterator");
      expect_device_reduce(policy, tagged.data(), n, f.tagged_init, map_sum_and_max, f.tagged_fold, "array of tuples");
      expect_device_reduce(policy, tagged_misaligned.data(), n, f.tagged_init, map_sum_and_max, f.tagged_fold,
                           "array of tuples, misaligned");
      EXPECT_EQ(comparable(tally::transform_reduce(policy, maps.begin(), maps.end(), weigh_by_one{}, f.weighted_init,
                                                   map_and_sum)),
                comparable(f.ones_fold))
          << "transform_reduce making tuples";
    }
  }
}

#endif  // !TALLY_TEST_HOST_ONLY

}  // namespace
