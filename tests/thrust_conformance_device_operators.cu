// Part of test_thrust_conformance_device (tests/test_thrust_conformance_device.cu says how the
// program is split): every kind of operator, lambdas included, and every kind of iterator.

#include "support/thrust_conformance.cuh"

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace tally_test::conformance;
using tally_test::seeded;

// The sanitized host build (scripts/test) defines TALLY_TEST_HOST_ONLY and compiles no kernel tests.
#if !defined(TALLY_TEST_HOST_ONLY)

// __host__ __device__ and __device__ lambdas (in a free function: extended lambdas cannot live
// in a test body). Thrust refuses a __device__ lambda whose result type it must ask for
// (reduce's operator, transform_reduce's transform) unless it has a trailing return type or is
// wrapped in cuda::proclaim_return_type; tally takes the plain one too, and
// tally::commutative of it.
void expect_lambdas_agree_on_the_device(const thrust::device_vector<int>& dv) {
  const auto first = dv.begin(), last = dv.end();
  const std::string what = "n = " + std::to_string(dv.size());
  const auto plus = [] __host__ __device__(int a, int b) { return a + b; };
  expect_agree(TALLY_CONFORM(reduce, thrust::device, tally::device, first, last, 7, plus),
               "__host__ __device__ lambda: reduce, " + what);

  const auto device_plus = [] __device__(int a, int b) { return a + b; };
  const auto device_plus_typed = [] __device__(int a, int b) -> int { return a + b; };
  expect_agree(TALLY_CONFORM(reduce, thrust::device, tally::device, first, last, 7, device_plus_typed),
               "__device__ lambda with a trailing return type: reduce, " + what);
  const auto proclaimed = cuda::proclaim_return_type<int>(device_plus);
  expect_agree(TALLY_CONFORM(reduce, thrust::device, tally::device, first, last, 7, proclaimed),
               "cuda::proclaim_return_type(__device__ lambda): reduce, " + what);
  // The plain __device__ lambda, and tally::commutative of it: tally's calls against Thrust's
  // with the proclaimed one (the same type, the same value).
  using thrust_result_t = decltype(thrust::reduce(thrust::device, first, last, 7, proclaimed));
  static_assert(std::is_same_v<thrust_result_t, decltype(tally::reduce(tally::device, first, last, 7, device_plus))>);
  static_assert(std::is_same_v<thrust_result_t, decltype(tally::reduce(tally::device, first, last, 7,
                                                                       tally::commutative(device_plus)))>);
  static_assert(tally::is_commutative_v<decltype(tally::commutative(device_plus))>);  // the plan that may reorder
  const int from_thrust = thrust::reduce(thrust::device, first, last, 7, proclaimed);
  EXPECT_EQ(tally::reduce(tally::device, first, last, 7, device_plus), from_thrust)
      << "plain __device__ lambda: reduce, " << what;
  EXPECT_EQ(tally::reduce(tally::device, first, last, 7, tally::commutative(device_plus)), from_thrust)
      << "tally::commutative(__device__ lambda): reduce, " << what;
}

