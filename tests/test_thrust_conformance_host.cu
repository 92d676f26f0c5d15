// Differential conformance against Thrust, host cases (docs/thrust.md, "Conformance program";
// the helpers and what they check: tests/support/thrust_conformance.cuh). Every algorithm
// through thrust:: and tally:: under thrust::host, thrust::seq and tally::host and without a
// policy, on element types, init types, kinds of operator (host-only ones included) and kinds
// of iterator. These cases run everywhere: in CI, under valgrind and the sanitizers.

#include "support/thrust_conformance.cuh"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace {

using namespace tally_test::conformance;
using tally_test::seeded;

// Sizes kept modest: these cases run under valgrind and the sanitizers in CI.
const std::size_t host_sizes[] = {0, 1, 2, 1000, 65539};

// Every algorithm under thrust::host, tally::host and thrust::seq (tally's own policy and
// Thrust's; one instantiation of tally's for all three), then minmax_element with repeated
// extremes and the forms without a policy, on the same instantiations.
TEST(thrust_conformance_host, every_algorithm_under_every_host_policy) {
  for (std::size_t n : host_sizes) {
    seeded s(900 + n);
    SCOPED_TRACE(s.trace());
    const std::vector<int> a = integers<int>(n, s.rng), b = integers<int>(n, s.rng);
    expect_family_agrees(thrust::host, tally::host, a.begin(), b.begin(), a, b, 3, "thrust::host against tally::host");
    expect_family_agrees(thrust::host, thrust::host, a.begin(), b.begin(), a, b, 3, "thrust::host");
    expect_family_agrees(thrust::seq, thrust::seq, a.begin(), b.begin(), a, b, 3, "thrust::seq");

    const std::vector<int> ties = many_ties<int>(n, s.rng);
    expect_ties_agree(thrust::host, tally::host, ties.begin(), n, "thrust::host against tally::host");
    expect_ties_agree(thrust::seq, thrust::seq, ties.begin(), n, "thrust::seq");

    const std::string no_policy = "without a policy, n = " + std::to_string(n);
    expect_agree(TALLY_CONFORM_NO_POLICY(reduce, a.begin(), a.end()), no_policy + ": reduce");
    expect_agree(TALLY_CONFORM_NO_POLICY(inner_product, a.begin(), a.end(), b.begin(), 3), no_policy + ": inner_product");
    expect_same_positions(TALLY_CONFORM_NO_POLICY(minmax_element, ties.begin(), ties.end()), ties.begin(),
                          no_policy + ": minmax_element");
  }
}

// reduce on every element type (inner_product and minmax_element too on float, whose products
// round and whose zeros have two signs); the user types through the algorithms their operators
// allow.
template <class T>
void expect_integer_type_agrees_on_the_host(std::uint64_t salt) {
  for (std::size_t n : host_sizes) {
    seeded s(salt * 100 + n);
    SCOPED_TRACE(s.trace());
    const std::vector<T> a = integers<T>(n, s.rng);
    expect_reduce_agrees(thrust::host, tally::host, a.begin(), a, static_cast<T>(s.rng() % 7), "integers");
  }
}

