// tally::reduce_by_key and reduce_by_key_into on the device (issue 36): the runs Thrust finds,
// and each run's result with the bits of tally::reduce over the run's values from its first one
// (the host backend's), for runs of every size class, across the run-finding kernels' tile
// boundaries, under other key comparisons and operators, through iterators, on streams and in
// graphs; integer runs equal an exact reference and thrust::reduce_by_key; outputs are poisoned
// before each run.

#include "support/test_support.cuh"
#include "tally/reduce_by_key.cuh"
#include "tally/tally.cuh"

#include <gtest/gtest.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/reduce.h>

#include <cuda/std/functional>
#include <cuda/std/tuple>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace tally_test;

class reduce_by_key_device : public device_test {};

// Keys in runs: every edge of the segmented kernels' size classes (a run's segment is its values
// after the first: lane, lane group, warp, block, long), of the run-finding tiles (8192 keys)
// and of their head words (32 keys), plus random short runs. Adjacent runs have different keys;
// a key comes back in a later run, as in a real key column.
std::vector<int> keys_in_runs(std::mt19937_64& rng, std::size_t extra_random, std::vector<std::size_t>& lengths) {
  lengths = {1,    2,    3,    4,    5,    6,    9,    31,    32,    33,   34,    63,    64,    65,
             129,  130,  512,  513,  514,  1024, 1025, 1026,  4096,  4097, 8191,  8192,  8193,  8194,
             16385, 16386, 3 * 8192 + 6, 100001, 1, 1, 1};
  std::uniform_int_distribution<std::size_t> small(1, 70);
  for (std::size_t i = 0; i < extra_random; ++i) lengths.push_back(small(rng));
  std::shuffle(lengths.begin(), lengths.end(), rng);
  std::vector<int> keys;
  int key = 7;
  for (std::size_t length : lengths) {
    keys.insert(keys.end(), length, key);
    key = (key * 5 + 3) % 1000;  // differs from the last key: 5k + 3 = k has no solution mod 1000
  }
  return keys;
}

// Float values under keys_in_runs(rng, 100) keys, the host backend's sums by key (the bits the
// device must give), and keys and values on the device: the case of the stream, graph and thread
// tests.
struct float_runs_case {
  std::vector<std::size_t> lengths;
  std::vector<int> keys;
  std::vector<float> values;
  std::size_t n = 0, runs = 0;
  std::vector<int> want_keys;
  std::vector<float> want;
  thrust::device_vector<int> d_keys;
  thrust::device_vector<float> d_values;

  explicit float_runs_case(std::mt19937_64& rng)
      : keys(keys_in_runs(rng, 100, lengths)), values(random_values<float>(keys.size(), rng)), n(keys.size()),
        runs(lengths.size()), want_keys(runs), want(runs), d_keys(keys.begin(), keys.end()),
        d_values(values.begin(), values.end()) {
    tally::reduce_by_key(tally::host, keys.begin(), keys.end(), values.begin(), want_keys.begin(), want.begin());
  }
};

