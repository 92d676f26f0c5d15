// Must not compile: trips the static_assert in tally::detail::device_reduce_by_key
// (include/tally/detail/dispatch/key_runs_dispatch.cuh):
//   "tally::reduce_by_key: exact sums of fields per key run are not built on the device yet (issue 37); reduce each field with tally::exact_plus, or pass tally::host"
// Exact x/y sums per key run on the device, which would otherwise have called exact_plus as an
// ordinary operator deep inside the kernels.
#include <tally/exact.cuh>
#include <tally/fields.cuh>
#include <tally/reduce_by_key.cuh>

#include <cuda/std/tuple>

#include <cstddef>

using xy = cuda::std::tuple<float, float>;

std::size_t exact_runs(const int* keys, const xy* values, int* keys_out, xy* values_out, std::size_t n) {
  const auto ends = tally::reduce_by_key(tally::device, keys, keys + n, values, keys_out, values_out,
                                         cuda::std::equal_to<int>{},
                                         tally::fields(tally::exact_plus<float>{}, tally::exact_plus<float>{}));
  return std::size_t(ends.first - keys_out);
}
