// Compiled by scripts/test with the device optimizer on, under a time limit: one call that
// took nvcc most of an hour before tally cut its folds' chains for the optimizer
// (include/tally/detail/tile/fold_chain.cuh). The operator is the one Thrust's own reduce tests
// use; unsigned int and a remainder by a constant are what made the optimizer's time grow
// exponentially with the length of a thread's unrolled fold. Both plans: the operator as it
// is (not commutative: the order-preserving plan) and marked commutative.
#include <tally/tally.cuh>
#include <thrust/device_vector.h>

struct plus_mod_10 {
  __host__ __device__ unsigned int operator()(unsigned int a, unsigned int b) const {
    return ((a % 10) + (b % 10)) % 10;
  }
};

unsigned int ordered_sum_mod_10(const thrust::device_vector<unsigned int>& v) {
  return tally::reduce(v.begin(), v.end(), 0u, plus_mod_10{});
}

unsigned int commutative_sum_mod_10(const thrust::device_vector<unsigned int>& v) {
  return tally::reduce(v.begin(), v.end(), 0u, tally::commutative(plus_mod_10{}));
}
