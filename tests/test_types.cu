// Every type a CUDA user reduces, on the host backend (docs/types.md): integers of every width,
// signed and unsigned, with every built-in operator, wrapping in init's type as Thrust's do;
// __half and __nv_bfloat16 accumulated in float and in their own type; CUDA vector types;
// trivially copyable structs up to 64 bytes. The same cases on the device:
// tests/test_types_device.cu.
#include "support/type_cases.cuh"

namespace {

using namespace tally_test::types;
using tally_test::bits_of;
using tally_test::seeded;

template <class T>
class integer_types : public ::testing::Test {};
TYPED_TEST_SUITE(integer_types, every_integer);

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

// Narrow values into a wide init: accumulated in init's type, as Thrust does.
template <class T, class Acc>
void expect_widened_sums(std::uint64_t salt) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : type_sizes(s.rng)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto v = int_inputs<T>(int_op::plus, n, s.rng);
    const Acc init = static_cast<Acc>(s.rng() % 1000);
    const Acc want = int_reference(int_op::plus, v, init);
    EXPECT_EQ(tally::reduce(tally::host, v.begin(), v.end(), init, tally::plus<Acc>{}), want);
    EXPECT_EQ(tally::reduce(tally::host, v.begin(), v.end(), init), want);
  }
}

TEST(widened_integers, narrow_values_accumulate_in_inits_type_on_the_host) {
  expect_widened_sums<std::int8_t, int>(440);
  expect_widened_sums<std::uint8_t, std::uint32_t>(441);
  expect_widened_sums<std::int16_t, long long>(442);
  expect_widened_sums<std::uint16_t, std::uint64_t>(443);
  expect_widened_sums<std::int32_t, std::int64_t>(444);
}

template <class H>
class narrow_floats : public ::testing::Test {};
TYPED_TEST_SUITE(narrow_floats, every_narrow_float);

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

template <class S, class Op>
void expect_structs(std::uint64_t salt, Op op, bool exact_any_order) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : type_sizes(s.rng)) {
    const auto v = random_structs<S>(n, s.rng);
    const S init = random_structs<S>(1, s.rng)[0];
    const S host = tally::reduce(tally::host, v.begin(), v.end(), init, op);
    // Integer operators (and the ordered path) give the left fold exactly.
    if (exact_any_order) EXPECT_TRUE(same_fields(host, left_fold(v, init, op))) << "n = " << n;
    EXPECT_TRUE(same_fields(tally::reduce(tally::host.threads(3), v.begin(), v.end(), init, op), host)) << "n = " << n;
  }
}

TEST(user_structs, up_to_64_bytes_on_the_host) {
  expect_structs<counters16>(490, add_counters{}, true);
  expect_structs<counters16>(491, tally::commutative(add_counters{}), true);
  expect_structs<rgb16>(492, brightest{}, true);
  expect_structs<quad16>(493, quad_max{}, true);
  expect_structs<block3x4>(494, add_blocks{}, false);
}

}  // namespace
