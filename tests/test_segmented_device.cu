// tally::segmented_reduce on the device (issue 36): every segment has the bits of
// tally::reduce over that segment alone, on the device and the host, for every size class
// (a lane, a warp, a block, a long segment whole or split over blocks), every offsets form,
// empty and bad segments; integer segments equal an exact reference and float segments an
// accurate one; outputs are poisoned before each run.

#include "support/test_support.cuh"
#include "tally/segmented_reduce.cuh"
#include "tally/tally.cuh"

#include <gtest/gtest.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// (Outside the unnamed namespace: a member only a trait reads counts as unused there.)
// Marked commutative (a lie) and sensitive in every bit to the grouping and to the order of
// each combine's operands: a segment equals its own tally::reduce only if the kernel evaluated
// the plan's very tree, left operand first.
struct order_witness {
  static constexpr bool commutative = true;
  __host__ __device__ unsigned operator()(unsigned a, unsigned b) const { return a * 31u + b; }
};
static_assert(tally::is_commutative_v<order_witness>, "takes the commutative plan");

namespace {

using namespace tally_test;

class segmented_device : public device_test {};

using wide_eight = cuda::std::tuple<double, double, double, double, double, double, double, double>;

struct square {
  __host__ __device__ double operator()(float v) const { return double(v) * double(v); }
};

// Sizes at every edge of the size classes for 4- and 8-byte values (VW = 4 and 2: a lane takes
// up to VW, a warp up to 256 * VW, a block up to one step of 2048 * VW), plus long segments of
// several tiles, random small ones and empty ones.
std::vector<std::int64_t> class_edge_offsets(std::mt19937_64& rng, std::size_t extra_random) {
  std::vector<std::size_t> sizes = {0,    1,    2,    3,    4,    5,    7,    8,     9,     31,    32,
                                    33,   63,   64,   65,   127,  128,  129,  511,   512,   513,   1023,
                                    1024, 1025, 4095, 4096, 4097, 8191, 8192, 8193,  16384, 16385, 3 * 8192 + 5,
                                    100000, 0, 0};
  std::uniform_int_distribution<std::size_t> small(0, 300);
  for (std::size_t i = 0; i < extra_random; ++i) sizes.push_back(small(rng));
  std::shuffle(sizes.begin(), sizes.end(), rng);
  std::vector<std::int64_t> offsets{0};
  for (std::size_t size : sizes) offsets.push_back(offsets.back() + std::int64_t(size));
  return offsets;
}

// out[s] against tally::reduce of segment s on the host (the same bits by the plan), and the
// sum's exact or accurate value.
template <class T, class OffsetVec>
void expect_segments(const std::vector<T>& v, const OffsetVec& begins, const OffsetVec& ends, const std::vector<T>& out,
                     T init) {
  for (std::size_t s = 0; s < out.size(); ++s) {
    const std::int64_t b = begins[s], e = ends[s];
    const T alone = tally::reduce(tally::host, v.begin() + b, v.begin() + e, init, tally::plus<T>{});
    ASSERT_EQ(bits_of(out[s]), bits_of(alone)) << "segment " << s << " of " << (e - b) << " elements";
    if constexpr (std::is_integral_v<T>) {
      ASSERT_EQ(out[s], reference_sum<T>(v, std::size_t(b), std::size_t(e), init)) << "segment " << s;
    } else if (e - b > 0) {
      ASSERT_TRUE(sum_is_near(out[s], reference_sum<double>(v, std::size_t(b), std::size_t(e), double(init)),
                              sum_error_bound(v, std::size_t(b), std::size_t(e), double(init))))
          << "segment " << s << " of " << (e - b) << " elements";
    } else {
      ASSERT_EQ(bits_of(out[s]), bits_of(init)) << "empty segment " << s;
    }
  }
}

template <class T>
void check_offsets_form(std::uint64_t salt, std::size_t extra_random, std::size_t value_offset) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  const auto offsets = class_edge_offsets(s.rng, extra_random);
  auto v = random_values<T>(std::size_t(offsets.back()), s.rng);
  if constexpr (std::is_floating_point_v<T>)
    for (auto& x : v) x = std::abs(x) + T(0.25);  // positive: even a short segment's sum stands clear of 0
  device_buffer<T> in(v, value_offset);
  const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
  const std::size_t segments = offsets.size() - 1;
  thrust::device_vector<T> d_out(poisoned_vector<T>(segments));
  const T init = T(3);
  const auto end = tally::segmented_reduce(tally::device, in.data(), d_offsets.begin(), d_offsets.end(),
                                           d_out.begin(), init, tally::plus<T>{});
  EXPECT_EQ(end, d_out.end());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const thrust::host_vector<T> h_out = d_out;
  const std::vector<T> out(h_out.begin(), h_out.end());
  const std::vector<std::int64_t> begins(offsets.begin(), offsets.end() - 1), ends(offsets.begin() + 1, offsets.end());
  expect_segments(v, begins, ends, out, init);
  // And the same bits as the host backend's segmented_reduce, and as tally::reduce on the device
  // for a few segments.
  std::vector<T> host_out = poisoned_vector<T>(segments);
  tally::segmented_reduce(tally::host, v.begin(), offsets.begin(), offsets.end(), host_out.begin(), init,
                          tally::plus<T>{});
  for (std::size_t i = 0; i < segments; ++i) ASSERT_EQ(bits_of(out[i]), bits_of(host_out[i])) << "segment " << i;
  for (std::size_t i = 0; i < segments; i += 7) {
    const T alone = tally::reduce(tally::device, in.data() + offsets[i], in.data() + offsets[i + 1], init,
                                  tally::plus<T>{});
    ASSERT_EQ(bits_of(out[i]), bits_of(alone)) << "segment " << i << " against tally::reduce on the device";
  }
}

