// One translation unit that instantiates every family of tally's kernels on the device, for
// scripts/check-packaging to compile as PTX for every architecture the toolkit supports, with
// warnings as errors and without --extended-lambda (tally's headers must not need it). The
// test suite itself builds for one architecture; this file is what makes the architecture-
// specific paths build everywhere: redux.sync in the warp trees of 32-bit integers under an
// exact operator (compute capability 8.0+, tally/warp/reduce.cuh) and programmatic dependent
// launch at the start of every kernel (9.0+, detail/kernels/grid_dependency.cuh), and the
// plain shuffle trees and waits below those. scripts/check-packaging reads the PTX to check that
// each path appears exactly where its architecture has it. Nothing here runs: the functions
// only have to be compiled.
#include <tally/tally.cuh>

#include <cuda/std/tuple>
#include <cuda_fp16.h>
#include <thrust/device_vector.h>
#include <thrust/iterator/counting_iterator.h>

#include <cstdint>

namespace arch_coverage {

// Not commutative: the order-preserving (ordered) plan.
struct subtract {
  __host__ __device__ int operator()(int a, int b) const { return a - b; }
};
struct is_negative {
  __host__ __device__ bool operator()(float x) const { return x < 0.0f; }
};
struct square {
  __host__ __device__ double operator()(float x) const { return double(x) * double(x); }
};

// Every strategy on float, int and double. The strategy is chosen at run time, so each call
// instantiates the kernels of all of them that its type and operator allow; int under
// tally::plus (an exact integer operator) is the one that folds its warps by redux.sync and
// may take the atomic strategies.
template <class T>
T reduce_every_strategy(const thrust::device_vector<T>& v, tally::strategy s) {
  const auto policy = tally::device.strategy(s);
  return tally::reduce(policy, v.begin(), v.end(), T(0), tally::plus<T>{}) +
         tally::reduce(policy, v.begin(), v.end(), T(0), tally::maximum<T>{});
}
template float reduce_every_strategy<float>(const thrust::device_vector<float>&, tally::strategy);
template int reduce_every_strategy<int>(const thrust::device_vector<int>&, tally::strategy);
template double reduce_every_strategy<double>(const thrust::device_vector<double>&, tally::strategy);

// The atomic strategies of int, and unsigned int's redux under the bitwise operators.
int reduce_atomic(const thrust::device_vector<int>& v) {
  return tally::reduce(tally::device.strategy(tally::strategy::block_atomic), v.begin(), v.end(), 0) +
         tally::reduce(tally::device.strategy(tally::strategy::warp_atomic), v.begin(), v.end(), 0, tally::minimum<int>{});
}
unsigned int reduce_bits(const thrust::device_vector<unsigned int>& v) {
  return tally::reduce(tally::device, v.begin(), v.end(), 0u, tally::bit_xor<unsigned int>{}) |
         tally::reduce(tally::device, v.begin(), v.end(), ~0u, tally::bit_and<unsigned int>{});
}

// Floating-point atomics, which only nondeterministic() allows.
float reduce_float_atomic(const thrust::device_vector<float>& v) {
  return tally::reduce(tally::device.nondeterministic().strategy(tally::strategy::block_atomic), v.begin(), v.end(),
                       0.0f);
}

int reduce_ordered(const thrust::device_vector<int>& v) {
  return tally::reduce(tally::device, v.begin(), v.end(), 0, subtract{});
}

// The asynchronous form: the result stays on the device.
void reduce_into(const thrust::device_vector<float>& v, float* out, cudaStream_t stream) {
  tally::reduce_into(tally::device.on(stream), v.begin(), v.end(), out, 0.0f, tally::plus<float>{});
}

double transform_reduce(const thrust::device_vector<float>& v) {
  return tally::transform_reduce(tally::device, v.begin(), v.end(), square{}, 0.0, tally::plus<double>{});
}

float inner_product(const thrust::device_vector<float>& a, const thrust::device_vector<float>& b) {
  return tally::inner_product(tally::device, a.begin(), a.end(), b.begin(), 0.0f);
}

std::int64_t count(const thrust::device_vector<float>& v) {
  return tally::count_if(tally::device, v.begin(), v.end(), is_negative{}) +
         tally::count(tally::device, v.begin(), v.end(), 1.0f);
}

std::int64_t extrema(const thrust::device_vector<float>& v) {
  const auto least = tally::min_element(tally::device, v.begin(), v.end());
  const auto most = tally::max_element(tally::device, v.begin(), v.end());
  const auto both = tally::minmax_element(tally::device, v.begin(), v.end());
  return (least - v.begin()) + (most - v.begin()) + (both.first - both.second);
}

bool logical(const thrust::device_vector<float>& v) {
  return tally::all_of(tally::device, v.begin(), v.end(), is_negative{}) ||
         tally::any_of(tally::device, v.begin(), v.end(), is_negative{}) ||
         tally::none_of(tally::device, v.begin(), v.end(), is_negative{});
}

// The family's _into forms, whose kernels write the answer through a converting writer.
void family_into(const thrust::device_vector<float>& v, std::int64_t* positions, bool* answers, double* sums,
                 cudaStream_t stream) {
  const auto p = tally::device.on(stream);
  tally::transform_reduce_into(p, v.begin(), v.end(), sums, square{}, 0.0, tally::plus<double>{});
  tally::inner_product_into(p, v.begin(), v.end(), v.begin(), sums + 1, 0.0);
  tally::count_if_into(p, v.begin(), v.end(), positions, is_negative{});
  tally::minmax_element_into(p, v.begin(), v.end(), positions + 1);
  tally::all_of_into(p, v.begin(), v.end(), answers, is_negative{});
}

// Multi-field: a zip of three arrays under tally::fields, and a counting (non-contiguous) range.
using sum_min_max = cuda::std::tuple<float, int, double>;
sum_min_max fields(const thrust::device_vector<float>& x, const thrust::device_vector<int>& y,
                   const thrust::device_vector<double>& z) {
  const auto first = tally::zip(x.begin(), y.begin(), z.begin());
  return tally::reduce(tally::device, first, first + x.size(), sum_min_max(0.0f, 0, 0.0),
                       tally::fields(tally::plus<>{}, tally::minimum<>{}, tally::maximum<>{}));
}
long long counting(long long n) {
  return tally::reduce(tally::device, thrust::counting_iterator<long long>(0), thrust::counting_iterator<long long>(n),
                       0LL);
}

// Half values, read 8 per load and summed in float.
float half_sum(const thrust::device_vector<__half>& v) {
  return tally::reduce(tally::device, v.begin(), v.end(), 0.0f);
}

}  // namespace arch_coverage
