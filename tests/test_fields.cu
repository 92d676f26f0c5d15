// Multi-field reductions (tally/fields.cuh): structures of arrays through tally::zip, arrays
// of vector types and tuple-like structs, tally::fields and fieldwise operators,
// transform_reduce making tuples, and tuples through the warp and block building blocks.
// Each field is checked against a separate reference: exact for integers, minima and maxima;
// for float sums, the bits of a separate single-field tally::reduce (the zip's plan is the
// field's plan) and a long double reference within the summation bound.
#include "support/test_support.cuh"
#include "tally/block/reduce.cuh"
#include "tally/fields.cuh"
#include "tally/warp/reduce.cuh"

#include <thrust/device_vector.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/tuple.h>

#include <algorithm>
#include <cuda/std/tuple>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

struct particle {  // a user struct made tuple-like by tally::field_members
  float x;
  float y;
  float z;
  int count;
};
template <>
struct tally::field_members<particle> {
  __host__ __device__ static constexpr auto list() {
    return cuda::std::make_tuple(&particle::x, &particle::y, &particle::z, &particle::count);
  }
};

namespace {

using tally_test::bits_of;
using tally_test::random_values;
using tally_test::seeded;
using xyz = cuda::std::tuple<float, float, float>;
using box = cuda::std::tuple<float, float, float, float, float, float>;

constexpr float inf = std::numeric_limits<float>::infinity();

// Sizes around a warp, a block, a float step (8192) and its multiples, plus seeded random ones.
std::vector<std::size_t> field_sizes(std::uint64_t salt) {
  auto sizes = tally_test::boundary_sizes();
  for (std::size_t n : {8191, 8192, 8193, 3 * 8192 - 1, 3 * 8192 + 1}) sizes.push_back(n);
  seeded s(salt);
  std::uniform_int_distribution<std::size_t> d(1, 300000);
  for (int i = 0; i < 6; ++i) sizes.push_back(d(s.rng));
  return sizes;
}

template <class T>
T min_of(const std::vector<T>& v) {
  return *std::min_element(v.begin(), v.end());
}
template <class T>
T max_of(const std::vector<T>& v) {
  return *std::max_element(v.begin(), v.end());
}

// A float sum of v's fields checked two ways: the bits of a separate host tally::reduce of
// the field, and a long double reference within the bound of any summation order.
void expect_float_sum(float got, const std::vector<float>& v, float init, const std::string& what) {
  EXPECT_EQ(bits_of(got), bits_of(tally::reduce(tally::host, v.begin(), v.end(), init))) << what;
  const double want = tally_test::reference_sum<double>(v, 0, v.size(), double(init));
  TALLY_EXPECT_SUM_NEAR(got, want, tally_test::sum_error_bound(v, 0, v.size(), init)) << what;
}

struct bounding_box_of {
  __host__ __device__ box operator()(const xyz& p) const {
    const float x = cuda::std::get<0>(p), y = cuda::std::get<1>(p), z = cuda::std::get<2>(p);
    return box(x, y, z, x, y, z);
  }
};
const auto box_op = tally::fields(tally::minimum<float>{}, tally::minimum<float>{}, tally::minimum<float>{},
                                  tally::maximum<float>{}, tally::maximum<float>{}, tally::maximum<float>{});
const box empty_box(inf, inf, inf, -inf, -inf, -inf);

// sum, sum of squares, count: mean and variance in one pass.
using moments = cuda::std::tuple<float, float, int>;
// x * x written plainly: tally::plus, which folds it, may not be contracted with it into an
// FMA, so the device still gives the host's bits (the moments test checks it).
struct moments_of {
  __host__ __device__ moments operator()(float x) const { return moments(x, x * x, 1); }
};

// ---- operators ----

TEST(fields_operators, single_operators_on_tuple_like_values_are_fieldwise) {
  seeded s(1);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<float>(6, s.rng);
  const float3 a{v[0], v[1], v[2]}, b{v[3], v[4], v[5]};
  const float3 lo = tally::minimum<float3>{}(a, b);
  EXPECT_EQ(lo.x, std::min(a.x, b.x));
  EXPECT_EQ(lo.y, std::min(a.y, b.y));
  EXPECT_EQ(lo.z, std::min(a.z, b.z));
  const float3 hi = tally::maximum<>{}(a, b);
  EXPECT_EQ(hi.x, std::max(a.x, b.x));
  EXPECT_EQ(hi.z, std::max(a.z, b.z));
  const xyz sum = tally::plus<xyz>{}(xyz(a.x, a.y, a.z), xyz(b.x, b.y, b.z));
  EXPECT_EQ(cuda::std::get<0>(sum), a.x + b.x);
  EXPECT_EQ(cuda::std::get<2>(sum), a.z + b.z);
  const auto mixed = tally::fields(tally::plus<>{}, tally::minimum<>{}, tally::bit_or<>{});
  const auto m = mixed(cuda::std::make_tuple(v[0], v[1], 5), cuda::std::make_tuple(v[2], v[3], 10));
  EXPECT_EQ(cuda::std::get<0>(m), v[0] + v[2]);
  EXPECT_EQ(cuda::std::get<1>(m), std::min(v[1], v[3]));
  EXPECT_EQ(cuda::std::get<2>(m), 15);
  const particle p = tally::plus<>{}(particle{v[0], v[1], v[2], 3}, particle{v[3], v[4], v[5], 4});
  EXPECT_EQ(p.x, v[0] + v[3]);
  EXPECT_EQ(p.count, 7);
  static_assert(std::is_same_v<thrust::tuple<float, int>, cuda::std::tuple<float, int>>,
                "thrust::tuple and cuda::std::tuple are one type: either spelling works for init");
  static_assert(tally::field_count_v<double4_32a> == 4 && tally::field_count_v<particle> == 4);
}

// The fast paths are chosen at compile time: guard that zips and float3 arrays take them.
TEST(fields_operators, zips_and_float3_arrays_take_the_vectorized_plans) {
  using float_zip = decltype(tally::zip(std::declval<const float*>(), std::declval<float*>(), std::declval<int*>()));
  using box_view = thrust::transform_iterator<bounding_box_of, decltype(tally::zip(std::declval<const float*>(),
                                                                                    std::declval<const float*>(),
                                                                                    std::declval<const float*>()))>;
  using mixed_zip = decltype(tally::zip(std::declval<const float*>(), std::declval<const double*>()));
  static_assert(tally::detail::zip_view<float_zip>::vector_width == 4);
  static_assert(tally::detail::zip_view<box_view>::vector_width == 4);
  static_assert(tally::detail::zip_view<mixed_zip>::vector_width == 0, "mixed element sizes: element reads");
  EXPECT_EQ(tally::detail::plan_vector_width_v<float_zip>, 4);
  EXPECT_EQ(tally::detail::plan_vector_width_v<box_view>, 4);
  EXPECT_EQ(tally::detail::plan_vector_width_v<const float3*>, 4);
  EXPECT_EQ(tally::detail::plan_vector_width_v<std::vector<double3>::const_iterator>, 2);
  EXPECT_EQ(tally::detail::plan_vector_width_v<const float4*>, 1);
  EXPECT_EQ(tally::detail::plan_vector_width_v<const particle*>, 1);
}

// ---- host ----

TEST(fields_host, soa_sums_mins_and_maxes_equal_separate_references) {
  for (std::size_t n : field_sizes(10)) {
    if (n == 0) continue;
    seeded s(n + 11);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const auto x = random_values<float>(n, s.rng), y = random_values<float>(n, s.rng), z = random_values<float>(n, s.rng);
    const auto first = tally::zip(x.begin(), y.begin(), z.begin());
    const xyz sum = tally::reduce(tally::host, first, first + n, xyz(0.5f, 0.0f, -1.0f), tally::plus<>{});
    expect_float_sum(cuda::std::get<0>(sum), x, 0.5f, "x");
    expect_float_sum(cuda::std::get<1>(sum), y, 0.0f, "y");
    expect_float_sum(cuda::std::get<2>(sum), z, -1.0f, "z");
    const xyz lo = tally::reduce(tally::host, first, first + n, xyz(inf, inf, inf), tally::minimum<>{});
    EXPECT_EQ(cuda::std::get<0>(lo), min_of(x));
    EXPECT_EQ(cuda::std::get<1>(lo), min_of(y));
    EXPECT_EQ(cuda::std::get<2>(lo), min_of(z));
    const xyz hi = tally::reduce(tally::host, first, first + n, xyz(-inf, -inf, -inf), tally::maximum<xyz>{});
    EXPECT_EQ(cuda::std::get<0>(hi), max_of(x));
    EXPECT_EQ(cuda::std::get<1>(hi), max_of(y));
    EXPECT_EQ(cuda::std::get<2>(hi), max_of(z));
  }
}

TEST(fields_host, empty_ranges_return_init) {
  std::vector<float> x, y;
  const auto first = tally::zip(x.begin(), y.begin());
  const auto init = cuda::std::make_tuple(1.5f, -2.5f);
  EXPECT_EQ(tally::reduce(tally::host, first, first, init, tally::plus<>{}), init);
  EXPECT_EQ(tally::transform_reduce(tally::host, x.begin(), x.end(), moments_of{}, moments(1, 2, 3), tally::plus<>{}),
            moments(1, 2, 3));
}

TEST(fields_host, mixed_operators_and_an_integer_count) {
  for (std::size_t n : field_sizes(20)) {
    if (n == 0) continue;
    seeded s(n + 21);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const auto x = random_values<float>(n, s.rng), y = random_values<float>(n, s.rng), z = random_values<float>(n, s.rng);
    const auto c = random_values<int>(n, s.rng);
    using row = cuda::std::tuple<float, float, float, int>;
    const auto op = tally::fields(tally::plus<>{}, tally::minimum<>{}, tally::maximum<>{}, tally::bit_xor<>{});
    const auto first = tally::zip(x.data(), y.data(), z.data(), c.data());
    const row got = tally::reduce(tally::host, first, first + n, row(0.0f, inf, -inf, 0), op);
    expect_float_sum(cuda::std::get<0>(got), x, 0.0f, "x sum");
    EXPECT_EQ(cuda::std::get<1>(got), min_of(y));
    EXPECT_EQ(cuda::std::get<2>(got), max_of(z));
    int want_xor = 0;
    for (int v : c) want_xor ^= v;
    EXPECT_EQ(cuda::std::get<3>(got), want_xor);
  }
}

TEST(fields_host, eight_float_fields_and_a_count) {
  for (std::size_t n : {std::size_t(1), std::size_t(33), std::size_t(8193), std::size_t(100003)}) {
    seeded s(n + 31);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    std::vector<std::vector<float>> f;
    for (int k = 0; k < 8; ++k) f.push_back(random_values<float>(n, s.rng));
    const auto c = random_values<int>(n, s.rng);
    using row = cuda::std::tuple<float, float, float, float, float, float, float, float, int>;
    const auto first = tally::zip(f[0].begin(), f[1].begin(), f[2].begin(), f[3].begin(), f[4].begin(), f[5].begin(),
                                  f[6].begin(), f[7].begin(), c.begin());
    const row got = tally::reduce(tally::host, first, first + n, row{}, tally::plus<>{});
    expect_float_sum(cuda::std::get<0>(got), f[0], 0.0f, "field 0");
    expect_float_sum(cuda::std::get<3>(got), f[3], 0.0f, "field 3");
    expect_float_sum(cuda::std::get<7>(got), f[7], 0.0f, "field 7");
    EXPECT_EQ(cuda::std::get<8>(got), tally_test::reference_sum<int>(c, 0, n, 0));
  }
}

TEST(fields_host, arrays_of_vector_types_equal_separate_field_reductions) {
  for (std::size_t n : field_sizes(40)) {
    if (n == 0) continue;
    seeded s(n + 41);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const auto x = random_values<float>(n, s.rng), y = random_values<float>(n, s.rng), z = random_values<float>(n, s.rng);
    std::vector<float3> points(n);
    std::vector<double3> wide(n);
    std::vector<int3> cells(n);
    const auto ix = random_values<int>(n, s.rng), iy = random_values<int>(n, s.rng);
    std::vector<double> dx(n);
    for (std::size_t i = 0; i < n; ++i) {
      points[i] = {x[i], y[i], z[i]};
      wide[i] = {double(x[i]) * 3, double(y[i]), double(z[i])};
      dx[i] = wide[i].x;
      cells[i] = {ix[i], iy[i], ix[i] ^ iy[i]};
    }
    // A float3 array's plan (48-byte chunks of 4 elements) is the float plan, so each field
    // has the bits of a separate float reduction.
    const float3 sum = tally::reduce(tally::host, points.begin(), points.end(), float3{0, 0, 0}, tally::plus<>{});
    expect_float_sum(sum.x, x, 0.0f, "x");
    expect_float_sum(sum.y, y, 0.0f, "y");
    expect_float_sum(sum.z, z, 0.0f, "z");
    const float3 lo = tally::reduce(tally::host, points.begin(), points.end(), float3{inf, inf, inf}, tally::minimum<>{});
    EXPECT_EQ(lo.x, min_of(x));
    EXPECT_EQ(lo.z, min_of(z));
    const double3 dsum = tally::reduce(tally::host, wide.begin(), wide.end(), double3{0, 0, 0}, tally::plus<>{});
    EXPECT_EQ(bits_of(dsum.x), bits_of(tally::reduce(tally::host, dx.begin(), dx.end(), 0.0)));
    const int3 isum = tally::reduce(tally::host, cells.begin(), cells.end(), int3{0, 0, 0}, tally::plus<>{});
    EXPECT_EQ(isum.x, tally_test::reference_sum<int>(ix, 0, n, 0));
    EXPECT_EQ(isum.y, tally_test::reference_sum<int>(iy, 0, n, 0));
  }
}

TEST(fields_host, a_tuple_like_struct) {
  for (std::size_t n : {std::size_t(1), std::size_t(257), std::size_t(70001)}) {
    seeded s(n + 51);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const auto x = random_values<float>(n, s.rng), y = random_values<float>(n, s.rng);
    const auto c = random_values<int>(n, s.rng);
    std::vector<particle> ps(n);
    for (std::size_t i = 0; i < n; ++i) ps[i] = {x[i], y[i], -x[i], c[i]};
    const auto op = tally::fields(tally::plus<>{}, tally::maximum<>{}, tally::minimum<>{}, tally::plus<>{});
    const particle got = tally::reduce(tally::host, ps.begin(), ps.end(), particle{0, -inf, inf, 0}, op);
    const double want_x = tally_test::reference_sum<double>(x, 0, n, 0.0);
    TALLY_EXPECT_SUM_NEAR(got.x, want_x, tally_test::sum_error_bound(x, 0, n, 0.0));
    EXPECT_EQ(got.y, max_of(y));
    EXPECT_EQ(got.z, -max_of(x));
    EXPECT_EQ(got.count, tally_test::reference_sum<int>(c, 0, n, 0));
  }
}

TEST(fields_host, transform_reduce_bounding_box_and_moments) {
  for (std::size_t n : field_sizes(60)) {
    if (n == 0) continue;
    seeded s(n + 61);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const auto x = random_values<float>(n, s.rng), y = random_values<float>(n, s.rng), z = random_values<float>(n, s.rng);
    const auto first = tally::zip(x.begin(), y.begin(), z.begin());
    const box b = tally::transform_reduce(tally::host, first, first + n, bounding_box_of{}, empty_box, box_op);
    EXPECT_EQ(b, box(min_of(x), min_of(y), min_of(z), max_of(x), max_of(y), max_of(z)));
    const moments m = tally::transform_reduce(tally::host, x.begin(), x.end(), moments_of{}, moments(0, 0, 0),
                                              tally::plus<>{});
    std::vector<float> squares(n);
    for (std::size_t i = 0; i < n; ++i) squares[i] = x[i] * x[i];
    expect_float_sum(cuda::std::get<0>(m), x, 0.0f, "sum");
    expect_float_sum(cuda::std::get<1>(m), squares, 0.0f, "sum of squares");
    EXPECT_EQ(cuda::std::get<2>(m), int(n));
  }
}

TEST(fields_host, misaligned_starts_follow_the_same_plan) {
  seeded s(70);
  SCOPED_TRACE(s.trace());
  const std::size_t n = 50001;
  const auto x = random_values<float>(n + 3, s.rng), y = random_values<float>(n + 3, s.rng);
  const auto first = tally::zip(x.data() + 1, y.data() + 3);
  const auto got = tally::reduce(tally::host, first, first + n, cuda::std::make_tuple(0.0f, 0.0f), tally::plus<>{});
  EXPECT_EQ(bits_of(cuda::std::get<0>(got)), bits_of(tally::reduce(tally::host, x.data() + 1, x.data() + 1 + n, 0.0f)));
  EXPECT_EQ(bits_of(cuda::std::get<1>(got)), bits_of(tally::reduce(tally::host, y.data() + 3, y.data() + 3 + n, 0.0f)));
}

TEST(fields_host, a_reversed_range_throws) {
  std::vector<float> x(10), y(10);
  const auto first = tally::zip(x.begin(), y.begin());
  EXPECT_THROW(tally::reduce(tally::host, first + 5, first, cuda::std::make_tuple(0.0f, 0.0f), tally::plus<>{}),
               std::invalid_argument);
}

// ---- device ----

// The sanitized host build (scripts/test) defines TALLY_TEST_HOST_ONLY and compiles no kernel tests.
#if !defined(TALLY_TEST_HOST_ONLY)
class fields_device : public tally_test::device_test {};

// Per unit mass. Written with tally's operators, which the device compiler may not contract
// into FMAs, so that each energy has the same bits on the host and the device.
struct kinetic_energy {
  __host__ __device__ float operator()(const float3& v) const {
    const tally::plus<float> add;
    const tally::multiplies<float> mul;
    return mul(0.5f, add(add(mul(v.x, v.x), mul(v.y, v.y)), mul(v.z, v.z)));
  }
};

// Every stream at its own offset: aligned, 4 bytes past and 12 bytes past a 16-byte boundary.
TEST_F(fields_device, soa_equals_the_host_bit_for_bit_at_every_size_and_alignment) {
  auto sizes = field_sizes(100);
  if (!tally_test::under_sanitizer()) sizes.push_back((std::size_t(1) << 24) + 3);  // tiles of several steps
  for (std::size_t n : sizes) {
    for (std::size_t offset : {0, 1, 3}) {
      seeded s(n * 7 + offset);
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset " + std::to_string(offset) + ", " + s.trace());
      const auto x = random_values<float>(n, s.rng), y = random_values<float>(n, s.rng),
                 z = random_values<float>(n, s.rng);
      tally_test::device_buffer<float> dx(x, offset), dy(y, 0), dz(z, (offset * 2) % 4);
      const auto dfirst = tally::zip(dx.data(), dy.data(), dz.data());
      const auto hfirst = tally::zip(x.data(), y.data(), z.data());
      const xyz init(0.25f, 0.0f, -1.0f);
      const xyz got = tally::reduce(tally::device, dfirst, dfirst + n, init, tally::plus<>{});
      const xyz want = tally::reduce(tally::host, hfirst, hfirst + n, init, tally::plus<>{});
      EXPECT_EQ(bits_of(cuda::std::get<0>(got)), bits_of(cuda::std::get<0>(want)));
      EXPECT_EQ(bits_of(cuda::std::get<1>(got)), bits_of(cuda::std::get<1>(want)));
      EXPECT_EQ(bits_of(cuda::std::get<2>(got)), bits_of(cuda::std::get<2>(want)));
      if (n > 0) {
        expect_float_sum(cuda::std::get<0>(got), x, 0.25f, "x");
        const box b = tally::transform_reduce(tally::device, dfirst, dfirst + n, bounding_box_of{}, empty_box, box_op);
        EXPECT_EQ(b, box(min_of(x), min_of(y), min_of(z), max_of(x), max_of(y), max_of(z)));
      }
      tally_test::device_value<xyz> out;  // poisoned
      tally::reduce_into(tally::device, dfirst, dfirst + n, out.get(), init, tally::plus<>{});
      const xyz into = out.read();
      EXPECT_EQ(bits_of(cuda::std::get<1>(into)), bits_of(cuda::std::get<1>(want)));
      EXPECT_EQ(bits_of(cuda::std::get<2>(into)), bits_of(cuda::std::get<2>(want)));
    }
  }
}

TEST_F(fields_device, thrust_vectors_mixed_operators_and_eight_fields_with_a_count) {
  for (std::size_t n : {std::size_t(1), std::size_t(31), std::size_t(257), std::size_t(8193), std::size_t(300007)}) {
    seeded s(n + 200);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    std::vector<std::vector<float>> f;
    std::vector<thrust::device_vector<float>> d;
    for (int k = 0; k < 8; ++k) {
      f.push_back(random_values<float>(n, s.rng));
      d.emplace_back(f.back().begin(), f.back().end());
    }
    const auto c = random_values<int>(n, s.rng);
    thrust::device_vector<int> dc(c.begin(), c.end());
    using row = cuda::std::tuple<float, float, float, float, float, float, float, float, int>;
    const auto op = tally::fields(tally::plus<>{}, tally::minimum<>{}, tally::maximum<>{}, tally::plus<>{},
                                  tally::plus<>{}, tally::plus<>{}, tally::plus<>{}, tally::plus<>{}, tally::plus<>{});
    const row init(0.0f, inf, -inf, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 7);
    const auto dfirst = tally::zip(d[0].begin(), d[1].begin(), d[2].begin(), d[3].begin(), d[4].begin(), d[5].begin(),
                                   d[6].begin(), d[7].begin(), dc.begin());
    const auto hfirst = tally::zip(f[0].begin(), f[1].begin(), f[2].begin(), f[3].begin(), f[4].begin(), f[5].begin(),
                                   f[6].begin(), f[7].begin(), c.begin());
    const row got = tally::reduce(dfirst, dfirst + n, init, op);  // device, from the iterators
    const row want = tally::reduce(tally::host, hfirst, hfirst + n, init, op);
    EXPECT_EQ(bits_of(cuda::std::get<0>(got)), bits_of(cuda::std::get<0>(want)));
    EXPECT_EQ(cuda::std::get<1>(got), min_of(f[1]));
    EXPECT_EQ(cuda::std::get<2>(got), max_of(f[2]));
    EXPECT_EQ(bits_of(cuda::std::get<5>(got)), bits_of(cuda::std::get<5>(want)));
    EXPECT_EQ(bits_of(cuda::std::get<7>(got)), bits_of(cuda::std::get<7>(want)));
    EXPECT_EQ(cuda::std::get<8>(got), 7 + tally_test::reference_sum<int>(c, 0, n, 0));
  }
}

TEST_F(fields_device, arrays_of_structures_equal_the_host_aligned_or_not) {
  for (std::size_t n : field_sizes(300)) {
    for (std::size_t offset : {0, 1}) {
      seeded s(n * 5 + offset + 301);
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset " + std::to_string(offset) + ", " + s.trace());
      const auto x = random_values<float>(n, s.rng), y = random_values<float>(n, s.rng);
      const auto c = random_values<int>(n, s.rng);
      std::vector<float3> points(n);
      std::vector<double3> wide(n);
      std::vector<int3> cells(n);
      std::vector<particle> ps(n);
      for (std::size_t i = 0; i < n; ++i) {
        points[i] = {x[i], y[i], x[i] - y[i]};
        wide[i] = {double(x[i]), double(y[i]) * 0.1, double(c[i])};
        cells[i] = {c[i], c[i] / 3, 1};
        ps[i] = {x[i], y[i], -y[i], c[i]};
      }
      tally_test::device_buffer<float3> dpoints(points, offset);
      tally_test::device_buffer<double3> dwide(wide, offset);
      tally_test::device_buffer<int3> dcells(cells, offset);
      tally_test::device_buffer<particle> dps(ps, offset);
      const float3 fs = tally::reduce(tally::device, dpoints.begin(), dpoints.end(), float3{1, 2, 3}, tally::plus<>{});
      const float3 fh = tally::reduce(tally::host, points.begin(), points.end(), float3{1, 2, 3}, tally::plus<>{});
      EXPECT_EQ(bits_of(fs.x), bits_of(fh.x));
      EXPECT_EQ(bits_of(fs.y), bits_of(fh.y));
      EXPECT_EQ(bits_of(fs.z), bits_of(fh.z));
      const double3 ds = tally::reduce(tally::device, dwide.begin(), dwide.end(), double3{0, 0, 0}, tally::plus<>{});
      const double3 dh = tally::reduce(tally::host, wide.begin(), wide.end(), double3{0, 0, 0}, tally::plus<>{});
      EXPECT_EQ(bits_of(ds.x), bits_of(dh.x));
      EXPECT_EQ(bits_of(ds.z), bits_of(dh.z));
      const int3 is = tally::reduce(tally::device, dcells.begin(), dcells.end(), int3{0, 0, 0}, tally::plus<>{});
      EXPECT_EQ(is.x, tally_test::reference_sum<int>(c, 0, n, 0));
      EXPECT_EQ(is.z, int(n));
      const auto op = tally::fields(tally::plus<>{}, tally::maximum<>{}, tally::minimum<>{}, tally::plus<>{});
      const particle init{0, -inf, inf, 0};
      const particle pd = tally::reduce(tally::device, dps.begin(), dps.end(), init, op);
      const particle ph = tally::reduce(tally::host, ps.begin(), ps.end(), init, op);
      EXPECT_EQ(bits_of(pd.x), bits_of(ph.x));
      EXPECT_EQ(pd.y, n ? max_of(y) : -inf);
      EXPECT_EQ(pd.z, n ? -max_of(y) : inf);
      EXPECT_EQ(pd.count, tally_test::reference_sum<int>(c, 0, n, 0));
      // transform_reduce over an array of float3: kinetic energy 1/2 |v|^2 with the 48-byte loader.
      const kinetic_energy energy;
      EXPECT_EQ(bits_of(tally::transform_reduce(tally::device, dpoints.begin(), dpoints.end(), energy, 0.0f,
                                                tally::plus<float>{})),
                bits_of(tally::transform_reduce(tally::host, points.begin(), points.end(), energy, 0.0f,
                                                tally::plus<float>{})));
    }
  }
}

TEST_F(fields_device, moments_by_transform_reduce_equal_the_host) {
  for (std::size_t n : field_sizes(400)) {
    seeded s(n + 401);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const auto x = random_values<float>(n, s.rng);
    tally_test::device_buffer<float> dx(x, n % 3);
    const moments got = tally::transform_reduce(tally::device, dx.begin(), dx.end(), moments_of{}, moments(0, 0, 0),
                                                tally::plus<>{});
    const moments want = tally::transform_reduce(tally::host, x.begin(), x.end(), moments_of{}, moments(0, 0, 0),
                                                 tally::plus<>{});
    EXPECT_EQ(bits_of(cuda::std::get<0>(got)), bits_of(cuda::std::get<0>(want)));
    EXPECT_EQ(bits_of(cuda::std::get<1>(got)), bits_of(cuda::std::get<1>(want)));
    EXPECT_EQ(cuda::std::get<2>(got), int(n));
  }
}

TEST_F(fields_device, bad_zipped_inputs_throw_before_any_kernel_runs) {
  thrust::device_vector<float> x(100, 1.0f);
  const float* none = nullptr;
  const auto with_null = tally::zip(x.data().get(), none);
  EXPECT_THROW(tally::reduce(tally::device, with_null, with_null + 100, cuda::std::make_tuple(0.0f, 0.0f),
                             tally::plus<>{}),
               std::invalid_argument);
  const auto zipped = tally::zip(x.data().get(), x.data().get());
  EXPECT_THROW(tally::reduce(tally::device, zipped + 10, zipped, cuda::std::make_tuple(0.0f, 0.0f), tally::plus<>{}),
               std::invalid_argument);
  int pageable = 0;
  TEST_CUDA(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0));
  std::vector<float> host(100, 2.0f);
  const auto with_host = tally::zip(x.data().get(), host.data());
  if (!pageable) {
    EXPECT_THROW(tally::reduce(tally::device, with_host, with_host + 100, cuda::std::make_tuple(0.0f, 0.0f),
                               tally::plus<>{}),
                 std::invalid_argument);
  }
  // The context is still usable.
  const auto ok = tally::reduce(tally::device, zipped, zipped + 100, cuda::std::make_tuple(0.0f, 0.0f), tally::plus<>{});
  EXPECT_EQ(ok, cuda::std::make_tuple(100.0f, 100.0f));
  TEST_CUDA(cudaGetLastError());
}

