#pragma once
// tally::segmented_reduce: one reduction per segment of a range, each with exactly the bits
// of tally::reduce over that segment alone (issue 36; docs/decisions/0022).
//
//   OutIt segmented_reduce(policy, first, offsets_first, offsets_last, out, init, op)
//       S + 1 offsets delimit S segments: segment s is [first + offsets[s], first +
//       offsets[s + 1]); out[s] = reduce(segment s, init, op); an empty segment gives init.
//       Returns out + S.
//   OutIt segmented_reduce(policy, first, begins_first, begins_last, ends_first, out, init, op)
//       begin and end offsets apart (CUB's form): segment s is [first + begins[s], first +
//       ends[s]); segments may overlap, leave gaps and come in any order.
//   OutIt segmented_reduce(policy, first, num_segments, segment_size, out, init, op)
//       segments of segment_size consecutive elements (the rows of a row-major matrix).
// reduce_by_key and reduce_by_key_into (runs of equal keys) are in tally/reduce_by_key.cuh.
//
// Under a device policy the input, the offsets and out must be device-accessible, and the
// call returns without waiting (like reduce_into): out is written on the policy's stream.
// Offsets that a device reads are not checked on the host: a segment whose bounds are
// negative or decrease gives init and reads nothing. The device backend takes accumulators of
// at most 64 bytes (docs/segmented.md).

#include "tally/detail/dispatch/segmented_dispatch.cuh"
#include "tally/detail/segment_bounds.cuh"
#include "tally/reduce.cuh"

#include <thrust/device_ptr.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <iterator>
#include <string>
#include <thread>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

