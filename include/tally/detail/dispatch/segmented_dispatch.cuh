#pragma once
// Device dispatch of a segmented reduction: scratch for the lists and the split segments'
// chains, then the launches of kernels/segmented_kernels.cuh on the policy's stream.

#include "tally/detail/dispatch/device_dispatch.cuh"
#include "tally/detail/dispatch/exact_segmented_dispatch.cuh"
#include "tally/detail/dispatch/launch.cuh"
#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/kernels/segmented_kernels.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/scratch_layout.cuh"
#include "tally/detail/tuning.cuh"
#include "tally/operator_traits.cuh"

#include <algorithm>
#include <cstdint>

namespace tally::detail {

// A segmented reduction keeps each long segment's chains in shared memory (block_threads of
// them) while it folds them; wider accumulators would take too much of it.
inline constexpr std::size_t segmented_max_accumulator_bytes = 64;

inline std::size_t round_up_64(std::size_t bytes) { return (bytes + 63) / 64 * 64; }

// Where a segmented reduction finds its segment count and keeps its lists: S known on the host,
// or (reduce_by_key) an upper bound of S with the count in a device word, and room for the ids of
// segments longer than a warp's (at most S; fewer where the total size bounds them).
struct segment_count_source {
  std::uint64_t segments = 0;
  const unsigned long long* on_device = nullptr;
  std::uint64_t id_room = 0;
};

// The scratch of the commutative launches: the counts taken, the sizes, chain numbers, map and
// chains of the split segments, then room for the ids.
struct segmented_scratch_shape {
  bool may_be_long = false;  // some segment may be longer than a warp reduces: the lists and later launches
  std::uint64_t split_max = 0;
  std::size_t taken_bytes = 0, sizes_bytes = 0, starts_bytes = 0, map_bytes = 0, chain_bytes = 0, id_bytes = 0;
  std::size_t total() const { return taken_bytes + sizes_bytes + starts_bytes + map_bytes + chain_bytes + id_bytes; }
};

template <class Acc, int VW>
segmented_scratch_shape commutative_segmented_shape(const segment_count_source& count, std::uint64_t longest) {
  segmented_scratch_shape shape;
  const bool may_be_long = longest == 0 || longest > warp_segment_max<VW>;
  if (!may_be_long) return shape;
  shape.may_be_long = true;
  shape.split_max = segment_split_capacity<Acc>;
  if (shape.split_max > count.id_room) shape.split_max = count.id_room;
  shape.taken_bytes = 64;
  shape.sizes_bytes = round_up_64(std::size_t(shape.split_max) * sizeof(std::uint64_t));
  shape.starts_bytes = round_up_64(std::size_t(shape.split_max) * sizeof(std::uint64_t));
  shape.map_bytes = round_up_64(std::size_t(shape.split_max) * block_threads * sizeof(unsigned int));
  shape.chain_bytes = round_up_64(std::size_t(shape.split_max) * block_threads * sizeof(Acc));
  shape.id_bytes = round_up_64(std::size_t(count.id_room) * sizeof(unsigned int));
  return shape;
}

// The commutative operators' launches, in scratch the caller leased: `at` is where the shape's
// bytes begin in it.
template <class Acc, class It, class Bounds, class OutIt, class Op, class Policy>
void launch_commutative_segmented_in(const call_scratch& scratch, unsigned char* at,
                                     const segmented_scratch_shape& shape, It first, Bounds bounds,
                                     const segment_count_source& count, OutIt out, Acc init, Op op,
                                     const Policy& policy, int device) {
  using V = iterator_value_t<It>;
  constexpr int vw = plan_vector_width_v<It>;
  constexpr auto by_size = &segments_by_size_kernel<Acc, vw, It, V, Bounds, Op, OutIt>;
  constexpr auto long_ones = &long_segments_kernel<Acc, vw, It, V, Bounds, Op, OutIt>;
  constexpr auto split_ones = &split_segments_kernel<Acc, vw, Bounds, Op, OutIt>;
  constexpr auto listed = &listed_segments_kernel<Acc, vw, It, V, Bounds, Op, OutIt>;
  const bool may_be_long = shape.may_be_long;
  auto* control_bytes_of = reinterpret_cast<unsigned char*>(scratch.control);
  const auto carve = [&at](std::size_t bytes) {
    unsigned char* p = at;
    at += bytes;
    return p;
  };
  segment_lists lists;
  lists.taken = reinterpret_cast<std::uint64_t*>(carve(shape.taken_bytes));
  lists.split_sizes = reinterpret_cast<std::uint64_t*>(carve(shape.sizes_bytes));
  lists.chain_starts = reinterpret_cast<std::uint64_t*>(carve(shape.starts_bytes));
  lists.chain_segment = reinterpret_cast<unsigned int*>(carve(shape.map_bytes));
  Acc* chains = reinterpret_cast<Acc*>(carve(shape.chain_bytes));
  lists.ids = reinterpret_cast<unsigned int*>(carve(shape.id_bytes));
  lists.block_count = reinterpret_cast<unsigned long long*>(control_bytes_of + control_word::block_segments_byte);
  lists.long_count = reinterpret_cast<unsigned long long*>(control_bytes_of + control_word::long_segments_byte);
  lists.split_max = shape.split_max;
  lists.segments = count.segments;
  lists.id_room = count.id_room;
  lists.segments_on_device = count.on_device;

  // Segments per warp and pass: fewer than a warp's lanes where the segments are few for the
  // grid, so that every warp has some.
  const std::uint64_t segments = count.segments;
  const std::uint64_t resident = resident_grid<by_size>(policy, device);
  const std::uint64_t warps = resident * (block_threads / warp_threads);
  unsigned group = warp_threads;
  while (group > 1 && segments < warps * group * 2) group /= 2;
  const std::uint64_t warps_needed = (segments + group - 1) / group;
  const std::uint64_t blocks_needed = (warps_needed + block_threads / warp_threads - 1) / (block_threads / warp_threads);
  // More groups than a resident grid's warps: up to tuning::segments_by_size_slices resident
  // grids' worth of blocks, each slice of the grid striding over its share of the groups. A
  // forced grid size is the grid; and where only the device counts the segments (reduce_by_key's
  // runs), S is a bound that can exceed them by far, and slices sized by it would launch blocks
  // with nothing to do (measured slower for runs of 4096 keys and more), so one slice.
  const std::uint64_t slices =
      policy.forced_grid_size() != 0 || counted_on_device_v<Bounds>
          ? 1
          : std::min<std::uint64_t>(tuning::segments_by_size_slices, (blocks_needed + resident - 1) / resident);
  const std::uint64_t grid =
      std::max<std::uint64_t>(1, slices > 1 ? slices * resident : std::min(blocks_needed, resident));
  const std::uint64_t slice_segments =
      slices > 1 ? ((segments + group - 1) / group + slices - 1) / slices * group : segments;
  const cudaStream_t stream = policy.stream();
  launch_kernel<by_size>(unsigned(grid), block_threads, stream, device, first, bounds, init, op, out, lists, group,
                         slice_segments, unsigned(slices > 1 ? resident : grid));
  if (may_be_long) {
    // Block 0 numbers the chains; the others (at least one) reduce the listed short segments.
    const unsigned listed_grid = unsigned(std::max<std::uint64_t>(2, resident_grid<listed>(policy, device)));
    launch_kernel<listed>(listed_grid, block_threads, stream, device, first, bounds, init, op, out, lists);
    launch_kernel<long_ones>(unsigned(resident_grid<long_ones>(policy, device)), block_threads, stream, device, first,
                             bounds, init, op, out, lists, chains);
    // At least one block: the device may count no segment to split, and the launch is cheap.
    const std::uint64_t fold_grid = std::max<std::uint64_t>(1, std::min(shape.split_max, resident_grid<split_ones>(policy, device)));
    launch_kernel<split_ones>(unsigned(fold_grid), block_threads,
                              stream, device, bounds, init, op, out, lists, static_cast<const Acc*>(chains));
  }
}

// Segments of one size known on the host, in one launch of Kernel (kernels/segmented_kernels.cuh):
// `per_block` units (segments, or the chains route's chains) to a block, as many blocks as the
// units need up to a resident grid.
template <auto Kernel, class Policy, class... Args>
void launch_equal_size_segments(std::uint64_t units, std::uint64_t per_block, const Policy& policy, int device,
                                const Args&... args) {
  check_stream_of_device(policy.stream(), device);
  const std::uint64_t blocks = (units + per_block - 1) / per_block;
  const std::uint64_t resident = resident_grid<Kernel>(policy, device);
  launch_kernel<Kernel>(unsigned(blocks < resident ? blocks : resident), block_threads, policy.stream(), device,
                        args...);
}

// Which kernels of their own segments of one size take, where the host knows the size (bounds
// whose sizes are all equal): lanes each up to a warp's lanes' worth, a warp each up to a warp's
// segment, a block each for one tile beyond that, and for longer ones a block per chain of the
// plan then a block per segment (chains), while their chains fit segmented_chain_bytes;
// none beyond that.
enum class equal_size_route { none, lanes, warp, one_tile, chains };

// The chains of each segment of `size` elements (chains_of its plan).
template <int VW, class Op>
std::uint64_t equal_size_chains(std::uint64_t size) {
  return chains_of(make_plan(size, VW, plan_max_tiles_for<Op>));
}

template <class Bounds, int VW, class Acc, class Op>
equal_size_route route_of_equal_sizes(std::uint64_t longest, std::uint64_t segments) {
  if constexpr (has_equal_sizes_v<Bounds>) {
    if (longest > 0 && longest <= std::uint64_t(warp_threads) * VW) return equal_size_route::lanes;
    if (longest > std::uint64_t(warp_threads) * VW && longest <= warp_segment_max<VW>) return equal_size_route::warp;
    if (longest > warp_segment_max<VW> && longest <= block_segment_max<VW>) return equal_size_route::one_tile;
    if (longest > block_segment_max<VW> &&
        segments <= segmented_chain_bytes / sizeof(Acc) / equal_size_chains<VW, Op>(longest))
      return equal_size_route::chains;
  } else {
    (void)longest;
    (void)segments;
  }
  return equal_size_route::none;
}

// Few segments counted on the host (1 to few_segments_max<Acc>), under a commutative operator:
// every chain of every segment, a run of them to a block, then a block per segment folding its
// chains, in the scratch of one lease (room for block_threads chains a segment, the most a
// segment has: the host does not know the sizes).
template <class Acc, class It, class Bounds, class OutIt, class Op, class Policy>
void launch_few_segments(It first, Bounds bounds, std::uint64_t segments, OutIt out, Acc init, Op op,
                         const Policy& policy, int device) {
  using V = iterator_value_t<It>;
  constexpr int vw = plan_vector_width_v<It>;
  constexpr auto chains_kernel = &few_segments_chains_kernel<Acc, vw, It, V, Bounds, Op>;
  constexpr auto fold_kernel = &few_segments_fold_kernel<Acc, vw, Bounds, Op, OutIt>;
  check_stream_of_device(policy.stream(), device);
  scratch_lease lease(device, policy.stream(), std::size_t(segments * block_threads * sizeof(Acc)), false);
  Acc* chains = static_cast<Acc*>(lease.scratch().partials);
  launch_kernel<chains_kernel>(unsigned(resident_grid<chains_kernel>(policy, device)), block_threads, policy.stream(),
                               device, first, bounds, op, segments, chains);
  const std::uint64_t resident = resident_grid<fold_kernel>(policy, device);
  launch_kernel<fold_kernel>(unsigned(segments < resident ? segments : resident), block_threads, policy.stream(), device,
                             bounds, init, op, out, segments, static_cast<const Acc*>(chains));
  lease.launched();
}

// The operators that are not commutative: a block per segment in the ordered plan.
template <class Acc, class It, class Bounds, class OutIt, class Op, class Policy>
void launch_ordered_segmented(It first, Bounds bounds, const segment_count_source& count, OutIt out, Acc init, Op op,
                              const Policy& policy, int device) {
  using V = iterator_value_t<It>;
  constexpr int vw = plan_vector_width_v<It>;
  constexpr auto ordered = &ordered_segments_kernel<Acc, vw, It, V, Bounds, Op, OutIt>;
  check_stream_of_device(policy.stream(), device);
  const std::uint64_t resident = resident_grid<ordered>(policy, device);
  launch_kernel<ordered>(unsigned(count.segments < resident ? count.segments : resident), block_threads,
                         policy.stream(), device, first, bounds, init, op, out, count.segments, count.on_device);
}

// Reduces `segments` segments of the input at `first` (a device-readable iterator) into
// out[0, segments). longest: an upper bound of the segments' sizes where the host knows one
// (the fixed-size form), else 0: then every launch is made, and the device decides. An operator
// that is not commutative takes a block per segment in the ordered plan; an exact sum
// (tally::exact_plus) its own kernels (exact_segmented_dispatch.cuh).
template <class Acc, class It, class Bounds, class OutIt, class Op, class Policy>
void device_segmented_reduce(It first, Bounds bounds, std::uint64_t segments, std::uint64_t longest, OutIt out,
                             Acc init, Op op, const Policy& policy, int device) {
  static_assert(sizeof(Acc) <= segmented_max_accumulator_bytes,
                "tally::segmented_reduce: the device backend takes accumulators (init's type) of at most 64 bytes");
  const segment_count_source count{segments, nullptr, segments};
  if constexpr (is_exact_plus_v<Op>) {
    static_assert(std::is_same_v<Op, exact_plus<Acc>>, "tally::exact_plus<T>: init must be a T");
    device_exact_segmented(first, bounds, segments, longest, out, init, policy, device);
  } else if constexpr (declares_exact_fields<Op>::value) {
    static_assert(std::is_pointer_v<OutIt>,
                  "tally::fields of tally::exact_plus per segment: out must be contiguous (a pointer, "
                  "thrust::device_ptr or a device_vector iterator) of init's type");
    if constexpr (check_exact_fields<Op, Acc, iterator_value_t<It>>() && std::is_pointer_v<OutIt>) {
      static_assert(std::is_same_v<std::remove_cv_t<std::remove_pointer_t<OutIt>>, Acc>,
                    "tally::fields of tally::exact_plus per segment: out's elements must be init's type");
      device_exact_fields_segmented(first, bounds, segments, longest, out, init, policy, device,
                                    std::make_index_sequence<field_count_v<Acc>>{});
    }
  } else if constexpr (is_commutative_v<Op>) {
    // Only bounds of equal sizes compile these kernels: the offsets forms' call sites do not.
    if constexpr (has_equal_sizes_v<Bounds>) {
      using V = iterator_value_t<It>;
      constexpr int vw = plan_vector_width_v<It>;
      constexpr std::uint64_t warps_per_block = block_threads / warp_threads, pass = std::uint64_t(warp_threads) * vw;
      switch (route_of_equal_sizes<Bounds, vw, Acc, Op>(longest, segments)) {
        case equal_size_route::lanes: {
          // lanes_covering the size's chunks; segment_batch passes of a warp's groups.
          const unsigned lanes = tally::warp::detail::lanes_covering(unsigned((longest + vw - 1) / vw));
          launch_equal_size_segments<&lane_segments_kernel<Acc, vw, It, V, Bounds, Op, OutIt>>(
              segments, std::uint64_t(block_threads / lanes) * segment_batch, policy, device, first, bounds, init, op,
              out, segments, lanes);
          return;
        }
        case equal_size_route::warp:  // the fewest passes (2, 4 or 8) that cover the size
          if (longest <= 2 * pass) {
            launch_equal_size_segments<&warp_segments_kernel<2, Acc, vw, It, V, Bounds, Op, OutIt>>(
                segments, warps_per_block, policy, device, first, bounds, init, op, out, segments);
          } else if (longest <= 4 * pass) {
            launch_equal_size_segments<&warp_segments_kernel<4, Acc, vw, It, V, Bounds, Op, OutIt>>(
                segments, warps_per_block, policy, device, first, bounds, init, op, out, segments);
          } else {
            launch_equal_size_segments<&warp_segments_kernel<8, Acc, vw, It, V, Bounds, Op, OutIt>>(
                segments, warps_per_block, policy, device, first, bounds, init, op, out, segments);
          }
          return;
        case equal_size_route::one_tile:
          launch_equal_size_segments<&one_tile_segments_kernel<Acc, vw, It, V, Bounds, Op, OutIt>>(
              segments, 1, policy, device, first, bounds, init, op, out, segments);
          return;
        case equal_size_route::chains: {
          // Two launches in the scratch of one lease: the chains, then their folds.
          const std::uint64_t chains = equal_size_chains<vw, Op>(longest);
          scratch_lease lease(device, policy.stream(), std::size_t(segments * chains * sizeof(Acc)), false);
          Acc* chain_values = static_cast<Acc*>(lease.scratch().partials);
          launch_equal_size_segments<&equal_size_chains_kernel<Acc, vw, It, V, Bounds, Op>>(
              segments * chains, 1, policy, device, first, bounds, op, segments, unsigned(chains), chain_values);
          launch_equal_size_segments<&equal_size_fold_kernel<Acc, vw, Bounds, Op, OutIt>>(
              segments, 1, policy, device, bounds, init, op, out, segments, unsigned(chains),
              static_cast<const Acc*>(chain_values));
          lease.launched();
          return;
        }
        case equal_size_route::none:
          break;
      }
    }
    if (segments <= few_segments_max<Acc>) {
      launch_few_segments(first, bounds, segments, out, init, op, policy, device);
      return;
    }
    const segmented_scratch_shape shape = commutative_segmented_shape<Acc, plan_vector_width_v<It>>(count, longest);
    scratch_lease lease(device, policy.stream(), shape.total(), false);
    launch_commutative_segmented_in(lease.scratch(), static_cast<unsigned char*>(lease.scratch().partials), shape,
                                    first, bounds, count, out, init, op, policy, device);
    lease.launched();
  } else {
    launch_ordered_segmented(first, bounds, count, out, init, op, policy, device);
  }
}

}  // namespace tally::detail
