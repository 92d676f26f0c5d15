// Must not compile: trips the static_assert in tally::detail::check_operator
// (include/tally/reduce.cuh):
//   "tally: the operator cannot be called as op(init, init); init's type is the accumulator"
// A unary functor, meant as transform_reduce's transform, passed as reduce's operator
// cannot fold two accumulators.
#include <tally/reduce.cuh>

#include <vector>

struct square {
  __host__ __device__ int operator()(int x) const { return x * x; }
};

int sum_of_squares(const std::vector<int>& v) {
  return tally::reduce(tally::host, v.begin(), v.end(), 0, square{});
}
