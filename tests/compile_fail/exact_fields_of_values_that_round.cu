// Must not compile: trips the static_assert in tally::detail::check_exact_fields
// (include/tally/detail/exact_fields.cuh):
//   "tally::fields of tally::exact_plus: each field of the values must convert exactly to the same field of init (T itself; float, half or bf16 into double; half or bf16 into float)"
// Exact x/y sums of double values into float fields under a device policy: each conversion
// would round before the exact sum, so the sum would not be the exact sum of the values.
#include <tally/exact.cuh>
#include <tally/fields.cuh>
#include <tally/ranges.cuh>

#include <cuda/std/tuple>

#include <cstddef>

cuda::std::tuple<float, float> exact_sums(const double* x, const double* y, std::size_t n) {
  const auto points = tally::zip(x, y);
  return tally::reduce(tally::device, points, points + std::ptrdiff_t(n), cuda::std::tuple<float, float>(0.0f, 0.0f),
                       tally::fields(tally::exact_plus<float>{}, tally::exact_plus<float>{}));
}
