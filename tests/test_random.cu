// Randomized reductions: thousands of cases, each drawn from its own seed (printed on
// failure; TALLY_TEST_SEED replays a run): N from 0 to about 2^20 with the boundaries
// favoured, a misaligned start, a value type, an operator (tally's commutative ones and an
// unmarked user functor, which takes the order-preserving plan), an iterator kind, host or
// device, and a device strategy where it is legal. Integers are checked exactly; float and
// double sums are within the summation error bound of a long double reference, and the
// device gives the host backend's bits wherever the policy is deterministic.
#include "support/test_support.cuh"
#include "tally/reduce.cuh"

#include <thrust/device_ptr.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using tally::strategy;
using tally_test::bits_of;
using tally_test::seeded;

// An associative sum tally cannot know is commutative: it keeps left-to-right order.
// Integers add in unsigned arithmetic, so that a wrapping sum is defined behaviour.
struct user_sum {
  template <class T>
  __host__ __device__ T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};

template <class T>
struct same_value {
  __host__ __device__ T operator()(T x) const { return x; }
};

// Element i of `data`: a counting range turned into the data, read one element at a time.
template <class T>
struct element_at {
  const T* data;
  __host__ __device__ T operator()(long long i) const { return data[i]; }
};

enum class value_kind { int32, uint32, int64, float32, float64 };
enum class op_kind { plus, minimum, maximum, bit_xor, user };
enum class iterator_kind { pointer, device_ptr, transform, counting };

const char* name_of(value_kind v) {
  constexpr const char* names[] = {"int", "unsigned", "long long", "float", "double"};
  return names[int(v)];
}
const char* name_of(op_kind o) {
  constexpr const char* names[] = {"plus", "minimum", "maximum", "bit_xor", "user_sum"};
  return names[int(o)];
}
const char* name_of(iterator_kind i) {
  constexpr const char* names[] = {"pointer", "device_ptr", "transform_iterator", "counting_iterator"};
  return names[int(i)];
}
const char* name_of(strategy s) {
  constexpr const char* names[] = {"automatic", "single_pass", "two_pass", "block_atomic", "warp_atomic"};
  return names[int(s)];
}

// One case, drawn from its own generator.
struct random_case {
  value_kind value = value_kind::int32;
  op_kind op = op_kind::plus;
  iterator_kind iterator = iterator_kind::pointer;
  bool on_device = false;
  strategy forced = strategy::automatic;
  bool nondeterministic = false;
  std::size_t n = 0;
  std::size_t offset = 0;  // elements past a 256-byte boundary (device) or the vector's start

  std::string describe() const {
    return std::string(name_of(value)) + " " + name_of(op) + " over a " + name_of(iterator) + ", n " +
           std::to_string(n) + ", offset " + std::to_string(offset) + ", " +
           (on_device ? std::string("device ") + name_of(forced) + (nondeterministic ? " nondeterministic" : "")
                      : std::string("host"));
  }
};

bool is_integer(value_kind v) { return v == value_kind::int32 || v == value_kind::uint32 || v == value_kind::int64; }

// Mostly sizes at or near the boundaries (warp, block, tile, powers of two), the rest
// spread evenly in log scale up to max_n.
std::size_t pick_size(std::mt19937_64& rng, std::size_t max_n) {
  const int kind = std::uniform_int_distribution<int>(0, 99)(rng);
  if (kind < 10) return std::uniform_int_distribution<std::size_t>(0, 3)(rng);
  if (kind < 40) {
    std::vector<std::size_t> sizes;
    for (std::size_t s : tally_test::boundary_sizes())
      if (s <= max_n) sizes.push_back(s);
    return sizes[std::uniform_int_distribution<std::size_t>(0, sizes.size() - 1)(rng)];
  }
  const int max_log = int(std::log2(double(max_n)));
  if (kind < 60) {
    const std::size_t power = std::size_t(1) << std::uniform_int_distribution<int>(5, max_log - 1)(rng);
    return power + std::uniform_int_distribution<int>(-3, 3)(rng);
  }
  const double log_n = std::uniform_real_distribution<double>(0.0, double(max_log))(rng);
  return std::min(max_n, std::size_t(std::exp2(log_n)));
}

