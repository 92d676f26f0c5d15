// tally::reduce and reduce_into on the device: results, determinism, iterators, policies,
// streams, graphs and threads. Every test here skips without a GPU.
#include "support/test_support.cuh"
#include "tally/reduce.cuh"

#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cuda/std/functional>

#include <algorithm>
#include <climits>
#include <functional>
#include <thread>
#include <vector>

// An operator marked commutative whose every bit depends on the grouping and on which operand
// comes first: the device must take the plan's tree exactly as the host replays it, operands
// in order, where a sum's rounding might hide a swapped pair.
template <class T>
struct order_revealing_sum {
  static constexpr bool commutative = true;
  __host__ __device__ T operator()(T a, T b) const { return a * T(31) + b; }
};
// Outside the anonymous namespace: there nvcc took `commutative`, read only through the
// traits, for an unused member.
static_assert(tally::is_commutative_v<order_revealing_sum<unsigned>>, "takes the commutative plan");

namespace {

using tally_test::bits_of;
using tally_test::device_buffer;
using tally_test::device_value;
using tally_test::random_values;
using tally_test::order_sensitive_values;
using tally_test::reference_sum;
using tally_test::seeded;

// Extended lambdas cannot live in a test body (a private member), so these helpers hold them.
int sum_with_host_device_lambda(const thrust::device_vector<int>& dv) {
  return tally::reduce(tally::device, dv.begin(), dv.end(), 0, [] __host__ __device__(int a, int b) { return a + b; });
}

long long sum_doubled_through_transform_iterator(const thrust::device_vector<int>& dv) {
  auto twice = [] __host__ __device__(int x) { return 2LL * x; };
  auto t = thrust::make_transform_iterator(dv.begin(), twice);
  return tally::reduce(tally::device, t, t + dv.size(), 0LL);
}

void min_into_with_device_lambda(const float* first, const float* last, float* out) {
  tally::reduce_into(tally::device, first, last, thrust::device_pointer_cast(out), 1e30f,
                     [] __device__(float a, float b) { return a < b ? a : b; });
}

// A 16-byte value: reduce() hands it to the host in four tagged words (runtime.cuh).
struct two_sums {
  long long low;
  long long high;
};
struct add_two_sums {
  __host__ __device__ two_sums operator()(const two_sums& a, const two_sums& b) const {
    return {a.low + b.low, a.high + b.high};
  }
};

template <class T>
class device_reduce : public tally_test::device_test {};
using value_types = ::testing::Types<int, unsigned, float, double>;
TYPED_TEST_SUITE(device_reduce, value_types);

TYPED_TEST(device_reduce, sum_min_max_at_every_boundary_size_equal_the_host_bit_for_bit) {
  using T = TypeParam;
  for (std::size_t n : tally_test::boundary_sizes()) {
    seeded s(n + 100);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const auto v = random_values<T>(n, s.rng);
    const T init = random_values<T>(1, s.rng)[0];
    device_buffer<T> d(v);

    const T sum = tally::reduce(tally::device, d.begin(), d.end(), init);
    const T host_sum = tally::reduce(tally::host, v.begin(), v.end(), init);
    EXPECT_EQ(bits_of(sum), bits_of(host_sum));
    if constexpr (std::is_floating_point_v<T>) {
      TALLY_EXPECT_SUM_NEAR(sum, reference_sum<T>(v, 0, n, init), tally_test::sum_error_bound(v, 0, n, init));
    } else {
      EXPECT_EQ(sum, reference_sum<T>(v, 0, n, init));
    }
    const T lo = tally::reduce(tally::device, d.begin(), d.end(), init, tally::minimum<T>{});
    const T hi = tally::reduce(tally::device, d.begin(), d.end(), init, thrust::maximum<T>{});
    EXPECT_EQ(lo, std::min(init, n ? *std::min_element(v.begin(), v.end()) : init));
    EXPECT_EQ(hi, std::max(init, n ? *std::max_element(v.begin(), v.end()) : init));
    if constexpr (std::is_floating_point_v<T>) {  // bits alone, on inputs whose order shows
      const auto w = order_sensitive_values<T>(n, s.rng);
      device_buffer<T> e(w);
      EXPECT_EQ(bits_of(tally::reduce(tally::device, e.begin(), e.end(), init)),
                bits_of(tally::reduce(tally::host, w.begin(), w.end(), init)));
    }
  }
}

TYPED_TEST(device_reduce, random_sizes_and_misaligned_starts_equal_the_host_bit_for_bit) {
  using T = TypeParam;
  seeded s(200);
  SCOPED_TRACE(s.trace());
  std::uniform_int_distribution<std::size_t> size(1, tally_test::under_sanitizer() ? 1u << 18 : 3u << 20);
  for (int i = 0; i < 24; ++i) {
    const std::size_t n = size(s.rng);
    const std::size_t offset = i % 4;  // 0: 16-byte aligned; 1..3: element-misaligned starts
    SCOPED_TRACE("n = " + std::to_string(n) + ", offset = " + std::to_string(offset));
    const auto v = order_sensitive_values<T>(n, s.rng);  // bits alone are checked for floats
    device_buffer<T> d(v, offset);
    device_value<T> out;
    tally::reduce_into(tally::device, d.begin(), d.end(), out.get(), T(1), tally::plus<T>{});
    EXPECT_EQ(bits_of(out.read()), bits_of(tally::reduce(tally::host, v.begin(), v.end(), T(1))));
    if constexpr (!std::is_floating_point_v<T>) EXPECT_EQ(out.read(), reference_sum<T>(v, 0, n, T(1)));
  }
}

class device_determinism : public tally_test::device_test {};

TEST_F(device_determinism, same_bits_over_repeated_runs_and_any_grid_size) {
  const bool light = tally_test::under_sanitizer();
  const std::size_t largest = light ? (std::size_t(1) << 20) + 3 : (std::size_t(1) << 24) + 3;
  for (std::size_t n : {std::size_t(5000), std::size_t(1) << 18, largest}) {
    seeded s(300 + n);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    const auto v = order_sensitive_values<float>(n, s.rng);
    device_buffer<float> d(v);
    const float host = tally::reduce(tally::host, v.begin(), v.end(), 0.0f);
    for (int run = 0; run < (light ? 5 : 50); ++run)
      ASSERT_EQ(bits_of(tally::reduce(tally::device, d.begin(), d.end(), 0.0f)), bits_of(host)) << "run " << run;
    for (unsigned grid : {1u, 2u, 3u, 7u, 64u, 131u, 1000u, 5000u})
      ASSERT_EQ(bits_of(tally::reduce(tally::device.grid_size(grid), d.begin(), d.end(), 0.0f)), bits_of(host))
          << "grid " << grid;
  }
}

// Block 0 of a single pass reduces no tile while the tiles number at most fold_block_gate
// per tile block, and otherwise reduces tiles first (fold_block_role in kernels/reduce_kernels.cuh).
// Forced grids put tile counts on both sides of that gate: the bits are the host's either
// way, and integer sums are exact.
TEST_F(device_determinism, same_bits_on_both_sides_of_the_fold_block_gate) {
  for (unsigned grid : {2u, 3u, 7u, 40u}) {
    const std::uint64_t gate_tiles = tally::detail::fold_block_gate * (grid - 1);
    for (std::uint64_t tiles : {gate_tiles - 1, gate_tiles, gate_tiles + 1}) {
      const std::size_t tile_items = tally::detail::make_plan_for<float>(1).step_items;  // one-step tiles
      for (std::size_t n : {std::size_t(tiles * tile_items), std::size_t(tiles * tile_items - 777)}) {
        ASSERT_EQ(tally::detail::make_plan_for<float>(n).tiles, tiles) << "n = " << n;
        ASSERT_EQ(tally::detail::make_plan_for<int>(n).tiles, tiles) << "n = " << n;
        seeded s(330 + n + grid);
        SCOPED_TRACE("grid = " + std::to_string(grid) + ", n = " + std::to_string(n) + ", " + s.trace());
        const auto f = random_values<float>(n, s.rng);
        const auto v = random_values<int>(n, s.rng);
        device_buffer<float> df(f);
        device_buffer<int> dv(v);
        const auto policy = tally::device.grid_size(grid);
        EXPECT_EQ(bits_of(tally::reduce(policy, df.begin(), df.end(), 0.5f)),
                  bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.5f)));
        EXPECT_EQ(tally::reduce(policy, dv.begin(), dv.end(), 3), reference_sum<int>(v, 0, n, 3));
      }
    }
  }
}

