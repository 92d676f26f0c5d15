#pragma once
// The host backend: the device plan executed on CPU threads. Each tile is reduced by
// replaying what the block's threads, warps and shuffle trees do, so float and double
// results equal the device's bit for bit (docs/determinism.md). Operators that are not
// commutative replay the order-preserving plan instead (ordered_reduce_tile).

#include "tally/detail/exact_fields.cuh"
#include "tally/detail/exact_sum.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tuple_like.cuh"
#include "tally/operator_traits.cuh"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <iterator>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace tally::detail::host {

template <class Acc>
struct lane_value {
  Acc value{};
  bool valid = false;
};

template <class Acc, class Op>
void combine(lane_value<Acc>& into, const lane_value<Acc>& other, Op& op) {
  if (!other.valid) return;
  into.value = into.valid ? static_cast<Acc>(op(into.value, other.value)) : other.value;
  into.valid = true;
}

// tally::warp::reduce on 32 lanes starting at `lanes`: lane i takes op(v[i], v[i + d]).
// Lane i + d is updated only after lane i in this ascending loop, so it still holds the
// value the device's shuffle would read.
template <class Acc, class Op>
lane_value<Acc> warp_reduce(lane_value<Acc>* lanes, Op& op) {
  for (int delta = warp_threads / 2; delta > 0; delta /= 2)
    for (int i = 0; i < delta; ++i) combine(lanes[i], lanes[i + delta], op);
  return lanes[0];
}

// tally::block::reduce for block_threads lanes (the lanes are overwritten).
template <class Acc, class Op>
lane_value<Acc> block_reduce(lane_value<Acc>* lanes, Op& op) {
  constexpr int warps = block_threads / warp_threads;
  lane_value<Acc> warp_results[warp_threads];
  for (int w = 0; w < warps; ++w) warp_results[w] = warp_reduce(lanes + w * warp_threads, op);
  return warp_reduce(warp_results, op);
}

// A full tile, as reduce_full_tile does it: lane t's chunks are those whose index within
// the tile is t (mod block_threads), each folded left to right. Walking steps, loads and
// lanes in that nesting reads memory in order and needs no validity flags.
template <class Acc, class It, class Op>
Acc reduce_full_tile(It first, const reduction_plan& plan, std::uint64_t tile, Op& op) {
  using difference_type = typename std::iterator_traits<It>::difference_type;
  const int vw = plan.vector_width;
  const std::uint64_t chunk_groups = std::uint64_t(plan.steps_per_tile) * loads_per_step;
  std::uint64_t at = plan.tile_begin(tile);
  std::vector<Acc> acc(block_threads);
  for (std::uint64_t g = 0; g < chunk_groups; ++g) {
    for (int t = 0; t < block_threads; ++t, at += vw) {
      Acc& lane = acc[t];
      int j = 0;
      if (g == 0) {
        lane = static_cast<Acc>(first[static_cast<difference_type>(at)]);
        j = 1;
      }
      for (; j < vw; ++j) lane = static_cast<Acc>(op(lane, static_cast<Acc>(first[static_cast<difference_type>(at + j)])));
    }
  }
  // The block tree with every lane valid (tally::block::reduce without flags).
  constexpr int warps = block_threads / warp_threads;
  lane_value<Acc> warp_results[warp_threads];
  for (int w = 0; w < warps; ++w) {
    Acc* lanes = acc.data() + w * warp_threads;
    for (int delta = warp_threads / 2; delta > 0; delta /= 2)
      for (int i = 0; i < delta; ++i) lanes[i] = static_cast<Acc>(op(lanes[i], lanes[i + delta]));
    warp_results[w] = {lanes[0], true};
  }
  return warp_reduce(warp_results, op).value;
}