TEST(thrust_conformance_host, every_element_type) {
  expect_integer_type_agrees_on_the_host<std::int8_t>(1);
  expect_integer_type_agrees_on_the_host<std::uint8_t>(2);
  expect_integer_type_agrees_on_the_host<std::int16_t>(3);
  expect_integer_type_agrees_on_the_host<std::uint16_t>(4);
  expect_integer_type_agrees_on_the_host<std::uint32_t>(6);
  expect_integer_type_agrees_on_the_host<std::int64_t>(7);
  expect_integer_type_agrees_on_the_host<std::uint64_t>(8);
  for (std::size_t n : host_sizes) {
    seeded s(910 + n);
    SCOPED_TRACE(s.trace());
    // float: exact sums (eighths) and rounded ones (values of mixed magnitudes).
    const auto fe = eighths<float>(n, s.rng), fe2 = eighths<float>(n, s.rng);
    const auto fr = tally_test::random_values<float>(n, s.rng), fr2 = tally_test::random_values<float>(n, s.rng);
    for (const auto* f : {&fe, &fr}) {
      const auto& g = f == &fe ? fe2 : fr2;
      const std::string what = f == &fe ? "float, exact sums" : "float, rounded sums";
      expect_reduce_agrees(thrust::host, tally::host, f->begin(), *f, 0.5f, what);
      expect_inner_product_agrees(thrust::host, tally::host, f->begin(), g.begin(), *f, g, 0.5f, what);
    }
    const auto ft = many_ties<float>(n, s.rng);
    expect_minmax_agrees(thrust::host, tally::host, ft.begin(), n, "float, repeated extremes, -0.0 beside 0.0");
    const auto d = tally_test::random_values<double>(n, s.rng);
    expect_reduce_agrees(thrust::host, tally::host, d.begin(), d, 1.0, "double, rounded sums");
    const auto h = capped_small_integers<__half>(n, s.rng, 600);
    expect_reduce_agrees(thrust::host, tally::host, h.begin(), h, __float2half_rn(1.0f), "__half");
    const auto bf = capped_small_integers<__nv_bfloat16>(n, s.rng, 80);
    expect_reduce_agrees(thrust::host, tally::host, bf.begin(), bf, __float2bfloat16_rn(1.0f), "__nv_bfloat16");

    // A trivially copyable struct with the user's operator. (Not reduce(first, last): Thrust's
    // init for it is value_type(0), which this struct lacks.)
    const std::vector<int> v = integers<int>(n, s.rng);
    std::vector<tally_point> points(n);
    for (std::size_t i = 0; i < n; ++i) points[i] = {int(s.rng() % 5), v[i]};
    const auto pf = points.begin(), pl = points.end();
    const std::string nn = ", n = " + std::to_string(n);
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, pf, pl, tally_point{2, -2}, add_points{}),
                 "trivially copyable struct: reduce with the user's operator" + nn);
    expect_same_position(TALLY_CONFORM(min_element, thrust::host, tally::host, pf, pl, by_count{}), pf,
                         "trivially copyable struct: min_element by a comparator" + nn);

    // A type with constructors of its own.
    const std::vector<long long> raw = widen(v);
    const std::vector<cents> money(raw.begin(), raw.end());  // the converting constructor
    const auto cf = money.begin(), cl = money.end();
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, cf, cl), "cents: reduce(first, last)" + nn);
    expect_agree(TALLY_CONFORM(reduce, thrust::seq, thrust::seq, raw.begin(), raw.end(), cents(7), thrust::plus<cents>{}),
                 "cents: reduce of long long into a cents init (converting constructor)" + nn);
    expect_agree(TALLY_CONFORM(inner_product, thrust::host, tally::host, cf, cl, cf, cents(1)), "cents: inner_product" + nn);
    expect_minmax_agrees(thrust::host, tally::host, cf, n, "cents");

    // Found by this program and fixed (29278a2): reduce(first, last) starts from value_type(0),
    // as thrust::reduce does, which differs from value_type{} for this type.
    const std::vector<one_by_default> ones(v.begin(), v.end());
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, ones.begin(), ones.end()),
                 "reduce(first, last) of a type whose default constructor is not its 0" + nn);
  }
}

