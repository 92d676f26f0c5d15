#pragma once
// An executable statement of the reduction plan, written the way the device kernel runs:
// thread by thread, then a shuffle tree that reads the values every lane held before each
// step. Slow and plain on purpose. The host backend must give the same bits as this for
// every input and operator, including order-sensitive ones.

#include "tally/detail/plan.cuh"

#include <cstdint>
#include <optional>
#include <vector>

namespace tally_test::oracle {

using tally::detail::block_threads;
using tally::detail::loads_per_step;

// __shfl_down tree over one warp of optional values; lane 0's result.
template <class Acc, class Op>
std::optional<Acc> shuffle_tree(std::vector<std::optional<Acc>> lanes, Op op) {
  for (int delta = 16; delta > 0; delta /= 2) {
    const auto before = lanes;  // a shuffle reads the values held before the step
    for (int lane = 0; lane < 32; ++lane) {
      if (lane + delta >= 32 || !before[lane + delta]) continue;
      lanes[lane] = before[lane] ? Acc(op(*before[lane], *before[lane + delta])) : *before[lane + delta];
    }
  }
  return lanes[0];
}

template <class Acc, class Op>
std::optional<Acc> block_tree(const std::vector<std::optional<Acc>>& threads, Op op) {
  std::vector<std::optional<Acc>> warp_results(32);
  for (int w = 0; w < block_threads / 32; ++w)
    warp_results[w] = shuffle_tree<Acc>({threads.begin() + w * 32, threads.begin() + w * 32 + 32}, op);
  return shuffle_tree<Acc>(warp_results, op);
}

template <class Acc, class V, class Op>
Acc reduce(const std::vector<V>& values, Acc init, Op op) {
  const std::uint64_t n = values.size();
  if (n == 0) return init;
  const auto plan = tally::detail::make_plan(n, tally::detail::vector_width_v<V>);
  const std::uint64_t vw = plan.vector_width;
  std::vector<std::optional<Acc>> partials(block_threads);  // the last block's threads
  for (std::uint64_t tile = 0; tile < plan.tiles; ++tile) {
    std::vector<std::optional<Acc>> threads(block_threads);
    for (int t = 0; t < block_threads; ++t) {
      for (std::uint64_t s = 0; s < plan.steps_per_tile; ++s) {
        for (int u = 0; u < loads_per_step; ++u) {
          for (std::uint64_t j = 0; j < vw; ++j) {
            const std::uint64_t i =
                plan.tile_begin(tile) + s * plan.step_items + (std::uint64_t(u) * block_threads + t) * vw + j;
            if (i >= n) continue;
            const Acc x = static_cast<Acc>(values[i]);
            threads[t] = threads[t] ? Acc(op(*threads[t], x)) : x;
          }
        }
      }
    }
    const Acc partial = *block_tree<Acc>(threads, op);
    auto& slot = partials[tile % block_threads];
    slot = slot ? Acc(op(*slot, partial)) : partial;
  }
  return Acc(op(init, *block_tree<Acc>(partials, op)));
}

}  // namespace tally_test::oracle