// ---- building blocks: tuples through tally::warp and tally::block in a user's kernel ----

using mixed = cuda::std::tuple<float, int, double>;

__global__ void warp_tuple_sums(const float* f, const int* i, const double* d, mixed* tuples, float* floats,
                                int* ints) {
  const unsigned k = blockIdx.x * 32 + threadIdx.x;
  const mixed total = tally::warp::reduce(mixed(f[k], i[k], d[k]), tally::plus<>{});
  const float float_alone = tally::warp::reduce(f[k], tally::plus<float>{});
  const int int_alone = tally::warp::reduce(i[k], tally::plus<int>{});
  if (threadIdx.x == 0) {
    tuples[blockIdx.x] = total;
    floats[blockIdx.x] = float_alone;
    ints[blockIdx.x] = int_alone;
  }
}

// A bounding box and a count per block, some threads holding nothing.
__global__ void block_boxes(const float* x, const float* y, box* boxes, float* min_x, float* max_y, int* counts) {
  const unsigned k = blockIdx.x * 256 + threadIdx.x;
  bool valid = threadIdx.x % 3 != 0;
  const auto min = tally::minimum<>{};  // the operator built inside the kernel
  const auto max = tally::maximum<>{};
  const box b = tally::block::reduce<256>(box(x[k], y[k], 0, x[k], y[k], 0), valid,
                                          tally::fields(min, min, min, max, max, max));
  bool valid_again = threadIdx.x % 3 != 0;
  const float lo = tally::block::reduce<256>(x[k], valid_again, tally::minimum<float>{});
  valid_again = threadIdx.x % 3 != 0;
  const float hi = tally::block::reduce<256>(y[k], valid_again, tally::maximum<float>{});
  const int2 n = tally::block::reduce<256>(int2{threadIdx.x % 3 != 0 ? 1 : 0, 1}, tally::plus<>{});
  if (threadIdx.x == 0) {
    boxes[blockIdx.x] = b;
    min_x[blockIdx.x] = lo;
    max_y[blockIdx.x] = hi;
    counts[blockIdx.x] = n.x * 1000 + n.y;
  }
}