// init of another type than the elements: the accumulator is init's type, and inner_product
// multiplies in it (thrust::multiplies<Init>): int elements up to 10^6 with a long long init
// have products that overflow int, the case that used to differ; floats of 13 and 14 bits have
// products exact in double and rounded in float.
TEST(thrust_conformance_host, init_narrower_and_wider_than_the_elements) {
  for (std::size_t n : host_sizes) {
    seeded s(920 + n);
    SCOPED_TRACE(s.trace());
    const std::vector<int> a = products_overflowing_int(n, s.rng), b = products_overflowing_int(n, s.rng);
    const std::string nn = ", n = " + std::to_string(n);
    expect_inner_product_agrees(thrust::host, tally::host, a.begin(), b.begin(), a, b, 5LL, "int elements, long long init");
    expect_inner_product_agrees(thrust::seq, thrust::seq, a.begin(), b.begin(), a, b, 5LL,
                                "int elements, long long init, thrust::seq");  // the same instantiation of tally's
    expect_agree(TALLY_CONFORM(inner_product, thrust::host, tally::host, a.begin(), a.end(), b.begin(), 5LL,
                               thrust::plus<long long>{}, thrust::multiplies<long long>{}),
                 "int elements, long long init: inner_product(thrust::plus<long long>, thrust::multiplies<long long>)" + nn);
    expect_inner_product_agrees(thrust::host, thrust::host, a.begin(), b.begin(), a, b, short(5),
                                "int elements, short init");
    const auto i8 = integers<std::int8_t>(n, s.rng);
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, i8.begin(), i8.end(), -3),
                 "int8 elements, int init: reduce" + nn);
    const std::vector<float> f = wide_floats(n, s.rng, -4000, 8191), g = wide_floats(n, s.rng, 0, 16383);
    expect_sum_agrees(TALLY_CONFORM(reduce, thrust::host, tally::host, f.begin(), f.end(), 0.5),
                      "float elements, double init: reduce" + nn, 0.5, n, [&](std::size_t i) { return f[i]; });
    expect_inner_product_agrees(thrust::host, tally::host, f.begin(), g.begin(), f, g, 0.5, "float elements, double init");
  }
}

// Extended lambdas cannot live in a test body (a private member function), so this free
// function holds them.
void expect_host_device_lambdas_agree_on_the_host(const std::vector<int>& v) {
  const auto plus = [] __host__ __device__(int a, int b) { return a + b; };
  const auto less = [] __host__ __device__(int a, int b) { return a < b; };
  const auto first = v.begin(), last = v.end();
  const std::string what = "__host__ __device__ lambdas, n = " + std::to_string(v.size());
  expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, first, last, 7, plus), what + ": reduce");
  expect_same_position(TALLY_CONFORM(min_element, thrust::host, tally::host, first, last, less), first,
                       what + ": min_element");
}

TEST(thrust_conformance_host, every_kind_of_operator) {
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(1000), std::size_t(65539)}) {
    seeded s(930 + n);
    SCOPED_TRACE(s.trace());
    std::uniform_int_distribution<int> d(-1000, 1000);
    std::vector<int> v(n);
    for (auto& x : v) x = d(s.rng);
    const auto first = v.begin(), last = v.end();
    const std::string nn = ", n = " + std::to_string(n);

    // Host-only function objects (no __host__ __device__) in every slot, under the three host
    // policies: the program compiles with warnings as errors (nvcc's 20011 and 20014 among them).
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, first, last, 7, host_plus{}), "host-only: reduce" + nn);
    expect_agree(TALLY_CONFORM(transform_reduce, thrust::seq, thrust::seq, first, last, host_negate{}, 7, host_plus{}),
                 "host-only: transform_reduce" + nn);
    expect_agree(TALLY_CONFORM(inner_product, thrust::host, thrust::host, first, last, first, 7, host_plus{}, host_plus{}),
                 "host-only: inner_product" + nn);
    expect_agree(TALLY_CONFORM(count_if, thrust::host, tally::host, first, last, host_is_odd{}), "host-only: count_if" + nn);
    expect_agree(TALLY_CONFORM(any_of, thrust::seq, thrust::seq, first, last, host_is_odd{}), "host-only: any_of" + nn);
    expect_same_positions(TALLY_CONFORM(minmax_element, thrust::host, tally::host, first, last, host_less{}), first,
                          "host-only: minmax_element" + nn);

    // Function objects with const and with non-const operator().
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, first, last, 7, const_plus{}), "const: reduce" + nn);
    expect_agree(TALLY_CONFORM(transform_reduce, thrust::host, tally::host, first, last, mutable_negate{}, 7,
                               mutable_plus{}),
                 "non-const: transform_reduce" + nn);
    expect_agree(TALLY_CONFORM(inner_product, thrust::host, tally::host, first, last, first, 7, mutable_plus{},
                               mutable_plus{}),
                 "non-const: inner_product" + nn);
    expect_agree(TALLY_CONFORM(all_of, thrust::host, tally::host, first, last, mutable_is_odd{}), "non-const: all_of" + nn);
    expect_mutable_comparator_agrees(thrust::host, first, n, "non-const comparator" + nn);

    expect_host_device_lambdas_agree_on_the_host(v);

    // Every library's plus; Thrust's maximum, minimum, multiplies (the last on values of
    // magnitude 1, and on powers of two in double: exact in any order).
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, first, last, 3, thrust::plus<int>{}), "thrust::plus" + nn);
    expect_agree(TALLY_CONFORM(reduce, thrust::seq, thrust::seq, first, last, 3, cuda::std::plus<int>{}),
                 "cuda::std::plus<int>" + nn);
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, first, last, 3, thrust::maximum<int>{}),
                 "thrust::maximum" + nn);
    expect_agree(TALLY_CONFORM(reduce, thrust::host, thrust::host, first, last, 3, thrust::minimum<int>{}),
                 "thrust::minimum" + nn);
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, first, last, 3, std::plus<int>{}), "std::plus<int>" + nn);
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, first, last, 3, std::plus<>{}), "std::plus<>" + nn);
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, first, last, 3, tally::plus<>{}), "tally::plus<>" + nn);
    std::vector<int> signs(n);
    for (auto& x : signs) x = s.rng() & 1 ? 1 : -1;
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, signs.begin(), signs.end(), -1, thrust::multiplies<int>{}),
                 "thrust::multiplies" + nn);
    std::vector<double> powers(std::min<std::size_t>(n, 2000));
    for (auto& x : powers) x = std::ldexp(s.rng() & 1 ? 1.0 : -1.0, int(s.rng() % 3) - 1);
    expect_agree(TALLY_CONFORM(reduce, thrust::host, tally::host, powers.begin(), powers.end(), 1.0,
                               thrust::multiplies<double>{}),
                 "thrust::multiplies<double> on powers of two" + nn);
  }
}

