#pragma once
// Device dispatch of a segmented reduction: scratch for the lists and the split segments'
// chains, then the three launches of kernels/segmented_kernels.cuh on the policy's stream.

#include "tally/detail/dispatch/device_dispatch.cuh"
#include "tally/detail/dispatch/launch.cuh"
#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/kernels/segmented_kernels.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/scratch_layout.cuh"
#include "tally/operator_traits.cuh"

#include <cstdint>

namespace tally::detail {

// A segmented reduction keeps each long segment's chains in shared memory (block_threads of
// them) while it folds them; wider accumulators would take too much of it.
inline constexpr std::size_t segmented_max_accumulator_bytes = 64;

// Reduces `segments` segments of the input at `first` (a device-readable iterator) into
// out[0, segments). longest: an upper bound of the segments' sizes where the host knows one
// (the fixed-size form), else 0: then every launch is made, and the device decides.
template <class Acc, class It, class Bounds, class OutIt, class Op, class Policy>
void device_segmented_reduce(It first, Bounds bounds, std::uint64_t segments, std::uint64_t longest, OutIt out,
                             Acc init, Op op, const Policy& policy, int device) {
  static_assert(is_commutative_v<Op>,
                "tally::segmented_reduce: the device backend takes commutative operators for now (an operator "
                "that keeps left-to-right order is issue 36's next step); use tally::host for this operator");
  static_assert(sizeof(Acc) <= segmented_max_accumulator_bytes,
                "tally::segmented_reduce: the device backend takes accumulators (init's type) of at most 64 bytes");
  using V = iterator_value_t<It>;
  constexpr int vw = plan_vector_width_v<It>;
  constexpr auto by_size = &segments_by_size_kernel<Acc, vw, It, V, Bounds, Op, OutIt>;
  constexpr auto long_ones = &long_segments_kernel<Acc, vw, It, V, Bounds, Op, OutIt>;
  constexpr auto split_ones = &split_segments_kernel<Acc, vw, Bounds, Op, OutIt>;
  const bool may_be_long = longest == 0 || longest > warp_segment_max<vw>;
  // Scratch: the split segments' chains, then room for every segment's id.
  const std::size_t chain_bytes = may_be_long ? std::size_t(segment_split_max) * block_threads * sizeof(Acc) : 0;
  const std::size_t id_bytes = may_be_long ? std::size_t(segments) * sizeof(unsigned int) : 0;
  scratch_lease lease(device, policy.stream(), chain_bytes + id_bytes, false);
  const call_scratch& scratch = lease.scratch();
  auto* control_bytes_of = reinterpret_cast<unsigned char*>(scratch.control);
  segment_lists lists;
  lists.ids = reinterpret_cast<unsigned int*>(static_cast<unsigned char*>(scratch.partials) + chain_bytes);
  lists.block_count = reinterpret_cast<unsigned long long*>(control_bytes_of + control_word::block_segments_byte);
  lists.long_count = reinterpret_cast<unsigned long long*>(control_bytes_of + control_word::long_segments_byte);
  lists.epoch = scratch.epoch;
  lists.segments = segments;
  Acc* chains = static_cast<Acc*>(scratch.partials);

  const std::uint64_t warps_needed = (segments + warp_threads - 1) / warp_threads;
  const std::uint64_t blocks_needed = (warps_needed + block_threads / warp_threads - 1) / (block_threads / warp_threads);
  const std::uint64_t resident = resident_grid<by_size>(policy, device);
  launch_kernel<by_size>(unsigned(blocks_needed < resident ? blocks_needed : resident), block_threads,
                         policy.stream(), device, first, bounds, init, op, out, lists);
  if (may_be_long) {
    launch_kernel<long_ones>(unsigned(resident_grid<long_ones>(policy, device)), block_threads, policy.stream(), device,
                             first, bounds, init, op, out, lists, chains);
    const std::uint64_t split_grid = segments < segment_split_max ? segments : segment_split_max;
    launch_kernel<split_ones>(unsigned(split_grid), block_threads, policy.stream(), device, bounds, init, op, out,
                              lists, static_cast<const Acc*>(chains));
  }
  lease.launched();
}

}  // namespace tally::detail
