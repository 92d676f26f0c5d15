// One call site, as a user writes it: tally::reduce over a thrust::device_vector<float>.
// tools/compile-cost compiles it beside the same call through Thrust and CUB.
#include <tally/tally.cuh>

#include <thrust/device_vector.h>

float sum(const thrust::device_vector<float>& v) { return tally::reduce(v.begin(), v.end(), 0.0f); }
