#pragma once
// Shared by tally's tests: seeded inputs, exact and high-precision references, device
// buffers poisoned before use, and the fixture that skips device tests without a GPU.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>
#include <iomanip>
#include <random>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace tally_test {

#define TEST_CUDA(call)                                                                  \
  do {                                                                                   \
    const cudaError_t test_status_ = (call);                                             \
    ASSERT_EQ(test_status_, cudaSuccess) << #call << ": " << cudaGetErrorString(test_status_); \
  } while (0)

#if defined(__CUDACC__)
// Keeps the calling GPU thread busy for about `cycles` clock cycles.
__device__ inline void spin_for_cycles(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// A one-thread launch of it keeps a stream busy, so that work queued behind is still
// pending when the host goes on. (A template, so that tests that never launch it compile
// no kernel.)
template <int = 0>
__global__ void keep_stream_busy(long long cycles) {
  spin_for_cycles(cycles);
}
#endif

// The base seed of a run: a new one each run, so that the random cases differ from run to
// run, printed once (and in every failure's trace); TALLY_TEST_SEED=that value replays the run.
inline std::uint64_t base_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("TALLY_TEST_SEED");
    std::uint64_t chosen = 0;
    if (env != nullptr) {
      chosen = std::strtoull(env, nullptr, 10);
    } else {
      std::random_device entropy;
      chosen = (std::uint64_t(entropy()) << 32 | entropy()) % 1000000007u;  // short enough to retype
    }
    std::printf("tally tests: base seed %llu (TALLY_TEST_SEED=%llu replays this run)\n",
                static_cast<unsigned long long>(chosen), static_cast<unsigned long long>(chosen));
    std::fflush(stdout);
    return chosen;
  }();
  return seed;
}

// A generator for one case; the seed goes into the failure message.
struct seeded {
  std::uint64_t seed;
  std::mt19937_64 rng;
  explicit seeded(std::uint64_t salt) : seed(base_seed() * 1000003u + salt), rng(seed) {}
  std::string trace() const { return "seed " + std::to_string(seed) + " (TALLY_TEST_SEED=" + std::to_string(base_seed()) + ")"; }
};

// Random values of T: integers over a range that makes overflow and order matter,
// floats of mixed signs and magnitudes (never all equal, never all zero). Float values lean
// positive (a third of them negative, and those half as large), so that a sum of more than a
// few of them is far from 0 next to the sum of their magnitudes: an error bound in that
// measure (sum_error_bound) is then far below the sum, and tells a right sum from 0, from
// init alone or from one that lost a tile, where a mean of zero would often put the sum
// inside the bound.
template <class T>
std::vector<T> random_values(std::size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<double> mantissa(-0.5, 1.0);
    std::uniform_int_distribution<int> exponent(-8, 8);
    for (auto& x : v) x = static_cast<T>(std::ldexp(mantissa(rng), exponent(rng)));
  } else if constexpr (std::is_signed_v<T>) {
    std::uniform_int_distribution<long long> d(-1000000, 1000000);
    for (auto& x : v) x = static_cast<T>(d(rng));
  } else {
    std::uniform_int_distribution<unsigned long long> d(0, 2000000);
    for (auto& x : v) x = static_cast<T>(d(rng));
  }
  return v;
}

// Finite values of every exponent, subnormals included: random bit patterns, the non-finite ones
// drawn again (the exact sums' inputs over the whole range).
template <class T>
std::vector<T> any_finite(std::size_t n, std::mt19937_64& rng) {
  using bits_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  std::vector<T> v;
  v.reserve(n);
  while (v.size() < n) {
    const bits_t bits = static_cast<bits_t>(rng());
    T x;
    std::memcpy(&x, &bits, sizeof x);
    if (std::isfinite(x)) v.push_back(x);
  }
  return v;
}

// Values whose sum's bits depend on the order of the additions almost always: a mean of zero
// and magnitudes over 16 binades, so that partial sums cancel and round differently in any
// other order. For checks of bits alone (device against host, run against run, grid against
// grid), which a change to the plan's order must fail; with random_values' positive lean the
// sum rounds the same in most orders, and such a change passed most seeds. Bound checks keep
// random_values, whose sums stand clear of their bounds. Integers: random_values.
template <class T>
std::vector<T> order_sensitive_values(std::size_t n, std::mt19937_64& rng) {
  if constexpr (std::is_floating_point_v<T>) {
    std::vector<T> v(n);
    std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
    std::uniform_int_distribution<int> exponent(-8, 8);
    for (auto& x : v) x = static_cast<T>(std::ldexp(mantissa(rng), exponent(rng)));
    return v;
  } else {
    return random_values<T>(n, rng);
  }
}