template <class T>
void check_runs(std::uint64_t salt, std::size_t extra_random) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  std::vector<std::size_t> lengths;
  const auto keys = keys_in_runs(s.rng, extra_random, lengths);
  auto values = random_values<T>(keys.size(), s.rng);
  // Positive floats: a short run's sum then stands clear of 0, where the accurate check can tell
  // it from 0.
  if constexpr (std::is_floating_point_v<T>)
    for (auto& x : values) x = std::abs(x) + T(0.25);
  const std::size_t n = keys.size(), runs = lengths.size();
  const thrust::device_vector<int> d_keys(keys.begin(), keys.end());
  const thrust::device_vector<T> d_values(values.begin(), values.end());
  thrust::device_vector<int> d_keys_out(poisoned_vector<int>(n));
  thrust::device_vector<T> d_values_out(poisoned_vector<T>(n));
  const auto ends = tally::reduce_by_key(tally::device, d_keys.begin(), d_keys.end(), d_values.begin(),
                                         d_keys_out.begin(), d_values_out.begin());
  ASSERT_EQ(std::size_t(ends.first - d_keys_out.begin()), runs);
  ASSERT_EQ(std::size_t(ends.second - d_values_out.begin()), runs);
  const thrust::host_vector<int> keys_out = d_keys_out;
  const thrust::host_vector<T> values_out = d_values_out;
  // The host backend: the same runs, the same bits.
  std::vector<int> host_keys(runs);
  std::vector<T> host_values = poisoned_vector<T>(runs);
  const auto host_ends = tally::reduce_by_key(tally::host, keys.begin(), keys.end(), values.begin(), host_keys.begin(),
                                              host_values.begin());
  ASSERT_EQ(std::size_t(host_ends.first - host_keys.begin()), runs);
  std::size_t begin = 0;
  for (std::size_t r = 0; r < runs; ++r) {
    const std::size_t end = begin + lengths[r];
    ASSERT_EQ(keys_out[r], keys[begin]) << "run " << r;
    ASSERT_EQ(bits_of(values_out[r]), bits_of(host_values[r])) << "run " << r << " of " << lengths[r];
    // tally::reduce over the run's values from its first one, on the device.
    if (r % 5 == 0) {
      const T alone = tally::reduce(tally::device, d_values.begin() + std::ptrdiff_t(begin + 1),
                                    d_values.begin() + std::ptrdiff_t(end), values[begin], tally::plus<T>{});
      ASSERT_EQ(bits_of(values_out[r]), bits_of(alone)) << "run " << r << " against tally::reduce";
    }
    if constexpr (std::is_integral_v<T>) {
      ASSERT_EQ(values_out[r], reference_sum<T>(values, begin, end, T(0))) << "run " << r;
    } else {
      ASSERT_TRUE(sum_is_near(values_out[r], reference_sum<double>(values, begin, end, 0.0),
                              sum_error_bound(values, begin, end, 0.0)))
          << "run " << r << " of " << lengths[r];
    }
    begin = end;
  }
  for (std::size_t r = runs; r < n && r < runs + 64; ++r)
    ASSERT_EQ(bits_of(values_out[r]), bits_of(poisoned_vector<T>(1)[0])) << "written past the runs at " << r;
  if constexpr (std::is_integral_v<T>) {
    // Thrust's own answer: the same runs and, for integers, the same values.
    thrust::device_vector<int> t_keys(n);
    thrust::device_vector<T> t_values(n);
    const auto t_ends = thrust::reduce_by_key(d_keys.begin(), d_keys.end(), d_values.begin(), t_keys.begin(),
                                              t_values.begin());
    ASSERT_EQ(std::size_t(t_ends.first - t_keys.begin()), runs);
    const thrust::host_vector<int> tk = t_keys;
    const thrust::host_vector<T> tv = t_values;
    for (std::size_t r = 0; r < runs; ++r) {
      ASSERT_EQ(tk[r], keys_out[r]) << "run " << r;
      ASSERT_EQ(tv[r], values_out[r]) << "run " << r;
    }
  }
}

TEST_F(reduce_by_key_device, runs_of_every_size_class_float) { check_runs<float>(21, 300); }
TEST_F(reduce_by_key_device, runs_of_every_size_class_double) { check_runs<double>(22, 300); }
TEST_F(reduce_by_key_device, runs_of_every_size_class_int) { check_runs<int>(23, 300); }
TEST_F(reduce_by_key_device, runs_of_every_size_class_long_long) { check_runs<long long>(24, 40); }

