// Must not compile: trips the static_assert in tally::block::detail::fold_warps
// (include/tally/block/reduce.cuh):
//   "BlockThreads: a multiple of 32, at most 1024"
// No CUDA block has more than 1024 threads; 2048 is a grid's worth the user meant to split.
#include <tally/block/reduce.cuh>
#include <tally/functional.cuh>

__global__ void block_sums(const int* in, int* out) {
  const int v = in[blockIdx.x * 2048 + threadIdx.x];
  const int sum = tally::block::reduce_ordered<2048>(v, tally::plus<int>{});
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