template <class T>
struct halve_value_of {
  __host__ __device__ T operator()(T x) const { return T(0.5) * x; }
};

// A one-tile plan whose n fills exactly 1, 2, 4, ... chunks of every thread runs a kernel
// of that many loads per thread; any other n, and every n of a misaligned start's
// element-wise loader, the kernel of a whole step (single_tile_reduce_kernel). At each such n
// and one element either side, for 16-, 8- and 4-byte vector widths, through the vector
// loader, the element-wise loader (a misaligned start) and a transformed loader, the bits are
// the host's and integer sums are exact.
template <class T>
void expect_one_tile_sums_equal_the_host(std::uint64_t salt) {
  const std::size_t row = std::size_t(tally::detail::block_threads) * tally::detail::vector_width_v<T>;
  const std::size_t step = tally::detail::make_plan_for<T>(1).step_items;
  std::vector<std::size_t> sizes;
  for (std::size_t loads = 1; loads <= std::size_t(tally::detail::loads_per_step); loads *= 2)
    for (std::size_t n : {row * loads - 1, row * loads, row * loads + 1})
      if (n <= step) sizes.push_back(n);
  for (std::size_t n : sizes) {
    ASSERT_EQ(tally::detail::make_plan_for<T>(n).tiles, 1u) << "n = " << n;
    seeded s(salt + n);
    SCOPED_TRACE(std::string(sizeof(T) == 8 ? "double" : sizeof(T) == 4 ? "float/int" : "narrow") +
                 ", n = " + std::to_string(n) + ", " + s.trace());
    const auto v = random_values<T>(n, s.rng);
    device_buffer<T> aligned(v);
    device_buffer<T> shifted(v, 1);  // one element past a 256-byte boundary: not 16-byte aligned
    const T init = static_cast<T>(3);
    if constexpr (std::is_floating_point_v<T>) {
      const halve_value_of<T> halve;
      const auto host = bits_of(tally::reduce(tally::host, v.begin(), v.end(), init));
      EXPECT_EQ(bits_of(tally::reduce(tally::device, aligned.begin(), aligned.end(), init)), host);
      EXPECT_EQ(bits_of(tally::reduce(tally::device, shifted.begin(), shifted.end(), init)), host);
      auto halved = thrust::make_transform_iterator(aligned.begin(), halve);
      auto halved_host = thrust::make_transform_iterator(v.begin(), halve);
      EXPECT_EQ(bits_of(tally::reduce(tally::device, halved, halved + n, init)),
                bits_of(tally::reduce(tally::host, halved_host, halved_host + n, init)));
    } else {
      const T exact = reference_sum<T>(v, 0, n, init);
      EXPECT_EQ(tally::reduce(tally::device, aligned.begin(), aligned.end(), init), exact);
      EXPECT_EQ(tally::reduce(tally::device, shifted.begin(), shifted.end(), init), exact);
    }
  }
}