// The last, partial tile (reduce_partial_tile): the same order, lanes may hold nothing.
template <class Acc, class It, class Op>
lane_value<Acc> reduce_partial_tile(It first, const reduction_plan& plan, std::uint64_t tile, Op& op) {
  using difference_type = typename std::iterator_traits<It>::difference_type;
  const std::uint64_t begin = plan.tile_begin(tile);
  const std::uint64_t end = std::min(plan.n, begin + plan.tile_items);
  const int vw = plan.vector_width;
  std::vector<lane_value<Acc>> lanes(block_threads);
  // Walk the tile in memory order; each chunk goes to the thread that owns it.
  std::uint64_t chunk = 0;
  for (std::uint64_t chunk_first = begin; chunk_first < end; chunk_first += vw, ++chunk) {
    auto& lane = lanes[chunk % block_threads];
    for (std::uint64_t i = chunk_first; i < std::min(end, chunk_first + vw); ++i) {
      const Acc x = static_cast<Acc>(first[static_cast<difference_type>(i)]);
      if (lane.valid) {
        lane.value = static_cast<Acc>(op(lane.value, x));
      } else {
        lane.value = x;
        lane.valid = true;
      }
    }
  }
  return block_reduce(lanes.data(), op);
}

template <class Acc, class It, class Op>
Acc reduce_tile(It first, const reduction_plan& plan, std::uint64_t tile, Op& op) {
  if (plan.tile_is_full(tile)) return reduce_full_tile<Acc>(first, plan, tile, op);
  return reduce_partial_tile<Acc>(first, plan, tile, op).value;
}

// Block 0's fold of the tile partials (fold_published_partials), or the two pass's second
// launch: thread t takes partials t, t + block_threads, ... in order, then the block tree.
template <class Acc, class Op>
Acc fold_partials(const std::vector<Acc>& partials, Op& op) {
  std::vector<lane_value<Acc>> lanes(block_threads);
  for (std::size_t k = 0; k < partials.size(); ++k) {
    lane_value<Acc> p{partials[k], true};
    combine(lanes[k % block_threads], p, op);
  }
  return block_reduce(lanes.data(), op).value;
}

// ---- the order-preserving plan (plan.cuh, ordered_tile; tile/ordered_tile.cuh) ----

// tally::warp::reduce_ordered on 32 lanes: for d = 1, 2, 4, 8, 16, lane i (a multiple of
// 2d) takes combine(v[i], v[i + d]); each step reads lanes the previous steps finished.
template <class Acc, class Op>
lane_value<Acc> ordered_warp_reduce(lane_value<Acc>* lanes, Op& op) {
  for (int delta = 1; delta < warp_threads; delta *= 2)
    for (int i = 0; i + delta < warp_threads; i += 2 * delta) combine(lanes[i], lanes[i + delta], op);
  return lanes[0];
}

// tally::block::reduce_ordered for block_threads lanes (the lanes are overwritten).
template <class Acc, class Op>
lane_value<Acc> ordered_block_reduce(lane_value<Acc>* lanes, Op& op) {
  constexpr int warps = block_threads / warp_threads;
  lane_value<Acc> warp_results[warp_threads];
  for (int w = 0; w < warps; ++w) warp_results[w] = ordered_warp_reduce(lanes + w * warp_threads, op);
  return ordered_warp_reduce(warp_results, op);
}

// ordered_reduce_tile: each warp's pieces in order, each piece's lanes by the ordered warp
// tree, then the warps' folds by the ordered tree.
template <class Acc, class It, class Op>
Acc ordered_reduce_tile(It first, const reduction_plan& plan, std::uint64_t tile, Op& op) {
  using difference_type = typename std::iterator_traits<It>::difference_type;
  const ordered_tile shape = ordered_tile_of(plan, tile);
  constexpr int warps = block_threads / warp_threads;
  lane_value<Acc> warp_results[warp_threads];
  lane_value<Acc> lanes[warp_threads];
  for (int w = 0; w < warps; ++w) {
    for (std::uint64_t piece = 0; piece < shape.steps; ++piece) {
      const std::uint64_t piece_begin = shape.piece_begin(w, piece);
      if (piece_begin >= shape.end) break;
      for (int l = 0; l < warp_threads; ++l) {
        lane_value<Acc>& lane = lanes[l];
        lane.valid = false;
        const std::uint64_t run_begin = piece_begin + std::uint64_t(l) * shape.run_items;
        const std::uint64_t run_end = std::min(shape.end, run_begin + shape.run_items);
        for (std::uint64_t i = run_begin; i < run_end; ++i) {
          const Acc x = static_cast<Acc>(first[static_cast<difference_type>(i)]);
          lane.value = lane.valid ? static_cast<Acc>(op(lane.value, x)) : x;
          lane.valid = true;
        }
      }
      combine(warp_results[w], ordered_warp_reduce(lanes, op), op);
    }
  }
  return ordered_warp_reduce(warp_results, op).value;
}