random_case pick_case(std::mt19937_64& rng, bool allow_device, std::size_t max_n) {
  random_case c;
  c.value = value_kind(std::uniform_int_distribution<int>(0, 4)(rng));
  const bool integer = is_integer(c.value);
  constexpr op_kind float_ops[] = {op_kind::plus, op_kind::minimum, op_kind::maximum, op_kind::user};
  c.op = integer ? op_kind(std::uniform_int_distribution<int>(0, 4)(rng))
                 : float_ops[std::uniform_int_distribution<int>(0, 3)(rng)];
  c.on_device = allow_device && std::uniform_int_distribution<int>(0, 9)(rng) < 8;
  // Fancy iterators only for sums of int, float and double: a few instantiations cover them.
  const bool fancy = c.op == op_kind::plus && c.value != value_kind::uint32 && c.value != value_kind::int64;
  std::vector<iterator_kind> kinds{iterator_kind::pointer};
  if (c.on_device) kinds.push_back(iterator_kind::device_ptr);
  if (fancy) kinds.insert(kinds.end(), {iterator_kind::transform, iterator_kind::counting});
  c.iterator = kinds[std::uniform_int_distribution<std::size_t>(0, kinds.size() - 1)(rng)];
  c.n = pick_size(rng, max_n);
  c.offset = std::uniform_int_distribution<std::size_t>(0, 7)(rng);
  if (c.on_device) {
    // The atomic strategies need a commutative operator (not user_sum) and, on floating
    // point, nondeterministic(); integer atomics are exact, so allowed anyway.
    const bool atomics = c.op != op_kind::user;
    c.forced = strategy(std::uniform_int_distribution<int>(0, atomics ? 4 : 2)(rng));
    const bool atomic = c.forced == strategy::block_atomic || c.forced == strategy::warp_atomic;
    c.nondeterministic = (atomic && !integer) || std::uniform_int_distribution<int>(0, 9)(rng) == 0;
  }
  return c;
}

// Inputs: integer sums of int stay far from overflow (signed overflow is undefined on the
// host), unsigned sums wrap, long long and floating point span wide ranges.
template <class T>
std::vector<T> case_values(std::size_t count, op_kind op, std::mt19937_64& rng) {
  std::vector<T> v(count);
  if constexpr (std::is_same_v<T, int>) {
    const int bound = op == op_kind::plus ? 1000 : 1 << 30;
    std::uniform_int_distribution<int> d(-bound, bound);
    for (auto& x : v) x = d(rng);
  } else if constexpr (std::is_same_v<T, unsigned>) {
    std::uniform_int_distribution<unsigned> d(0, ~0u);
    for (auto& x : v) x = d(rng);
  } else if constexpr (std::is_same_v<T, long long>) {
    std::uniform_int_distribution<long long> d(-(1ll << 40), 1ll << 40);
    for (auto& x : v) x = d(rng);
  } else {
    v = tally_test::random_values<T>(count, rng);
  }
  return v;
}

template <class T>
T reference_fold(const T* first, std::size_t n, T init, op_kind op) {
  T acc = init;
  for (std::size_t i = 0; i < n; ++i) {
    const T x = first[i];
    switch (op) {
      case op_kind::minimum: acc = x < acc ? x : acc; break;
      case op_kind::maximum: acc = acc < x ? x : acc; break;
      case op_kind::bit_xor:
        if constexpr (std::is_integral_v<T>) acc = acc ^ x;
        break;
      default: acc = user_sum{}(acc, x); break;  // an exact wrapping sum for integers
    }
  }
  return acc;
}