TEST_F(device_determinism, one_tile_kernels_of_every_load_count_equal_the_host) {
  expect_one_tile_sums_equal_the_host<float>(350);
  expect_one_tile_sums_equal_the_host<double>(360);
  expect_one_tile_sums_equal_the_host<int>(370);
  expect_one_tile_sums_equal_the_host<std::int8_t>(380);
}

// The fold of the tile partials takes warp 0's tree alone for at most 32 partials and the
// block tree beyond (fold_partials_of). At tile counts on both sides of 32 and of one
// partial per thread, with full and partial last tiles, the bits equal the host's whatever
// the strategy or grid, and integer sums are exact.
TEST_F(device_determinism, folds_of_few_and_many_partials_equal_the_host) {
  const std::size_t step = tally::detail::make_plan_for<float>(1).step_items;
  for (std::uint64_t tiles : {2, 3, 31, 32, 33, 255, 256, 257}) {
    for (std::size_t n : {std::size_t(tiles * step), std::size_t(tiles * step - 333)}) {
      ASSERT_EQ(tally::detail::make_plan_for<float>(n).tiles, tiles) << "n = " << n;
      seeded s(400 + n);
      SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
      const auto f = random_values<float>(n, s.rng);
      const auto v = random_values<int>(n, s.rng);
      device_buffer<float> df(f);
      device_buffer<int> dv(v);
      const auto host = bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.5f));
      EXPECT_EQ(bits_of(tally::reduce(tally::device, df.begin(), df.end(), 0.5f)), host);
      EXPECT_EQ(bits_of(tally::reduce(tally::device.strategy(tally::strategy::two_pass), df.begin(), df.end(), 0.5f)),
                host);
      EXPECT_EQ(bits_of(tally::reduce(tally::device.grid_size(5), df.begin(), df.end(), 0.5f)), host);
      EXPECT_EQ(tally::reduce(tally::device, dv.begin(), dv.end(), 3), reference_sum<int>(v, 0, n, 3));
    }
  }
}

