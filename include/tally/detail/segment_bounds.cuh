#pragma once
// Where the segments of a segmented reduction lie, read on the device: segment s is
// [begin, end) of the input. Offsets are read as 64-bit signed values. A segment whose
// bounds are negative or decrease is empty (its result is init): offsets in device memory are
// not checked on the host, and such a segment then reads nothing (docs/segmented.md).

#include "tally/detail/plan.cuh"  // TALLY_HOST_DEVICE

#include <cstdint>
#include <iterator>

namespace tally::detail {

struct segment_extent {
  std::uint64_t begin = 0;
  std::uint64_t size = 0;
};

TALLY_HOST_DEVICE inline segment_extent extent_of(std::int64_t begin, std::int64_t end) {
  if (begin < 0 || end < begin) return {0, 0};
  return {std::uint64_t(begin), std::uint64_t(end - begin)};
}

// S + 1 offsets: segment s is [offsets[s], offsets[s + 1]).
template <class OffsetIt>
struct offset_bounds {
  OffsetIt offsets;
  TALLY_HOST_DEVICE segment_extent operator()(std::uint64_t s) const {
    using diff = typename std::iterator_traits<OffsetIt>::difference_type;
    return extent_of(static_cast<std::int64_t>(offsets[static_cast<diff>(s)]),
                     static_cast<std::int64_t>(offsets[static_cast<diff>(s + 1)]));
  }
};

// Separate begin and end offsets, as CUB's DeviceSegmentedReduce takes them.
template <class BeginIt, class EndIt>
struct begin_end_bounds {
  BeginIt begins;
  EndIt ends;
  TALLY_HOST_DEVICE segment_extent operator()(std::uint64_t s) const {
    return extent_of(static_cast<std::int64_t>(begins[static_cast<typename std::iterator_traits<BeginIt>::difference_type>(s)]),
                     static_cast<std::int64_t>(ends[static_cast<typename std::iterator_traits<EndIt>::difference_type>(s)]));
  }
};

// Segments of `size` consecutive elements (the rows of a row-major matrix).
struct fixed_size_bounds {
  std::uint64_t size;
  TALLY_HOST_DEVICE segment_extent operator()(std::uint64_t s) const { return {s * size, size}; }
};

}  // namespace tally::detail
