// Ranges of more than 2^31 elements on every path whose indexing could wrap there: the
// aligned 16-byte vector loads, int8 values (the most elements per load), a zip of two
// ranges, the order-preserving plan of an operator that is not commutative, the order-free
// plan of min_element (a position past 2^31), and each strategy. Every answer is exact and
// checked against an integer shadow that the host computes from the same hash of the
// index, independently of tally: element i is a small integer k(i) in [-2, 5], stored as the
// float k / 4 and the int8 k. Sums of them are exact in double and long long in any order,
// so the atomic strategies must be exact too.
#include "support/test_support.cuh"
#include "tally/extrema.cuh"
#include "tally/reduce.cuh"
#include "tally/transform_reduce.cuh"

#include <thrust/iterator/zip_iterator.h>
#include <thrust/tuple.h>

#include <cstdint>
#include <string>

namespace {

using tally::strategy;

// The sanitized host build (scripts/test) defines TALLY_TEST_HOST_ONLY and compiles no kernel tests.
#if !defined(TALLY_TEST_HOST_ONLY)

__host__ __device__ int small_value(std::uint64_t i, std::uint64_t seed) {
  std::uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return int(z >> 61) - 2;  // [-2, 5]
}

__global__ void fill_small_values(float* quarters, std::int8_t* bytes, std::uint64_t n, std::uint64_t seed) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::uint64_t(gridDim.x) * blockDim.x) {
    const int k = small_value(i, seed);
    quarters[i] = float(k) * 0.25f;
    bytes[i] = static_cast<std::int8_t>(k);
  }
}

// A sum that tally cannot know is commutative: it takes the order-preserving plan.
struct sum_in_order {
  __host__ __device__ long long operator()(long long a, long long b) const { return a + b; }
};

// 4 * quarter + byte: 2 k for every element of the zip.
struct twice_the_value {
  template <class Pair>
  __host__ __device__ long long operator()(const Pair& p) const {
    return static_cast<long long>(4.0f * thrust::get<0>(p)) + thrust::get<1>(p);
  }
};
struct by_value {
  template <class Pair>
  __host__ __device__ bool operator()(const Pair& a, const Pair& b) const {
    return thrust::get<1>(a) < thrust::get<1>(b);
  }
};

// One input for every test of the program: n values as floats and as int8, with the
// sum of k, and one unique smallest element (k = -3) placed past 2^31.
class huge_ranges : public tally_test::device_test {
 protected:
  static constexpr std::uint64_t full_n = (std::uint64_t(1) << 31) + 4099;
  static constexpr std::uint64_t light_n = (std::uint64_t(1) << 20) + 77;

  static void TearDownTestSuite() {
    cudaFree(quarters_);
    cudaFree(bytes_);
    quarters_ = nullptr;
    bytes_ = nullptr;
  }