TEST(thrust_conformance_host, every_iterator_kind) {
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(1000), std::size_t(65539)}) {
    seeded s(940 + n);
    SCOPED_TRACE(s.trace());
    const std::vector<int> v = integers<int>(n, s.rng);
    // std::vector iterators: every test above.
    expect_reduce_agrees(thrust::host, thrust::host, v.data(), v, 3, "raw host pointers");
    const thrust::host_vector<int> hv(v.begin(), v.end());
    expect_reduce_agrees(thrust::host, tally::host, hv.begin(), v, 3, "thrust::host_vector iterators");

    std::vector<long long> iota(n);
    std::iota(iota.begin(), iota.end(), -7LL);
    const thrust::counting_iterator<long long> counting(-7);
    expect_reduce_agrees(thrust::host, tally::host, counting, iota, 1LL, "counting_iterator");
    const thrust::constant_iterator<int> constant(-3);
    expect_agree(TALLY_CONFORM(count, thrust::host, tally::host, constant, constant + static_cast<std::ptrdiff_t>(n), -3),
                 "constant_iterator: count, n = " + std::to_string(n));

    std::vector<int> twiced(n);
    std::transform(v.begin(), v.end(), twiced.begin(), twice<int>{});
    const auto transformed = thrust::make_transform_iterator(v.begin(), twice<int>{});
    expect_reduce_agrees(thrust::host, tally::host, transformed, twiced, 1, "transform_iterator");

    const std::vector<int> perm = random_permutation(n, s.rng);
    std::vector<int> permuted(n);
    for (std::size_t i = 0; i < n; ++i) permuted[i] = v[perm[i]];
    const auto permutation = thrust::make_permutation_iterator(v.begin(), perm.begin());
    expect_minmax_agrees(thrust::host, tally::host, permutation, n, "permutation_iterator");

    // thrust::reverse_iterator. (Not std::reverse_iterator: Thrust's own __host__ __device__
    // reduce calls its constexpr __host__ members, nvcc warning 20015, an error under the
    // suite's -Werror all-warnings.)
    const auto reverse = thrust::make_reverse_iterator(v.end());
    expect_minmax_agrees(thrust::seq, thrust::seq, reverse, n, "thrust::reverse_iterator");

    const std::vector<int> w = integers<int>(n, s.rng);
    expect_zip_agrees(thrust::host, tally::host, thrust::make_zip_iterator(thrust::make_tuple(v.begin(), w.begin())), n,
                      "zip_iterator");
  }
}

}  // namespace