TEST_F(segmented_device, every_size_class_float) { check_offsets_form<float>(1, 400, 0); }
TEST_F(segmented_device, every_size_class_float_misaligned) { check_offsets_form<float>(2, 100, 3); }
TEST_F(segmented_device, every_size_class_double) { check_offsets_form<double>(3, 400, 1); }
TEST_F(segmented_device, every_size_class_int) { check_offsets_form<int>(4, 400, 0); }
TEST_F(segmented_device, every_size_class_long_long) { check_offsets_form<long long>(5, 50, 0); }

// At most few_segments_max<Acc> segments (a block's threads, fewer for accumulators wider than 32
// bytes) counted on the host take two launches of their own (decision 0045) instead of the
// lists': the 36 segments of every size class alone, long ones among them, and the counts at the
// route's edge, where one segment more takes the lists.
TEST_F(segmented_device, few_segments_of_every_size_class) {
  static_assert(tally::detail::few_segments_max<float> == 256 && tally::detail::few_segments_max<double> == 256);
  static_assert(tally::detail::few_segments_max<wide_eight> == 128, "256 chains of 64 bytes a segment fit 2 MiB for 128");
  check_offsets_form<float>(21, 0, 0);
  check_offsets_form<float>(22, 0, 1);
  check_offsets_form<double>(23, 0, 1);
  check_offsets_form<int>(24, 0, 0);
  check_offsets_form<long long>(25, 0, 0);
}
TEST_F(segmented_device, few_segments_at_the_routes_edge) {
  check_offsets_form<float>(26, 256 - 36, 0);  // 256 segments: the last count of the route
  check_offsets_form<float>(27, 257 - 36, 0);  // 257: the lists
  check_offsets_form<int>(28, 256 - 36, 2);
}

// Long segments of many tiles: more than segment_split_max of them (so some are reduced whole
// by one block and others split over many), and one of more than block_threads tiles, whose
// chains fold several partials each.
// Each shape twice: alone (151 segments, the few segments' route) and after 300 segments of one
// element (the lists').
TEST_F(segmented_device, long_segments_whole_and_split) {
  for (const int ones_before : {0, 300}) {
    SCOPED_TRACE("segments of one element before the long ones: " + std::to_string(ones_before));
    seeded s(6);
    SCOPED_TRACE(s.trace());
    std::vector<std::int64_t> offsets{0};
    for (int i = 0; i < ones_before; ++i) offsets.push_back(offsets.back() + 1);
    std::uniform_int_distribution<std::int64_t> size(8193, 5 * 8192);
    for (int i = 0; i < 150; ++i) offsets.push_back(offsets.back() + size(s.rng));
    offsets.push_back(offsets.back() + (under_sanitizer() ? 300000 : 2100000 + 3));  // 257 tiles of floats
    auto v = random_values<float>(std::size_t(offsets.back()), s.rng);
    for (auto& x : v) x += 0.25f;
    const thrust::device_vector<float> d_v(v.begin(), v.end());
    const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
    thrust::device_vector<float> d_out(poisoned_vector<float>(offsets.size() - 1));
    tally::segmented_reduce(tally::device, d_v.begin(), d_offsets.begin(), d_offsets.end(), d_out.begin(), -1.5f,
                            tally::plus<float>{});
    const thrust::host_vector<float> h_out = d_out;
    const std::vector<std::int64_t> begins(offsets.begin(), offsets.end() - 1), ends(offsets.begin() + 1, offsets.end());
    expect_segments(v, begins, ends, std::vector<float>(h_out.begin(), h_out.end()), -1.5f);
  }
}

// More long segments than are split chain by chain: with an accumulator of 64 bytes the first
// segmented_chain_bytes / (block_threads * 64) = 128 listed are split and the rest are reduced
// whole, a block each; one-tile segments between them. 80,000 tiny segments before them make the
// first launch give a warp several segments a pass (segments_by_size_kernel's group), so that a
// warp lists several long ones at once. Every segment against the host backend bit for bit, each
// long one against its own tally::reduce, and every first field against an accurate sum.
struct spread_to_eight {
  __host__ __device__ wide_eight operator()(float x) const {
    const double d = x;
    return wide_eight(d, 2 * d, 3 * d, 4 * d, -d, d * d, 0.5 * d, d + 1);
  }
};
TEST_F(segmented_device, more_long_segments_than_are_split) {
  static_assert(tally::detail::segmented_chain_bytes / (tally::detail::block_threads * sizeof(wide_eight)) == 128);
  seeded s(13);
  SCOPED_TRACE(s.trace());
  std::vector<std::int64_t> offsets{0};
  std::uniform_int_distribution<std::int64_t> tiny_size(0, 3), long_size(8193, 3 * 8192), tile_size(1025, 8192);
  for (int i = 0; i < 80000; ++i) offsets.push_back(offsets.back() + tiny_size(s.rng));
  for (int i = 0; i < 150; ++i) {
    offsets.push_back(offsets.back() + long_size(s.rng));
    if (i % 8 == 7) offsets.push_back(offsets.back() + tile_size(s.rng));
  }
  const std::size_t n = std::size_t(offsets.back()), segments = offsets.size() - 1;
  auto v = random_values<float>(n, s.rng);
  for (auto& x : v) x = std::abs(x) + 0.25f;
  const thrust::device_vector<float> d_v(v.begin(), v.end());
  const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
  const auto wide = thrust::make_transform_iterator(d_v.begin(), spread_to_eight{});
  const wide_eight init(-1.0, 0, 0, 0, 0, 0, 0, 2.0);
  thrust::device_vector<wide_eight> d_out(segments, wide_eight(-7, -7, -7, -7, -7, -7, -7, -7));
  tally::segmented_reduce(tally::device, wide, d_offsets.begin(), d_offsets.end(), d_out.begin(), init,
                          tally::plus<>{});
  const thrust::host_vector<wide_eight> h_out = d_out;
  std::vector<wide_eight> on_host(segments, wide_eight(-9, -9, -9, -9, -9, -9, -9, -9));
  tally::segmented_reduce(tally::host, thrust::make_transform_iterator(v.begin(), spread_to_eight{}), offsets.begin(),
                          offsets.end(), on_host.begin(), init, tally::plus<>{});
  for (std::size_t i = 0; i < segments; ++i) {
    ASSERT_EQ(std::memcmp(&on_host[i], &h_out[i], sizeof(wide_eight)), 0) << "segment " << i << " against the host";
    const std::vector<double> first(v.begin() + offsets[i], v.begin() + offsets[i + 1]);
    ASSERT_TRUE(sum_is_near(cuda::std::get<0>(h_out[i]), reference_sum<double>(first, 0, first.size(), -1.0),
                            sum_error_bound(first, 0, first.size(), -1.0)))
        << "segment " << i;
    if (first.size() <= 1024) continue;
    const wide_eight alone =
        tally::reduce(tally::device, wide + offsets[i], wide + offsets[i + 1], init, tally::plus<>{});
    ASSERT_EQ(std::memcmp(&alone, &h_out[i], sizeof(wide_eight)), 0) << "segment " << i << " against tally::reduce";
  }
}