// A sum of floating-point values as accurate as the references need, whatever long double is:
// Neumaier's compensated sum in long double. Where long double has 64 bits of significand it
// is far more than enough; under valgrind, which computes long double in double precision, the
// compensation still makes the error about one rounding of the sum rather than one per
// addition (a plain double sum of 2^20 doubles strayed beyond the plan's error bound there).
class accurate_sum {
 public:
  explicit accurate_sum(long double first = 0) : sum_(first) {}
  void add(long double x) {
    const long double t = sum_ + x;
    compensation_ += std::fabs(sum_) >= std::fabs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
  }
  long double value() const { return sum_ + compensation_; }

 private:
  long double sum_;
  long double compensation_ = 0;
};

// References: integer sums wrap in the accumulator's type exactly as the library's must
// (computed in unsigned 64-bit arithmetic, then converted); float sums compensated
// (accurate_sum).
template <class Acc, class T>
Acc reference_sum(const std::vector<T>& v, std::size_t first, std::size_t last, Acc init) {
  if constexpr (std::is_floating_point_v<Acc>) {
    accurate_sum s(init);
    for (std::size_t i = first; i < last; ++i) s.add(v[i]);
    return static_cast<Acc>(s.value());
  } else {
    std::uint64_t s = static_cast<std::uint64_t>(init);
    for (std::size_t i = first; i < last; ++i) s += static_cast<std::uint64_t>(static_cast<Acc>(v[i]));
    return static_cast<Acc>(s);
  }
}

// The longest chain of additions any element of an n-element reduction goes through, under
// every plan tally makes (docs/determinism.md), derived from the plan's rules and not from its
// code: a thread folds at most 8 loads of 16 elements a step, and a tile has
// ceil(steps / 2048) steps of at least 2048 elements, so a thread's fold is at most
// 128 + n / 2^19 long (n / 2^19 exactly when tiles are longer than one step); then the warp
// and block trees (at most 10 levels), block 0's fold of at most 8 partials a thread and its
// trees (10), init (1), and the reference's own rounding to the accumulator (1). The order-
// preserving plan's chains are shorter. extra_depth adds chains outside the plan: the atomic
// strategies' accumulator, which every unit's result joins one after another.
inline double plan_addition_depth(std::size_t n, double extra_depth = 0) {
  return 128.0 + std::ceil(double(n) / 524288.0) + 30.0 + extra_depth;
}

// Bound on |computed sum - exact| for a sum in T's precision whose additions form chains of
// at most `depth` (Higham's gamma_d = d u / (1 - d u) times the sum of |x_i| and |init|):
// at 2^20 floats about 1e-5 of that sum, where the former bound, (n + 1) eps, was larger than
// the sums themselves. It says nothing where it is not below the exact sum's magnitude:
// expect_sum_near (below) also checks that.
template <class T>
double sum_error_bound(const std::vector<T>& v, std::size_t first, std::size_t last, double init,
                       double extra_depth = 0) {
  double abs_sum = std::abs(init);
  for (std::size_t i = first; i < last; ++i) abs_sum += std::abs(double(v[i]));
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const double d = plan_addition_depth(last - first, extra_depth);
  return d * u / (1 - d * u) * abs_sum + std::numeric_limits<T>::min();
}

// got is within `bound` of `exact`, and the bound is smaller than |exact|, so that the check
// can tell a right sum from 0, from init alone or from a sum that lost a tile.
inline ::testing::AssertionResult sum_is_near(double got, double exact, double bound) {
  if (!(bound < std::abs(exact)))
    return ::testing::AssertionFailure() << std::setprecision(17) << "the error bound " << bound
                                         << " cannot tell the exact sum " << exact << " from 0";
  if (!(std::abs(got - exact) <= bound))
    return ::testing::AssertionFailure() << std::setprecision(17) << "the sum " << got << " is "
                                         << std::abs(got - exact) << " from the exact " << exact
                                         << ", more than the bound " << bound;
  return ::testing::AssertionSuccess();
}
#define TALLY_EXPECT_SUM_NEAR(got, exact, bound) \
  EXPECT_TRUE(::tally_test::sum_is_near(double(got), double(exact), double(bound)))

template <class T>
std::uint64_t bits_of(const T& x) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof(T) < 8 ? sizeof(T) : 8);
  return bits;
}

// Under compute-sanitizer (scripts/gpu-check sets TALLY_TEST_UNDER_SANITIZER) the same
// tests run on smaller inputs and fewer repeats, so the instrumented run stays in minutes.
inline bool under_sanitizer() { return std::getenv("TALLY_TEST_UNDER_SANITIZER") != nullptr; }