// Every key different (every run one value: the values come back unchanged) and every key the
// same (one run: tally::reduce of the rest from the first value).
TEST_F(reduce_by_key_device, all_runs_of_one_and_one_run_of_all) {
  seeded s(25);
  SCOPED_TRACE(s.trace());
  const std::size_t n = under_sanitizer() ? 70001 : (std::size_t(1) << 20) + 3;
  const auto values = random_values<float>(n, s.rng);
  const thrust::device_vector<float> d_values(values.begin(), values.end());
  thrust::device_vector<long long> d_keys_out(poisoned_vector<long long>(n));
  thrust::device_vector<float> d_values_out(poisoned_vector<float>(n));
  const auto distinct = thrust::counting_iterator<long long>(-5);
  auto ends = tally::reduce_by_key(tally::device, distinct, distinct + std::ptrdiff_t(n), d_values.begin(),
                                   d_keys_out.begin(), d_values_out.begin());
  ASSERT_EQ(std::size_t(ends.second - d_values_out.begin()), n);
  {
    const thrust::host_vector<long long> k = d_keys_out;
    const thrust::host_vector<float> v = d_values_out;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(k[i], (long long)i - 5) << i;
      ASSERT_EQ(bits_of(v[i]), bits_of(values[i])) << i;
    }
  }
  const auto same = thrust::constant_iterator<int>(42);
  thrust::device_vector<int> d_one_key(poisoned_vector<int>(2));
  thrust::fill(d_values_out.begin(), d_values_out.end(), -1.0f);
  const auto one = tally::reduce_by_key(tally::device, same, same + std::ptrdiff_t(n), d_values.begin(),
                                        d_one_key.begin(), d_values_out.begin());
  ASSERT_EQ(one.first - d_one_key.begin(), 1);
  const float want = tally::reduce(tally::device, d_values.begin() + 1, d_values.end(), values[0], tally::plus<float>{});
  EXPECT_EQ(int(d_one_key[0]), 42);
  EXPECT_EQ(bits_of(float(d_values_out[0])), bits_of(want));
  EXPECT_EQ(bits_of(float(d_values_out[1])), bits_of(-1.0f)) << "written past the one run";
}

// A key comparison of the user's (keys equal by tens), a maximum, and an operator that is not
// commutative (composition of affine maps modulo 2^64: any change of order changes it).
struct same_ten {
  __host__ __device__ bool operator()(int a, int b) const { return a / 10 == b / 10; }
};

TEST_F(reduce_by_key_device, other_key_comparisons_and_operators) {
  seeded s(26);
  SCOPED_TRACE(s.trace());
  std::vector<std::size_t> lengths;
  auto keys = keys_in_runs(s.rng, 200, lengths);
  // Within a run, keys vary in their last digit: equal by tens, not by ==.
  std::uniform_int_distribution<int> digit(0, 9);
  for (auto& k : keys) k = k * 10 + digit(s.rng);
  const std::size_t n = keys.size();
  const thrust::device_vector<int> d_keys(keys.begin(), keys.end());
  auto ints = random_values<int>(n, s.rng);
  const thrust::device_vector<int> d_ints(ints.begin(), ints.end());
  thrust::device_vector<int> d_keys_out(poisoned_vector<int>(n)), d_max(poisoned_vector<int>(n));
  const auto ends = tally::reduce_by_key(tally::device, d_keys.begin(), d_keys.end(), d_ints.begin(), d_keys_out.begin(),
                                         d_max.begin(), same_ten{}, tally::maximum<int>{});
  ASSERT_EQ(std::size_t(ends.first - d_keys_out.begin()), lengths.size());
  std::vector<affine_map> maps(n);
  std::uniform_int_distribution<std::uint64_t> any;
  for (auto& m : maps) m = {any(s.rng) | 1u, any(s.rng)};
  const thrust::device_vector<affine_map> d_maps(maps.begin(), maps.end());
  thrust::device_vector<affine_map> d_composed(n, affine_map{0, 0});
  thrust::device_vector<int> d_keys_out2(poisoned_vector<int>(n));
  tally::reduce_by_key(tally::device, d_keys.begin(), d_keys.end(), d_maps.begin(), d_keys_out2.begin(),
                       d_composed.begin(), same_ten{}, compose_affine{});
  const thrust::host_vector<int> keys_out = d_keys_out, keys_out2 = d_keys_out2, max_out = d_max;
  const thrust::host_vector<affine_map> composed = d_composed;
  std::size_t begin = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    const std::size_t end = begin + lengths[r];
    ASSERT_EQ(keys_out[r], keys[begin]) << "run " << r;
    ASSERT_EQ(keys_out2[r], keys[begin]) << "run " << r;
    ASSERT_EQ(max_out[r], *std::max_element(ints.begin() + std::ptrdiff_t(begin), ints.begin() + std::ptrdiff_t(end)))
        << "run " << r;
    affine_map want = maps[begin];
    for (std::size_t k = begin + 1; k < end; ++k) want = compose_affine{}(want, maps[k]);
    ASSERT_TRUE(composed[r].a == want.a && composed[r].b == want.b) << "run " << r << " of " << lengths[r];
    begin = end;
  }
}