// Block 0 folds the partials of exact 32-bit integer operators by redux.sync, a thread without
// a partial taking the operator's identity and the warps' results crossing at one barrier
// (commutative_fold.cuh, fold_exact_integer_partials). At tile counts that leave lanes and
// whole warps of block 0 empty, and under operators whose identity is not 0 (values chosen so
// that a 0 in an empty thread would show), the single pass and the two pass equal the host.
TEST_F(device_determinism, integer_partials_folded_with_empty_threads_take_each_operators_identity) {
  const std::size_t step = tally::detail::make_plan_for<int>(1).step_items;
  for (std::uint64_t tiles : {2, 31, 32, 33, 64, 100, 224, 225, 255, 256, 257}) {
    const std::size_t n = std::size_t(tiles * step - 5);
    ASSERT_EQ(tally::detail::make_plan_for<int>(n).tiles, tiles) << "n = " << n;
    seeded s(900 + n);
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + s.trace());
    std::vector<int> positive = random_values<int>(n, s.rng);
    for (int& x : positive) x = (x < 0 ? -x : x) + (1 << 30) + 17;  // bit 30 set in every value
    std::vector<int> negative(positive);
    for (int& x : negative) x = -x;
    device_buffer<int> dp(positive), dn(negative);
    const int least = *std::min_element(positive.begin(), positive.end());
    const int most = *std::max_element(negative.begin(), negative.end());
    int all_and = -1;
    for (int x : positive) all_and &= x;
    ASSERT_NE(all_and & (1 << 30), 0);
    const auto expect_host_results = [&](const auto& policy) {
      EXPECT_EQ(tally::reduce(policy, dp.begin(), dp.end(), INT_MAX, tally::minimum<int>{}), least);
      EXPECT_EQ(tally::reduce(policy, dn.begin(), dn.end(), INT_MIN, tally::maximum<int>{}), most);
      EXPECT_EQ(tally::reduce(policy, dp.begin(), dp.end(), -1, tally::bit_and<int>{}), all_and);
      EXPECT_EQ(tally::reduce(policy, dp.begin(), dp.end(), 3, tally::plus<int>{}), reference_sum<int>(positive, 0, n, 3));
    };
    expect_host_results(tally::device);
    expect_host_results(tally::device.strategy(tally::strategy::two_pass));
  }
}

// Every tile count a call may end with a fold by warp 0 alone (1 to 33, where the fold of the
// partials needs no flags: commutative_fold.cuh), and a few beyond it, under an operator that
// reveals the order of every combine: the single pass, the two pass and a small forced grid
// give the host's bits, for full and partial last tiles.
TEST_F(device_determinism, an_order_revealing_operator_gets_the_plans_tree_at_every_few_tile_count) {
  const auto check = [](auto zero) {
    using T = decltype(zero);
    const std::size_t step = tally::detail::make_plan_for<T>(1).step_items;
    std::vector<std::uint64_t> tile_counts;
    for (std::uint64_t tiles = 1; tiles <= 33; ++tiles) tile_counts.push_back(tiles);
    for (std::uint64_t tiles : {64, 255, 257}) tile_counts.push_back(tiles);
    for (std::uint64_t tiles : tile_counts) {
      for (std::size_t n : {std::size_t(tiles * step), std::size_t(tiles * step - 333)}) {
        ASSERT_EQ(tally::detail::make_plan_for<T>(n).tiles, tiles) << "n = " << n;
        seeded s(700 + n);
        SCOPED_TRACE("n = " + std::to_string(n) + ", " + std::to_string(sizeof(T)) + "-byte values, " + s.trace());
        const auto v = random_values<T>(n, s.rng);
        device_buffer<T> d(v);
        const T init = T(12345);
        const order_revealing_sum<T> op;
        const T host = tally::reduce(tally::host, v.begin(), v.end(), init, op);
        EXPECT_EQ(tally::reduce(tally::device, d.begin(), d.end(), init, op), host);
        EXPECT_EQ(tally::reduce(tally::device.strategy(tally::strategy::two_pass), d.begin(), d.end(), init, op), host);
        EXPECT_EQ(tally::reduce(tally::device.grid_size(3), d.begin(), d.end(), init, op), host);
      }
    }
  };
  check(std::uint32_t(0));  // 8-byte values in the block tree: test_building_blocks
}

