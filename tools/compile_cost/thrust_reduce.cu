// One call site, as a user writes it: thrust::reduce over a thrust::device_vector<float>.
#include <thrust/device_vector.h>
#include <thrust/reduce.h>

float sum(const thrust::device_vector<float>& v) { return thrust::reduce(v.begin(), v.end(), 0.0f); }
