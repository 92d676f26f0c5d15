// tally::warp and tally::block reductions called from a user's own kernel.
#include "support/test_support.cuh"
#include "tally/block/reduce.cuh"
#include "tally/functional.cuh"
#include "tally/warp/reduce.cuh"

#include <thrust/functional.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
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

// 32-bit integers under the exact operators (folded by redux.sync on compute capability
// 8.0+, by shuffles elsewhere). Block b writes, for its 8 warps and then for itself: the
// fold of every value, and the fold of the values marked valid with whether any was.
template <class T, class Op>
__global__ void exact_integer_trees(const T* in, const unsigned char* valid_in, T* warp_all, T* warp_valid,
                                    unsigned char* warp_any, T* block_all, T* block_valid, unsigned char* block_any) {
  const unsigned i = blockIdx.x * 256 + threadIdx.x;
  const T v = in[i];
  const T w_all = tally::warp::reduce(v, Op{});
  bool w_ok = valid_in[i] != 0;
  const T w_valid = tally::warp::reduce(v, w_ok, Op{});
  const T b_all = tally::block::reduce<256>(v, Op{});
  bool b_ok = valid_in[i] != 0;
  const T b_valid = tally::block::reduce<256>(v, b_ok, Op{});
  if (threadIdx.x % 32 == 0) {
    const unsigned warp = i / 32;
    warp_all[warp] = w_all;
    if (w_ok) warp_valid[warp] = w_valid;  // left poisoned where the warp had nothing
    warp_any[warp] = w_ok;
  }
  if (threadIdx.x == 0) {
    block_all[blockIdx.x] = b_all;
    if (b_ok) block_valid[blockIdx.x] = b_valid;
    block_any[blockIdx.x] = b_ok;
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

// Values that make a wrong identity for an empty lane show: block b % 3 draws from the
// whole range, from the negative half and from the positive half; for &, every bit is set
// but for one bit cleared in one value in 16, so the fold keeps some bits set.
template <class T, class Op>
std::vector<T> exact_tree_values(int blocks, std::mt19937_64& rng) {
  std::vector<T> v(std::size_t(blocks) * 256);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto bits = static_cast<std::uint32_t>(rng());
    if constexpr (std::is_same_v<Op, tally::bit_and<T>>) {
      v[i] = static_cast<T>(rng() % 16 == 0 ? ~(1u << (bits % 32)) : ~0u);
    } else {
      const int kind = int(i / 256 % 3);
      v[i] = static_cast<T>(kind == 0 ? bits : kind == 1 ? (bits | 0x80000000u) : (bits & 0x7fffffffu));
    }
  }
  return v;
}

template <class T, class Op>
void check_exact_integer_trees(std::mt19937_64& rng) {
  constexpr int blocks = 24, warps = blocks * 8;
  const auto v = exact_tree_values<T, Op>(blocks, rng);
  std::vector<unsigned char> valid(v.size());
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const int density = int(i / 32 % 4);  // warps with nothing, a few, about half and all valid
    valid[i] = density == 0 ? 0 : density == 1 ? (rng() % 16 == 0) : density == 2 ? (rng() % 2 == 0) : 1;
  }
  const T poison = static_cast<T>(0x5A5A5A5Au);
  tally_test::device_buffer<T> in(v), w_all(std::vector<T>(warps, poison)), w_valid(std::vector<T>(warps, poison)),
      b_all(std::vector<T>(blocks, poison)), b_valid(std::vector<T>(blocks, poison));
  tally_test::device_buffer<unsigned char> valid_in(valid), w_any(std::vector<unsigned char>(warps, 7)),
      b_any(std::vector<unsigned char>(blocks, 7));
  exact_integer_trees<T, Op><<<blocks, 256>>>(in.data(), valid_in.data(), w_all.data(), w_valid.data(), w_any.data(),
                                              b_all.data(), b_valid.data(), b_any.data());
  TEST_CUDA(cudaGetLastError());
  std::vector<T> got_w_all(warps), got_w_valid(warps), got_b_all(blocks), got_b_valid(blocks);
  std::vector<unsigned char> got_w_any(warps), got_b_any(blocks);
  TEST_CUDA(cudaMemcpy(got_w_all.data(), w_all.data(), warps * sizeof(T), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(got_w_valid.data(), w_valid.data(), warps * sizeof(T), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(got_b_all.data(), b_all.data(), blocks * sizeof(T), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(got_b_valid.data(), b_valid.data(), blocks * sizeof(T), cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(got_w_any.data(), w_any.data(), warps, cudaMemcpyDeviceToHost));
  TEST_CUDA(cudaMemcpy(got_b_any.data(), b_any.data(), blocks, cudaMemcpyDeviceToHost));
  // The host's fold, left to right: the exact operators give the same bits in any order.
  const auto fold = [&](std::size_t first, std::size_t last, bool only_valid, bool& any) {
    T acc{};
    any = false;
    for (std::size_t i = first; i < last; ++i) {
      if (only_valid && !valid[i]) continue;
      acc = any ? static_cast<T>(Op{}(acc, v[i])) : v[i];
      any = true;
    }
    return acc;
  };
  // Group g of `size` threads (a warp, or a block) against the host's folds of its values.
  const auto expect_group = [&](const char* what, int g, int size, T all, T valid_only, unsigned char any_valid) {
    SCOPED_TRACE(std::string(what) + " " + std::to_string(g));
    bool any = false;
    EXPECT_EQ(all, fold(std::size_t(g) * size, std::size_t(g + 1) * size, false, any));
    const T want = fold(std::size_t(g) * size, std::size_t(g + 1) * size, true, any);
    EXPECT_EQ(any_valid, any ? 1 : 0);
    EXPECT_EQ(valid_only, any ? want : poison) << "valid values only";
  };
  for (int w = 0; w < warps; ++w) expect_group("warp", w, 32, got_w_all[w], got_w_valid[w], got_w_any[w]);
  for (int b = 0; b < blocks; ++b) expect_group("block", b, 256, got_b_all[b], got_b_valid[b], got_b_any[b]);
}

template <class T>
void check_exact_integer_operators(std::mt19937_64& rng) {
  const auto check = [&rng](auto op, const char* name) {
    SCOPED_TRACE(name);
    check_exact_integer_trees<T, decltype(op)>(rng);
  };
  check(tally::plus<T>{}, "plus");
  check(tally::minimum<T>{}, "minimum");
  check(tally::maximum<T>{}, "maximum");
  check(tally::bit_and<T>{}, "bit_and");
  check(tally::bit_or<T>{}, "bit_or");
  check(tally::bit_xor<T>{}, "bit_xor");
  check(thrust::plus<T>{}, "thrust::plus");
}

// The warp and block trees of 32-bit integers under +, min, max, &, | and ^, with every
// lane holding a value and with some holding nothing (whole warps and blocks too), against
// the host's fold. On the H100 these fold by redux.sync, so this checks its identities for
// empty lanes and the signed and unsigned forms.
TEST_F(building_blocks, integer_trees_fold_every_exact_operator) {
  seeded s(4);
  SCOPED_TRACE(s.trace());
  {
    SCOPED_TRACE("int");
    check_exact_integer_operators<int>(s.rng);
  }
  {
    SCOPED_TRACE("unsigned");
    check_exact_integer_operators<unsigned int>(s.rng);
  }
}

// The block trees fold the warps' results on the lanes that hold one only (by shuffles, or
// by thread 0 from the slots where every warp holds one); the bits must be those of the 32-lane
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

// An operator whose every bit depends on the grouping and on which operand comes first (it is
// marked nothing: the block trees take it as given), so that a tree that swapped a combine's
// operands or regrouped them gives other bits, where a sum's rounding might not show it.
template <class T>
struct order_revealing {
  __host__ __device__ T operator()(T a, T b) const { return a * T(31) + b; }
};

template <class T, int Threads>
__global__ void block_trees_of_order_revealing(const T* in, T* out) {
  const T total = tally::block::reduce<Threads>(in[threadIdx.x], order_revealing<T>{});
  if (threadIdx.x == 0) *out = total;
}

// The host's replay of the documented tree: each warp's 32 lanes by the shuffle-down tree,
// then the warps' results by the same tree over as many lanes as cover them.
template <class T>
T shuffle_tree_replay(std::vector<T> lanes) {
  for (std::size_t d = lanes.size() / 2; d > 0; d /= 2)
    for (std::size_t i = 0; i < d; ++i) lanes[i] = order_revealing<T>{}(lanes[i], lanes[i + d]);
  return lanes[0];
}

template <class T, int Threads>
void check_order_revealing_block_tree(std::mt19937_64& rng) {
  constexpr int warps = Threads / 32;
  static_assert((warps & (warps - 1)) == 0, "the replay below covers power-of-two warp counts");
  std::vector<T> v(Threads);
  for (auto& x : v) x = T(rng());
  std::vector<T> warp_results(warps);
  for (int w = 0; w < warps; ++w)
    warp_results[w] = shuffle_tree_replay(std::vector<T>(v.begin() + w * 32, v.begin() + (w + 1) * 32));
  const T want = shuffle_tree_replay(warp_results);
  tally_test::device_buffer<T> in(v);
  tally_test::device_value<T> out;  // poisoned until written
  block_trees_of_order_revealing<T, Threads><<<1, Threads>>>(in.data(), out.get());
  TEST_CUDA(cudaGetLastError());
  EXPECT_EQ(out.read(), want) << Threads << " threads, " << sizeof(T) << "-byte values";
}

// The last stage of the block tree is evaluated by thread 0 from the warps' slots where the
// warps are few and the values small (tally/warp/reduce.cuh, tree_of_slots), by shuffles
// otherwise; either must combine the same operands in the same order as the lanes' tree.
TEST_F(building_blocks, block_trees_keep_each_combines_operands_and_order) {
  seeded s(4);
  SCOPED_TRACE(s.trace());
  for (int round = 0; round < 4; ++round) {
    check_order_revealing_block_tree<std::uint32_t, 64>(s.rng);
    check_order_revealing_block_tree<std::uint32_t, 256>(s.rng);
    check_order_revealing_block_tree<std::uint64_t, 256>(s.rng);
    check_order_revealing_block_tree<std::uint64_t, 512>(s.rng);
    check_order_revealing_block_tree<std::uint32_t, 1024>(s.rng);
  }
}

}  // namespace
