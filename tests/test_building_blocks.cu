// tally::warp and tally::block reductions called from a user's own kernel.
#include "support/test_support.cuh"
#include "tally/block/reduce.cuh"
#include "tally/functional.cuh"
#include "tally/warp/reduce.cuh"

#include <vector>

namespace {

using tally_test::random_values;
using tally_test::seeded;

struct int_pair {  // an 8-byte struct: shuffled as two words
  int sum;
  int max;
};

struct pair_op {
  __host__ __device__ int_pair operator()(const int_pair& a, const int_pair& b) const {
    return {a.sum + b.sum, a.max < b.max ? b.max : a.max};
  }
};

__global__ void warp_sums(const int* in, int* out) {
  const int v = in[blockIdx.x * 32 + threadIdx.x];
  const int sum = tally::warp::reduce(v, tally::plus<int>{});
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

// Each block reduces twice (pairs, then with only the even threads holding a value) to
// check that the shared storage may be reused.
__global__ void block_reductions(const int* in, int* sums, int* maxes, int* even_sums, bool* any) {
  const int v = in[blockIdx.x * 256 + threadIdx.x];
  const int_pair total = tally::block::reduce<256>(int_pair{v, v}, pair_op{});
  bool valid = threadIdx.x % 2 == 0;
  const int even = tally::block::reduce<256>(v, valid, tally::plus<int>{});
  if (threadIdx.x == 0) {
    sums[blockIdx.x] = total.sum;
    maxes[blockIdx.x] = total.max;
    even_sums[blockIdx.x] = even;
    any[blockIdx.x] = valid;
  }
}

class building_blocks : public tally_test::device_test {};

TEST_F(building_blocks, warp_reduce_sums_each_warp) {
  seeded s(1);
  SCOPED_TRACE(s.trace());
  constexpr int warps = 64;
  const auto v = random_values<int>(warps * 32, s.rng);
  tally_test::device_buffer<int> in(v);
  std::vector<int> poison(warps, 0x5A5A5A5A);
  tally_test::device_buffer<int> out(poison);
  warp_sums<<<warps, 32>>>(in.data(), out.data());
  TEST_CUDA(cudaGetLastError());
  std::vector<int> got(warps);
  TEST_CUDA(cudaMemcpy(got.data(), out.data(), warps * sizeof(int), cudaMemcpyDeviceToHost));
  for (int w = 0; w < warps; ++w)
    EXPECT_EQ(got[w], tally_test::reference_sum<int>(v, w * 32, w * 32 + 32, 0)) << "warp " << w;
}

TEST_F(building_blocks, block_reduce_of_structs_and_partial_blocks) {
  seeded s(2);
  SCOPED_TRACE(s.trace());
  constexpr int blocks = 40;
  const auto v = random_values<int>(blocks * 256, s.rng);
  tally_test::device_buffer<int> in(v);
  std::vector<int> poison(blocks, 0x5A5A5A5A);
  tally_test::device_buffer<int> sums(poison), maxes(poison), evens(poison);
  bool* any = nullptr;
  TEST_CUDA(cudaMalloc(&any, blocks));
  TEST_CUDA(cudaMemset(any, 0, blocks));
  block_reductions<<<blocks, 256>>>(in.data(), sums.data(), maxes.data(), evens.data(), any);
  TEST_CUDA(cudaGetLastError());
  std::vector<int> got_sum(blocks), got_max(blocks), got_even(blocks);
  bool got_any[blocks];
  TEST_CUDA(cudaMemcpy(got_sum.data(), sums.data(), blocks * sizeof(int), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(got_max.data(), maxes.data(), blocks * sizeof(int), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(got_even.data(), evens.data(), blocks * sizeof(int), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(got_any, any, blocks, cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaFree(any));
  for (int b = 0; b < blocks; ++b) {
    long long sum = 0, even = 0;
    int mx = v[b * 256];
    for (int t = 0; t < 256; ++t) {
      sum += v[b * 256 + t];
      if (t % 2 == 0) even += v[b * 256 + t];
      mx = std::max(mx, v[b * 256 + t]);
    }
    EXPECT_EQ(got_sum[b], int(sum)) << "block " << b;
    EXPECT_EQ(got_max[b], mx) << "block " << b;
    EXPECT_EQ(got_even[b], int(even)) << "block " << b;
    EXPECT_TRUE(got_any[b]) << "block " << b;
  }
}

}  // namespace