// One-tile segments (more than a warp's 256 * VW elements, at most a tile) are listed by the
// first launch and reduced a warp each by the blocks of the launch after it (decision 0041),
// which stride over them: 6,000 of them, more than those blocks' warps, among tiny, warp-sized
// and long ones. Two calls in a row on one stream, so that the second sees the count words the
// first left zeroed; every segment against the host backend bit for bit, and against an
// accurate sum.
// Positive floats over the given segments, on the host and the device, and the host backend's sum
// of each segment from init: what a device call's outputs must equal (its bits) and be near (the
// sum in doubles).
struct float_segments {
  std::vector<std::int64_t> offsets;
  float init;
  std::vector<float> v;
  thrust::device_vector<float> d_v;
  thrust::device_vector<std::int64_t> d_offsets;
  std::vector<float> on_host;

  float_segments(std::vector<std::int64_t> offsets_in, float init_in, std::mt19937_64& rng)
      : offsets(std::move(offsets_in)), init(init_in), v(random_values<float>(std::size_t(offsets.back()), rng)) {
    for (auto& x : v) x = std::abs(x) + 0.25f;
    d_v.assign(v.begin(), v.end());
    d_offsets.assign(offsets.begin(), offsets.end());
    on_host = poisoned_vector<float>(segments());
    tally::segmented_reduce(tally::host, v.begin(), offsets.begin(), offsets.end(), on_host.begin(), init,
                            tally::plus<float>{});
  }
  std::size_t segments() const { return offsets.size() - 1; }
  void expect(const thrust::device_vector<float>& d_out) const {
    const thrust::host_vector<float> out = d_out;
    for (std::size_t i = 0; i < segments(); ++i) {
      const auto b = std::size_t(offsets[i]), e = std::size_t(offsets[i + 1]);
      ASSERT_EQ(bits_of(out[i]), bits_of(on_host[i])) << "segment " << i << " of " << (e - b);
      ASSERT_TRUE(
          sum_is_near(out[i], reference_sum<double>(v, b, e, double(init)), sum_error_bound(v, b, e, double(init))))
          << "segment " << i;
    }
  }
};

