// Must not compile: trips the static_assert in tally::block::detail::reduce_all
// (include/tally/block/reduce.cuh):
//   "BlockThreads: a multiple of 32, at most 1024"
// The block tree folds whole warps: a block of 100 threads ends in a partial warp.
#include <tally/block/reduce.cuh>
#include <tally/functional.cuh>

__global__ void block_sums(const float* in, float* out) {
  const float v = in[blockIdx.x * 100 + threadIdx.x];
  const float sum = tally::block::reduce<100>(v, tally::plus<float>{});
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