// Plans of two tiles run in one block, a run of block_threads threads per tile
// (tile_pair_reduce_kernel); 3 to 5 tiles take the single pass. Its bits must equal the
// host's and the general single pass's (a forced grid size takes that), for full and partial
// last tiles, a last tile of one element and one that does not reach every thread, through
// the vector loader, the element-wise one (a misaligned start) and a transformed one;
// integer sums exact.
TEST_F(device_determinism, plans_of_two_to_five_tiles_equal_the_host_and_the_single_pass) {
  const auto check = [](auto zero, std::size_t offset) {
    using T = decltype(zero);
    const std::size_t step = tally::detail::make_plan_for<T>(1).step_items;
    const std::size_t vector = 16 / sizeof(T);
    for (std::uint64_t tiles : {2, 3, 4, 5}) {
      const std::size_t last = (tiles - 1) * step;  // the last tile's first element
      for (std::size_t n : {std::size_t(tiles * step), last + 1, last + 100 * vector + 3, tiles * step - 333}) {
        ASSERT_EQ(tally::detail::make_plan_for<T>(n).tiles, tiles) << "n = " << n;
        seeded s(500 + n + offset);
        SCOPED_TRACE("n = " + std::to_string(n) + ", offset " + std::to_string(offset) + ", " +
                     std::to_string(sizeof(T)) + "-byte values, " + s.trace());
        const auto v = random_values<T>(n, s.rng);
        device_buffer<T> d(v, offset);
        const T init = random_values<T>(1, s.rng)[0];
        const auto host = bits_of(tally::reduce(tally::host, v.begin(), v.end(), init));
        EXPECT_EQ(bits_of(tally::reduce(tally::device, d.begin(), d.end(), init)), host);
        EXPECT_EQ(bits_of(tally::reduce(tally::device.strategy(tally::strategy::single_pass), d.begin(), d.end(), init)),
                  host);
        EXPECT_EQ(bits_of(tally::reduce(tally::device.grid_size(3), d.begin(), d.end(), init)), host);
        EXPECT_EQ(bits_of(tally::reduce(tally::device.strategy(tally::strategy::two_pass), d.begin(), d.end(), init)),
                  host);
        if constexpr (std::is_integral_v<T>) {
          EXPECT_EQ(tally::reduce(tally::device, d.begin(), d.end(), init), reference_sum<T>(v, 0, n, init));
        } else {
          TALLY_EXPECT_SUM_NEAR(tally::reduce(tally::device, d.begin(), d.end(), init), reference_sum<T>(v, 0, n, init),
                                tally_test::sum_error_bound(v, 0, n, init));
          const halve_value_of<T> halve;  // a transformed loader (halving ints would give zeros)
          auto halved = thrust::make_transform_iterator(d.begin(), halve);
          auto halved_host = thrust::make_transform_iterator(v.begin(), halve);
          EXPECT_EQ(bits_of(tally::reduce(tally::device, halved, halved + n, init)),
                    bits_of(tally::reduce(tally::host, halved_host, halved_host + n, init)));
        }
      }
    }
  };
  for (std::size_t offset : {0, 1}) {
    check(0.0f, offset);
    check(0.0, offset);
    check(0, offset);
  }
}

// Inputs above a fraction of the L2 are read with an evict-first hint (streams_reads in
// loads.cuh), smaller ones through the read-only path: the same values, so the same bits,
// on both sides of the threshold, for the plain and the transformed loader.
TEST_F(device_determinism, same_bits_on_both_sides_of_the_streaming_threshold) {
  const int device = tally::detail::current_device();
  const std::uint64_t l2 = std::uint64_t(tally::detail::properties(device).l2_bytes);
  const std::size_t edge = std::size_t(l2 / tally::detail::stream_reads_l2_fraction / sizeof(float));
  const halve_value_of<float> halve;
  for (std::size_t n : {edge - 5, edge, edge + 1, edge + 4099}) {
    const bool streams = tally::detail::streams_reads(n * sizeof(float), l2);
    EXPECT_EQ(streams, n > edge) << "n = " << n;
    seeded s(340 + n);
    SCOPED_TRACE("n = " + std::to_string(n) + (streams ? ", streamed, " : ", cached, ") + s.trace());
    const auto v = random_values<float>(n, s.rng);
    device_buffer<float> d(v);
    EXPECT_EQ(bits_of(tally::reduce(tally::device, d.begin(), d.end(), 0.25f)),
              bits_of(tally::reduce(tally::host, v.begin(), v.end(), 0.25f)));
    auto halved = thrust::make_transform_iterator(d.begin(), halve);
    auto halved_host = thrust::make_transform_iterator(v.begin(), halve);
    EXPECT_EQ(bits_of(tally::reduce(tally::device, halved, halved + n, 0.0f)),
              bits_of(tally::reduce(tally::host, halved_host, halved_host + n, 0.0f)));
  }
}

TEST_F(device_determinism, double_sums_equal_the_host_for_large_inputs) {
  seeded s(310);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<double>((std::size_t(1) << (tally_test::under_sanitizer() ? 19 : 23)) + 17, s.rng);
  device_buffer<double> d(v, 1);
  EXPECT_EQ(bits_of(tally::reduce(tally::device, d.begin(), d.end(), 0.0)),
            bits_of(tally::reduce(tally::host, v.begin(), v.end(), 0.0)));
}