#if !defined(TALLY_TEST_HOST_ONLY)
// Device memory for every case, aligned to 256 bytes; a case uses its start.
class device_arena {
 public:
  explicit device_arena(std::size_t bytes) {
    if (cudaMalloc(&base_, bytes) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
  }
  ~device_arena() { cudaFree(base_); }
  device_arena(const device_arena&) = delete;
  device_arena& operator=(const device_arena&) = delete;
  void* get() const { return base_; }

 private:
  void* base_ = nullptr;
};
#endif

// Reduces [first, first + n) under `policy` through the case's iterator kind.
template <class T, class Op, class Policy>
T reduce_through(const Policy& policy, const random_case& c, const T* first, T init, Op op) {
  const std::size_t n = c.n;
  constexpr bool fancy = std::is_same_v<Op, tally::plus<T>> && !std::is_same_v<T, unsigned> &&
                         !std::is_same_v<T, long long>;
  if constexpr (fancy) {
    if (c.iterator == iterator_kind::transform) {
      const auto it = thrust::make_transform_iterator(first, same_value<T>{});
      return tally::reduce(policy, it, it + n, init, op);
    }
    if (c.iterator == iterator_kind::counting) {
      const auto it = thrust::make_transform_iterator(thrust::counting_iterator<long long>(0), element_at<T>{first});
      return tally::reduce(policy, it, it + n, init, op);
    }
  }
  if constexpr (!std::is_same_v<Policy, tally::host_policy>) {
    if (c.iterator == iterator_kind::device_ptr) {
      const thrust::device_ptr<const T> it(first);
      return tally::reduce(policy, it, it + n, init, op);
    }
  }
  return tally::reduce(policy, first, first + n, init, op);
}

// Float sums checked against a bound, and those whose bound was no smaller than the exact
// sum's magnitude (a sum near 0 by chance: there the bound could not tell a wrong sum from a
// right one). run_cases requires such cases to be rare, so that the bound checks as a whole
// can fail on a wrong answer.
struct bound_census {
  int sums = 0;
  int uninformative = 0;
};
bound_census census;

// Runs one case and checks it; returns false on a failure (already reported).
template <class T, class Op>
bool run_case(const random_case& c, std::mt19937_64& rng, void* device_memory) {
  const std::vector<T> all = case_values<T>(c.offset + c.n, c.op, rng);
  const T* host_first = all.data() + c.offset;
  const T init = case_values<T>(1, c.op, rng)[0];
  const Op op{};
  const T host = reduce_through(tally::host, c, host_first, init, op);

  const bool sum = c.op == op_kind::plus || c.op == op_kind::user;
  double bound = 0;
  long double exact = 0;
  T expected{};
  if (std::is_floating_point_v<T> && sum) {
    tally_test::accurate_sum reference(init);
    for (std::size_t i = 0; i < c.n; ++i) reference.add(host_first[i]);
    exact = reference.value();
    bound = tally_test::sum_error_bound(all, c.offset, c.offset + c.n, double(init));
    EXPECT_LE(std::abs(double(host) - double(exact)), bound) << "host";
    ++census.sums;
    if (!(bound < std::abs(double(exact)))) ++census.uninformative;
  } else {
    expected = reference_fold<T>(host_first, c.n, init, c.op);
    EXPECT_EQ(host, expected) << "host";
  }
#if defined(TALLY_TEST_HOST_ONLY)
  (void)device_memory;
  return !::testing::Test::HasFailure();
#else
  if (!c.on_device) return !::testing::Test::HasFailure();

  T* device_first = static_cast<T*>(device_memory) + c.offset;
  if (c.n > 0 && cudaMemcpy(device_first, host_first, c.n * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess) {
    ADD_FAILURE() << "cudaMemcpy failed";
    return false;
  }
  auto policy = tally::device.strategy(c.forced);
  if (c.nondeterministic) policy = policy.nondeterministic();
  const T device = reduce_through(policy, c, static_cast<const T*>(device_first), init, op);
  if (std::is_floating_point_v<T> && sum) {
    if (c.nondeterministic)
      EXPECT_LE(std::abs(double(device) - double(exact)), bound) << "device";
    else
      EXPECT_EQ(bits_of(device), bits_of(host)) << "device " << device << " against the host's " << host;
  } else {
    EXPECT_EQ(device, expected) << "device";
  }
  return !::testing::Test::HasFailure();
#endif
}

template <class T>
bool run_case_of_type(const random_case& c, std::mt19937_64& rng, void* device_memory) {
  switch (c.op) {
    case op_kind::plus: return run_case<T, tally::plus<T>>(c, rng, device_memory);
    case op_kind::minimum: return run_case<T, tally::minimum<T>>(c, rng, device_memory);
    case op_kind::maximum: return run_case<T, tally::maximum<T>>(c, rng, device_memory);
    case op_kind::bit_xor:
      if constexpr (std::is_integral_v<T>) return run_case<T, tally::bit_xor<T>>(c, rng, device_memory);
      break;
    case op_kind::user: return run_case<T, user_sum>(c, rng, device_memory);
  }
  ADD_FAILURE() << "no such case";
  return false;
}

bool run_one(const random_case& c, std::mt19937_64& rng, void* device_memory) {
  switch (c.value) {
    case value_kind::int32: return run_case_of_type<int>(c, rng, device_memory);
    case value_kind::uint32: return run_case_of_type<unsigned>(c, rng, device_memory);
    case value_kind::int64: return run_case_of_type<long long>(c, rng, device_memory);
    case value_kind::float32: return run_case_of_type<float>(c, rng, device_memory);
    case value_kind::float64: return run_case_of_type<double>(c, rng, device_memory);
  }
  return false;
}

// Runs `cases` cases, each from seed salt + its index; stops at the first failure.
void run_cases(int cases, std::uint64_t salt, bool allow_device, std::size_t max_n, void* device_memory) {
  census = {};
  for (int i = 0; i < cases; ++i) {
    seeded s(salt + i);
    const random_case c = pick_case(s.rng, allow_device, max_n);
    SCOPED_TRACE("case " + std::to_string(i) + ": " + c.describe() + ", " + s.trace());
    if (!run_one(c, s.rng, device_memory)) return;
  }
  EXPECT_GT(census.sums, cases / 20) << "too few float sums to say anything about their bound";
  EXPECT_LE(census.uninformative * 100, census.sums)
      << census.uninformative << " of " << census.sums
      << " float sums had an error bound no smaller than the sum itself: the bound checks could not fail";
}

// Host policy only: runs everywhere, in a few seconds even in a sanitized Debug build.
TEST(random_host, cases_against_references) { run_cases(2000, 1000000, false, std::size_t(1) << 17, nullptr); }

#if !defined(TALLY_TEST_HOST_ONLY)
class random_device : public tally_test::device_test {};

// Host and device; about a minute on an H100, seconds under compute-sanitizer.
TEST_F(random_device, cases_against_references_and_the_host_bits) {
  const bool small = tally_test::under_sanitizer();
  const std::size_t max_n = small ? std::size_t(1) << 16 : (std::size_t(1) << 20) + 64;
  device_arena arena((max_n + 16) * sizeof(double));
  run_cases(small ? 60 : 6000, 2000000, true, max_n, arena.get());
}
#endif

}  // namespace
