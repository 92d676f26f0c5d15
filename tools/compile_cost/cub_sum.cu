// One call site, as a user writes it: cub::DeviceReduce::Sum over a thrust::device_vector<float>,
// with its temporary storage, and the result copied back.
#include <cub/device/device_reduce.cuh>
#include <thrust/device_vector.h>

float sum(const thrust::device_vector<float>& v) {
  thrust::device_vector<float> out(1);
  std::size_t bytes = 0;
  cub::DeviceReduce::Sum(nullptr, bytes, v.data().get(), out.data().get(), static_cast<int>(v.size()));
  thrust::device_vector<unsigned char> temp(bytes);
  cub::DeviceReduce::Sum(temp.data().get(), bytes, v.data().get(), out.data().get(), static_cast<int>(v.size()));
  return out[0];
}