// Past plan_max_tiles steps a tile takes several steps, and the last tile may end inside
// its last step: full steps, then a step whose chunks stop partway (one straddling n).
TEST_F(device_determinism, a_last_tile_of_several_steps_ending_mid_step_equals_the_host) {
  if (tally_test::under_sanitizer()) GTEST_SKIP() << "200 MB input; the other sizes cover this path under the sanitizer";
  const std::size_t step = tally::detail::make_plan_for<float>(1).step_items;
  const std::size_t n = 3 * tally::detail::plan_max_tiles * step + 2 * step + 777;
  const auto plan = tally::detail::make_plan_for<float>(n);
  ASSERT_GT(plan.steps_per_tile, 2);
  ASSERT_GT(n - plan.tile_begin(plan.tiles - 1), 2 * step) << "the last tile must hold two full steps and more";
  seeded s(320);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<float>(n, s.rng);
  device_buffer<float> d(v, 1);
  EXPECT_EQ(bits_of(tally::reduce(tally::device, d.begin(), d.end(), 0.5f)),
            bits_of(tally::reduce(tally::host, v.begin(), v.end(), 0.5f)));
  TALLY_EXPECT_SUM_NEAR(tally::reduce(tally::device, d.begin(), d.end(), 0.5f), reference_sum<float>(v, 0, n, 0.5f),
                        tally_test::sum_error_bound(v, 0, n, 0.5f));
  device_buffer<float> aligned(v);
  EXPECT_EQ(bits_of(tally::reduce(tally::device, aligned.begin(), aligned.end(), 0.5f)),
            bits_of(tally::reduce(tally::host, v.begin(), v.end(), 0.5f)));
}

class device_interop : public tally_test::device_test {};

TEST_F(device_interop, thrust_vectors_pointers_and_policies) {
  seeded s(400);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(100003, s.rng);
  const int expected = reference_sum<int>(v, 0, v.size(), 0);
  thrust::device_vector<int> dv(v.begin(), v.end());
  thrust::device_ptr<int> p = dv.data();

  EXPECT_EQ(tally::reduce(dv.begin(), dv.end()), expected);  // no policy: device, from the iterator
  EXPECT_EQ(tally::reduce(p, p + dv.size(), 0), expected);
  EXPECT_EQ(tally::reduce(thrust::device, dv.begin(), dv.end(), 0), expected);
  EXPECT_EQ(tally::reduce(tally::device, thrust::raw_pointer_cast(p), thrust::raw_pointer_cast(p) + dv.size()), expected);
  EXPECT_EQ(tally::reduce(tally::device, dv.begin(), dv.end(), 0, cuda::std::plus<int>{}), expected);
  EXPECT_EQ(tally::reduce(tally::device, dv.begin(), dv.end(), 0, thrust::plus<int>{}), expected);
  EXPECT_EQ(sum_with_host_device_lambda(dv), expected);

  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreate(&stream));
  EXPECT_EQ(tally::reduce(thrust::cuda::par.on(stream), dv.begin(), dv.end(), 0), expected);
  EXPECT_EQ(tally::reduce(tally::device.on(stream), dv.begin(), dv.end(), 0), expected);
  TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_F(device_interop, fancy_iterators_take_the_general_path) {
  thrust::counting_iterator<long long> first(0);
  const long long n = (1LL << 22) + 5;
  EXPECT_EQ(tally::reduce(tally::device, first, first + n, 0LL), n * (n - 1) / 2);

  seeded s(401);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(50001, s.rng);
  thrust::device_vector<int> dv(v.begin(), v.end());
  EXPECT_EQ(sum_doubled_through_transform_iterator(dv), 2LL * reference_sum<long long>(v, 0, v.size(), 0));
}

TEST_F(device_interop, reduce_into_writes_a_poisoned_output_and_init_for_an_empty_range) {
  seeded s(402);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<float>(123457, s.rng);
  device_buffer<float> d(v);
  device_value<double> out;  // the output's type may differ from the accumulator's
  tally::reduce_into(tally::device, d.begin(), d.end(), out.get(), 2.0f, tally::plus<float>{});
  TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(out.read(), double(tally::reduce(tally::host, v.begin(), v.end(), 2.0f)));

  out.poison();
  tally::reduce_into(tally::device, d.begin(), d.begin(), out.get(), 2.0f, tally::plus<float>{});
  TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(out.read(), 2.0);

  device_value<float> min_out;
  min_into_with_device_lambda(d.begin(), d.end(), min_out.get());
  EXPECT_EQ(min_out.read(), *std::min_element(v.begin(), v.end()));
}

