// Must not compile: trips the static_assert in tally::detail::reduce_impl for tally::nccl
// (include/tally/distributed.cuh):
//   "tally::fields of tally::exact_plus: exact sums of fields over several GPUs are not built yet (issue 37); sum each field with tally::exact_plus"
// Exact x/y sums of a zip under the NCCL policy, which would otherwise have summed one rank's
// shard alone: refused at compile time (an exact sum of one field runs). Built only where
// tally::tally_nccl is (NCCL found).
#include <tally/distributed.cuh>
#include <tally/exact.cuh>
#include <tally/fields.cuh>
#include <tally/ranges.cuh>

#include <cuda/std/tuple>

#include <cstddef>

cuda::std::tuple<float, float> exact_totals(ncclComm_t comm, const float* x, const float* y, std::size_t n) {
  const auto points = tally::zip(x, y);
  return tally::reduce(tally::nccl(comm), points, points + n, cuda::std::tuple<float, float>(0.0f, 0.0f),
                       tally::fields(tally::exact_plus<float>{}, tally::exact_plus<float>{}));
}