TEST_F(thrust_conformance_device, every_kind_of_operator) {
  for (std::size_t n : device_sizes()) {
    seeded s(1040 + n);
    SCOPED_TRACE(s.trace());
    std::uniform_int_distribution<int> d(-1000, 1000);
    std::vector<int> v(n);
    for (auto& x : v) x = d(s.rng);
    const thrust::device_vector<int> dv(v.begin(), v.end());
    const auto first = dv.begin(), last = dv.end();
    const std::string nn = ", n = " + std::to_string(n);

    expect_agree(TALLY_CONFORM(reduce, thrust::device, tally::device, first, last, 7, const_plus{}), "const: reduce" + nn);
    expect_agree(TALLY_CONFORM(transform_reduce, thrust::device, tally::device, first, last, mutable_negate{}, 7,
                               mutable_plus{}),
                 "non-const: transform_reduce" + nn);
    expect_agree(TALLY_CONFORM(inner_product, thrust::device, thrust::device, first, last, first, 7, mutable_plus{},
                               mutable_plus{}),
                 "non-const: inner_product" + nn);
    expect_mutable_comparator_agrees(thrust::device, first, n, "non-const comparator" + nn);
    expect_lambdas_agree_on_the_device(dv);

    // Thrust's and libcu++'s operators (tally's own are on the host). std::plus is not here: its
    // operator() is a constexpr __host__ function, which neither Thrust's kernels nor tally's
    // may call without nvcc's --expt-relaxed-constexpr. thrust::plus is cuda::std::plus.
    expect_agree(TALLY_CONFORM(reduce, thrust::device, tally::device, first, last, 3, cuda::std::plus<int>{}),
                 "cuda::std::plus<int>" + nn);
    expect_agree(TALLY_CONFORM(reduce, thrust::device, tally::device, first, last, 3, thrust::maximum<int>{}),
                 "thrust::maximum" + nn);
    expect_agree(TALLY_CONFORM(reduce, thrust::device, thrust::device, first, last, 3, thrust::minimum<int>{}),
                 "thrust::minimum" + nn);
    std::vector<int> signs(n);
    for (auto& x : signs) x = s.rng() & 1 ? 1 : -1;
    const thrust::device_vector<int> dsigns(signs.begin(), signs.end());
    expect_agree(TALLY_CONFORM(reduce, thrust::device, tally::device, dsigns.begin(), dsigns.end(), -1,
                               thrust::multiplies<int>{}),
                 "thrust::multiplies" + nn);
  }
}

TEST_F(thrust_conformance_device, every_iterator_kind) {
  for (std::size_t n : device_sizes()) {
    seeded s(1050 + n);
    SCOPED_TRACE(s.trace());
    const std::vector<int> v = integers<int>(n, s.rng);
    const thrust::device_vector<int> dv(v.begin(), v.end());
    // device_vector iterators, raw pointers and device_ptr: every_algorithm_under_every_policy
    // (test_thrust_conformance_device.cu).

    std::vector<long long> iota(n);
    std::iota(iota.begin(), iota.end(), -7LL);
    const thrust::counting_iterator<long long> counting(-7);
    expect_reduce_agrees(thrust::device, tally::device, counting, iota, 1LL, "counting_iterator");
    const thrust::constant_iterator<int> constant(-3);
    expect_agree(TALLY_CONFORM(count, thrust::device, tally::device, constant, constant + static_cast<std::ptrdiff_t>(n), -3),
                 "constant_iterator: count, n = " + std::to_string(n));

    std::vector<int> twiced(n);
    std::transform(v.begin(), v.end(), twiced.begin(), twice<int>{});
    const auto transformed = thrust::make_transform_iterator(dv.begin(), twice<int>{});
    expect_reduce_agrees(thrust::device, tally::device, transformed, twiced, 1, "transform_iterator");

    const std::vector<int> perm = random_permutation(n, s.rng);
    const thrust::device_vector<int> dperm(perm.begin(), perm.end());
    std::vector<int> permuted(n);
    for (std::size_t i = 0; i < n; ++i) permuted[i] = v[perm[i]];
    const auto permutation = thrust::make_permutation_iterator(dv.begin(), dperm.begin());
    expect_reduce_agrees(thrust::device, tally::device, permutation, permuted, 1, "permutation_iterator");

    const auto reverse = thrust::make_reverse_iterator(dv.end());
    expect_minmax_agrees(thrust::device, tally::device, reverse, n, "reverse_iterator");

    const std::vector<int> w = integers<int>(n, s.rng);
    const thrust::device_vector<int> dw(w.begin(), w.end());
    expect_zip_agrees(thrust::device, tally::device, thrust::make_zip_iterator(thrust::make_tuple(dv.begin(), dw.begin())),
                      n, "zip_iterator");
  }
}

#endif  // !TALLY_TEST_HOST_ONLY

}  // namespace
