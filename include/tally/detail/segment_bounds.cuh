#pragma once
// Where the segments of a segmented reduction lie, read on the device: segment s is
// [begin, end) of the input. Offsets are read as 64-bit signed values. A segment whose
// bounds are negative or decrease is empty (its result is init): offsets in device memory are
// not checked on the host, and such a segment then reads nothing (docs/segmented.md).

#include "tally/detail/plan.cuh"  // TALLY_HOST_DEVICE

#include <cstdint>
#include <iterator>
#include <type_traits>
#include <utility>

namespace tally::detail {

struct segment_extent {
  std::uint64_t begin = 0;
  std::uint64_t size = 0;
};

TALLY_HOST_DEVICE inline segment_extent extent_of(std::int64_t begin, std::int64_t end) {
  if (begin < 0 || end < begin) return {0, 0};
  return {std::uint64_t(begin), std::uint64_t(end - begin)};
}

// An offset as its iterator gives it (an integer as loaded, not yet widened: see fetched_bounds),
// or as a 64-bit value where the iterator's value type is not an integer.
template <class It>
using offset_word_t = std::conditional_t<std::is_integral_v<typename std::iterator_traits<It>::value_type>,
                                         typename std::iterator_traits<It>::value_type, std::int64_t>;

template <class It>
TALLY_HOST_DEVICE offset_word_t<It> offset_word_at(const It& it, std::uint64_t i) {
  return static_cast<offset_word_t<It>>(it[static_cast<typename std::iterator_traits<It>::difference_type>(i)]);
}

// S + 1 offsets: segment s is [offsets[s], offsets[s + 1]).
template <class OffsetIt>
struct offset_bounds {
  OffsetIt offsets;
  struct fetched {
    offset_word_t<OffsetIt> begin, end;
  };
  TALLY_HOST_DEVICE fetched fetch(std::uint64_t s) const {
    return {offset_word_at(offsets, s), offset_word_at(offsets, s + 1)};
  }
  TALLY_HOST_DEVICE static segment_extent extent(const fetched& f) {
    return extent_of(static_cast<std::int64_t>(f.begin), static_cast<std::int64_t>(f.end));
  }
  TALLY_HOST_DEVICE segment_extent operator()(std::uint64_t s) const { return extent(fetch(s)); }
};

// Separate begin and end offsets, as CUB's DeviceSegmentedReduce takes them.
template <class BeginIt, class EndIt>
struct begin_end_bounds {
  BeginIt begins;
  EndIt ends;
  struct fetched {
    offset_word_t<BeginIt> begin;
    offset_word_t<EndIt> end;
  };
  TALLY_HOST_DEVICE fetched fetch(std::uint64_t s) const {
    return {offset_word_at(begins, s), offset_word_at(ends, s)};
  }
  TALLY_HOST_DEVICE static segment_extent extent(const fetched& f) {
    return extent_of(static_cast<std::int64_t>(f.begin), static_cast<std::int64_t>(f.end));
  }
  TALLY_HOST_DEVICE segment_extent operator()(std::uint64_t s) const { return extent(fetch(s)); }
};

// Segments of `size` consecutive elements (the rows of a row-major matrix).
struct fixed_size_bounds {
  static constexpr bool equal_sizes = true;  // every segment has the same size
  std::uint64_t size;
  TALLY_HOST_DEVICE segment_extent operator()(std::uint64_t s) const { return {s * size, size}; }
};

// The runs of equal keys of reduce_by_key, found on the device: run r is [starts[r],
// starts[r + 1]) of the values. Thrust gives a run the reduction of its values from its first
// one, so the run's first value is its init and the segment is the rest of it (init_of).
// starts holds runs + 1 increasing entries, written by tally's own kernels.
template <class ValuesIt, class Acc>
struct key_run_bounds {
  // Only the device knows how many runs there are (segment_lists::segments_on_device).
  static constexpr bool counted_on_device = true;
  const std::uint32_t* starts;
  ValuesIt values;
  struct fetched {
    std::uint32_t begin, end;
  };
  TALLY_HOST_DEVICE fetched fetch(std::uint64_t r) const { return {starts[r], starts[r + 1]}; }
  TALLY_HOST_DEVICE static segment_extent extent(const fetched& f) {
    const std::uint64_t b = f.begin, e = f.end;
    return e > b ? segment_extent{b + 1, e - b - 1} : segment_extent{0, 0};
  }
  TALLY_HOST_DEVICE segment_extent operator()(std::uint64_t r) const { return extent(fetch(r)); }
  TALLY_HOST_DEVICE Acc init_of(std::uint64_t r) const {
    using diff = typename std::iterator_traits<ValuesIt>::difference_type;
    return static_cast<Acc>(values[static_cast<diff>(starts[r])]);
  }
};

// A segment's bounds in two steps: fetch(s) issues the reads of segment s's bounds and keeps the
// words as read; extent(words) is the segment. A loop that fetches the next segment's bounds
// before it reduces this one's has both reads in flight at once, where widening or comparing an
// offset as soon as it is read would wait for it (segments_by_size_kernel). Bounds without a
// `fetched` type (fixed_size_bounds, which reads nothing) are fetched whole.
template <class Bounds, class = void>
struct fetched_bounds {
  using words = segment_extent;
  TALLY_HOST_DEVICE static words fetch(const Bounds& bounds, std::uint64_t s) { return bounds(s); }
  TALLY_HOST_DEVICE static segment_extent extent(const words& w) { return w; }
};
template <class Bounds>
struct fetched_bounds<Bounds, std::void_t<typename Bounds::fetched>> {
  using words = typename Bounds::fetched;
  TALLY_HOST_DEVICE static words fetch(const Bounds& bounds, std::uint64_t s) { return bounds.fetch(s); }
  TALLY_HOST_DEVICE static segment_extent extent(const words& w) { return Bounds::extent(w); }
};

// Whether the segment count is a word the device wrote (key_run_bounds) rather than the host's S.
template <class Bounds, class = void>
struct counted_on_device : std::false_type {};
template <class Bounds>
struct counted_on_device<Bounds, std::enable_if_t<Bounds::counted_on_device>> : std::true_type {};
template <class Bounds>
inline constexpr bool counted_on_device_v = counted_on_device<Bounds>::value;

// Whether the bounds give every segment the same size (fixed_size_bounds, the matrix's rows):
// the kernels then leave out the paths for segments of sizes that differ.
template <class Bounds, class = void>
struct has_equal_sizes : std::false_type {};
template <class Bounds>
struct has_equal_sizes<Bounds, std::enable_if_t<Bounds::equal_sizes>> : std::true_type {};
template <class Bounds>
inline constexpr bool has_equal_sizes_v = has_equal_sizes<Bounds>::value;

// Segment s's init: the call's init, unless the bounds give each segment its own (init_of).
template <class Bounds, class = void>
struct gives_own_init : std::false_type {};
template <class Bounds>
struct gives_own_init<Bounds, std::void_t<decltype(std::declval<const Bounds&>().init_of(std::uint64_t(0)))>>
    : std::true_type {};

template <class Bounds, class Acc>
TALLY_HOST_DEVICE Acc init_for(const Bounds& bounds, std::uint64_t s, const Acc& init) {
  if constexpr (gives_own_init<Bounds>::value) {
    return bounds.init_of(s);
  } else {
    (void)bounds;
    (void)s;
    return init;
  }
}

}  // namespace tally::detail