// reduce_by_key_into: the run count in device memory, asynchronous on a stream of the
// application's, captured in a graph and replayed on another stream after the capturing stream
// is gone, beside a direct call; an empty input writes a count of 0.
TEST_F(reduce_by_key_device, into_streams_and_graphs) {
  seeded s(27);
  SCOPED_TRACE(s.trace());
  const float_runs_case c(s.rng);
  const std::size_t n = c.n, runs = c.runs;
  const auto& want_keys = c.want_keys;
  const auto& want = c.want;
  const auto& d_keys = c.d_keys;
  const auto& d_values = c.d_values;
  thrust::device_vector<int> d_keys_out(poisoned_vector<int>(n));
  thrust::device_vector<float> d_out(poisoned_vector<float>(n));
  thrust::device_vector<unsigned int> d_count(1, 12345u);
  cudaStream_t capturing, other;
  ASSERT_EQ(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  tally::reduce_by_key_into(tally::device.on(capturing), d_keys.begin(), d_keys.end(), d_values.begin(),
                            d_keys_out.begin(), d_out.begin(), d_count.begin());
  ASSERT_EQ(cudaStreamEndCapture(capturing, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(capturing), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    thrust::fill(d_out.begin(), d_out.end(), -1.0f);
    thrust::fill(d_keys_out.begin(), d_keys_out.end(), -1);
    d_count[0] = 0u;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, other), cudaSuccess);
    thrust::device_vector<float> d_direct(poisoned_vector<float>(n));
    thrust::device_vector<int> d_direct_keys(poisoned_vector<int>(n));
    thrust::device_vector<long long> d_direct_count(1, -1);
    tally::reduce_by_key_into(tally::device.on(cudaStreamPerThread), d_keys.begin(), d_keys.end(), d_values.begin(),
                              d_direct_keys.begin(), d_direct.begin(), d_direct_count.data());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(std::size_t(d_count[0]), runs) << "replay " << replay;
    ASSERT_EQ(std::size_t((long long)d_direct_count[0]), runs) << "direct call " << replay;
    const thrust::host_vector<float> got = d_out, direct = d_direct;
    const thrust::host_vector<int> got_keys = d_keys_out, direct_keys = d_direct_keys;
    for (std::size_t r = 0; r < runs; ++r) {
      ASSERT_EQ(got_keys[r], want_keys[r]) << "replay " << replay << ", run " << r;
      ASSERT_EQ(direct_keys[r], want_keys[r]) << "direct call " << replay << ", run " << r;
      ASSERT_EQ(bits_of(got[r]), bits_of(want[r])) << "replay " << replay << ", run " << r;
      ASSERT_EQ(bits_of(direct[r]), bits_of(want[r])) << "direct call " << replay << ", run " << r;
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(other);
  d_count[0] = 77u;
  tally::reduce_by_key_into(tally::device, d_keys.begin(), d_keys.begin(), d_values.begin(), d_keys_out.begin(),
                            d_out.begin(), d_count.begin());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(unsigned(d_count[0]), 0u) << "no keys: no runs";
}

// Past 2^31 keys, through iterators (keys i / 65536 computed as read, every value 1): each run's
// sum is its length. 2^32 - 1 keys or more are refused before anything runs.
struct by_block {
  __host__ __device__ long long operator()(long long i) const { return i >> 16; }
};

TEST_F(reduce_by_key_device, past_two_to_the_31_and_the_limit) {
  const long long n = under_sanitizer() ? (1ll << 22) + 5 : (1ll << 31) + 70001;
  const auto keys = thrust::make_transform_iterator(thrust::counting_iterator<long long>(0), by_block{});
  const auto ones = thrust::constant_iterator<long long>(1);
  const std::size_t runs = std::size_t((n + 65535) >> 16);
  thrust::device_vector<long long> d_keys_out(runs + 1, -1), d_sums(runs + 1, -1);
  const auto ends =
      tally::reduce_by_key(tally::device, keys, keys + n, ones, d_keys_out.begin(), d_sums.begin());
  ASSERT_EQ(std::size_t(ends.first - d_keys_out.begin()), runs);
  const thrust::host_vector<long long> k = d_keys_out, sums = d_sums;
  for (std::size_t r = 0; r < runs; ++r) {
    ASSERT_EQ(k[r], (long long)r) << r;
    const long long length = std::min<long long>(65536, n - (long long)r * 65536);
    ASSERT_EQ(sums[r], length) << "run " << r;
  }
  EXPECT_EQ(sums[runs], -1) << "written past the runs";
  try {
    tally::reduce_by_key(tally::device, keys, keys + ((1ll << 32) - 1), ones, d_keys_out.begin(), d_sums.begin());
    ADD_FAILURE() << "2^32 - 1 keys not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("reduce_by_key"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2^32 - 1"), std::string::npos) << e.what();
  }
}

