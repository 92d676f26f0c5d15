// Must compile: the control of the compile-fail tests. It is reduce_with_unary_operator.cu
// written correctly (the unary functor as transform_reduce's transform, on the host and on
// the device), compiled by the same command, so that a command that cannot compile tally at
// all (a wrong include path, an unknown flag) fails this test rather than passing every
// compile-fail test. The device call instantiates the device dispatch and its kernels.
#include <tally/transform_reduce.cuh>

#include <cstddef>
#include <vector>

struct square {
  __host__ __device__ int operator()(int x) const { return x * x; }
};

int sum_of_squares(const std::vector<int>& v) {
  return tally::transform_reduce(tally::host, v.begin(), v.end(), square{}, 0, tally::plus<int>{});
}

int sum_of_squares_on_device(const int* values, std::size_t n) {
  return tally::transform_reduce(tally::device, values, values + n, square{}, 0, tally::plus<int>{});
}