TEST_F(device_interop, reduce_into_is_captured_in_a_graph_and_replayed) {
  seeded s(403);
  SCOPED_TRACE(s.trace());
  const std::size_t n = (1u << 20) + 9;
  auto v = random_values<int>(n, s.rng);
  device_buffer<int> d(v);
  device_value<int> out;
  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  cudaGraph_t graph;
  TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  tally::reduce_into(tally::device.on(stream), d.begin(), d.end(), out.get(), 0, tally::plus<int>{});
  TEST_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  for (int replay = 0; replay < 3; ++replay) {
    v = random_values<int>(n, s.rng);  // new data each replay: the graph must read it
    TEST_CUDA(cudaMemcpy(d.data(), v.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    out.poison();
    TEST_CUDA(cudaGraphLaunch(exec, stream));
    TEST_CUDA(cudaStreamSynchronize(stream));
    EXPECT_EQ(out.read(), reference_sum<int>(v, 0, n, 0)) << "replay " << replay;
  }
  TEST_CUDA(cudaGraphExecDestroy(exec));
  TEST_CUDA(cudaGraphDestroy(graph));
  TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_F(device_interop, concurrent_calls_from_host_threads_on_their_own_streams) {
  const int threads = 8, calls = tally_test::under_sanitizer() ? 3 : 25;
  std::vector<std::vector<int>> inputs;
  std::vector<std::size_t> sizes;
  seeded s(404);
  SCOPED_TRACE(s.trace());
  std::uniform_int_distribution<std::size_t> size(1, tally_test::under_sanitizer() ? 1u << 17 : 1u << 21);
  for (int t = 0; t < threads; ++t) inputs.push_back(random_values<int>(size(s.rng), s.rng));
  const std::size_t scratch_before = tally::detail::scratch_entries();

  std::vector<int> failures(threads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const auto& v = inputs[t];
      device_buffer<int> d(v);
      cudaStream_t stream;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      const int expected = reference_sum<int>(v, 0, v.size(), t);
      for (int c = 0; c < calls; ++c) {
        // Half the threads share the default stream, the others use their own.
        const auto policy = t % 2 ? tally::device.on(stream) : tally::device;
        if (tally::reduce(policy, d.begin(), d.end(), t) != expected) ++failures[t];
      }
      cudaStreamDestroy(stream);
    });
  }
  for (auto& w : workers) w.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  // One scratch entry per stream that was used, whatever the number of calls.
  EXPECT_LE(tally::detail::scratch_entries(), scratch_before + threads / 2 + 1);
}

// reduce() takes its value from a pinned slot that the next call gets again (the pool hands
// slots out last in, first out). Each call waits behind a kernel of another length: none
// (the host spins), about 0.1 ms (it asks the stream meanwhile) and about 2 ms (past 0.2 ms:
// it keeps spinning under the default schedule, and blocks in cudaStreamSynchronize under
// cudaDeviceScheduleBlockingSync; both schedules run), and returns a 16-byte value unlike
// the last call's. A word left over from the last call, or a value taken before all its
// words landed, would show as a wrong sum.
TEST_F(device_interop, reduce_returns_its_own_value_however_long_it_waits) {
  seeded s(406);
  SCOPED_TRACE(s.trace());
  unsigned int flags_before = 0;
  TEST_CUDA(cudaGetDeviceFlags(&flags_before));
  const unsigned int schedule_before = flags_before & cudaDeviceScheduleMask;
  // Puts the schedule back however the test ends (a failed ASSERT returns early), so that the
  // tests after it run under the schedule they were started with.
  struct schedule_restorer {
    unsigned int schedule;
    ~schedule_restorer() { EXPECT_EQ(cudaSetDeviceFlags(schedule), cudaSuccess) << "restoring the device schedule"; }
  } restore{schedule_before};
  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto policy = tally::device.on(stream);
  std::uniform_int_distribution<long long> value(-(1LL << 40), 1LL << 40);
  std::uniform_int_distribution<std::size_t> size(1, 100000);
  for (int round = 0; round < 6; ++round) {
    const unsigned int schedule = round % 2 == 0 ? schedule_before : unsigned(cudaDeviceScheduleBlockingSync);
    TEST_CUDA(cudaSetDeviceFlags(schedule));
    unsigned int flags_now = 0;
    TEST_CUDA(cudaGetDeviceFlags(&flags_now));
    ASSERT_EQ(flags_now & cudaDeviceScheduleMask, schedule) << "round " << round;
    for (long long cycles : {0LL, 200000LL, 4000000LL}) {
      std::vector<two_sums> v(size(s.rng));
      two_sums want{0, 0};
      for (auto& x : v) {
        x = {value(s.rng), value(s.rng)};
        want.low += x.low;
        want.high += x.high;
      }
      device_buffer<two_sums> d(v);
      if (cycles > 0) tally_test::keep_stream_busy<><<<1, 1, 0, stream>>>(cycles);
      TEST_CUDA(cudaGetLastError());
      const two_sums got =
          tally::reduce(policy, d.begin(), d.end(), two_sums{0, 0}, tally::commutative(add_two_sums{}));
      EXPECT_EQ(got.low, want.low) << "round " << round << ", " << cycles << " cycles, n " << v.size();
      EXPECT_EQ(got.high, want.high) << "round " << round << ", " << cycles << " cycles, n " << v.size();
    }
  }
  TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_F(device_interop, steady_state_calls_add_no_scratch) {
  seeded s(405);
  const auto v = random_values<float>(1u << 16, s.rng);
  device_buffer<float> d(v);
  tally::reduce(tally::device, d.begin(), d.end(), 0.0f);
  const std::size_t entries = tally::detail::scratch_entries();
  for (int i = 0; i < 100; ++i) tally::reduce(tally::device, d.begin(), d.end(), 0.0f);
  EXPECT_EQ(tally::detail::scratch_entries(), entries);
}

}  // namespace

namespace {

// Seeded values made on the device (a hash of the index), so that a 2^31-element input
// takes a fraction of a second to fill instead of minutes of host generation.
__global__ void fill_hashed(float* out, std::uint64_t n, std::uint64_t seed) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::uint64_t(gridDim.x) * blockDim.x) {
    std::uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    // [-4, 12): mixed signs, leaning positive, so that the sum is far from 0 next to the sum of
    // the magnitudes and the error bound can tell a right sum from a wrong one.
    out[i] = float(std::int64_t(z >> 40) - (std::int64_t(1) << 22)) * (1.0f / (1 << 20));
  }
}