// Tuple values (x, y, z and a count per run, through tally::zip): each run's tuple has the bits of
// the host backend's, field by field.
TEST_F(reduce_by_key_device, zip_values_per_run) {
  seeded s(28);
  SCOPED_TRACE(s.trace());
  std::vector<std::size_t> lengths;
  const auto keys = keys_in_runs(s.rng, 150, lengths);
  const std::size_t n = keys.size(), runs = lengths.size();
  const auto x = random_values<float>(n, s.rng), y = random_values<float>(n, s.rng), z = random_values<float>(n, s.rng);
  using sums = cuda::std::tuple<float, float, float, int>;
  const thrust::device_vector<int> d_keys(keys.begin(), keys.end());
  const thrust::device_vector<float> dx(x.begin(), x.end()), dy(y.begin(), y.end()), dz(z.begin(), z.end());
  const auto points = tally::zip(dx.begin(), dy.begin(), dz.begin(), thrust::constant_iterator<int>(1));
  thrust::device_vector<int> d_ids(n, -1);
  thrust::device_vector<sums> d_sums(n, sums(-1.0f, -1.0f, -1.0f, -1));
  const auto ends = tally::reduce_by_key(tally::device, d_keys.begin(), d_keys.end(), points, d_ids.begin(),
                                         d_sums.begin(), cuda::std::equal_to<>{}, tally::plus<>{});
  ASSERT_EQ(std::size_t(ends.first - d_ids.begin()), runs);
  const auto host_points = tally::zip(x.begin(), y.begin(), z.begin(), thrust::constant_iterator<int>(1));
  std::vector<int> host_ids(n);
  std::vector<sums> host_sums(n);
  tally::reduce_by_key(tally::host, keys.begin(), keys.end(), host_points, host_ids.begin(), host_sums.begin(),
                       cuda::std::equal_to<>{}, tally::plus<>{});
  const thrust::host_vector<int> ids = d_ids;
  const thrust::host_vector<sums> got = d_sums;
  for (std::size_t r = 0; r < runs; ++r) {
    ASSERT_EQ(ids[r], host_ids[r]) << "run " << r;
    const sums g = got[r], h = host_sums[r];
    ASSERT_EQ(bits_of(cuda::std::get<0>(g)), bits_of(cuda::std::get<0>(h))) << "run " << r;
    ASSERT_EQ(bits_of(cuda::std::get<1>(g)), bits_of(cuda::std::get<1>(h))) << "run " << r;
    ASSERT_EQ(bits_of(cuda::std::get<2>(g)), bits_of(cuda::std::get<2>(h))) << "run " << r;
    ASSERT_EQ(cuda::std::get<3>(g), int(lengths[r])) << "run " << r;
  }
}

