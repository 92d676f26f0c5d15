// Every type a CUDA user reduces, on the device (docs/types.md): the cases of
// tests/test_types.cu (host) run through tally::device, against the same references and, for
// floating point, equal to the host backend bit for bit. Device tests skip without a GPU.
#include "support/type_cases.cuh"

namespace {

using namespace tally_test::types;
using tally_test::bits_of;
using tally_test::device_buffer;
using tally_test::device_value;
using tally_test::seeded;

template <class T>
class device_integer_types : public tally_test::device_test {};
TYPED_TEST_SUITE(device_integer_types, every_integer);

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
void expect_widened_sums(std::uint64_t salt) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : type_sizes(s.rng, true)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto v = int_inputs<T>(int_op::plus, n, s.rng);
    const Acc init = static_cast<Acc>(s.rng() % 1000);
    const Acc want = int_reference(int_op::plus, v, init);
    device_buffer<T> d(v, 3);
    device_value<Acc> out;
    tally::reduce_into(tally::device, d.begin(), d.end(), out.get(), init, tally::plus<Acc>{});
    EXPECT_EQ(out.read(), want);
    EXPECT_EQ(tally::reduce(tally::device, d.begin(), d.end(), init), want);
  }
}

class device_widened_integers : public tally_test::device_test {};

TEST_F(device_widened_integers, narrow_values_accumulate_in_inits_type_on_the_device) {
  expect_widened_sums<std::int8_t, int>(450);
  expect_widened_sums<std::uint8_t, std::uint32_t>(451);
  expect_widened_sums<std::int16_t, long long>(452);
  expect_widened_sums<std::uint16_t, std::uint64_t>(453);
  expect_widened_sums<std::int32_t, std::int64_t>(454);
}

template <class H>
class device_narrow_floats : public tally_test::device_test {};
TYPED_TEST_SUITE(device_narrow_floats, every_narrow_float);

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

template <class S, class Op>
void expect_structs(std::uint64_t salt, Op op, bool exact_any_order) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : type_sizes(s.rng, true)) {
    const auto v = random_structs<S>(n, s.rng);
    const S init = random_structs<S>(1, s.rng)[0];
    const S host = tally::reduce(tally::host, v.begin(), v.end(), init, op);
    // Integer operators (and the ordered path) give the left fold exactly; the float block
    // sums are reproducible, so the device must equal the host.
    if (exact_any_order) EXPECT_TRUE(same_fields(host, left_fold(v, init, op))) << "host, n = " << n;
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

class device_user_structs : public tally_test::device_test {};

TEST_F(device_user_structs, up_to_160_bytes_equal_the_host) {
  expect_structs<counters16>(495, add_counters{}, true);
  expect_structs<counters16>(496, tally::commutative(add_counters{}), true);
  expect_structs<rgb16>(497, brightest{}, true);
  expect_structs<quad16>(498, quad_max{}, true);
  expect_structs<block3x4>(499, add_blocks{}, false);
  expect_structs<counters40>(500, add_counters40{}, true);
  expect_structs<counters40>(501, tally::commutative(add_counters40{}), true);
}

}  // namespace