TEST_F(fields_device, tuples_through_the_warp_and_block_building_blocks) {
  constexpr int warps = 64, blocks = 16;
  seeded s(500);
  SCOPED_TRACE(s.trace());
  const auto f = random_values<float>(warps * 32, s.rng);
  const auto i = random_values<int>(warps * 32, s.rng);
  const auto d = random_values<double>(warps * 32, s.rng);
  tally_test::device_buffer<float> df(f);
  tally_test::device_buffer<int> di(i);
  tally_test::device_buffer<double> dd(d);
  thrust::device_vector<mixed> tuples(warps);
  thrust::device_vector<float> floats(warps);
  thrust::device_vector<int> ints(warps);
  TEST_CUDA(cudaMemset(thrust::raw_pointer_cast(tuples.data()), 0xA5, warps * sizeof(mixed)));
  warp_tuple_sums<<<warps, 32>>>(df.data(), di.data(), dd.data(), thrust::raw_pointer_cast(tuples.data()),
                                 thrust::raw_pointer_cast(floats.data()), thrust::raw_pointer_cast(ints.data()));
  TEST_CUDA(cudaDeviceSynchronize());
  for (int w = 0; w < warps; ++w) {
    const mixed t = tuples[w];
    EXPECT_EQ(bits_of(cuda::std::get<0>(t)), bits_of(float(floats[w]))) << "warp " << w;
    EXPECT_EQ(cuda::std::get<1>(t), tally_test::reference_sum<int>(i, w * 32, w * 32 + 32, 0));
    EXPECT_EQ(cuda::std::get<1>(t), int(ints[w]));
    const double want = tally_test::reference_sum<double>(d, w * 32, w * 32 + 32, 0.0);
    TALLY_EXPECT_SUM_NEAR(cuda::std::get<2>(t), want, tally_test::sum_error_bound(d, w * 32, w * 32 + 32, 0.0));
  }

  const auto x = random_values<float>(blocks * 256, s.rng), y = random_values<float>(blocks * 256, s.rng);
  tally_test::device_buffer<float> dx(x), dy(y);
  thrust::device_vector<box> boxes(blocks);
  thrust::device_vector<float> min_x(blocks), max_y(blocks);
  thrust::device_vector<int> counts(blocks);
  TEST_CUDA(cudaMemset(thrust::raw_pointer_cast(boxes.data()), 0xA5, blocks * sizeof(box)));
  block_boxes<<<blocks, 256>>>(dx.data(), dy.data(), thrust::raw_pointer_cast(boxes.data()),
                               thrust::raw_pointer_cast(min_x.data()), thrust::raw_pointer_cast(max_y.data()),
                               thrust::raw_pointer_cast(counts.data()));
  TEST_CUDA(cudaDeviceSynchronize());
  for (int b = 0; b < blocks; ++b) {
    float lo_x = inf, lo_y = inf, hi_x = -inf, hi_y = -inf;
    int held = 0;
    for (int t = 0; t < 256; ++t) {
      if (t % 3 == 0) continue;
      const std::size_t k = std::size_t(b) * 256 + t;
      lo_x = std::min(lo_x, x[k]);
      lo_y = std::min(lo_y, y[k]);
      hi_x = std::max(hi_x, x[k]);
      hi_y = std::max(hi_y, y[k]);
      ++held;
    }
    const box got = boxes[b];
    EXPECT_EQ(got, box(lo_x, lo_y, 0, hi_x, hi_y, 0)) << "block " << b;
    EXPECT_EQ(cuda::std::get<0>(got), float(min_x[b]));
    EXPECT_EQ(cuda::std::get<4>(got), float(max_y[b]));
    EXPECT_EQ(int(counts[b]), held * 1000 + 256);
  }
}

#endif  // !TALLY_TEST_HOST_ONLY

}  // namespace