// ordered_fold_published_partials: thread t folds its contiguous range, then the ordered
// block tree.
template <class Acc, class Op>
Acc ordered_fold_partials(const std::vector<Acc>& partials, Op& op) {
  const std::uint64_t per_thread = ordered_partials_per_thread(partials.size());
  std::vector<lane_value<Acc>> lanes(block_threads);
  for (std::size_t k = 0; k < partials.size(); ++k) {
    lane_value<Acc> p{partials[k], true};
    combine(lanes[k / per_thread], p, op);
  }
  return ordered_block_reduce(lanes.data(), op).value;
}

// Tiles are spread over threads; below this many elements one thread does it all.
inline constexpr std::uint64_t parallel_threshold = std::uint64_t(1) << 18;

// Adds n elements to an accumulator of exact sums (exact_accumulator, or exact_fields below):
// contiguous pieces on up to max_threads threads, their accumulators merged. Integer addition
// is exact, so any split gives the same sum.
template <class Accumulator, class It>
Accumulator accumulate_exactly(It first, std::uint64_t n, unsigned max_threads) {
  Accumulator total;
  unsigned threads = 1;
  if (n >= parallel_threshold) {
    static const unsigned hardware_threads = std::max(1u, std::thread::hardware_concurrency());
    threads = max_threads ? max_threads : hardware_threads;
  }
  threads = unsigned(std::min<std::uint64_t>(threads, (n + 4095) / 4096));
  const auto add_piece = [&](std::uint64_t from, std::uint64_t to, Accumulator& into) {
    using diff = typename std::iterator_traits<It>::difference_type;
    for (std::uint64_t i = from; i < to; ++i) into.add(first[static_cast<diff>(i)]);
  };
  if (threads <= 1) {
    add_piece(0, n, total);
    return total;
  }
  std::vector<Accumulator> pieces(threads);
  std::vector<std::thread> workers;
  std::vector<std::exception_ptr> errors(threads);
  const std::uint64_t per_thread = (n + threads - 1) / threads;
  for (unsigned w = 0; w < threads; ++w) {
    const std::uint64_t from = std::min(n, w * per_thread), to = std::min(n, from + per_thread);
    workers.emplace_back([&, w, from, to] {
      try {
        add_piece(from, to, pieces[w]);
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  for (auto& worker : workers) worker.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
  for (const auto& piece : pieces) total.merge(piece);
  return total;
}

template <class T, class It>
exact_accumulator<T> exact_accumulate(It first, std::uint64_t n, unsigned max_threads) {
  static_assert(converts_exactly<typename std::iterator_traits<It>::value_type, T>(),
                "tally::exact_plus<T>: the values must convert to T exactly (T itself; float, half or bf16 into "
                "double; half or bf16 into float); convert them with a transform first");
  return accumulate_exactly<exact_accumulator<T>>(first, n, max_threads);
}

template <class T, class It>
T exact_sum(It first, std::uint64_t n, T init, unsigned max_threads) {
  exact_accumulator<T> total = exact_accumulate<T>(first, n, max_threads);
  total.add(init);
  return total.value();
}

// The exact sums of every field of a tuple-like accumulator Acc (tally::fields of exact_plus
// operators only): an exact_accumulator per field.
template <class Acc, class Fields = std::make_index_sequence<field_count_v<Acc>>>
struct exact_fields;
template <class Acc, std::size_t... I>
struct exact_fields<Acc, std::index_sequence<I...>> {
  std::tuple<exact_accumulator<field_t<I, Acc>>...> sums;

  template <class V>
  void add(const V& element) {
    Acc value = static_cast<Acc>(element);
    (std::get<I>(sums).add(field<I>(value)), ...);
  }
  void merge(const exact_fields& other) { (std::get<I>(sums).merge(std::get<I>(other.sums)), ...); }
  Acc value(Acc init) {
    (std::get<I>(sums).add(field<I>(init)), ...);
    ((field<I>(init) = std::get<I>(sums).value()), ...);
    return init;
  }
};

template <class Op, class Acc, class It>
Acc exact_fields_sum(It first, std::uint64_t n, Acc init, unsigned max_threads) {
  if constexpr (!check_exact_fields<Op, Acc, typename std::iterator_traits<It>::value_type>()) {
    return init;  // not compiled further: the check has failed
  } else {
    return accumulate_exactly<exact_fields<Acc>>(first, n, max_threads).value(init);
  }
}

// tally::reduce's plan on the host: the same tiles, trees and fold as the device.
template <class Acc, class It, class Op>
Acc plan_reduce(It first, std::uint64_t n, Acc init, Op op, unsigned max_threads, int vector_width) {
  if (n == 0) return init;
  const reduction_plan plan = make_plan(n, vector_width, plan_max_tiles_for<Op>);
  std::vector<Acc> partials(plan.tiles);
  auto run_tiles = [&](std::uint64_t from, std::uint64_t to) {
    Op local_op = op;
    for (std::uint64_t tile = from; tile < to; ++tile) {
      if constexpr (is_commutative_v<Op>) {
        partials[tile] = reduce_tile<Acc>(first, plan, tile, local_op);
      } else {
        partials[tile] = ordered_reduce_tile<Acc>(first, plan, tile, local_op);
      }
    }
  };

  unsigned threads = 1;
  if (n >= parallel_threshold) {
    static const unsigned hardware_threads = std::max(1u, std::thread::hardware_concurrency());  // a system call
    threads = max_threads ? max_threads : hardware_threads;
  }
  threads = unsigned(std::min<std::uint64_t>(threads, plan.tiles));
  if (threads <= 1) {
    run_tiles(0, plan.tiles);
  } else {
    std::vector<std::thread> workers;
    std::vector<std::exception_ptr> errors(threads);
    const std::uint64_t per_thread = (plan.tiles + threads - 1) / threads;
    for (unsigned w = 0; w < threads; ++w) {
      const std::uint64_t from = w * per_thread, to = std::min(plan.tiles, from + per_thread);
      workers.emplace_back([&, w, from, to] {
        try {
          run_tiles(from, to);
        } catch (...) {
          errors[w] = std::current_exception();
        }
      });
    }
    for (auto& worker : workers) worker.join();
    for (auto& error : errors)
      if (error) std::rethrow_exception(error);
  }
  Acc total = partials[0];
  if (plan.tiles > 1) {
    if constexpr (is_commutative_v<Op>) {
      total = fold_partials(partials, op);
    } else {
      total = ordered_fold_partials(partials, op);
    }
  }
  return static_cast<Acc>(op(init, total));
}

template <class Acc, class It, class Op>
Acc reduce(It first, std::uint64_t n, Acc init, Op op, unsigned max_threads, int vector_width) {
  if constexpr (is_exact_plus_v<Op>) {
    using T = typename Op::accumulator_type::value_type;
    static_assert(std::is_same_v<Acc, T>, "tally::exact_plus<T>: init must be a T");
    (void)op;
    (void)vector_width;
    return exact_sum<T>(first, n, init, max_threads);
  } else if constexpr (declares_exact_fields<Op>::value) {
    (void)op;
    (void)vector_width;
    return exact_fields_sum<Op>(first, n, init, max_threads);
  } else {
    return plan_reduce(first, n, init, op, max_threads, vector_width);
  }
}

}  // namespace tally::detail::host
