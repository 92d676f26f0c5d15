// A call site that compiles its own kernels (the library prebuilds sums only): the maximum of a
// thrust::device_vector<float>. scripts/test counts the kernels it compiles: tally's own
// choice of strategy only (docs/decisions/0021-forced-strategies-in-the-policy-type.md).
#include <tally/tally.cuh>

#include <thrust/device_vector.h>

#include <limits>

float largest(const thrust::device_vector<float>& v) {
  return tally::reduce(v.begin(), v.end(), -std::numeric_limits<float>::infinity(), tally::maximum<float>{});
}
