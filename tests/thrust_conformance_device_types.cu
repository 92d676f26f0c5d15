// Part of test_thrust_conformance_device (tests/test_thrust_conformance_device.cu says how the
// program is split): reduce on every element type, the user types included, and init of
// another type than the elements.

#include "support/thrust_conformance.cuh"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace tally_test::conformance;
using tally_test::seeded;

// The sanitized host build (scripts/test) defines TALLY_TEST_HOST_ONLY and compiles no kernel tests.
#if !defined(TALLY_TEST_HOST_ONLY)

template <class T>
void expect_integer_type_agrees_on_the_device(std::uint64_t salt) {
  for (std::size_t n : device_sizes()) {
    seeded s(salt * 100 + n);
    SCOPED_TRACE(s.trace());
    const std::vector<T> a = integers<T>(n, s.rng);
    const thrust::device_vector<T> da(a.begin(), a.end());
    expect_reduce_agrees(thrust::device, tally::device, da.begin(), a, static_cast<T>(s.rng() % 7), "integers");
  }
}

// reduce on every element type, the user types included.
TEST_F(thrust_conformance_device, every_element_type) {
  expect_integer_type_agrees_on_the_device<std::int8_t>(11);
  expect_integer_type_agrees_on_the_device<std::uint8_t>(12);
  expect_integer_type_agrees_on_the_device<std::int16_t>(13);
  expect_integer_type_agrees_on_the_device<std::uint16_t>(14);
  expect_integer_type_agrees_on_the_device<std::uint32_t>(16);
  expect_integer_type_agrees_on_the_device<std::int64_t>(17);
  expect_integer_type_agrees_on_the_device<std::uint64_t>(18);
  for (std::size_t n : device_sizes()) {
    seeded s(1020 + n);
    SCOPED_TRACE(s.trace());
    const auto fe = eighths<float>(n, s.rng);
    const thrust::device_vector<float> dfe(fe.begin(), fe.end());
    expect_reduce_agrees(thrust::device, tally::device, dfe.begin(), fe, 0.5f, "float, exact sums");
    const auto fr = tally_test::random_values<float>(n, s.rng);
    const thrust::device_vector<float> dfr(fr.begin(), fr.end());
    expect_reduce_agrees(thrust::device, tally::device, dfr.begin(), fr, 1.0f, "float, rounded sums");
    const auto d = tally_test::random_values<double>(n, s.rng);
    const thrust::device_vector<double> dd(d.begin(), d.end());
    expect_reduce_agrees(thrust::device, tally::device, dd.begin(), d, 1.0, "double, rounded sums");

    // __half and __nv_bfloat16: Thrust's reduce on them (small integers: exact sums).
    const auto h = capped_small_integers<__half>(n, s.rng, 600);
    const thrust::device_vector<__half> dh(h.begin(), h.end());
    expect_reduce_agrees(thrust::device, tally::device, dh.begin(), h, __float2half_rn(1.0f), "__half");
    const auto bf = capped_small_integers<__nv_bfloat16>(n, s.rng, 80);
    const thrust::device_vector<__nv_bfloat16> dbf(bf.begin(), bf.end());
    expect_reduce_agrees(thrust::device, tally::device, dbf.begin(), bf, __float2bfloat16_rn(1.0f), "__nv_bfloat16");

    const std::string nn = ", n = " + std::to_string(n);
    const std::vector<int> v = integers<int>(n, s.rng);
    std::vector<tally_point> points(n);
    for (std::size_t i = 0; i < n; ++i) points[i] = {int(s.rng() % 5), v[i]};
    const thrust::device_vector<tally_point> dpoints(points.begin(), points.end());
    const auto pf = dpoints.begin(), pl = dpoints.end();
    expect_agree(TALLY_CONFORM(reduce, thrust::device, tally::device, pf, pl, tally_point{2, -2}, add_points{}),
                 "trivially copyable struct: reduce with the user's operator" + nn);

    const std::vector<long long> raw = widen(v);
    const thrust::device_vector<long long> draw(raw.begin(), raw.end());
    const thrust::device_vector<cents> money(draw.begin(), draw.end());  // converted on the device
    expect_agree(TALLY_CONFORM(reduce, thrust::device, tally::device, money.begin(), money.end()),
                 "cents: reduce(first, last)" + nn);
  }
}

TEST_F(thrust_conformance_device, init_narrower_and_wider_than_the_elements) {
  for (std::size_t n : device_sizes()) {
    seeded s(1030 + n);
    SCOPED_TRACE(s.trace());
    const std::vector<int> a = products_overflowing_int(n, s.rng), b = products_overflowing_int(n, s.rng);
    const thrust::device_vector<int> da(a.begin(), a.end()), db(b.begin(), b.end());
    expect_inner_product_agrees(thrust::device, tally::device, da.begin(), db.begin(), a, b, 5LL,
                                "int elements, long long init");
    expect_inner_product_agrees(thrust::device, thrust::device, da.begin(), db.begin(), a, b, short(5),
                                "int elements, short init");
    const std::vector<float> f = wide_floats(n, s.rng, -4000, 8191), g = wide_floats(n, s.rng, 0, 16383);
    const thrust::device_vector<float> df(f.begin(), f.end()), dg(g.begin(), g.end());
    expect_inner_product_agrees(thrust::device, tally::device, df.begin(), dg.begin(), f, g, 0.5,
                                "float elements (products of 27 bits), double init");
  }
}


#endif  // !TALLY_TEST_HOST_ONLY

}  // namespace
