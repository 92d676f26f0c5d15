// Must not compile: trips the static_assert in tally::detail::device_reduce_instantiated
// (include/tally/detail/dispatch/device_dispatch.cuh):
//   "tally::exact_plus: exact sums of fields are not built for the device yet (issue 37); pass tally::host"
// Exact x/y/z sums under a device policy, before their device backend exists: refused at
// compile time rather than summed inexactly.
#include <tally/exact.cuh>
#include <tally/fields.cuh>
#include <tally/ranges.cuh>

#include <cuda/std/tuple>

#include <cstddef>

cuda::std::tuple<float, float> exact_sums(const float* x, const float* y, std::size_t n) {
  const auto points = tally::zip(x, y);
  return tally::reduce(tally::device, points, points + std::ptrdiff_t(n), cuda::std::tuple<float, float>(0.0f, 0.0f),
                       tally::fields(tally::exact_plus<float>{}, tally::exact_plus<float>{}));
}
