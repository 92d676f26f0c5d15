// Must not compile: trips the static_assert in tally::detail::device_reduce
// (include/tally/detail/dispatch/device_dispatch.cuh):
//   "tally::exact_plus: the device backend of exact sums is not built yet (issue 37); pass tally::host"
// An exact sum under a device policy, before its device backend exists: refused at compile time
// rather than summed inexactly.
#include <tally/exact.cuh>

#include <cstddef>

float exact_sum(const float* values, std::size_t n) {
  return tally::reduce(tally::device, values, values + n, 0.0f, tally::exact_plus<float>{});
}