// Host threads calling at once: four on one stream (the legacy default stream), two on streams of
// their own, two on their per-thread default streams; each checks every result against the host
// backend's bits. (gpu-check runs cases named concurrent_calls under memcheck only.)
TEST_F(reduce_by_key_device, concurrent_calls_on_one_stream_and_on_many) {
  seeded s(29);
  SCOPED_TRACE(s.trace());
  const float_runs_case c(s.rng);
  const std::size_t n = c.n, runs = c.runs;
  const auto& want_keys = c.want_keys;
  const auto& want = c.want;
  const auto& d_keys = c.d_keys;
  const auto& d_values = c.d_values;
  const int rounds = under_sanitizer() ? 2 : 10;
  std::vector<std::string> failures(8);
  std::vector<std::thread> workers;
  for (int t = 0; t < 8; ++t) {
    workers.emplace_back([&, t] {
      try {
        cudaStream_t own = nullptr;
        if (t >= 4 && t < 6 && cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) != cudaSuccess)
          throw std::runtime_error("cudaStreamCreate failed");
        const cudaStream_t stream = t < 4 ? cudaStreamLegacy : t < 6 ? own : cudaStreamPerThread;
        int* keys_out = nullptr;
        float* out = nullptr;
        unsigned long long* count = nullptr;
        if (cudaMalloc(&keys_out, n * sizeof(int)) != cudaSuccess || cudaMalloc(&out, n * sizeof(float)) != cudaSuccess ||
            cudaMalloc(&count, sizeof(unsigned long long)) != cudaSuccess)
          throw std::runtime_error("cudaMalloc failed");
        std::vector<int> got_keys(runs);
        std::vector<float> got(runs);
        for (int round = 0; round < rounds && failures[std::size_t(t)].empty(); ++round) {
          if (cudaMemsetAsync(out, 0xA5, n * sizeof(float), stream) != cudaSuccess) throw std::runtime_error("memset");
          if (round % 2 == 0) {
            tally::reduce_by_key_into(tally::device.on(stream), d_keys.data().get(), d_keys.data().get() + n,
                                      d_values.data().get(), keys_out, out, count);
          } else {
            const auto ends = tally::reduce_by_key(tally::device.on(stream), d_keys.data().get(),
                                                   d_keys.data().get() + n, d_values.data().get(), keys_out, out);
            if (std::size_t(ends.first - keys_out) != runs) failures[std::size_t(t)] = "run count returned";
          }
          unsigned long long c = 0;
          if (cudaStreamSynchronize(stream) != cudaSuccess ||
              cudaMemcpy(&c, count, sizeof(c), cudaMemcpyDeviceToHost) != cudaSuccess ||
              cudaMemcpy(got.data(), out, runs * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess ||
              cudaMemcpy(got_keys.data(), keys_out, runs * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess)
            throw std::runtime_error("copy back failed");
          if (round % 2 == 0 && c != runs) failures[std::size_t(t)] = "run count written: " + std::to_string(c);
          for (std::size_t r = 0; r < runs && failures[std::size_t(t)].empty(); ++r)
            if (got_keys[r] != want_keys[r] || bits_of(got[r]) != bits_of(want[r]))
              failures[std::size_t(t)] = "round " + std::to_string(round) + ", run " + std::to_string(r);
        }
        cudaFree(keys_out);
        cudaFree(out);
        cudaFree(count);
        if (own) cudaStreamDestroy(own);
      } catch (const std::exception& e) {
        failures[std::size_t(t)] = e.what();
      }
    });
  }
  for (auto& w : workers) w.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[std::size_t(t)], "") << "thread " << t;
}