namespace tally {
namespace detail {

template <class T, class = void>
struct is_iterator_like : std::false_type {};
template <class T>
struct is_iterator_like<T, std::void_t<typename std::iterator_traits<T>::iterator_category>> : std::true_type {};

// Runs segments [0, count) through `one(s)` on up to max_threads threads (0: one per hardware
// thread), contiguous runs of segments per thread. Each segment is reduced by one thread,
// with the host backend's single-thread path: its bits do not depend on the split.
template <class One>
void for_each_segment(std::uint64_t count, std::uint64_t total_items, unsigned max_threads, One one) {
  unsigned threads = 1;
  if (total_items >= host::parallel_threshold) {
    static const unsigned hardware_threads = std::max(1u, std::thread::hardware_concurrency());
    threads = max_threads ? max_threads : hardware_threads;
  }
  threads = unsigned(std::min<std::uint64_t>(threads, count));
  if (threads <= 1) {
    for (std::uint64_t s = 0; s < count; ++s) one(s);
    return;
  }
  std::vector<std::thread> workers;
  std::vector<std::exception_ptr> errors(threads);
  const std::uint64_t per_thread = (count + threads - 1) / threads;
  for (unsigned w = 0; w < threads; ++w) {
    const std::uint64_t from = w * per_thread, to = std::min(count, from + per_thread);
    workers.emplace_back([&, w, from, to] {
      try {
        for (std::uint64_t s = from; s < to; ++s) one(s);
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  for (auto& worker : workers) worker.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

template <class It, class OffsetIt, class OutIt, class T, class Op>
OutIt segmented_reduce_impl(const host_policy& policy, It first, OffsetIt offsets_first, OffsetIt offsets_last,
                            OutIt out, T init, Op op) {
  constexpr const char* algorithm = "segmented_reduce";
  check_operator<T, Op, iterator_value_t<It>>();
  const std::uint64_t offsets = checked_distance(offsets_first, offsets_last, algorithm);
  if (offsets == 0)
    throw_invalid_argument(algorithm, "the offsets are empty; S segments need S + 1 offsets (one offset: no segments)");
  const std::uint64_t segments = offsets - 1;
  // Offsets are read once, checked before anything is reduced.
  std::vector<std::uint64_t> begins(offsets);
  std::uint64_t previous = 0;
  for (std::uint64_t s = 0; s < offsets; ++s) {
    const auto offset = offsets_first[static_cast<std::ptrdiff_t>(s)];
    if constexpr (std::is_signed_v<std::remove_cv_t<decltype(offset)>>) {
      if (offset < 0)
        throw_invalid_argument(algorithm, "offset " + std::to_string(s) + " is negative; offsets index the input from 0");
    }
    begins[s] = static_cast<std::uint64_t>(offset);
    if (s > 0 && begins[s] < previous)
      throw_invalid_argument(algorithm, "offsets " + std::to_string(s - 1) + " and " + std::to_string(s) +
                                            " decrease; offsets must not decrease (segment s is [offsets[s], offsets[s + 1]))");
    previous = begins[s];
  }
  const std::uint64_t total = segments > 0 ? begins[segments] - begins[0] : 0;
  for_each_segment(segments, total, policy.thread_count(), [&](std::uint64_t s) {
    const auto segment_first = first + static_cast<std::ptrdiff_t>(begins[s]);
    out[static_cast<std::ptrdiff_t>(s)] =
        host::reduce(segment_first, begins[s + 1] - begins[s], init, op, 1u, plan_vector_width_v<It>);
  });
  return out + static_cast<std::ptrdiff_t>(segments);
}

// The fixed-size form's offsets: s -> s * size.
struct scaled_by {
  std::int64_t size;
  __host__ __device__ std::int64_t operator()(std::int64_t s) const { return s * size; }
};

// A device iterator as the kernels take it: the raw pointer of a contiguous one (checked to be
// device-accessible where the range is not empty), any other as it is.
template <class It>
auto device_view(It it, bool used, int device, const char* what, const char* algorithm = "segmented_reduce") {
  static_assert(std::is_pointer_v<It> || !is_host_only_iterator_v<It>,
                "tally::segmented_reduce, tally::reduce_by_key: under a device policy the inputs and outputs must "
                "be device iterators (copy host data to a device_vector first, or use tally::host)");
  if constexpr (is_contiguous_v<It>) {
    if (!used) return decltype(raw_pointer(it)){};
    const auto p = raw_pointer(it);
    check_device_accessible(p, properties(device), algorithm, what);
    return p;
  } else {
    (void)used;
    (void)device;
    (void)what;
    (void)algorithm;
    return it;
  }
}

// An input that a transform view will wrap, as the kernels can read it: under a device policy a
// contiguous range becomes a checked thrust::device_ptr (a raw pointer inside a
// thrust::transform_iterator would count as host memory); anything else stays as it is.
template <class Policy, class It>
auto readable_base(const Policy& policy, It first, bool used, const char* what, const char* algorithm) {
  using P = std::remove_cv_t<decltype(normalize_policy(policy))>;
  if constexpr (std::is_same_v<P, host_policy> || !is_contiguous_v<It>) {
    (void)used, (void)what, (void)algorithm;
    return first;
  } else {
    return thrust::device_pointer_cast(device_view(first, used, current_device(), what, algorithm));
  }
}

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
inline bool overlaps(const void* a, std::uint64_t a_bytes, const void* b, std::uint64_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

template <class OutIt, class It>
void check_output_apart(OutIt out, std::uint64_t segments, It in, std::uint64_t in_items, const char* what,
                        const char* algorithm = "segmented_reduce") {
  if constexpr (is_contiguous_v<OutIt> && is_contiguous_v<It>) {
    if (segments == 0 || in_items == 0) return;
    const auto* o = raw_pointer(out);
    const auto* i = raw_pointer(in);
    if (overlaps(o, segments * sizeof(*o), i, in_items * sizeof(*i)))
      throw_invalid_argument(algorithm, std::string("out overlaps ") + what +
                                                     ", which the reduction still reads while it writes; pass an "
                                                     "output range of its own");
  }
}

template <class It, class Bounds, class OutIt, class T, class Op, bool MayForceStrategy>
OutIt device_segmented(const basic_device_policy<MayForceStrategy>& policy, It first, Bounds make_bounds,
                       std::uint64_t segments, std::uint64_t longest, OutIt out, T init, Op op,
                       bool reads_input = true, const char* algorithm = "segmented_reduce") {
  check_operator<T, Op, iterator_value_t<It>>();
  static_assert(moves_as_bytes_v<T>,
                "tally::segmented_reduce: a device reduction moves init's type as bytes, so it must be trivially "
                "copyable, or copy-constructible and trivially destructible");
  if constexpr (operator_fits_v<T, Op, iterator_value_t<It>> && moves_as_bytes_v<T>) {
    if (segments == 0) return out;
    algorithm_scope scope(algorithm);
    if (segments >= (std::uint64_t(1) << 32))
      throw_invalid_argument(algorithm, "there are 2^32 segments or more; split the call into calls of fewer");
    const int device = current_device();
    const auto in = device_view(first, reads_input, device, "the input range", algorithm);
    const auto to = device_view(out, true, device, "out", algorithm);
    device_segmented_reduce(in, make_bounds(device), segments, longest, to, init, op, policy, device);
  }
  return out + static_cast<typename std::iterator_traits<OutIt>::difference_type>(segments);
}

}  // namespace detail

template <class Policy, class It, class OffsetIt, class OutIt, class T, class Op, detail::enable_if_policy_t<Policy> = 0,
          std::enable_if_t<detail::is_iterator_like<OffsetIt>::value, int> = 0>
OutIt segmented_reduce(const Policy& policy, It first, OffsetIt offsets_first, OffsetIt offsets_last, OutIt out, T init,
                       Op op) {
  const auto p = detail::normalize_policy(policy);
  if constexpr (std::is_same_v<std::remove_cv_t<decltype(p)>, host_policy>) {
    return detail::segmented_reduce_impl(p, first, offsets_first, offsets_last, out, init, op);
  } else {
    const std::uint64_t offsets = detail::checked_distance(offsets_first, offsets_last, "segmented_reduce");
    if (offsets == 0)
      detail::throw_invalid_argument("segmented_reduce",
                                     "the offsets are empty; S segments need S + 1 offsets (one offset: no segments)");
    detail::check_output_apart(out, offsets - 1, offsets_first, offsets, "the offsets");
    const auto bounds = [&](int device) {
      return detail::offset_bounds<decltype(detail::device_view(offsets_first, true, 0, ""))>{
          detail::device_view(offsets_first, true, device, "the offsets")};
    };
    return detail::device_segmented(p, first, bounds, offsets - 1, 0, out, init, op);
  }
}

// Begin and end offsets apart, as CUB's DeviceSegmentedReduce takes them: segment s is
// [first + begins[s], first + ends[s]). Returns out + S.
template <class Policy, class It, class BeginIt, class EndIt, class OutIt, class T, class Op,
          detail::enable_if_policy_t<Policy> = 0>
OutIt segmented_reduce(const Policy& policy, It first, BeginIt begins_first, BeginIt begins_last, EndIt ends_first,
                       OutIt out, T init, Op op) {
  const auto p = detail::normalize_policy(policy);
  const std::uint64_t segments = detail::checked_distance(begins_first, begins_last, "segmented_reduce");
  if constexpr (std::is_same_v<std::remove_cv_t<decltype(p)>, host_policy>) {
    detail::check_operator<T, Op, detail::iterator_value_t<It>>();
    std::uint64_t total = 0;
    for (std::uint64_t s = 0; s < segments; ++s) {
      const auto b = static_cast<std::int64_t>(begins_first[static_cast<std::ptrdiff_t>(s)]);
      const auto e = static_cast<std::int64_t>(ends_first[static_cast<std::ptrdiff_t>(s)]);
      if (b < 0 || e < b)
        detail::throw_invalid_argument("segmented_reduce", "segment " + std::to_string(s) +
                                                               " has a negative begin or ends before it begins; "
                                                               "each segment needs 0 <= begin <= end");
      total += std::uint64_t(e - b);
    }
    detail::for_each_segment(segments, total, p.thread_count(), [&](std::uint64_t s) {
      const auto b = static_cast<std::ptrdiff_t>(begins_first[static_cast<std::ptrdiff_t>(s)]);
      const auto e = static_cast<std::ptrdiff_t>(ends_first[static_cast<std::ptrdiff_t>(s)]);
      out[static_cast<std::ptrdiff_t>(s)] =
          detail::host::reduce(first + b, std::uint64_t(e - b), init, op, 1u, detail::plan_vector_width_v<It>);
    });
    return out + static_cast<std::ptrdiff_t>(segments);
  } else {
    detail::check_output_apart(out, segments, begins_first, segments, "the begin offsets");
    detail::check_output_apart(out, segments, ends_first, segments, "the end offsets");
    const auto bounds = [&](int device) {
      using B = decltype(detail::device_view(begins_first, true, 0, ""));
      using E = decltype(detail::device_view(ends_first, true, 0, ""));
      return detail::begin_end_bounds<B, E>{detail::device_view(begins_first, true, device, "the begin offsets"),
                                            detail::device_view(ends_first, true, device, "the end offsets")};
    };
    return detail::device_segmented(p, first, bounds, segments, 0, out, init, op);
  }
}

template <class Policy, class It, class Count, class OutIt, class T, class Op, detail::enable_if_policy_t<Policy> = 0,
          std::enable_if_t<std::is_integral_v<Count>, int> = 0>
OutIt segmented_reduce(const Policy& policy, It first, Count num_segments, Count segment_size, OutIt out, T init,
                       Op op) {
  if (num_segments < 0 || segment_size < 0)
    detail::throw_invalid_argument("segmented_reduce", "num_segments and segment_size must not be negative");
  const auto p = detail::normalize_policy(policy);
  if constexpr (std::is_same_v<std::remove_cv_t<decltype(p)>, host_policy>) {
    // S + 1 offsets 0, size, 2 * size, ..., computed as they are read.
    const auto offsets = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                         detail::scaled_by{std::int64_t(segment_size)});
    return detail::segmented_reduce_impl(p, first, offsets, offsets + (std::int64_t(num_segments) + 1), out, init, op);
  } else {
    const std::uint64_t segments = std::uint64_t(num_segments), size = std::uint64_t(segment_size);
    if (size != 0 && segments > std::uint64_t(INT64_MAX) / size)
      detail::throw_invalid_argument("segmented_reduce", "num_segments * segment_size overflows 64 bits");
    detail::check_output_apart(out, segments, first, segments * size, "the input range");
    const auto bounds = [size](int) { return detail::fixed_size_bounds{size}; };
    // A longest segment of 0 would mean "not known": an empty one is at most 1 long.
    return detail::device_segmented(p, first, bounds, segments, size == 0 ? 1 : size, out, init, op, size > 0);
  }
}

// transform_segmented_reduce: each element through unary_op first, as tally::transform_reduce;
// segment s has the bits of tally::transform_reduce over that segment alone.
template <class Policy, class It, class OffsetIt, class OutIt, class UnaryOp, class T, class BinaryOp,
          detail::enable_if_policy_t<Policy> = 0,
          std::enable_if_t<detail::is_iterator_like<OffsetIt>::value, int> = 0>
OutIt transform_segmented_reduce(const Policy& policy, It first, OffsetIt offsets_first, OffsetIt offsets_last,
                                 OutIt out, UnaryOp unary_op, T init, BinaryOp binary_op) {
  const bool any = offsets_first != offsets_last;
  const auto base = detail::readable_base(policy, first, any, "the input range", "transform_segmented_reduce");
  return tally::segmented_reduce(policy, thrust::make_transform_iterator(base, unary_op), offsets_first, offsets_last,
                                 out, init, binary_op);
}

// The fixed-size form of transform_segmented_reduce.
template <class Policy, class It, class Count, class OutIt, class UnaryOp, class T, class BinaryOp,
          detail::enable_if_policy_t<Policy> = 0, std::enable_if_t<std::is_integral_v<Count>, int> = 0>
OutIt transform_segmented_reduce(const Policy& policy, It first, Count num_segments, Count segment_size, OutIt out,
                                 UnaryOp unary_op, T init, BinaryOp binary_op) {
  const bool any = num_segments > 0 && segment_size > 0;
  const auto base = detail::readable_base(policy, first, any, "the input range", "transform_segmented_reduce");
  return tally::segmented_reduce(policy, thrust::make_transform_iterator(base, unary_op), num_segments, segment_size,
                                 out, init, binary_op);
}

}  // namespace tally
