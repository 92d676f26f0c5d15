// tally::warp and tally::block reductions called from a user's own kernel.
#include "support/test_support.cuh"
#include "tally/block/reduce.cuh"
#include "tally/functional.cuh"
#include "tally/warp/reduce.cuh"

#include <cstdint>
#include <cstring>
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


// The block trees of one block of Threads threads over floats, every thread holding a value
// and then only those marked in `valid_in`; and the order-preserving tree over affine maps.
struct affine {  // x -> a * x + b over 32-bit unsigned integers: associative, not commutative
  std::uint32_t a;
  std::uint32_t b;
};
struct compose {  // compose(f, g) applies g first, then f
  __host__ __device__ affine operator()(const affine& f, const affine& g) const {
    return {f.a * g.a, f.a * g.b + f.b};
  }
};

template <int Threads>
__global__ void block_trees(const float* in, const unsigned char* valid_in, const affine* maps, float* all_out,
                            float* some_out, affine* ordered_out, bool* some_any, bool* ordered_any) {
  const float v = in[threadIdx.x];
  const float all = tally::block::reduce<Threads>(v, tally::plus<float>{});
  bool valid = valid_in[threadIdx.x] != 0;
  const float some = tally::block::reduce<Threads>(v, valid, tally::plus<float>{});
  bool map_valid = valid_in[threadIdx.x] != 0;
  const affine ordered = tally::block::reduce_ordered<Threads>(maps[threadIdx.x], map_valid, compose{});
  if (threadIdx.x == 0) {
    *all_out = all;
    *some_out = some;
    *ordered_out = ordered;
    *some_any = valid;
    *ordered_any = map_valid;
  }
}

// The host's replay of the shuffle-down tree on 32 lanes, empty lanes leaving the other side.
struct lane_float {
  float value;
  bool valid;
};
lane_float shuffle_tree_of_32(std::vector<lane_float> lanes) {
  for (int d = 16; d > 0; d /= 2)
    for (int i = 0; i + d < 32; ++i) {  // ascending: lane i + d is read before it is updated
      if (!lanes[i + d].valid) continue;
      lanes[i].value = lanes[i].valid ? lanes[i].value + lanes[i + d].value : lanes[i + d].value;
      lanes[i].valid = true;
    }
  return lanes[0];
}
lane_float block_tree_replay(const std::vector<float>& v, const std::vector<unsigned char>& valid) {
  const int warps = int(v.size()) / 32;
  std::vector<lane_float> warp_results(32, lane_float{0.0f, false});
  for (int w = 0; w < warps; ++w) {
    std::vector<lane_float> lanes(32);
    for (int l = 0; l < 32; ++l) lanes[l] = {v[w * 32 + l], valid[w * 32 + l] != 0};
    warp_results[w] = shuffle_tree_of_32(lanes);
  }
  return shuffle_tree_of_32(warp_results);
}

template <int Threads>
void check_block_trees(std::mt19937_64& rng) {
  std::vector<float> v(Threads);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-24, 24);  // rounding depends on the order
  for (auto& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
  std::vector<unsigned char> valid(Threads);
  std::bernoulli_distribution coin(0.3);
  for (auto& f : valid) f = coin(rng) ? 1 : 0;
  std::vector<affine> maps(Threads);
  for (auto& m : maps) m = {std::uint32_t(rng()) | 1u, std::uint32_t(rng())};

  tally_test::device_buffer<float> in(v);
  tally_test::device_buffer<unsigned char> valid_in(valid);
  tally_test::device_buffer<affine> maps_in(maps);
  tally_test::device_value<float> all_out, some_out;  // poisoned until written
  tally_test::device_value<affine> ordered_out;
  tally_test::device_value<bool> some_any, ordered_any;
  block_trees<Threads><<<1, Threads>>>(in.data(), valid_in.data(), maps_in.data(), all_out.get(), some_out.get(),
                                       ordered_out.get(), some_any.get(), ordered_any.get());
  TEST_CUDA(cudaGetLastError());
  const float all = all_out.read();
  const float some = some_out.read();
  const affine ordered = ordered_out.read();

  const lane_float want_all = block_tree_replay(v, std::vector<unsigned char>(Threads, 1));
  const lane_float want_some = block_tree_replay(v, valid);
  affine want_ordered{1, 0};
  bool want_any = false;
  for (int t = 0; t < Threads; ++t)
    if (valid[t]) {
      want_ordered = want_any ? compose{}(want_ordered, maps[t]) : maps[t];
      want_any = true;
    }
  std::uint32_t got_bits, want_bits;
  std::memcpy(&got_bits, &all, 4);
  std::memcpy(&want_bits, &want_all.value, 4);
  EXPECT_EQ(got_bits, want_bits) << Threads << " threads, every thread holding a value";
  ASSERT_EQ(some_any.read(), want_some.valid);
  if (want_some.valid) {
    std::memcpy(&got_bits, &some, 4);
    std::memcpy(&want_bits, &want_some.value, 4);
    EXPECT_EQ(got_bits, want_bits) << Threads << " threads, some holding a value";
  }
  ASSERT_EQ(ordered_any.read(), want_any);
  if (want_any) {
    EXPECT_EQ(ordered.a, want_ordered.a) << Threads << " threads, ordered";
    EXPECT_EQ(ordered.b, want_ordered.b) << Threads << " threads, ordered";
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

// The block trees fold the warps' results on the lanes that hold one only (by shuffles, or
// by thread 0 from the slots for up to 8 warps); the bits must be those of the 32-lane
// tree with the other lanes empty, for warp counts that are powers of two and others.
TEST_F(building_blocks, block_trees_give_the_bits_of_the_full_lane_tree) {
  seeded s(3);
  SCOPED_TRACE(s.trace());
  for (int round = 0; round < 20; ++round) {
    check_block_trees<32>(s.rng);
    check_block_trees<96>(s.rng);
    check_block_trees<128>(s.rng);
    check_block_trees<160>(s.rng);
    check_block_trees<256>(s.rng);
    check_block_trees<1024>(s.rng);
  }
}

}  // namespace
