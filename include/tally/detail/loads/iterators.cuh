#pragma once
// What dispatch needs to know about an iterator: its system (host or device, as Thrust
// decides it) and, for contiguous ones, the raw pointer underneath.

#include <thrust/iterator/iterator_traits.h>
#include <thrust/memory.h>
#include <thrust/type_traits/is_contiguous_iterator.h>

#include <iterator>
#include <type_traits>

namespace tally::detail {

template <class It>
using iterator_value_t = typename std::iterator_traits<It>::value_type;

template <class It>
inline constexpr bool is_device_iterator_v =
    std::is_convertible_v<typename thrust::iterator_system<It>::type, thrust::device_system_tag>;

// Iterators of one system only: a std::vector's on the host, a device_vector's on the device.
// Fancy iterators over nothing (counting, constant) belong to any system.
template <class It>
inline constexpr bool is_host_only_iterator_v =
    std::is_convertible_v<typename thrust::iterator_system<It>::type, thrust::host_system_tag> && !is_device_iterator_v<It>;
template <class It>
inline constexpr bool is_device_only_iterator_v =
    is_device_iterator_v<It> &&
    !std::is_convertible_v<typename thrust::iterator_system<It>::type, thrust::host_system_tag>;

template <class It>
inline constexpr bool is_contiguous_v = thrust::is_contiguous_iterator_v<It>;

// The raw pointer behind a contiguous iterator (device_ptr, device_vector and std::vector
// iterators, raw pointers). Call only on a dereferenceable iterator.
template <class It>
auto raw_pointer(It it) {
  if constexpr (std::is_pointer_v<It>) {
    return it;
  } else {
    return thrust::raw_pointer_cast(&*it);
  }
}

}  // namespace tally::detail
