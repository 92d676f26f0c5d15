// Every reduction-family algorithm over every iterator kind a Thrust user hands it: raw and
// device pointers, device_vector and std::vector iterators, counting, constant, transform,
// permutation, reverse and zip iterators; on the host and the device, against std::
// references computed on the values the iterator yields. Then every algorithm over more
// than 2^31 elements (fancy iterators, no memory), with the answers placed beyond index
// 2^31 so that a 32-bit index anywhere would show.

#include "support/test_support.cuh"
#include "tally/tally.cuh"

#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/permutation_iterator.h>
#include <thrust/iterator/reverse_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/tuple.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

namespace {

using tally_test::seeded;

struct is_negative {
  template <class T>
  __host__ __device__ bool operator()(const T& x) const {
    return x < 0;
  }
};
struct never {
  template <class T>
  __host__ __device__ bool operator()(const T& x) const {
    return x > T(1000000000);
  }
};
struct square_as_long_long {
  template <class T>
  __host__ __device__ long long operator()(const T& x) const {
    return static_cast<long long>(x) * static_cast<long long>(x);
  }
};
struct three_x_minus_one {
  __host__ __device__ int operator()(int x) const { return 3 * x - 1; }
};

// Seeded values in [-1000, 1000]: small enough that every sum below is exact in 64 bits,
// with many ties for the extrema.
std::vector<int> random_ints(std::size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(-1000, 1000);
  std::vector<int> v(n);
  for (int& x : v) x = d(rng);
  return v;
}

// Every algorithm on [first, first + n) against std:: on `values`, the values the iterator
// yields (as long long). first2 is a second range of the same kind for the two-range forms.
template <class Policy, class It>
void expect_family_matches_std(const Policy& policy, It first, std::size_t n, const std::vector<long long>& values,
                               const std::string& what) {
  SCOPED_TRACE(what + ", n = " + std::to_string(n));
  ASSERT_EQ(values.size(), n);
  const It last = first + static_cast<std::ptrdiff_t>(n);
  const auto vb = values.begin(), ve = values.end();

  long long squares = 0, sum = 0;
  for (long long x : values) {
    squares += x * x;
    sum += x;
  }
  EXPECT_EQ(tally::reduce(policy, first, last, 0LL, tally::plus<long long>{}), sum);
  EXPECT_EQ(tally::transform_reduce(policy, first, last, square_as_long_long{}, 0LL, tally::plus<long long>{}), squares);
  EXPECT_EQ(tally::inner_product(policy, first, last, first, 0LL), squares);
  EXPECT_EQ(tally::transform_reduce(policy, first, last, first, 0LL), squares);

  const long long probe = values[n / 2];
  EXPECT_EQ(tally::count(policy, first, last, probe), std::count(vb, ve, probe));
  EXPECT_EQ(tally::count_if(policy, first, last, is_negative{}), std::count_if(vb, ve, is_negative{}));

  EXPECT_EQ(tally::min_element(policy, first, last) - first, std::min_element(vb, ve) - vb);
  EXPECT_EQ(tally::max_element(policy, first, last) - first, std::max_element(vb, ve) - vb);
  const auto both = tally::minmax_element(policy, first, last);
  const auto want = tally_test::first_min_first_max(vb, ve);
  EXPECT_EQ(both.first - first, want.first - vb);
  EXPECT_EQ(both.second - first, want.second - vb);

  EXPECT_EQ(tally::all_of(policy, first, last, is_negative{}), std::all_of(vb, ve, is_negative{}));
  EXPECT_EQ(tally::any_of(policy, first, last, is_negative{}), std::any_of(vb, ve, is_negative{}));
  EXPECT_EQ(tally::none_of(policy, first, last, is_negative{}), std::none_of(vb, ve, is_negative{}));
  EXPECT_FALSE(tally::any_of(policy, first, last, never{}));
  EXPECT_TRUE(tally::none_of(policy, first, last, never{}));
}

template <class T>
std::vector<long long> widen(const std::vector<T>& v) {
  return std::vector<long long>(v.begin(), v.end());
}

std::vector<long long> iota_values(long long start, std::size_t n) {
  std::vector<long long> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

std::vector<int> random_permutation(std::size_t n, std::mt19937_64& rng) {
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

const std::size_t sizes[] = {1, 2, 1000, 300001};

// ---- host ----

TEST(iterator_kinds_host, every_algorithm_over_every_iterator_kind) {
  for (std::size_t n : sizes) {
    seeded s(n + 910);
    SCOPED_TRACE(s.trace());
    const std::vector<int> v = random_ints(n, s.rng);
    const std::vector<long long> wide = widen(v);
    expect_family_matches_std(tally::host, v.begin(), n, wide, "std::vector iterator");
    expect_family_matches_std(tally::host, v.data(), n, wide, "pointer");
    expect_family_matches_std(tally::host, thrust::counting_iterator<long long>(-7), n, iota_values(-7, n),
                              "counting_iterator");
    expect_family_matches_std(tally::host, thrust::constant_iterator<int>(-3), n, std::vector<long long>(n, -3),
                              "constant_iterator");

    std::vector<long long> transformed(n);
    std::transform(v.begin(), v.end(), transformed.begin(), three_x_minus_one{});
    expect_family_matches_std(tally::host, thrust::make_transform_iterator(v.begin(), three_x_minus_one{}), n,
                              transformed, "transform_iterator");

    const std::vector<int> perm = random_permutation(n, s.rng);
    std::vector<long long> permuted(n);
    for (std::size_t i = 0; i < n; ++i) permuted[i] = v[perm[i]];
    expect_family_matches_std(tally::host, thrust::make_permutation_iterator(v.begin(), perm.begin()), n, permuted,
                              "permutation_iterator");

    expect_family_matches_std(tally::host, v.rbegin(), n, std::vector<long long>(wide.rbegin(), wide.rend()),
                              "std::reverse_iterator");
  }
}

// ---- device ----

class iterator_kinds_device : public tally_test::device_test {};

TEST_F(iterator_kinds_device, every_algorithm_over_every_iterator_kind) {
  for (std::size_t n : sizes) {
    seeded s(n + 920);
    SCOPED_TRACE(s.trace());
    const std::vector<int> v = random_ints(n, s.rng);
    const std::vector<long long> wide = widen(v);
    const thrust::device_vector<int> dv(v.begin(), v.end());
    const tally_test::device_buffer<int> misaligned(v, 1);

    expect_family_matches_std(tally::device, dv.begin(), n, wide, "device_vector iterator");
    expect_family_matches_std(tally::device, misaligned.data(), n, wide, "raw pointer, misaligned");
    expect_family_matches_std(tally::device, thrust::device_pointer_cast(misaligned.data()), n, wide,
                              "thrust::device_ptr");
    expect_family_matches_std(thrust::device, dv.begin(), n, wide, "thrust::device policy");
    expect_family_matches_std(tally::device, thrust::counting_iterator<long long>(-7), n, iota_values(-7, n),
                              "counting_iterator");
    expect_family_matches_std(tally::device, thrust::constant_iterator<int>(-3), n, std::vector<long long>(n, -3),
                              "constant_iterator");

    std::vector<long long> transformed(n);
    std::transform(v.begin(), v.end(), transformed.begin(), three_x_minus_one{});
    expect_family_matches_std(tally::device, thrust::make_transform_iterator(dv.begin(), three_x_minus_one{}), n,
                              transformed, "transform_iterator over a device_vector");
    expect_family_matches_std(tally::device, thrust::make_transform_iterator(misaligned.data(), three_x_minus_one{}),
                              n, transformed, "transform_iterator over a misaligned pointer");

    const std::vector<int> perm = random_permutation(n, s.rng);
    const thrust::device_vector<int> dperm(perm.begin(), perm.end());
    std::vector<long long> permuted(n);
    for (std::size_t i = 0; i < n; ++i) permuted[i] = v[perm[i]];
    expect_family_matches_std(tally::device, thrust::make_permutation_iterator(dv.begin(), dperm.begin()), n,
                              permuted, "permutation_iterator");

    expect_family_matches_std(tally::device, thrust::make_reverse_iterator(dv.end()), n,
                              std::vector<long long>(wide.rbegin(), wide.rend()), "thrust::reverse_iterator");
  }
}

// A zip of two ranges, reduced as tuples: the values are pairs, so the algorithms take
// tuple functors.
struct pair_product {
  template <class Tuple>
  __host__ __device__ long long operator()(const Tuple& t) const {
    return static_cast<long long>(thrust::get<0>(t)) * thrust::get<1>(t);
  }
};
struct pair_sum_is_negative {
  template <class Tuple>
  __host__ __device__ bool operator()(const Tuple& t) const {
    return thrust::get<0>(t) + thrust::get<1>(t) < 0;
  }
};
struct by_pair_sum {
  template <class Tuple>
  __host__ __device__ bool operator()(const Tuple& a, const Tuple& b) const {
    return thrust::get<0>(a) + thrust::get<1>(a) < thrust::get<0>(b) + thrust::get<1>(b);
  }
};

TEST_F(iterator_kinds_device, zip_iterators_reduce_tuples) {
  for (std::size_t n : sizes) {
    seeded s(n + 930);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const std::vector<int> a = random_ints(n, s.rng), b = random_ints(n, s.rng);
    std::vector<long long> products(n), sums(n);
    for (std::size_t i = 0; i < n; ++i) {
      products[i] = static_cast<long long>(a[i]) * b[i];
      sums[i] = a[i] + b[i];
    }
    const thrust::device_vector<int> da(a.begin(), a.end()), db(b.begin(), b.end());
    const auto first = thrust::make_zip_iterator(thrust::make_tuple(da.begin(), db.begin()));
    const auto last = first + static_cast<std::ptrdiff_t>(n);

    EXPECT_EQ(tally::transform_reduce(tally::device, first, last, pair_product{}, 0LL, tally::plus<long long>{}),
              std::accumulate(products.begin(), products.end(), 0LL));
    EXPECT_EQ(tally::count_if(tally::device, first, last, pair_sum_is_negative{}),
              std::count_if(sums.begin(), sums.end(), is_negative{}));
    EXPECT_EQ(tally::any_of(tally::device, first, last, pair_sum_is_negative{}),
              std::any_of(sums.begin(), sums.end(), is_negative{}));
    EXPECT_EQ(tally::min_element(tally::device, first, last, by_pair_sum{}) - first,
              std::min_element(sums.begin(), sums.end()) - sums.begin());
    const auto both = tally::minmax_element(tally::device, first, last, by_pair_sum{});
    const auto want = tally_test::first_min_first_max(sums.begin(), sums.end());
    EXPECT_EQ(both.first - first, want.first - sums.begin());
    EXPECT_EQ(both.second - first, want.second - sums.begin());
  }
}

// ---- more than 2^31 elements ----

// i % 1000, except -1 at `low` and 5000 at `high`: unique extremes at chosen positions.
struct planted_residue {
  long long low, high;
  __host__ __device__ long long operator()(long long i) const {
    return i == low ? -1 : i == high ? 5000 : i % 1000;
  }
};
struct residue_1000 {
  __host__ __device__ long long operator()(long long i) const { return i % 1000; }
};
struct divisible_by_7 {
  __host__ __device__ bool operator()(long long i) const { return i % 7 == 0; }
};
struct equals {
  long long value;
  __host__ __device__ bool operator()(long long i) const { return i == value; }
};
struct below {
  long long bound;
  __host__ __device__ bool operator()(long long i) const { return i < bound; }
};

TEST_F(iterator_kinds_device, every_algorithm_beyond_two_to_the_31_elements) {
  const long long n = tally_test::under_sanitizer() ? (1LL << 20) + 1001 : (1LL << 31) + 1001;
  SCOPED_TRACE("n = " + std::to_string(n));
  const thrust::counting_iterator<long long> first(0), last(n);

  // Sums: exact in 64 bits (n^2 / 2 < 2^63).
  EXPECT_EQ(tally::reduce(tally::device, first, last, 0LL), n * (n - 1) / 2);
  EXPECT_EQ(tally::inner_product(tally::device, first, last, thrust::constant_iterator<long long>(2), 0LL),
            n * (n - 1));
  long long residues = (n / 1000) * (999LL * 1000 / 2);
  for (long long r = 0; r < n % 1000; ++r) residues += r;
  EXPECT_EQ(tally::transform_reduce(tally::device, first, last, residue_1000{}, 0LL, tally::plus<long long>{}),
            residues);
  EXPECT_EQ(tally::count_if(tally::device, first, last, divisible_by_7{}), (n - 1) / 7 + 1);
  EXPECT_EQ(tally::count(tally::device, thrust::constant_iterator<int>(7), thrust::constant_iterator<int>(7) + n, 7), n);

  // Extrema planted past 2^31, and ties whose last occurrence is past 2^31.
  const long long low = n - 5, high = n - 977;
  const auto planted = thrust::make_transform_iterator(first, planted_residue{low, high});
  EXPECT_EQ(tally::min_element(tally::device, planted, planted + n) - planted, low);
  EXPECT_EQ(tally::max_element(tally::device, planted, planted + n) - planted, high);
  const auto both = tally::minmax_element(tally::device, planted, planted + n);
  EXPECT_EQ(both.first - planted, low);
  EXPECT_EQ(both.second - planted, high);
  const auto tied = thrust::make_transform_iterator(first, residue_1000{});
  const auto tied_both = tally::minmax_element(tally::device, tied, tied + n);
  EXPECT_EQ(tied_both.first - tied, 0);
  EXPECT_EQ(tied_both.second - tied, 999);  // the first of the largest, as Thrust
  EXPECT_EQ(tally::max_element(tally::device, tied, tied + n) - tied, 999);

  // Logical answers decided by one element past 2^31.
  EXPECT_TRUE(tally::any_of(tally::device, first, last, equals{n - 3}));
  EXPECT_FALSE(tally::none_of(tally::device, first, last, equals{n - 3}));
  EXPECT_TRUE(tally::all_of(tally::device, first, last, below{n}));
  EXPECT_FALSE(tally::all_of(tally::device, first, last, below{n - 1}));
}

}  // namespace