inline bool gpu_available(std::string* reason = nullptr) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    if (reason) *reason = status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA device";
    return false;
  }
  return true;
}

// Device tests derive from this: they skip, with the reason, where no GPU is present.
class device_test : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!gpu_available(&reason)) GTEST_SKIP() << "device test skipped: no usable CUDA device (" << reason << ")";
  }
};

// CUDA devices present (0 without a GPU).
inline int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

// Tests of two devices at once; their names start with two_devices, which scripts/gpu-check
// leaves out (saying so) on a machine with one GPU. Each leaves device 0 current.
class two_device_test : public ::testing::Test {
 protected:
  void SetUp() override {
    const int count = device_count();
    if (count < 2) GTEST_SKIP() << "device test skipped: needs two CUDA devices, found " << count;
  }
  void TearDown() override { cudaSetDevice(0); }
};

// A host vector of n values poisoned with 0xA5 bytes, to copy into an output before a run.
template <class T>
std::vector<T> poisoned_vector(std::size_t n) {
  std::vector<T> v(n);
  std::memset(static_cast<void*>(v.data()), 0xA5, n * sizeof(T));
  return v;
}

// An operator that is not commutative and exact: the composition of affine maps x -> a x + b
// modulo 2^64, first `first`, then `second`. Any change of order changes the result, so a test
// can check that an order-keeping reduction kept it.
struct affine_map {
  std::uint64_t a, b;
};
struct compose_affine {
  __host__ __device__ affine_map operator()(const affine_map& first, const affine_map& second) const {
    return {first.a * second.a, first.b * second.a + second.b};
  }
};

// A device allocation filled from a host vector, placed `offset` elements past a
// 256-byte boundary to test misaligned starts.
template <class T>
class device_buffer {
 public:
  explicit device_buffer(const std::vector<T>& host, std::size_t offset = 0) : n_(host.size()), offset_(offset) {
    if (cudaMalloc(&base_, (n_ + offset + 1) * sizeof(T)) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
    // Synchronize: a pageable copy may still be landing when cudaMemcpy returns, and work
    // on non-blocking streams does not wait for the legacy stream.
    if (cudaMemcpy(data(), host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess)
      throw std::runtime_error("cudaMemcpy failed");
  }
  ~device_buffer() { cudaFree(base_); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  T* data() const { return static_cast<T*>(base_) + offset_; }
  T* begin() const { return data(); }
  T* end() const { return data() + n_; }

 private:
  void* base_ = nullptr;
  std::size_t n_;
  std::size_t offset_;
};

// One device value, poisoned (0xA5 bytes) until something writes it.
template <class T>
class device_value {
 public:
  device_value() {
    if (cudaMalloc(&p_, sizeof(T)) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
    poison();
  }
  ~device_value() { cudaFree(p_); }
  device_value(const device_value&) = delete;
  device_value& operator=(const device_value&) = delete;
  void poison() {
    if (cudaMemset(p_, 0xA5, sizeof(T)) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
      throw std::runtime_error("cudaMemset failed");
  }
  T* get() const { return p_; }
  T read() const {
    T v;
    if (cudaMemcpy(&v, p_, sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess) throw std::runtime_error("cudaMemcpy failed");
    return v;
  }

 private:
  T* p_ = nullptr;
};

// The sizes every reduction test visits: around a warp, a block, a tile and a vector, where
// a one-tile kernel's loads per thread double (block_threads x 1, 2, 4, 8 chunks of 8- and
// 4-byte values: single_tile_reduce_kernel), and where plans of two tiles, reduced in one
// block (tile_pair_reduce_kernel), end (4-byte values: 16384; 8-byte values: 8192).
inline std::vector<std::size_t> boundary_sizes() {
  return {0,    1,    2,    3,    4,    5,    7,     31,    32,    33,        255,
          256,  257,  511,  512,  513,  1023, 1024,  1025,  2047,  2048,      2049,
          4095, 4096, 4097, 8191, 8192, 8193, 16383, 16384, 16385, 65536 + 3, (std::size_t(1) << 20) + 7};
}

// thrust::minmax_element's answer, which tally's follows: the first of the smallest and the
// first of the largest (std::minmax_element takes the last of the largest).
template <class It, class Comp = std::less<>>
std::pair<It, It> first_min_first_max(It first, It last, Comp comp = {}) {
  return {std::min_element(first, last, comp), std::max_element(first, last, comp)};
}

}  // namespace tally_test