TEST_F(segmented_device, listed_segments_outnumber_the_warps) {
  seeded s(17);
  SCOPED_TRACE(s.trace());
  std::vector<std::int64_t> offsets{0};
  std::uniform_int_distribution<std::int64_t> tile_size(1025, 2048), warp_size(129, 1024), tiny_size(0, 4);
  std::uniform_int_distribution<int> pick(0, 99);
  for (int i = 0; i < 6000; ++i) {
    const int kind = pick(s.rng);
    offsets.push_back(offsets.back() + tile_size(s.rng));
    if (kind >= 80) offsets.push_back(offsets.back() + warp_size(s.rng));
    if (kind >= 60) offsets.push_back(offsets.back() + tiny_size(s.rng));
    if (kind == 0) offsets.push_back(offsets.back() + 3 * 8192 + 17);
  }
  const float_segments data(std::move(offsets), 1.0f, s.rng);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (int call = 0; call < 2; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    thrust::device_vector<float> d_out(poisoned_vector<float>(data.segments()));
    tally::segmented_reduce(tally::device.on(stream), data.d_v.begin(), data.d_offsets.begin(), data.d_offsets.end(),
                            d_out.begin(), data.init, tally::plus<float>{});
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    data.expect(d_out);
  }
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// One segment over 2^24 + 3 doubles: tiles of two steps (the plan's longest-tile case), split.
TEST_F(segmented_device, one_huge_segment_is_reduce) {
  if (under_sanitizer()) GTEST_SKIP() << "134 MB input; long_segments_whole_and_split covers the split path";
  seeded s(7);
  SCOPED_TRACE(s.trace());
  const std::size_t n = (std::size_t(1) << 24) + 3;
  auto v = random_values<double>(n, s.rng);
  for (auto& x : v) x += 0.25;
  const thrust::device_vector<double> d_v(v.begin(), v.end());
  const thrust::device_vector<long long> d_offsets(std::vector<long long>{0, static_cast<long long>(n)});
  thrust::device_vector<double> d_out(poisoned_vector<double>(1));
  tally::segmented_reduce(tally::device, d_v.begin(), d_offsets.begin(), d_offsets.end(), d_out.begin(), 0.0,
                          tally::plus<double>{});
  const double got = d_out[0];
  const double alone = tally::reduce(tally::device, d_v.begin(), d_v.end(), 0.0, tally::plus<double>{});
  EXPECT_EQ(bits_of(got), bits_of(alone));
  EXPECT_TRUE(sum_is_near(got, reference_sum<double>(v, 0, n, 0.0), sum_error_bound(v, 0, n, 0.0)));
}

// The fixed-size form: rows of a row-major matrix, short rows and long ones.
TEST_F(segmented_device, fixed_size_rows) {
  seeded s(8);
  SCOPED_TRACE(s.trace());
  // Rows of one tile (1024 < cols <= 8192 ints) go a block each, rows of 128 < cols <= 1024 a
  // warp each, shorter rows a group of lanes each: more of them than the grid has blocks, warps
  // or groups, and a whole tile. Longer rows go a block per chain of their plan, then a block
  // per row: more chains than the grid has blocks, and rows of more tiles than the plan has
  // chains.
  for (const auto& shape : {std::pair<int, int>{1000, 37}, {300, 1}, {64, 20000}, {3, 0}, {1200, 3000}, {40, 8192},
                            {9000, 250}, {500, 1024}, {2000000, 1}, {300000, 20}, {100000, 128}, {3000, 8193},
                            {5, 300000}, {2, 2200000}}) {
    const int rows = shape.first, cols = shape.second;
    auto v = random_values<int>(std::size_t(rows) * cols, s.rng);
    const thrust::device_vector<int> d_v(v.begin(), v.end());
    thrust::device_vector<int> d_out(poisoned_vector<int>(rows));
    const auto end = tally::segmented_reduce(tally::device, d_v.data().get(), rows, cols, d_out.data().get(), 7,
                                             tally::plus<int>{});
    EXPECT_EQ(end, d_out.data().get() + rows);
    const thrust::host_vector<int> h_out = d_out;
    for (int r = 0; r < rows; ++r)
      ASSERT_EQ(h_out[r], reference_sum<int>(v, std::size_t(r) * cols, std::size_t(r + 1) * cols, 7))
          << "row " << r << " of " << rows << " x " << cols;
  }
}

// Begin and end offsets apart (CUB's form): segments may leave gaps, overlap and come in any
// order; min and max as the operators, a counting iterator as the input.
TEST_F(segmented_device, begin_end_offsets_and_other_operators) {
  seeded s(9);
  SCOPED_TRACE(s.trace());
  const std::size_t n = 200000;
  auto v = random_values<int>(n, s.rng);
  const thrust::device_vector<int> d_v(v.begin(), v.end());
  std::uniform_int_distribution<std::int64_t> at(0, std::int64_t(n)), len(0, 20000);
  std::vector<std::int64_t> begins, ends;
  for (int i = 0; i < 500; ++i) {
    const std::int64_t b = at(s.rng);
    begins.push_back(b);
    ends.push_back(std::min<std::int64_t>(std::int64_t(n), b + (i % 5 == 0 ? len(s.rng) : len(s.rng) % 40)));
  }
  const thrust::device_vector<std::int64_t> d_b(begins.begin(), begins.end()), d_e(ends.begin(), ends.end());
  thrust::device_vector<int> d_out(poisoned_vector<int>(begins.size()));
  tally::segmented_reduce(tally::device, d_v.begin(), d_b.begin(), d_b.end(), d_e.begin(), d_out.begin(),
                          std::numeric_limits<int>::lowest(), tally::maximum<int>{});
  thrust::host_vector<int> h_out = d_out;
  for (std::size_t i = 0; i < begins.size(); ++i) {
    int want = std::numeric_limits<int>::lowest();
    for (std::int64_t k = begins[i]; k < ends[i]; ++k) want = std::max(want, v[std::size_t(k)]);
    ASSERT_EQ(h_out[i], want) << "segment " << i;
  }
  // A counting iterator: segment [b, e) of 0, 1, 2, ... sums to an exact value.
  thrust::device_vector<long long> d_sums(poisoned_vector<long long>(begins.size()));
  tally::segmented_reduce(tally::device, thrust::counting_iterator<long long>(0), d_b.begin(), d_b.end(), d_e.begin(),
                          d_sums.begin(), 0ll, tally::plus<long long>{});
  const thrust::host_vector<long long> sums = d_sums;
  for (std::size_t i = 0; i < begins.size(); ++i) {
    const long long b = begins[i], e = ends[i];
    ASSERT_EQ(sums[i], (e - b) * (b + e - 1) / 2) << "segment " << i;
  }
}

// Offsets in device memory are not checked on the host: a segment whose offsets decrease or
// are negative gives init and reads nothing (compute-sanitizer's memcheck runs this), and its
// neighbours are right.
// Both routes: these five segments alone (few segments), and followed by 300 of one element (the lists).
TEST_F(segmented_device, bad_device_offsets_give_init) {
  for (const int ones_after : {0, 300}) {
    SCOPED_TRACE("segments of one element after: " + std::to_string(ones_after));
    const std::vector<float> v(1000 + ones_after, 1.0f);
    const thrust::device_vector<float> d_v(v.begin(), v.end());
    std::vector<std::int64_t> offsets = {0, 10, 5, 500, -7, 1000};
    for (int i = 0; i < ones_after; ++i) offsets.push_back(offsets.back() + 1);
    const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
    thrust::device_vector<float> d_out(poisoned_vector<float>(offsets.size() - 1));
    tally::segmented_reduce(tally::device, d_v.begin(), d_offsets.begin(), d_offsets.end(), d_out.begin(), 0.5f,
                            tally::plus<float>{});
    const thrust::host_vector<float> out = d_out;
    EXPECT_EQ(out[0], 10.5f);
    EXPECT_EQ(out[1], 0.5f) << "offsets 10 then 5 decrease";
    EXPECT_EQ(out[2], 495.5f);
    EXPECT_EQ(out[3], 0.5f) << "offsets 500 then -7 decrease";
    EXPECT_EQ(out[4], 0.5f) << "offset -7 is negative";
    for (int i = 0; i < ones_after; ++i) ASSERT_EQ(out[5 + i], 1.5f) << "segment " << 5 + i;
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
}

// What the host can check is refused before anything runs, with a sentence, and the context
// stays usable.
TEST_F(segmented_device, refused_arguments) {
  thrust::device_vector<float> d_v(100, 1.0f);
  thrust::device_vector<int> d_offsets(std::vector<int>{0, 50, 100});
  thrust::device_vector<float> d_out(2);
  const auto expect_refused = [](auto call, const char* words) {
    try {
      call();
      ADD_FAILURE() << "not refused: " << words;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("segmented_reduce"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_refused([&] {
    tally::segmented_reduce(tally::device, d_v.begin(), d_offsets.begin(), d_offsets.begin(), d_out.begin(), 0.0f,
                            tally::plus<float>{});
  }, "offsets are empty");
  expect_refused([&] {
    tally::segmented_reduce(tally::device, static_cast<const float*>(nullptr), d_offsets.begin(), d_offsets.end(),
                            d_out.begin(), 0.0f, tally::plus<float>{});
  }, "null pointer");
  expect_refused([&] {
    tally::segmented_reduce(tally::device, d_v.begin(), 2, 50, d_v.begin() + 10, 0.0f, tally::plus<float>{});
  }, "overlaps");
  expect_refused([&] {
    tally::segmented_reduce(tally::device, d_v.begin(), -1, 50, d_out.begin(), 0.0f, tally::plus<float>{});
  }, "negative");
  // No segments: nothing runs, out is returned.
  EXPECT_EQ(tally::segmented_reduce(tally::device, d_v.begin(), d_offsets.begin(), d_offsets.begin() + 1,
                                    d_out.begin(), 0.0f, tally::plus<float>{}),
            d_out.begin());
  EXPECT_EQ(tally::reduce(tally::device, d_v.begin(), d_v.end()), 100.0f) << "the context is still usable";
}

// On a stream of the application's, and captured in a graph replayed on another stream after
// the capturing stream is gone: the scratch is the graph's own.
// Both routes: 86 segments (few segments) and 436 (the lists, whose count words a replay reuses).
TEST_F(segmented_device, streams_and_graphs) {
  for (const std::size_t extra_random : {50, 400}) {
    SCOPED_TRACE("segments: " + std::to_string(36 + extra_random));
    seeded s(10);
    SCOPED_TRACE(s.trace());
    const auto offsets = class_edge_offsets(s.rng, extra_random);
    auto v = random_values<float>(std::size_t(offsets.back()), s.rng);
    const thrust::device_vector<float> d_v(v.begin(), v.end());
    const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
    const std::size_t segments = offsets.size() - 1;
    std::vector<float> want(segments);
    tally::segmented_reduce(tally::host, v.begin(), offsets.begin(), offsets.end(), want.begin(), 0.0f,
                            tally::plus<float>{});
    thrust::device_vector<float> d_out(poisoned_vector<float>(segments));
    cudaStream_t capturing, other;
    ASSERT_EQ(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    tally::segmented_reduce(tally::device.on(capturing), d_v.begin(), d_offsets.begin(), d_offsets.end(), d_out.begin(),
                            0.0f, tally::plus<float>{});
    ASSERT_EQ(cudaStreamEndCapture(capturing, &graph), cudaSuccess);
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(capturing), cudaSuccess);
    for (int replay = 0; replay < 3; ++replay) {
      thrust::fill(d_out.begin(), d_out.end(), -1.0f);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, other), cudaSuccess);
      // A direct call on another stream beside the replay, into its own output.
      thrust::device_vector<float> d_direct(poisoned_vector<float>(segments));
      tally::segmented_reduce(tally::device.on(cudaStreamPerThread), d_v.begin(), d_offsets.begin(), d_offsets.end(),
                              d_direct.begin(), 0.0f, tally::plus<float>{});
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const thrust::host_vector<float> got = d_out, direct = d_direct;
      for (std::size_t i = 0; i < segments; ++i) {
        ASSERT_EQ(bits_of(got[i]), bits_of(want[i])) << "replay " << replay << ", segment " << i;
        ASSERT_EQ(bits_of(direct[i]), bits_of(want[i])) << "direct call " << replay << ", segment " << i;
      }
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(other);
  }
}

// Per-cell x/y/z sums in one pass (a zip of three arrays, a tuple accumulator), a float3 array of
// structures, and a transformed input: each segment's result has the bits of tally::reduce or
// tally::transform_reduce over that segment alone.
TEST_F(segmented_device, fields_zips_and_transforms_per_segment) {
  seeded s(11);
  SCOPED_TRACE(s.trace());
  const auto offsets = class_edge_offsets(s.rng, 60);
  const std::size_t n = std::size_t(offsets.back()), segments = offsets.size() - 1;
  auto hx = random_values<float>(n, s.rng), hy = random_values<float>(n, s.rng), hz = random_values<float>(n, s.rng);
  for (auto& v : hy) v = std::abs(v) + 0.25f;  // positive: sums clear of 0, which the accurate check can tell from 0
  const thrust::device_vector<float> x(hx.begin(), hx.end()), y(hy.begin(), hy.end()), z(hz.begin(), hz.end());
  const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
  using xyz = cuda::std::tuple<float, float, float>;
  const auto points = tally::zip(x.begin(), y.begin(), z.begin());
  thrust::device_vector<xyz> sums(segments, xyz(-1.0f, -1.0f, -1.0f));
  tally::segmented_reduce(tally::device, points, d_offsets.begin(), d_offsets.end(), sums.begin(), xyz(0.0f, 0.0f, 0.0f),
                          tally::plus<>{});
  std::vector<float3> aos(n);
  for (std::size_t i = 0; i < n; ++i) aos[i] = float3{hx[i], hy[i], hz[i]};
  const thrust::device_vector<float3> d_aos(aos.begin(), aos.end());
  thrust::device_vector<float3> aos_sums(segments, float3{-1.0f, -1.0f, -1.0f});
  tally::segmented_reduce(tally::device, d_aos.begin(), d_offsets.begin(), d_offsets.end(), aos_sums.begin(),
                          float3{0.0f, 0.0f, 0.0f}, tally::plus<>{});
  const auto squares = thrust::make_transform_iterator(x.begin(), square{});
  thrust::device_vector<double> square_sums(segments, -1.0);
  tally::segmented_reduce(tally::device, squares, d_offsets.begin(), d_offsets.end(), square_sums.begin(), 0.0,
                          tally::plus<double>{});
  const thrust::host_vector<xyz> got = sums;
  const thrust::host_vector<float3> got_aos = aos_sums;
  const thrust::host_vector<double> got_squares = square_sums;
  for (std::size_t i = 0; i < segments; ++i) {
    const xyz alone = tally::reduce(tally::device, points + offsets[i], points + offsets[i + 1], xyz(0.0f, 0.0f, 0.0f),
                                    tally::plus<>{});
    ASSERT_EQ(bits_of(cuda::std::get<0>(got[i])), bits_of(cuda::std::get<0>(alone))) << "x of segment " << i;
    ASSERT_EQ(bits_of(cuda::std::get<1>(got[i])), bits_of(cuda::std::get<1>(alone))) << "y of segment " << i;
    ASSERT_EQ(bits_of(cuda::std::get<2>(got[i])), bits_of(cuda::std::get<2>(alone))) << "z of segment " << i;
    const float3 aos_alone = tally::reduce(tally::device, d_aos.begin() + offsets[i], d_aos.begin() + offsets[i + 1],
                                           float3{0.0f, 0.0f, 0.0f}, tally::plus<>{});
    ASSERT_EQ(bits_of(got_aos[i].x), bits_of(aos_alone.x)) << "float3 segment " << i;
    ASSERT_EQ(bits_of(got_aos[i].z), bits_of(aos_alone.z)) << "float3 segment " << i;
    const double squares_alone = tally::transform_reduce(tally::device, x.begin() + offsets[i], x.begin() + offsets[i + 1],
                                                         square{}, 0.0, tally::plus<double>{});
    ASSERT_EQ(bits_of(got_squares[i]), bits_of(squares_alone)) << "squares of segment " << i;
    if (offsets[i + 1] > offsets[i]) {
      ASSERT_TRUE(sum_is_near(cuda::std::get<1>(got[i]), reference_sum<double>(hy, std::size_t(offsets[i]), std::size_t(offsets[i + 1]), 0.0),
                              sum_error_bound(hy, std::size_t(offsets[i]), std::size_t(offsets[i + 1]), 0.0)))
          << "y of segment " << i;
    }
  }
}

// The same in the fixed-size form, whose segments of one size take kernels of their own (by
// lanes, by warp, a block each, or the lists for longer ones): a zip of three arrays with a tuple
// accumulator, a float3 array of structures and a transformed input, for a size in each route,
// against tally::reduce over each segment alone.
TEST_F(segmented_device, fields_zips_and_transforms_in_fixed_size_segments) {
  seeded s(12);
  SCOPED_TRACE(s.trace());
  for (const std::size_t size : {1, 3, 20, 100, 300, 1000, 3000, 10000, 40000}) {
    SCOPED_TRACE("segments of " + std::to_string(size));
    const std::size_t segments = size < 100 ? 3000 : 40, n = segments * size;
    auto hx = random_values<float>(n, s.rng), hy = random_values<float>(n, s.rng), hz = random_values<float>(n, s.rng);
    // Positive: each segment's sum then stands clear of 0, where the accurate check can tell it from
    // 0 (values of mixed signs gave one segment of 20 a sum inside its error bound, seed 275326126975915).
    for (auto& v : hy) v = std::abs(v) + 0.25f;
    const thrust::device_vector<float> x(hx.begin(), hx.end()), y(hy.begin(), hy.end()), z(hz.begin(), hz.end());
    using xyz = cuda::std::tuple<float, float, float>;
    const auto points = tally::zip(x.begin(), y.begin(), z.begin());
    thrust::device_vector<xyz> sums(segments, xyz(-1.0f, -1.0f, -1.0f));
    const auto count = std::int64_t(segments), length = std::int64_t(size);
    tally::segmented_reduce(tally::device, points, count, length, sums.begin(), xyz(0.0f, 0.0f, 0.0f), tally::plus<>{});
    std::vector<float3> aos(n);
    for (std::size_t i = 0; i < n; ++i) aos[i] = float3{hx[i], hy[i], hz[i]};
    const thrust::device_vector<float3> d_aos(aos.begin(), aos.end());
    thrust::device_vector<float3> aos_sums(segments, float3{-1.0f, -1.0f, -1.0f});
    tally::segmented_reduce(tally::device, d_aos.begin(), count, length, aos_sums.begin(), float3{0.0f, 0.0f, 0.0f},
                            tally::plus<>{});
    const auto squares = thrust::make_transform_iterator(x.begin(), square{});
    thrust::device_vector<double> square_sums(segments, -1.0);
    tally::segmented_reduce(tally::device, squares, count, length, square_sums.begin(), 0.0, tally::plus<double>{});
    const thrust::host_vector<xyz> got = sums;
    const thrust::host_vector<float3> got_aos = aos_sums;
    const thrust::host_vector<double> got_squares = square_sums;
    for (std::size_t i = 0; i < segments; ++i) {
      const auto b = std::ptrdiff_t(i * size), e = std::ptrdiff_t((i + 1) * size);
      const xyz alone = tally::reduce(tally::device, points + b, points + e, xyz(0.0f, 0.0f, 0.0f), tally::plus<>{});
      ASSERT_EQ(bits_of(cuda::std::get<0>(got[i])), bits_of(cuda::std::get<0>(alone))) << "x of segment " << i;
      ASSERT_EQ(bits_of(cuda::std::get<1>(got[i])), bits_of(cuda::std::get<1>(alone))) << "y of segment " << i;
      ASSERT_EQ(bits_of(cuda::std::get<2>(got[i])), bits_of(cuda::std::get<2>(alone))) << "z of segment " << i;
      const float3 aos_alone =
          tally::reduce(tally::device, d_aos.begin() + b, d_aos.begin() + e, float3{0.0f, 0.0f, 0.0f}, tally::plus<>{});
      ASSERT_EQ(bits_of(got_aos[i].x), bits_of(aos_alone.x)) << "float3 segment " << i;
      ASSERT_EQ(bits_of(got_aos[i].y), bits_of(aos_alone.y)) << "float3 segment " << i;
      ASSERT_EQ(bits_of(got_aos[i].z), bits_of(aos_alone.z)) << "float3 segment " << i;
      const double squares_alone =
          tally::transform_reduce(tally::device, x.begin() + b, x.begin() + e, square{}, 0.0, tally::plus<double>{});
      ASSERT_EQ(bits_of(got_squares[i]), bits_of(squares_alone)) << "squares of segment " << i;
      // And an independent reference: y's sum near its exact value.
      ASSERT_TRUE(sum_is_near(cuda::std::get<1>(got[i]), reference_sum<double>(hy, std::size_t(b), std::size_t(e), 0.0),
                              sum_error_bound(hy, std::size_t(b), std::size_t(e), 0.0)))
          << "y of segment " << i;
    }
  }
}

// An operator that is not commutative (composition of affine maps modulo 2^64: exact, and any
// change of order changes the answer) keeps each segment's left-to-right order, over every
// size class and a segment of several tiles.

TEST_F(segmented_device, an_operator_that_is_not_commutative_keeps_each_segments_order) {
  seeded s(12);
  SCOPED_TRACE(s.trace());
  auto offsets = class_edge_offsets(s.rng, 40);
  offsets.push_back(offsets.back() + (under_sanitizer() ? 20000 : 600001));  // 293 tiles: two partials a folding thread
  std::vector<affine_map> v(static_cast<std::size_t>(offsets.back()));
  std::uniform_int_distribution<std::uint64_t> any;
  for (auto& m : v) m = {any(s.rng) | 1u, any(s.rng)};
  const thrust::device_vector<affine_map> d_v(v.begin(), v.end());
  const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
  const std::size_t segments = offsets.size() - 1;
  thrust::device_vector<affine_map> d_out(segments, affine_map{0, 0});
  const affine_map identity{1, 0};
  tally::segmented_reduce(tally::device, d_v.begin(), d_offsets.begin(), d_offsets.end(), d_out.begin(), identity,
                          compose_affine{});
  const thrust::host_vector<affine_map> out = d_out;
  for (std::size_t i = 0; i < segments; ++i) {
    affine_map want = identity;
    for (std::int64_t k = offsets[i]; k < offsets[i + 1]; ++k) want = compose_affine{}(want, v[std::size_t(k)]);
    ASSERT_TRUE(out[i].a == want.a && out[i].b == want.b)
        << "segment " << i << " of " << (offsets[i + 1] - offsets[i]) << " maps";
  }
}


// Segments of more than VW and at most 32 VW elements, many to a warp: where their sizes differ,
// the warp packs lane groups of each one's width into its passes, widest first; where they are
// alike, every group has one width. Both must give each segment the bits of its own reduce:
// floats, doubles (VW = 2) and an operator whose value depends on the tree's every combine.
template <class T, class Op>
void check_small_segments(std::uint64_t salt, Op op, T init) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  constexpr std::int64_t vw = std::int64_t(16 / sizeof(T));
  std::uniform_int_distribution<std::int64_t> mixed(vw + 1, 32 * vw), alike(0, 3);
  std::vector<std::int64_t> offsets{0};
  for (int i = 0; i < 6000; ++i) {
    // Runs of 32 segments (a warp's group): of mixed sizes, or all alike, or mixed with small
    // and empty ones among them.
    const int kind = (i / 32) % 3;
    std::int64_t size = mixed(s.rng);
    if (kind == 1) size = (i / 32) % 2 == 0 ? 8 * vw : 32 * vw;
    if (kind == 2 && alike(s.rng) == 0) size = alike(s.rng);
    offsets.push_back(offsets.back() + size);
  }
  auto v = random_values<T>(std::size_t(offsets.back()), s.rng);
  if constexpr (std::is_floating_point_v<T>)
    for (auto& x : v) x = std::abs(x) + T(0.25);
  device_buffer<T> in(v, 1);  // misaligned: segments start anywhere
  const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
  const std::size_t segments = offsets.size() - 1;
  std::vector<T> alone(segments);
  for (std::size_t i = 0; i < segments; ++i)
    alone[i] = tally::reduce(tally::host, v.begin() + offsets[i], v.begin() + offsets[i + 1], init, op);
  // A grid of 4 blocks keeps 32 segments to a warp (a full grid spreads these few segments one
  // to a warp, and no warp would pack groups of several widths), and the full grid.
  for (const unsigned grid : {4u, 0u}) {
    SCOPED_TRACE(grid == 0 ? "the full grid" : "a grid of 4 blocks");
    thrust::device_vector<T> d_out(poisoned_vector<T>(segments));
    const auto policy = grid == 0 ? tally::device : tally::device.grid_size(grid);
    tally::segmented_reduce(policy, in.data(), d_offsets.begin(), d_offsets.end(), d_out.begin(), init, op);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const thrust::host_vector<T> out = d_out;
    for (std::size_t i = 0; i < segments; ++i)
      ASSERT_EQ(bits_of(out[i]), bits_of(alone[i]))
          << "segment " << i << " of " << (offsets[i + 1] - offsets[i]) << " elements";
  }
}

TEST_F(segmented_device, small_segments_of_mixed_sizes_replay_their_plans_tree) {
  check_small_segments<float>(13, tally::plus<float>{}, 3.0f);
  check_small_segments<double>(14, tally::plus<double>{}, 3.0);
  check_small_segments<unsigned>(15, order_witness{}, 7u);
}

// More groups of 32 segments than four resident grids' warps hold: the first launch's grid is
// then four slices of a resident grid, each striding over its own share of the groups, and every
// segment, in every slice and at each slice's edges, must be written once with its own bits.
// Sizes of every route, most of them tiny; a count of segments that no slice divides evenly.
TEST_F(segmented_device, many_groups_fill_every_slice_of_the_grid) {
  seeded s(41);
  SCOPED_TRACE(s.trace());
  const int segments_wanted = under_sanitizer() ? 40003 : 1500007;
  std::uniform_int_distribution<int> pick(0, 9999);
  std::uniform_int_distribution<std::int64_t> tiny(0, 4), lanes(5, 128), warp(129, 1024), tile(1025, 8192);
  std::vector<std::int64_t> offsets{0};
  for (int i = 0; i < segments_wanted; ++i) {
    const int kind = pick(s.rng);
    const std::int64_t size = kind < 8500 ? tiny(s.rng) : kind < 9900 ? lanes(s.rng) : kind < 9990 ? warp(s.rng)
                              : kind < 9999                        ? tile(s.rng)
                                                                   : 20000;
    offsets.push_back(offsets.back() + size);
  }
  const float_segments data(std::move(offsets), 2.0f, s.rng);
  thrust::device_vector<float> d_out(poisoned_vector<float>(data.segments()));
  tally::segmented_reduce(tally::device, data.d_v.begin(), data.d_offsets.begin(), data.d_offsets.end(), d_out.begin(),
                          data.init, tally::plus<float>{});
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  data.expect(d_out);
}

// Long runs of groups whose 32 segments all hold at most VW elements, each warp taking many of
// them in turn: such a run loops on its own, reading the next group's bounds while it reduces
// this one's, and hands over to the general path at a group that holds a wider segment, then
// comes back. Every segment must get its own bits: at a run's first and last group, after a
// wide group, at a slice's end inside a run, with 32-bit offsets, 64-bit ones and the begin and
// end form. A grid of 4 blocks makes each warp take hundreds of groups.
TEST_F(segmented_device, runs_of_tiny_segments_hand_over_to_wider_groups) {
  seeded s(43);
  SCOPED_TRACE(s.trace());
  const int groups = under_sanitizer() ? 1200 : 12000;
  std::uniform_int_distribution<std::int64_t> tiny(0, 4), lanes(5, 128), warp(129, 1024);
  std::uniform_int_distribution<int> run_length(1, 40), member(0, 31);
  std::vector<std::int64_t> offsets{0};
  int next_wide = run_length(s.rng);
  for (int g = 0; g < groups; ++g) {
    const bool wide = g == next_wide;
    if (wide) next_wide = g + run_length(s.rng);
    const int wide_member = member(s.rng);
    for (int m = 0; m < 32; ++m) {
      std::int64_t size = tiny(s.rng);
      if (wide && m == wide_member) size = (g % 3 == 0) ? warp(s.rng) : lanes(s.rng);
      offsets.push_back(offsets.back() + size);
    }
  }
  offsets.push_back(offsets.back() + 3);  // one more segment: the last group holds only it
  const float_segments data(std::move(offsets), 2.0f, s.rng);
  const std::vector<int> narrow(data.offsets.begin(), data.offsets.end());
  const thrust::device_vector<int> d_narrow(narrow.begin(), narrow.end());
  for (const unsigned grid : {4u, 0u}) {
    SCOPED_TRACE(grid == 0 ? "the full grid" : "a grid of 4 blocks");
    const auto policy = grid == 0 ? tally::device : tally::device.grid_size(grid);
    {
      SCOPED_TRACE("64-bit offsets");
      thrust::device_vector<float> d_out(poisoned_vector<float>(data.segments()));
      tally::segmented_reduce(policy, data.d_v.begin(), data.d_offsets.begin(), data.d_offsets.end(), d_out.begin(),
                              data.init, tally::plus<float>{});
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      data.expect(d_out);
    }
    {
      SCOPED_TRACE("32-bit offsets");
      thrust::device_vector<float> d_out(poisoned_vector<float>(data.segments()));
      tally::segmented_reduce(policy, data.d_v.begin(), d_narrow.begin(), d_narrow.end(), d_out.begin(), data.init,
                              tally::plus<float>{});
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      data.expect(d_out);
    }
    {
      SCOPED_TRACE("begin and end offsets");
      thrust::device_vector<float> d_out(poisoned_vector<float>(data.segments()));
      tally::segmented_reduce(policy, data.d_v.begin(), data.d_offsets.begin(), data.d_offsets.end() - 1,
                              data.d_offsets.begin() + 1, d_out.begin(), data.init, tally::plus<float>{});
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      data.expect(d_out);
    }
  }
}

}  // namespace