class device_huge : public tally_test::device_test {};

// More than 2^31 elements: 64-bit indexing end to end, device equal to the host bit for bit
// at an element-misaligned start, and an exact integer sum through a fancy iterator.
TEST_F(device_huge, more_than_two_to_the_31_elements) {
  const bool light = tally_test::under_sanitizer();
  const std::uint64_t n = light ? (std::uint64_t(1) << 20) + 77 : (std::uint64_t(1) << 31) + 1234567;
  const std::uint64_t seed = tally_test::base_seed();
  SCOPED_TRACE("n = " + std::to_string(n) + ", seed " + std::to_string(seed));
  float* base = nullptr;
  TEST_CUDA(cudaMalloc(&base, (n + 1) * sizeof(float)));
  float* data = base + 1;  // misaligned: the element-by-element loader
  fill_hashed<<<1024, 256>>>(data, n, seed);
  TEST_CUDA(cudaGetLastError());
  std::vector<float> host(n);
  TEST_CUDA(cudaMemcpy(host.data(), data, n * sizeof(float), cudaMemcpyDeviceToHost));

  const float device_sum = tally::reduce(tally::device, data, data + n, 0.0f);
  const float host_sum = tally::reduce(tally::host, host.begin(), host.end(), 0.0f);
  EXPECT_EQ(bits_of(device_sum), bits_of(host_sum));
  long double exact = 0;  // values are multiples of 2^-20 below 12: long double sums them exactly
  for (float x : host) exact += x;
  TALLY_EXPECT_SUM_NEAR(device_sum, exact, tally_test::sum_error_bound(host, 0, n, 0.0));
  TEST_CUDA(cudaFree(base));

  thrust::counting_iterator<unsigned long long> first(0);
  EXPECT_EQ(tally::reduce(tally::device, first, first + n, 0ull), n * (n - 1) / 2);
}

}  // namespace

// The sanitized host build (scripts/test) defines TALLY_TEST_HOST_ONLY and compiles no kernel tests.
#if !defined(TALLY_TEST_HOST_ONLY)
#include "support/plan_cases.cuh"

namespace {

// The oracle's cases (support/plan_cases.cuh) on the device, against the oracle that
// test_reduce_host.cu's host_backend_follows_the_plan holds the host backend to: the device
// follows the plan as docs/determinism.md states it, and so gives the host's bits. Every
// input is read from an aligned start and from one element past it (element by element
// where W > 1). Under a sanitizer only the small sizes.
struct device_side {
  template <class E>
  using buffer = tally_test::device_buffer<E>;
  static std::vector<std::size_t> offsets() { return {0, 1}; }
  template <class It, class T, class Op>
  static T reduce(It first, It last, T init, Op op) {
    return tally::reduce(tally::device, first, last, init, op);
  }
  template <class It>
  static std::int64_t min_element_index(It first, It last) {
    return tally::min_element(tally::device, first, last) - first;
  }
};

class device_follows_the_plan : public tally_test::device_test {};

TEST_F(device_follows_the_plan, commutative_sums_match_the_oracle) {
  tally_test::plan_cases::commutative_sums<device_side>(!tally_test::under_sanitizer());
}

TEST_F(device_follows_the_plan, ordered_operator_matches_the_oracle) {
  tally_test::plan_cases::ordered_operator<device_side>(!tally_test::under_sanitizer());
}

TEST_F(device_follows_the_plan, order_free_operators_match_the_oracle) {
  tally_test::plan_cases::order_free_operators<device_side>(!tally_test::under_sanitizer());
}

TEST_F(device_follows_the_plan, every_loader_matches_the_oracle) {
  tally_test::plan_cases::every_loader<device_side>(!tally_test::under_sanitizer());
}

}  // namespace
#endif  // !TALLY_TEST_HOST_ONLY
