// Must not compile: trips the static_assert in tally::detail::reduce_into_impl for device policies
// (include/tally/reduce.cuh):
//   "tally::reduce_into: out must be a pointer, thrust::device_ptr or a device_vector iterator"
// The device writes the result straight to memory through a raw pointer; an output iterator
// that is not contiguous (here one that would scale the value on the way out) has no
// address the kernel could write to.
#include <tally/reduce.cuh>

#include <thrust/iterator/transform_output_iterator.h>

#include <cstddef>

struct divide_by {
  float n;
  __host__ __device__ float operator()(float sum) const { return sum / n; }
};

void mean_into(const float* values, std::size_t n, float* mean) {
  auto out = thrust::make_transform_output_iterator(mean, divide_by{float(n)});
  tally::reduce_into(tally::device, values, values + n, out, 0.0f);
}