// Inside a capture the waiting form is refused before it enqueues anything (its result goes to the
// host, which a captured call cannot do), and the capture stays usable: the _into form is taken.
TEST_F(reduce_by_key_device, inside_a_capture_the_waiting_form_is_refused) {
  thrust::device_vector<int> d_keys(std::vector<int>{1, 1, 2, 3, 3, 3});
  thrust::device_vector<int> d_values(std::vector<int>{1, 2, 3, 4, 5, 6});
  thrust::device_vector<int> d_keys_out(6, -1), d_out(6, -1);
  thrust::device_vector<int> d_count(1, -1);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  // Outside the capture first: the same call works, and the process holds its result slots.
  const auto ends = tally::reduce_by_key(tally::device.on(stream), d_keys.begin(), d_keys.end(), d_values.begin(),
                                         d_keys_out.begin(), d_out.begin());
  EXPECT_EQ(ends.second - d_out.begin(), 3);
  thrust::fill(d_out.begin(), d_out.end(), -1);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  try {
    tally::reduce_by_key(tally::device.on(stream), d_keys.begin(), d_keys.end(), d_values.begin(), d_keys_out.begin(),
                         d_out.begin());
    ADD_FAILURE() << "reduce_by_key was not refused inside a capture";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("reduce_by_key"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("captured"), std::string::npos) << e.what();
  }
  tally::reduce_by_key_into(tally::device.on(stream), d_keys.begin(), d_keys.end(), d_values.begin(),
                            d_keys_out.begin(), d_out.begin(), d_count.begin());
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(int(d_count[0]), 3);
  EXPECT_EQ(int(d_out[0]), 3);
  EXPECT_EQ(int(d_out[1]), 3);
  EXPECT_EQ(int(d_out[2]), 15);
  EXPECT_EQ(int(d_keys_out[2]), 3);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_F(reduce_by_key_device, refused_arguments) {
  thrust::device_vector<int> d_keys(100, 3);
  thrust::device_vector<float> d_values(100, 1.0f);
  thrust::device_vector<int> d_keys_out(100);
  thrust::device_vector<float> d_out(100);
  std::vector<unsigned> host_count(1);
  const auto expect_refused = [](auto call, const char* algorithm, const char* words) {
    try {
      call();
      ADD_FAILURE() << "not refused: " << words;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(algorithm), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_refused([&] {
    tally::reduce_by_key(tally::device, d_keys.begin(), d_keys.end(), d_values.begin(), d_keys.begin(), d_out.begin());
  }, "reduce_by_key", "keys_out begins inside the keys");
  expect_refused([&] {
    tally::reduce_by_key(tally::device, d_keys.begin(), d_keys.end(), d_values.begin(), d_keys_out.begin(),
                         d_values.begin() + 50);
  }, "reduce_by_key", "values_out begins inside the values");
  expect_refused([&] {
    tally::reduce_by_key(tally::device, static_cast<const int*>(nullptr), static_cast<const int*>(nullptr) + 5,
                         d_values.begin(), d_keys_out.begin(), d_out.begin());
  }, "reduce_by_key", "null pointer");
  expect_refused([&] {
    tally::reduce_by_key_into(tally::device, d_keys.begin(), d_keys.end(), d_values.begin(), d_keys_out.begin(),
                              d_out.begin(), host_count.data());
  }, "reduce_by_key_into", "run_count");
  // Nothing ran: the outputs are as they were, and the context is usable.
  EXPECT_EQ(tally::reduce(tally::device, d_values.begin(), d_values.end()), 100.0f);
  const auto ends = tally::reduce_by_key(tally::device, d_keys.begin(), d_keys.end(), d_values.begin(),
                                         d_keys_out.begin(), d_out.begin());
  EXPECT_EQ(ends.first - d_keys_out.begin(), 1);
  EXPECT_EQ(float(d_out[0]), 100.0f);
}

}  // namespace