  void SetUp() override {
    tally_test::device_test::SetUp();
    if (IsSkipped() || quarters_ != nullptr) return;
    n_ = tally_test::under_sanitizer() ? light_n : full_n;
    seed_ = tally_test::base_seed();
    ASSERT_EQ(cudaMalloc(&quarters_, n_ * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&bytes_, n_), cudaSuccess);
    fill_small_values<<<2048, 256>>>(quarters_, bytes_, n_, seed_);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    smallest_at_ = n_ - 5;  // past 2^31 in the full size
    const float quarter = -0.75f;
    const std::int8_t byte = -3;
    ASSERT_EQ(cudaMemcpy(quarters_ + smallest_at_, &quarter, sizeof quarter, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(bytes_ + smallest_at_, &byte, 1, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    shadow_ = 0;
    for (std::uint64_t i = 0; i < n_; ++i) shadow_ += i == smallest_at_ ? -3 : small_value(i, seed_);
  }

  std::string trace() const { return "n = " + std::to_string(n_) + ", seed " + std::to_string(seed_); }

  static inline float* quarters_ = nullptr;
  static inline std::int8_t* bytes_ = nullptr;
  static inline std::uint64_t n_ = 0;
  static inline std::uint64_t seed_ = 0;
  static inline std::uint64_t smallest_at_ = 0;
  static inline long long shadow_ = 0;  // the sum of k over the input
};

TEST_F(huge_ranges, aligned_float_vectors_into_double_under_every_strategy) {
  SCOPED_TRACE(trace());
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(quarters_) % 16, 0u) << "the vector path needs an aligned start";
  const double want = 0.5 + double(shadow_) * 0.25;
  const auto p = tally::device;
  EXPECT_EQ(tally::reduce(p, quarters_, quarters_ + n_, 0.5), want) << "default";
  EXPECT_EQ(tally::reduce(p.strategy(strategy::single_pass), quarters_, quarters_ + n_, 0.5), want) << "single pass";
  EXPECT_EQ(tally::reduce(p.strategy(strategy::two_pass), quarters_, quarters_ + n_, 0.5), want) << "two pass";
  EXPECT_EQ(tally::reduce(p.nondeterministic().strategy(strategy::block_atomic), quarters_, quarters_ + n_, 0.5), want)
      << "block atomic";
  EXPECT_EQ(tally::reduce(p.nondeterministic().strategy(strategy::warp_atomic), quarters_, quarters_ + n_, 0.5), want)
      << "warp atomic";
}

TEST_F(huge_ranges, int8_values_into_long_long_and_int8_under_every_strategy) {
  SCOPED_TRACE(trace());
  const auto p = tally::device;
  for (strategy st : {strategy::automatic, strategy::single_pass, strategy::two_pass, strategy::block_atomic,
                      strategy::warp_atomic}) {
    SCOPED_TRACE("strategy " + std::to_string(int(st)));
    EXPECT_EQ(tally::reduce(p.strategy(st), bytes_, bytes_ + n_, 7LL), 7 + shadow_);
  }
  // In int8 itself the sum wraps mod 2^8, as Thrust's does (docs/types.md).
  const auto wrapped = static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<unsigned long long>(shadow_)));
  EXPECT_EQ(tally::reduce(p, bytes_, bytes_ + n_, std::int8_t(0)), wrapped);
  // Misaligned by one element: the head before the first aligned vector.
  EXPECT_EQ(tally::reduce(p, bytes_ + 1, bytes_ + n_, 0LL), shadow_ - small_value(0, seed_));
}

TEST_F(huge_ranges, an_operator_that_is_not_commutative_takes_the_ordered_plan) {
  SCOPED_TRACE(trace());
  static_assert(!tally::is_commutative_v<sum_in_order>, "the test needs the order-preserving plan");
  const auto p = tally::device;
  EXPECT_EQ(tally::reduce(p, bytes_, bytes_ + n_, 0LL, sum_in_order{}), shadow_);
  EXPECT_EQ(tally::reduce(p.strategy(strategy::two_pass), bytes_, bytes_ + n_, 0LL, sum_in_order{}), shadow_);
}

TEST_F(huge_ranges, a_zip_of_two_ranges_and_a_position_past_two_to_the_31) {
  SCOPED_TRACE(trace());
  const auto first = thrust::make_zip_iterator(thrust::make_tuple(quarters_, bytes_));
  const auto last = first + static_cast<std::ptrdiff_t>(n_);
  EXPECT_EQ(tally::transform_reduce(tally::device, first, last, twice_the_value{}, 0LL, tally::plus<long long>{}),
            2 * shadow_);
  EXPECT_EQ(static_cast<std::uint64_t>(tally::min_element(tally::device, first, last, by_value{}) - first), smallest_at_);
  EXPECT_EQ(static_cast<std::uint64_t>(tally::min_element(tally::device, bytes_, bytes_ + n_) - bytes_), smallest_at_);
}

#endif  // !TALLY_TEST_HOST_ONLY

}  // namespace
