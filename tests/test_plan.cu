// The plan: a function of N and the element size alone that covers the range exactly.
#include "support/test_support.cuh"
#include "tally/detail/plan.cuh"
#include "tally/extrema.cuh"
#include "tally/functional.cuh"

#include <random>

namespace {

using tally::detail::make_plan;
using tally::detail::plan_max_tiles;

void expect_valid_plan(std::uint64_t n, int vw) {
  const auto plan = make_plan(n, vw);
  SCOPED_TRACE("n = " + std::to_string(n) + ", vector width " + std::to_string(vw));
  EXPECT_EQ(plan.n, n);
  EXPECT_EQ(plan.step_items, std::uint64_t(tally::detail::block_threads) * tally::detail::loads_per_step * vw);
  EXPECT_EQ(plan.tile_items, plan.step_items * std::uint64_t(plan.steps_per_tile));
  EXPECT_GE(plan.steps_per_tile, 1u);
  EXPECT_LE(plan.tiles, plan_max_tiles);
  EXPECT_GE(plan.tiles * plan.tile_items, n);
  if (n > 0) EXPECT_LT((plan.tiles - 1) * plan.tile_items, n);
  if (n == 0) EXPECT_EQ(plan.tiles, 0u);
  // Only the last tile may be partial.
  for (std::uint64_t t = 0; t + 1 < plan.tiles; ++t) ASSERT_TRUE(plan.tile_is_full(t));
}

// A range's length is below 2^63 (its difference_type is signed 64-bit). Every plan up to
// that is exact: steps per tile above 2^31 (once an int, which wrapped at N > 2^53 and made
// 2^62 elements a fast wrong answer), full tiles really full, the last one holding the rest.
TEST(plan, is_exact_up_to_the_longest_range) {
  for (int vw : {1, 2, 4, 16}) {
    for (std::uint64_t n : {std::uint64_t(1) << 53, (std::uint64_t(1) << 53) + 1, (std::uint64_t(1) << 54) + 12345,
                            std::uint64_t(1) << 62, (std::uint64_t(1) << 62) + 3, (std::uint64_t(1) << 63) - 1}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", vector width " + std::to_string(vw));
      const auto plan = make_plan(n, vw);
      const unsigned __int128 covered = (unsigned __int128)plan.tiles * plan.tile_items;
      if (n >= std::uint64_t(1) << 62) EXPECT_GT(plan.steps_per_tile, std::uint64_t(1) << 31) << "where the int overflowed";
      EXPECT_EQ((unsigned __int128)plan.steps_per_tile * plan.step_items, (unsigned __int128)plan.tile_items);
      EXPECT_LE(plan.tiles, plan_max_tiles);
      EXPECT_GE(covered, (unsigned __int128)n);
      EXPECT_LT(covered - plan.tile_items, (unsigned __int128)n);
      EXPECT_TRUE(plan.tile_is_full(plan.tiles - 2));
      EXPECT_EQ(plan.tile_is_full(plan.tiles - 1), n % plan.tile_items == 0);
      // The ordered plan's tile bounds stay inside the range.
      const auto last = tally::detail::ordered_tile_of(plan, plan.tiles - 1);
      EXPECT_EQ(last.end, n);
      EXPECT_LT(last.begin, n);
    }
  }
}

TEST(plan, covers_boundary_sizes) {
  for (int vw : {1, 2, 4, 8, 16})
    for (std::uint64_t n : tally_test::boundary_sizes()) expect_valid_plan(n, vw);
}

TEST(plan, covers_random_and_huge_sizes) {
  tally_test::seeded s(1);
  SCOPED_TRACE(s.trace());
  std::uniform_int_distribution<std::uint64_t> size(1, std::uint64_t(1) << 40);
  for (int i = 0; i < 2000; ++i) expect_valid_plan(size(s.rng), 4);
  expect_valid_plan((std::uint64_t(1) << 31) + 5, 4);
  expect_valid_plan(std::uint64_t(1) << 34, 2);
}

TEST(plan, small_inputs_take_one_step_tiles_and_large_ones_cap_the_tile_count) {
  const std::uint64_t step = std::uint64_t(tally::detail::block_threads) * tally::detail::loads_per_step * 4;
  EXPECT_EQ(make_plan(1000, 4).tiles, 1u);
  EXPECT_EQ(make_plan(step, 4).tiles, 1u);
  EXPECT_EQ(make_plan(step + 1, 4).tiles, 2u);
  EXPECT_EQ(make_plan(step * plan_max_tiles, 4).steps_per_tile, 1);
  EXPECT_EQ(make_plan(step * plan_max_tiles + 1, 4).steps_per_tile, 2);
  const std::uint64_t n = std::uint64_t(1) << 28;
  const auto huge = make_plan(n, 4);
  EXPECT_EQ(huge.tiles, plan_max_tiles);
  EXPECT_EQ(std::uint64_t(huge.steps_per_tile), (n / step + plan_max_tiles - 1) / plan_max_tiles);
}

TEST(plan, order_free_operators_take_fewer_longer_tiles) {
  using tally::detail::order_free_max_tiles;
  using tally::detail::plan_max_tiles_for;
  using keep_min = tally::detail::keep_first_min<float, thrust::less<float>>;
  using keep_both = tally::detail::keep_min_and_max<float, thrust::less<float>>;
  static_assert(plan_max_tiles_for<keep_min> == order_free_max_tiles, "extrema combines are order-free");
  static_assert(plan_max_tiles_for<keep_both> == order_free_max_tiles, "extrema combines are order-free");
  static_assert(plan_max_tiles_for<tally::plus<float>> == plan_max_tiles, "a float sum keeps the full plan");
  const std::uint64_t step = std::uint64_t(tally::detail::block_threads) * tally::detail::loads_per_step * 4;
  const auto plan = make_plan(step * plan_max_tiles, 4, order_free_max_tiles);
  EXPECT_EQ(plan.tiles, order_free_max_tiles);
  EXPECT_EQ(std::uint64_t(plan.steps_per_tile), plan_max_tiles / order_free_max_tiles);
  EXPECT_EQ(make_plan(step * order_free_max_tiles + 1, 4, order_free_max_tiles).steps_per_tile, 2);
}

TEST(plan, tile_positions_fit_in_32_bits_up_to_2_to_the_40_elements_of_an_order_free_plan) {
  using tally::detail::local_positions_fit;
  using tally::detail::order_free_max_tiles;
  const std::uint64_t limit = std::uint64_t(1) << 40;  // 256 tiles of 2^32 floats
  EXPECT_TRUE(local_positions_fit(make_plan(limit, 4, order_free_max_tiles)));
  EXPECT_EQ(make_plan(limit, 4, order_free_max_tiles).tile_items, std::uint64_t(1) << 32);
  EXPECT_FALSE(local_positions_fit(make_plan(limit + 1, 4, order_free_max_tiles)));
  EXPECT_TRUE(local_positions_fit(make_plan(std::uint64_t(3) << 31, 16, order_free_max_tiles)));  // > 2^31 int8
  EXPECT_TRUE(local_positions_fit(make_plan(1, 4, order_free_max_tiles)));
}

TEST(plan, is_usable_at_compile_time) {
  constexpr auto plan = make_plan(12345, 4);
  constexpr std::uint64_t step = std::uint64_t(tally::detail::block_threads) * tally::detail::loads_per_step * 4;
  static_assert(plan.tiles == (12345 + step - 1) / step, "one-step tiles for small inputs");
  EXPECT_EQ(plan.step_items, step);
}

}  // namespace
