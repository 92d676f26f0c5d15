#pragma once
// Dispatch of exact sums per segment (kernels/exact_segment_kernels.cuh): the list of long
// segments and the split segments' slots in the call's scratch, then one launch, or two where a
// segment may be longer than a warp sums.

#include "tally/detail/dispatch/exact_dispatch.cuh"
#include "tally/detail/exact_fields.cuh"
#include "tally/detail/dispatch/launch.cuh"
#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/kernels/exact_segment_kernels.cuh"
#include "tally/detail/scratch_layout.cuh"

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <utility>

#include <thrust/iterator/transform_iterator.h>

namespace tally::detail {

// The scratch of an exact segmented reduction: room for the ids of the long segments (id_room,
// at most all), then the split segments' slots.
struct exact_segmented_shape {
  bool may_be_long = false;
  std::uint64_t id_room = 0;
  std::size_t id_bytes = 0, slot_bytes = 0;
  std::size_t total() const { return id_bytes + slot_bytes; }
};

// longest: an upper bound of the segments' sizes where the host knows one, else 0. id_room: how
// many segments may be longer than exact_warp_segment_max, at most.
template <class T>
exact_segmented_shape exact_segmented_shape_for(std::uint64_t id_room, std::uint64_t longest) {
  exact_segmented_shape shape;
  shape.may_be_long = longest == 0 || longest > exact_warp_segment_max;
  if (!shape.may_be_long || id_room == 0) return shape;
  const std::uint64_t slots = id_room < exact_split_max ? id_room : exact_split_max;
  shape.id_room = id_room;
  shape.id_bytes = (std::size_t(id_room) * sizeof(unsigned int) + 63) / 64 * 64;
  shape.slot_bytes = std::size_t(slots) * exact_slot_words<T> * sizeof(unsigned long long);
  return shape;
}

// Launches the exact sums of count.segments segments (or of the count the device holds, at most
// that many) into out, in scratch the caller leased: `at` is where the shape's bytes begin in it.
template <class T, class It, class Bounds, class OutIt, class Policy>
void launch_exact_segmented_in(const call_scratch& scratch, unsigned char* at, const exact_segmented_shape& shape,
                               It first, Bounds bounds, std::uint64_t segments,
                               const unsigned long long* segments_on_device, OutIt out, T init, const Policy& policy,
                               int device) {
  constexpr unsigned threads = exact_segment_threads<T>;
  constexpr auto by_size = &exact_segments_kernel<T, It, Bounds, OutIt>;
  constexpr auto long_ones = &exact_long_segments_kernel<T, It, Bounds, OutIt>;
  const cudaStream_t stream = policy.stream();
  check_stream_of_device(stream, device);
  auto* control_bytes_of = reinterpret_cast<unsigned char*>(scratch.control);
  exact_segment_lists lists;
  lists.ids = reinterpret_cast<unsigned int*>(at);
  lists.slots = reinterpret_cast<unsigned long long*>(at + shape.id_bytes);
  lists.count = reinterpret_cast<unsigned long long*>(control_bytes_of + control_word::long_segments_byte);
  lists.tickets = scratch.control + control_word::exact_blocks_done;
  lists.id_room = shape.id_room;
  lists.segments = segments;
  lists.segments_on_device = segments_on_device;
  // A warp takes `group` segments at a time: fewer than 32 where the segments are few for the grid.
  const std::uint64_t by_size_resident = exact_resident_grid<by_size, threads>(device);
  lists.group = exact_segment_group_for(segments, by_size_resident * (threads / 32));
  const std::uint64_t warps_wanted = (segments + lists.group - 1) / lists.group;
  const std::uint64_t blocks_wanted = (warps_wanted + threads / 32 - 1) / (threads / 32);
  const std::uint64_t grid = blocks_wanted < by_size_resident ? blocks_wanted : by_size_resident;
  launch_kernel<by_size>(unsigned(grid == 0 ? 1 : grid), threads, stream, device, first, bounds, init, out, lists);
  if (shape.may_be_long && shape.id_room != 0)
    launch_kernel<long_ones>(unsigned(exact_resident_grid<long_ones, threads>(device)), threads,
                             stream, device, first, bounds, init, out, lists);
}

// The exact sums of `segments` segments of the input at `first` (a device-readable iterator)
// into out[0, segments); longest as above.
template <class T, class It, class Bounds, class OutIt, class Policy>
void device_exact_segmented(It first, Bounds bounds, std::uint64_t segments, std::uint64_t longest, OutIt out, T init,
                            const Policy& policy, int device) {
  static_assert(converts_exactly<iterator_value_t<It>, T>(),
                "tally::exact_plus<T>: the values must convert to T exactly (T itself; float, half or bf16 into "
                "double; half or bf16 into float)");
  const exact_segmented_shape shape = exact_segmented_shape_for<T>(segments, longest);
  scratch_lease lease(device, policy.stream(), shape.total(), false);
  launch_exact_segmented_in(lease.scratch(), static_cast<unsigned char*>(lease.scratch().partials), shape, first,
                            bounds, segments, nullptr, out, init, policy, device);
  lease.launched();
}

// Writes field I of out[s] and leaves its other bytes alone: the output of one field's exact sums.
template <std::size_t I, class Acc>
struct field_output {
  using difference_type = std::ptrdiff_t;
  using value_type = field_t<I, Acc>;
  using pointer = value_type*;
  using reference = value_type&;
  using iterator_category = std::random_access_iterator_tag;
  Acc* out;
  __host__ __device__ value_type& operator[](difference_type s) const { return field<I>(out[s]); }
};

// Exact sums of fields (tally::fields of exact_plus operators only) per segment: one exact
// segmented reduction a field, over each element's field I converted as init's field I, into
// field I of out[s].
template <class Acc, class It, class Bounds, class Policy, std::size_t... I>
void device_exact_fields_segmented(It first, Bounds bounds, std::uint64_t segments, std::uint64_t longest, Acc* out,
                                   Acc init, const Policy& policy, int device, std::index_sequence<I...>) {
  (device_exact_segmented(thrust::make_transform_iterator(first, exact_field_of<I, Acc>{}), bounds, segments, longest,
                          field_output<I, Acc>{out}, field<I>(init), policy, device),
   ...);
}

// The same for reduce_by_key's runs (kernels/key_run_kernels.cuh found them: `starts`, `runs`),
// in scratch the caller leased: one pass a field, each run's first value's field its init.
template <class Acc, class ValuesIt, class Policy, std::size_t... I>
void launch_exact_fields_by_key_in(const call_scratch& scratch, unsigned char* at, const exact_segmented_shape& shape,
                                   ValuesIt values, const std::uint32_t* starts, std::uint64_t n,
                                   const unsigned long long* runs, Acc* out, const Policy& policy, int device,
                                   std::index_sequence<I...>) {
  const auto one_field = [&](auto index) {
    constexpr std::size_t field_index = decltype(index)::value;
    using F = field_t<field_index, Acc>;
    const auto field_values = thrust::make_transform_iterator(values, exact_field_of<field_index, Acc>{});
    const key_run_bounds<decltype(field_values), F> bounds{starts, field_values};
    launch_exact_segmented_in(scratch, at, shape, field_values, bounds, n, runs, field_output<field_index, Acc>{out},
                              F(0), policy, device);
  };
  (one_field(std::integral_constant<std::size_t, I>{}), ...);
}

}  // namespace tally::detail
