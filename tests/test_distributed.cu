// tally::nccl: reductions over shards on several GPUs (<tally/distributed.cuh>).
//
// Every check runs on every rank of a communicator, in two set-ups:
//   two_devices_on_threads.*    one process driving every GPU, a thread per rank (ncclCommInitAll)
//   two_devices_on_processes.*  two processes of this program, one GPU each (ncclCommInitRank with a
//                  unique id passed through a file), as across hosts; each worker process
//                  runs the same checks as its own gtest run, under a time limit
// Each rank checks its answer against single-GPU tally::reduce over the whole range (bits,
// for shards on the plan's tiles), against a double or exact integer reference, and against
// every other rank's answer (bits, gathered through NCCL). Without two GPUs every case skips
// with the reason.

#include <tally/distributed.cuh>
#include <tally/exact.cuh>
#include <tally/fields.cuh>
#include <tally/logical.cuh>

#include <gtest/gtest.h>
#include <nccl.h>
#include <thrust/device_vector.h>
#include <thrust/iterator/zip_iterator.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.cuh"

extern char** environ;

namespace {

using namespace tally_test;

#define TEST_NCCL(call)                                                            \
  do {                                                                             \
    const ncclResult_t test_nccl_ = (call);                                        \
    ASSERT_EQ(test_nccl_, ncclSuccess) << #call << ": " << ncclGetErrorString(test_nccl_); \
  } while (0)

// One rank's view of the communicator.
struct rank_context {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int ranks = 1;
  cudaStream_t stream = nullptr;
  tally::nccl_policy policy() const { return tally::nccl(comm).on(stream); }
};

using rank_check = std::function<void(const rank_context&)>;

// The bytes of `value` from every rank, in rank order (an ncclAllGather on the rank's stream).
template <class T>
std::vector<T> gather_from_ranks(const rank_context& ctx, const T& value) {
  std::vector<T> all(std::size_t(ctx.ranks));
  unsigned char* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, sizeof(T) * (ctx.ranks + 1)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, &value, sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(ncclAllGather(d, d + sizeof(T), sizeof(T), ncclUint8, ctx.comm, ctx.stream), ncclSuccess);
  EXPECT_EQ(cudaStreamSynchronize(ctx.stream), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(all.data(), d + sizeof(T), sizeof(T) * ctx.ranks, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  return all;
}

// Every rank holds the same bits of value.
template <class T>
void expect_same_on_every_rank(const rank_context& ctx, const T& value, const std::string& what) {
  const std::vector<T> all = gather_from_ranks(ctx, value);
  for (int r = 0; r < ctx.ranks; ++r)
    EXPECT_EQ(std::memcmp(&all[std::size_t(r)], &value, sizeof(T)), 0)
        << what << ": rank " << r << " differs from rank " << ctx.rank;
}

// The whole range on this rank's GPU, and this rank's shard of it.
template <class T>
struct sharded {
  std::vector<T> host;
  thrust::device_vector<T> whole;
  thrust::device_vector<T> mine;
  std::uint64_t offset = 0;
  sharded(const std::vector<T>& values, std::uint64_t begin, std::uint64_t end)
      : host(values), whole(values.begin(), values.end()), mine(values.begin() + begin, values.begin() + end),
        offset(begin) {}
};

template <class T>
sharded<T> split_on_plan(const rank_context& ctx, const std::vector<T>& values) {
  const auto bounds = tally::shard_bounds<T>(values.size(), ctx.ranks);
  return sharded<T>(values, bounds[std::size_t(ctx.rank)], bounds[std::size_t(ctx.rank) + 1]);
}

// An uneven split that is not on the plan's tiles: rank r holds a share growing with r.
template <class T>
sharded<T> split_unevenly(const rank_context& ctx, const std::vector<T>& values) {
  const std::uint64_t n = values.size();
  const std::uint64_t weight_total = std::uint64_t(ctx.ranks) * (ctx.ranks + 1) / 2;
  std::uint64_t begin = 0;
  for (int r = 0; r < ctx.rank; ++r) begin += n * std::uint64_t(r + 1) / weight_total;
  std::uint64_t end = ctx.rank + 1 == ctx.ranks ? n : begin + n * std::uint64_t(ctx.rank + 1) / weight_total;
  return sharded<T>(values, begin, end);
}

std::vector<std::size_t> distributed_sizes() {
  std::vector<std::size_t> sizes{0, 1, 7, 1000, 8192, 8193, 16384, 16385, 100003, (std::size_t(1) << 20) + 5};
  if (!under_sanitizer()) sizes.push_back((std::size_t(1) << 24) + 13);
  return sizes;
}

// ---- the checks each rank runs ----

// Shards on the plan's tiles: every rank gets tally::reduce's bits over the whole range.
template <class T>
void check_sum_on_plan_tiles(const rank_context& ctx) {
  for (std::size_t n : distributed_sizes()) {
    seeded s(7000 + n);
    const auto values = order_sensitive_values<T>(n, s.rng);
    auto data = split_on_plan(ctx, values);
    const auto policy = ctx.policy().shard(data.offset, n);
    const T init = T(3);
    const T got = tally::reduce(policy, data.mine.begin(), data.mine.end(), init);
    const T single = tally::reduce(tally::device, data.whole.begin(), data.whole.end(), init);
    const T host = tally::reduce(tally::host, values.begin(), values.end(), init);
    EXPECT_EQ(bits_of(got), bits_of(single)) << "n " << n << ", rank " << ctx.rank << ", " << s.trace();
    EXPECT_EQ(bits_of(got), bits_of(host)) << "n " << n << ", rank " << ctx.rank;
    double exact = double(init);
    for (T x : values) exact += double(x);
    double magnitude = std::abs(double(init));
    for (T x : values) magnitude += std::abs(double(x));
    EXPECT_NEAR(double(got), exact, 1e-5 * magnitude + 1e-30) << "n " << n;
    expect_same_on_every_rank(ctx, got, "sum of " + std::to_string(n));
  }
}

// Integers: exact, against an exact reference.
void check_integer_sum(const rank_context& ctx) {
  for (std::size_t n : {std::size_t(0), std::size_t(5), std::size_t(70001), std::size_t(1) << 21}) {
    seeded s(7100 + n);
    const auto values = random_values<long long>(n, s.rng);
    auto data = split_unevenly(ctx, values);
    long long exact = 11;
    for (long long x : values) exact += x;
    EXPECT_EQ(tally::reduce(ctx.policy(), data.mine.begin(), data.mine.end(), 11ll), exact) << "n " << n;
    const auto on_tiles = split_on_plan(ctx, values);
    EXPECT_EQ(tally::reduce(ctx.policy().shard(on_tiles.offset, n), on_tiles.mine.begin(), on_tiles.mine.end(), 11ll),
              exact)
        << "n " << n;
  }
}

// An operator that is not commutative keeps the global order, on the plan's tiles and off them.
void check_order_kept(const rank_context& ctx) {
  for (std::size_t n : {std::size_t(3), std::size_t(5000), std::size_t(300001), (std::size_t(1) << 21) + 1}) {
    std::vector<affine_map> maps(n);
    seeded s(7200 + n);
    for (auto& m : maps) m = {s.rng() | 1u, s.rng()};
    affine_map expected{1, 0};
    for (const auto& m : maps) expected = compose_affine{}(expected, m);
    const affine_map init{1, 0};
    auto on_tiles = split_on_plan(ctx, maps);
    const affine_map a =
        tally::reduce(ctx.policy().shard(on_tiles.offset, n), on_tiles.mine.begin(), on_tiles.mine.end(), init,
                      compose_affine{});
    EXPECT_EQ(a.a, expected.a) << "n " << n;
    EXPECT_EQ(a.b, expected.b) << "n " << n;
    auto uneven = split_unevenly(ctx, maps);
    const affine_map b = tally::reduce(ctx.policy(), uneven.mine.begin(), uneven.mine.end(), init, compose_affine{});
    EXPECT_EQ(b.a, expected.a) << "n " << n << " (uneven)";
    EXPECT_EQ(b.b, expected.b) << "n " << n << " (uneven)";
  }
}

// Any other split: every rank's shard reduced alone, then folded in rank order. With two
// ranks the fold of two partials is op(p0, p1) (the plan's tree over two partials).
void check_sum_in_rank_order(const rank_context& ctx) {
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(9000), std::size_t(1) << 20}) {
    seeded s(7300 + n);
    const auto values = order_sensitive_values<float>(n, s.rng);
    auto data = split_unevenly(ctx, values);
    const float got = tally::reduce(ctx.policy(), data.mine.begin(), data.mine.end(), 0.5f);
    // -0.0f is the identity of the float sum: op(-0, total) = total, bit for bit.
    const float mine_alone = tally::reduce(tally::device, data.mine.begin(), data.mine.end(), -0.0f);
    const auto partials = gather_from_ranks(ctx, mine_alone);
    const auto sizes = gather_from_ranks(ctx, std::uint64_t(data.mine.size()));
    if (ctx.ranks == 2) {
      float expected = 0.5f;
      if (sizes[0] > 0 && sizes[1] > 0) {
        expected = 0.5f + (partials[0] + partials[1]);
      } else if (sizes[0] + sizes[1] > 0) {
        expected = 0.5f + (sizes[0] > 0 ? partials[0] : partials[1]);
      }
      EXPECT_EQ(bits_of(got), bits_of(expected)) << "n " << n << ", " << s.trace();
    }
    double exact = 0.5;
    for (float x : values) exact += x;
    EXPECT_NEAR(got, exact, 1e-3 + 1e-5 * n) << "n " << n;
    expect_same_on_every_rank(ctx, got, "rank-order sum of " + std::to_string(n));
  }
}

// transform_reduce, inner_product, count, count_if, any_of and x/y/z sums in one pass.
void check_family(const rank_context& ctx) {
  const std::size_t n = (std::size_t(1) << 20) + 77;
  seeded s(7400);
  const auto values = order_sensitive_values<float>(n, s.rng);
  auto data = split_on_plan(ctx, values);
  const auto policy = ctx.policy().shard(data.offset, n);
  const auto square = [] __host__ __device__(float x) { return x * x; };
  EXPECT_EQ(bits_of(tally::transform_reduce(policy, data.mine.begin(), data.mine.end(), square, 0.0f, tally::plus<float>{})),
            bits_of(tally::transform_reduce(tally::device, data.whole.begin(), data.whole.end(), square, 0.0f,
                                            tally::plus<float>{})));
  EXPECT_EQ(bits_of(tally::inner_product(policy, data.mine.begin(), data.mine.end(), data.mine.begin(), 0.0)),
            bits_of(tally::inner_product(tally::device, data.whole.begin(), data.whole.end(), data.whole.begin(), 0.0)));
  const auto positive = [] __host__ __device__(float x) { return x > 0.0f; };
  std::int64_t expected_positive = 0;
  for (float x : values) expected_positive += x > 0.0f;
  EXPECT_EQ(std::int64_t(tally::count_if(policy, data.mine.begin(), data.mine.end(), positive)), expected_positive);
  EXPECT_EQ(std::int64_t(tally::count(policy, data.mine.begin(), data.mine.end(), values[n / 2])),
            std::int64_t(std::count(values.begin(), values.end(), values[n / 2])));
  const auto is_huge = [] __host__ __device__(float x) { return x > 1e30f; };
  EXPECT_FALSE(tally::any_of(policy, data.mine.begin(), data.mine.end(), is_huge));

  // x, y and z sums in one pass over a zip of three shards, split on the zip's plan.
  const auto ys = order_sensitive_values<float>(n, s.rng);
  const auto zs = order_sensitive_values<double>(n, s.rng);
  const thrust::device_vector<float> x_all(values.begin(), values.end()), y_all(ys.begin(), ys.end());
  const thrust::device_vector<double> z_all(zs.begin(), zs.end());
  const auto whole_first = thrust::make_zip_iterator(thrust::make_tuple(x_all.begin(), y_all.begin(), z_all.begin()));
  const auto bounds = tally::shard_bounds<decltype(whole_first)>(n, ctx.ranks);
  const std::uint64_t begin = bounds[std::size_t(ctx.rank)], end = bounds[std::size_t(ctx.rank) + 1];
  const thrust::device_vector<float> x_mine(values.begin() + begin, values.begin() + end);
  const thrust::device_vector<float> y_mine(ys.begin() + begin, ys.begin() + end);
  const thrust::device_vector<double> z_mine(zs.begin() + begin, zs.begin() + end);
  const auto mine_first = thrust::make_zip_iterator(thrust::make_tuple(x_mine.begin(), y_mine.begin(), z_mine.begin()));
  using acc = thrust::tuple<float, float, double>;
  const auto op = tally::fields(tally::plus<float>{}, tally::plus<float>{}, tally::plus<double>{});
  const acc got = tally::reduce(ctx.policy().shard(begin, n), mine_first, mine_first + (end - begin),
                                acc{0.0f, 0.0f, 0.0}, op);
  const acc single = tally::reduce(tally::device, whole_first, whole_first + n, acc{0.0f, 0.0f, 0.0}, op);
  EXPECT_EQ(bits_of(thrust::get<0>(got)), bits_of(thrust::get<0>(single)));
  EXPECT_EQ(bits_of(thrust::get<1>(got)), bits_of(thrust::get<1>(single)));
  EXPECT_EQ(bits_of(thrust::get<2>(got)), bits_of(thrust::get<2>(single)));
  double exact_z = 0;
  for (double v : zs) exact_z += v;
  EXPECT_NEAR(thrust::get<2>(got), exact_z, 1e-6 * n);
}

// Exact sums (tally::exact_plus): every rank gets the exact sum of init and the whole range,
// rounded once, whatever the split, with or without .shard(): the host's exact bits and the
// single GPU's. Values over the whole exponent range; special values met on one rank only, or
// opposite infinities on two; -0 everywhere; empty shards; reduce_into captured and replayed;
// a transform of float squares into double sums.
template <class T>
void check_exact_sums(const rank_context& ctx) {
  seeded s(7700 + sizeof(T));
  const auto host_exact = [](const std::vector<T>& v, T init) {
    return tally::reduce(tally::host, v.begin(), v.end(), init, tally::exact_plus<T>{});
  };
  const auto expect_exact = [&](const std::vector<T>& values, T init, const std::string& what) {
    SCOPED_TRACE(what + ", n = " + std::to_string(values.size()));
    const T want = host_exact(values, init);
    for (bool uneven : {false, true}) {
      auto data = uneven ? split_unevenly(ctx, values) : split_on_plan(ctx, values);
      const T got = tally::reduce(ctx.policy(), data.mine.begin(), data.mine.end(), init, tally::exact_plus<T>{});
      EXPECT_EQ(bits_of(got), bits_of(want)) << (uneven ? "uneven split" : "plan split") << ": " << got << " against " << want;
      const T with_shard = tally::reduce(ctx.policy().shard(data.offset, values.size()), data.mine.begin(),
                                         data.mine.end(), init, tally::exact_plus<T>{});
      EXPECT_EQ(bits_of(with_shard), bits_of(want)) << "with .shard()";
      if (!uneven && !values.empty()) {
        const T single = tally::reduce(tally::device, data.whole.begin(), data.whole.end(), init, tally::exact_plus<T>{});
        EXPECT_EQ(bits_of(single), bits_of(want)) << "one GPU";
      }
      expect_same_on_every_rank(ctx, got, what);
    }
  };
  for (std::size_t n : distributed_sizes()) expect_exact(any_finite<T>(n, s.rng), any_finite<T>(1, s.rng)[0], "any finite");
  const std::size_t n = 100003;
  const T inf = std::numeric_limits<T>::infinity();
  auto values = any_finite<T>(n, s.rng);
  values[n - 3] = std::numeric_limits<T>::quiet_NaN();  // on the last rank only
  expect_exact(values, T(1), "NaN on one rank");
  values = any_finite<T>(n, s.rng);
  values[2] = inf;
  values[n - 2] = -inf;
  expect_exact(values, T(1), "+inf and -inf on different ranks");
  values[n - 2] = T(5);
  expect_exact(values, T(1), "+inf on one rank");
  expect_exact(std::vector<T>(n, -T(0)), -T(0), "-0 everywhere, init -0");
  expect_exact(std::vector<T>(n, -T(0)), T(0), "-0 everywhere, init +0");
  expect_exact(std::vector<T>(3, std::numeric_limits<T>::max()), T(0), "overflow across ranks");
  expect_exact(std::vector<T>(1, T(2)), T(0.5), "one element: the other ranks' shards are empty");

  // reduce_into, directly and captured in a graph replayed three times.
  values = any_finite<T>(n, s.rng);
  auto data = split_unevenly(ctx, values);
  const T want = host_exact(values, T(-3));
  device_value<T> out;
  tally::reduce_into(ctx.policy(), data.mine.begin(), data.mine.end(), out.get(), T(-3), tally::exact_plus<T>{});
  TEST_CUDA(cudaStreamSynchronize(ctx.stream));
  EXPECT_EQ(bits_of(out.read()), bits_of(want)) << "reduce_into";
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  TEST_CUDA(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
  tally::reduce_into(ctx.policy(), data.mine.begin(), data.mine.end(), out.get(), T(-3), tally::exact_plus<T>{});
  TEST_CUDA(cudaStreamEndCapture(ctx.stream, &graph));
  TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    out.poison();
    TEST_CUDA(cudaGraphLaunch(exec, ctx.stream));
    TEST_CUDA(cudaStreamSynchronize(ctx.stream));
    EXPECT_EQ(bits_of(out.read()), bits_of(want)) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  if constexpr (sizeof(T) == 8) {
    // Float squares into double sums (each product exact in double), through transform_reduce.
    const auto floats = any_finite<float>(n, s.rng);
    std::vector<double> squares(n);
    for (std::size_t k = 0; k < n; ++k) squares[k] = double(floats[k]) * double(floats[k]);
    auto shards = split_unevenly(ctx, floats);
    const auto square = [] __host__ __device__(float x) { return double(x) * double(x); };
    const double got = tally::transform_reduce(ctx.policy(), shards.mine.begin(), shards.mine.end(), square, 0.0,
                                               tally::exact_plus<double>{});
    EXPECT_EQ(bits_of(got), bits_of(tally::reduce(tally::host, squares.begin(), squares.end(), 0.0,
                                                  tally::exact_plus<double>{})))
        << "transform_reduce";
  }
}

// The extrema return global positions: the first of equal values across ranks.
void check_extrema(const rank_context& ctx) {
  for (std::size_t n : {std::size_t(1), std::size_t(4097), std::size_t(1) << 20}) {
    seeded s(7500 + n);
    std::vector<int> values(n);
    std::uniform_int_distribution<int> d(-1000, 1000);
    for (auto& v : values) v = d(s.rng);
    values[n - 1] = -5000;  // ties for the minimum: the first global one wins
    values[n / 3] = -5000;
    values[n / 2] = 5000;
    auto data = split_unevenly(ctx, values);
    const auto policy = ctx.policy().shard(data.offset, n);
    const auto expected_min = std::min_element(values.begin(), values.end()) - values.begin();
    const auto expected_max = std::max_element(values.begin(), values.end()) - values.begin();
    EXPECT_EQ(tally::min_element(policy, data.mine.begin(), data.mine.end()), expected_min) << "n " << n;
    EXPECT_EQ(tally::max_element(policy, data.mine.begin(), data.mine.end()), expected_max) << "n " << n;
    const auto mm = tally::minmax_element(policy, data.mine.begin(), data.mine.end());
    EXPECT_EQ(mm.first, expected_min) << "n " << n;
    EXPECT_EQ(mm.second, expected_max) << "n " << n;
  }
}

// reduce_into does not wait, and a captured call replays: the graph owns its buffers.
void check_into_and_graphs(const rank_context& ctx) {
  const std::size_t n = 300007;
  seeded s(7600);
  const auto values = order_sensitive_values<double>(n, s.rng);
  auto data = split_on_plan(ctx, values);
  const auto policy = ctx.policy().shard(data.offset, n);
  const double single = tally::reduce(tally::device, data.whole.begin(), data.whole.end(), 1.0);
  device_value<double> out;
  tally::reduce_into(policy, data.mine.begin(), data.mine.end(), out.get(), 1.0);
  TEST_CUDA(cudaStreamSynchronize(ctx.stream));
  EXPECT_EQ(bits_of(out.read()), bits_of(single));

  out.poison();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  TEST_CUDA(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
  tally::reduce_into(policy, data.mine.begin(), data.mine.end(), out.get(), 1.0);
  TEST_CUDA(cudaStreamEndCapture(ctx.stream, &graph));
  TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    out.poison();
    TEST_CUDA(cudaGraphLaunch(exec, ctx.stream));
    TEST_CUDA(cudaStreamSynchronize(ctx.stream));
    EXPECT_EQ(bits_of(out.read()), bits_of(single)) << "replay " << replay;
    // A direct call between replays on the same stream shares nothing with the graph.
    EXPECT_EQ(bits_of(tally::reduce(policy, data.mine.begin(), data.mine.end(), 1.0)), bits_of(single));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// The same call twice gives the same bits (and the same on every rank).
void check_run_to_run(const rank_context& ctx) {
  const std::size_t n = (std::size_t(1) << 22) + 3;
  seeded s(7700);
  const auto values = order_sensitive_values<float>(n, s.rng);
  auto data = split_unevenly(ctx, values);
  const float first = tally::reduce(ctx.policy(), data.mine.begin(), data.mine.end());
  for (int run = 0; run < 3; ++run)
    EXPECT_EQ(bits_of(tally::reduce(ctx.policy(), data.mine.begin(), data.mine.end())), bits_of(first));
  expect_same_on_every_rank(ctx, first, "run-to-run sum");
  // Many calls back to back, each at every size a different shard: a kernel that read the
  // collective's buffer too early or too late would give one of them other bits.
  for (std::size_t size : {std::size_t(5000), std::size_t(1) << 17, std::size_t(1) << 20}) {
    const auto small = order_sensitive_values<float>(size, s.rng);
    auto on_tiles = split_on_plan(ctx, small);
    const float single = tally::reduce(tally::device, on_tiles.whole.begin(), on_tiles.whole.end());
    const auto policy = ctx.policy().shard(on_tiles.offset, size);
    for (int call = 0; call < 20; ++call)
      EXPECT_EQ(bits_of(tally::reduce(policy, on_tiles.mine.begin(), on_tiles.mine.end())), bits_of(single))
          << "size " << size << ", call " << call << ", rank " << ctx.rank;
  }
}

// Faults every rank sees: a shard off the plan's tiles, calls that differ across ranks. Each
// rank throws a sentence naming the faulty rank, and the next call works.
void check_faults(const rank_context& ctx) {
  const std::size_t n = (std::size_t(1) << 21) + 9;
  seeded s(7800);
  const auto values = random_values<float>(n, s.rng);
  auto uneven = split_unevenly(ctx, values);
  const auto off_tiles = ctx.policy().shard(uneven.offset, n);
  try {
    (void)tally::reduce(off_tiles, uneven.mine.begin(), uneven.mine.end());
    if (uneven.offset != 0 || ctx.ranks > 1) ADD_FAILURE() << "a shard off the plan's tiles was not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tally::reduce"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tile boundary"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank "), std::string::npos) << e.what();
  }
  // reduce_into cannot throw for what the combine finds: it leaves *out as it was.
  if (uneven.offset != 0 || ctx.ranks > 1) {
    device_value<float> out;
    const float poison = out.read();
    tally::reduce_into(off_tiles, uneven.mine.begin(), uneven.mine.end(), out.get());
    TEST_CUDA(cudaStreamSynchronize(ctx.stream));
    EXPECT_EQ(bits_of(out.read()), bits_of(poison)) << "reduce_into wrote a result the combine refused";
  }
  // Rank 0 multiplies where the others add (the same accumulator size): every rank refuses.
  auto on_tiles = split_on_plan(ctx, values);
  const auto policy = ctx.policy().shard(on_tiles.offset, n);
  try {
    if (ctx.rank == 0) {
      (void)tally::reduce(policy, on_tiles.mine.begin(), on_tiles.mine.end(), 1.0f, tally::multiplies<float>{});
    } else {
      (void)tally::reduce(policy, on_tiles.mine.begin(), on_tiles.mine.end(), 1.0f, tally::plus<float>{});
    }
    if (ctx.ranks > 1) ADD_FAILURE() << "ranks with different operators were not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rank "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("same call"), std::string::npos) << e.what();
  }
  // An NCCL call that fails (injected on every rank, so no rank waits in a collective): a
  // tally::nccl_error naming the rank and NCCL's error, and the next call works.
  tally::detail::inject_nccl_failures(1);
  try {
    (void)tally::reduce(policy, on_tiles.mine.begin(), on_tiles.mine.end());
    ADD_FAILURE() << "an injected NCCL failure did not throw";
  } catch (const tally::nccl_error& e) {
    EXPECT_EQ(e.code(), ncclInternalError);
    EXPECT_EQ(e.rank(), ctx.rank);
    const std::string text = e.what();
    EXPECT_NE(text.find("tally::reduce (rank " + std::to_string(ctx.rank) + ")"), std::string::npos) << text;
    EXPECT_NE(text.find("ncclAllReduce"), std::string::npos) << text;
    EXPECT_NE(text.find(ncclGetErrorString(ncclInternalError)), std::string::npos) << text;
    EXPECT_NE(text.find("ncclCommAbort"), std::string::npos) << text;
  }
  // The communicator of another device, on every rank at once (no collective is reached).
  int devices = 0;
  TEST_CUDA(cudaGetDeviceCount(&devices));
  int mine = 0;
  TEST_CUDA(cudaGetDevice(&mine));
  if (devices > 1) {
    TEST_CUDA(cudaSetDevice((mine + 1) % devices));
    EXPECT_THROW((void)tally::reduce(ctx.policy(), uneven.mine.begin(), uneven.mine.end()), std::invalid_argument);
    TEST_CUDA(cudaSetDevice(mine));
  }
  // A stream of another device, likewise on every rank at once.
  if (devices > 1) {
    TEST_CUDA(cudaSetDevice((mine + 1) % devices));
    cudaStream_t foreign = nullptr;
    TEST_CUDA(cudaStreamCreateWithFlags(&foreign, cudaStreamNonBlocking));
    TEST_CUDA(cudaSetDevice(mine));
    try {
      (void)tally::reduce(tally::nccl(ctx.comm).on(foreign), uneven.mine.begin(), uneven.mine.end());
      ADD_FAILURE() << "a stream of another device was not refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("device"), std::string::npos) << e.what();
    }
    TEST_CUDA(cudaStreamDestroy(foreign));
  }
  TEST_CUDA(cudaGetLastError());
  // The context and the communicator still work.
  double exact = 0;
  for (float x : values) exact += x;
  EXPECT_NEAR(tally::reduce(policy, on_tiles.mine.begin(), on_tiles.mine.end(), 0.0f), exact, 1e-3 * n);
}

const std::vector<std::pair<std::string, rank_check>>& every_check() {
  static const std::vector<std::pair<std::string, rank_check>> checks{
      {"float_sum_has_single_gpu_bits_on_plan_tiles", check_sum_on_plan_tiles<float>},
      {"double_sum_has_single_gpu_bits_on_plan_tiles", check_sum_on_plan_tiles<double>},
      {"integer_sums_are_exact", check_integer_sum},
      {"order_is_kept_for_an_operator_that_is_not_commutative", check_order_kept},
      {"other_splits_fold_in_rank_order", check_sum_in_rank_order},
      {"family_and_fields_have_single_gpu_bits", check_family},
      {"extrema_return_global_positions", check_extrema},
      {"reduce_into_and_graph_replays", check_into_and_graphs},
      {"same_bits_run_to_run", check_run_to_run},
      {"faults_are_refused_on_every_rank", check_faults},
      {"exact_float_sums_of_any_split", check_exact_sums<float>},
      {"exact_double_sums_of_any_split", check_exact_sums<double>},
  };
  return checks;
}

// ---- one process, a thread per GPU ----

struct threaded_ranks {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::string failure;
};

bool& threaded_state_flag() {
  static bool made = false;
  return made;
}
bool threaded_state_made() { return threaded_state_flag(); }

threaded_ranks& threaded() {
  threaded_state_flag() = true;
  static threaded_ranks state = [] {
    threaded_ranks s;
    const int count = device_count();
    if (count < 2) {
      s.failure = "needs two CUDA devices, found " + std::to_string(count);
      return s;
    }
    s.comms.resize(std::size_t(count));
    const ncclResult_t made = ncclCommInitAll(s.comms.data(), count, nullptr);
    if (made != ncclSuccess) {
      s.failure = std::string("ncclCommInitAll failed: ") + ncclGetErrorString(made);
      s.comms.clear();
      return s;
    }
    for (int d = 0; d < count; ++d) {
      cudaSetDevice(d);
      cudaStream_t stream = nullptr;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      s.streams.push_back(stream);
    }
    cudaSetDevice(0);
    return s;
  }();
  return state;
}

class OnThreads : public ::testing::Test {
 public:
  explicit OnThreads(rank_check check) : check_(std::move(check)) {}
  void TestBody() override {
    auto& state = threaded();
    if (!state.failure.empty()) GTEST_SKIP() << "distributed test skipped: " << state.failure;
    const int ranks = int(state.comms.size());
    // A rank stuck in a collective (a bug that left the ranks' calls mismatched) would hang
    // every thread: the watchdog then ends the program with a failure instead of stalling the run.
    std::mutex done_mutex;
    std::condition_variable done_signal;
    bool done = false;
    std::thread watchdog([&] {
      std::unique_lock<std::mutex> lock(done_mutex);
      const auto limit = std::chrono::seconds(under_sanitizer() ? 900 : 300);
      if (!done_signal.wait_for(lock, limit, [&] { return done; })) {
        std::fprintf(stderr, "%s: the ranks did not finish in time (a hang); ending the program\n",
                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::fflush(stderr);
        std::_Exit(1);
      }
    });
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        cudaSetDevice(r);
        rank_context ctx{state.comms[std::size_t(r)], r, ranks, state.streams[std::size_t(r)]};
        check_(ctx);
      });
    }
    for (auto& t : threads) t.join();
    {
      std::lock_guard<std::mutex> lock(done_mutex);
      done = true;
    }
    done_signal.notify_one();
    watchdog.join();
    cudaSetDevice(0);
  }

 private:
  rank_check check_;
};

// ---- processes: this program again, once per rank ----

// Set in a worker process: "RANK RANKS ID_FILE".
const char* worker_environment() { return std::getenv("TALLY_DISTRIBUTED_WORKER"); }

rank_context& worker_context() {
  static rank_context ctx;
  return ctx;
}

class InWorker : public ::testing::Test {
 public:
  explicit InWorker(rank_check check) : check_(std::move(check)) {}
  void TestBody() override { check_(worker_context()); }

 private:
  rank_check check_;
};

std::string self_path() {
  char buffer[4096] = {};
  const ssize_t length = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  return length > 0 ? std::string(buffer, std::size_t(length)) : std::string();
}

TEST(two_devices_on_processes, every_check_on_two_ranks_one_process_each) {
  const int count = device_count();
  if (count < 2) GTEST_SKIP() << "distributed test skipped: needs two CUDA devices, found " << count;
  ncclUniqueId id;
  TEST_NCCL(ncclGetUniqueId(&id));
  char id_file[] = "/tmp/tally-nccl-id-XXXXXX";
  const int fd = mkstemp(id_file);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, &id, sizeof(id)), ssize_t(sizeof(id)));
  close(fd);
  const std::string program = self_path();
  ASSERT_FALSE(program.empty());
  std::vector<pid_t> workers;
  std::vector<std::string> logs;
  for (int r = 0; r < 2; ++r) {
    const std::string log = std::string(id_file) + ".rank" + std::to_string(r) + ".log";
    logs.push_back(log);
    const std::string env = "TALLY_DISTRIBUTED_WORKER=" + std::to_string(r) + " 2 " + id_file;
    // The ranks draw the same inputs: every worker takes this process's base seed.
    std::vector<std::string> env_strings{env, "CUDA_VISIBLE_DEVICES=" + std::to_string(r),
                                         "TALLY_TEST_SEED=" + std::to_string(base_seed())};
    for (char** e = environ; *e != nullptr; ++e)
      if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0 && std::strncmp(*e, "TALLY_DISTRIBUTED_WORKER=", 25) != 0 &&
          std::strncmp(*e, "TALLY_TEST_SEED=", 16) != 0)
        env_strings.push_back(*e);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string arg0 = program;
    std::string filter = "--gtest_filter=two_devices_in_worker.*";
    char* argv[] = {arg0.data(), filter.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, program.c_str(), &actions, nullptr, argv, envp.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
    workers.push_back(pid);
  }
  // A hang (a rank stuck in a collective) fails the test instead of stalling the run.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(under_sanitizer() ? 900 : 300);
  std::vector<int> statuses(workers.size(), -1);
  std::size_t done = 0;
  while (done < workers.size()) {
    for (std::size_t w = 0; w < workers.size(); ++w) {
      if (statuses[w] != -1) continue;
      int status = 0;
      if (waitpid(workers[w], &status, WNOHANG) == workers[w]) {
        statuses[w] = status;
        ++done;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (std::size_t w = 0; w < workers.size(); ++w)
        if (statuses[w] == -1) {
          kill(workers[w], SIGKILL);
          waitpid(workers[w], &statuses[w], 0);
          ADD_FAILURE() << "rank " << w << " did not finish in time (killed)";
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (std::size_t w = 0; w < workers.size(); ++w) {
    std::ifstream in(logs[w]);
    std::stringstream text;
    text << in.rdbuf();
    const bool passed = WIFEXITED(statuses[w]) && WEXITSTATUS(statuses[w]) == 0;
    EXPECT_TRUE(passed) << "rank " << w << " failed; its output:\n" << text.str();
    // Every check ran in the worker, none skipped.
    EXPECT_NE(text.str().find("[  PASSED  ] " + std::to_string(every_check().size()) + " tests"), std::string::npos)
        << "rank " << w << ":\n" << text.str();
    EXPECT_EQ(text.str().find("SKIPPED"), std::string::npos) << "rank " << w << ":\n" << text.str();
    std::remove(logs[w].c_str());
  }
  std::remove(id_file);
}

// Without NCCL work: the split helper and the policy's arguments.
TEST(ShardBounds, deal_out_the_plans_tiles_evenly_and_cover_the_range) {
  for (std::uint64_t n : {0ull, 1ull, 8192ull, 8193ull, 1000000ull, (1ull << 24) + 5, 1ull << 40}) {
    for (int ranks : {1, 2, 3, 8}) {
      const auto bounds = tally::shard_bounds<float>(n, ranks);
      ASSERT_EQ(bounds.size(), std::size_t(ranks) + 1);
      EXPECT_EQ(bounds.front(), 0u);
      EXPECT_EQ(bounds.back(), n);
      const auto plan = tally::detail::make_plan_for<float>(n);
      for (int r = 0; r < ranks; ++r) {
        EXPECT_LE(bounds[std::size_t(r)], bounds[std::size_t(r) + 1]);
        EXPECT_TRUE(bounds[std::size_t(r)] % plan.tile_items == 0 || bounds[std::size_t(r)] == n);
        const std::uint64_t tiles = (bounds[std::size_t(r) + 1] - bounds[std::size_t(r)] + plan.tile_items - 1) / plan.tile_items;
        EXPECT_LE(tiles, plan.tiles / std::uint64_t(ranks) + 1) << "n " << n << ", " << ranks << " ranks";
      }
    }
  }
  EXPECT_THROW(tally::shard_bounds<float>(10, 0), std::invalid_argument);
  // Zips take their bases' plan.
  using zip = thrust::zip_iterator<thrust::tuple<float*, float*>>;
  EXPECT_EQ(tally::shard_bounds<zip>(1u << 24, 2)[1], tally::shard_bounds<float>(1u << 24, 2)[1]);
}

// Where each rank's contribution goes, computed on the host from its own arguments alone
// (a float sum: vector width 4).
tally::detail::shard_layout float_sum_layout(int rank, int ranks, bool shard, std::uint64_t offset,
                                             std::uint64_t global, std::uint64_t n) {
  return tally::detail::layout_shard_of<tally::plus<float>>(rank, ranks, shard, offset, global, n, 4);
}

TEST(ShardLayout, tiles_of_the_global_plan_or_a_slot_per_rank) {
  const std::uint64_t global = (std::uint64_t(1) << 24) + 5;
  const auto plan = tally::detail::make_plan(global, 4);
  const auto bounds = tally::shard_bounds<float>(global, 3);
  for (int r = 0; r < 3; ++r) {
    const auto l = float_sum_layout(r, 3, true, bounds[r], global, bounds[r + 1] - bounds[r]);
    EXPECT_TRUE(l.on_plan_tiles);
    EXPECT_EQ(l.fault, tally::detail::shard_fault::none);
    EXPECT_EQ(l.slot_count, plan.tiles);
    EXPECT_EQ(l.first_slot, bounds[r] / plan.tile_items);
    EXPECT_EQ(l.shard_plan.tile_items, plan.tile_items);
    EXPECT_EQ(l.shard_plan.n, bounds[r + 1] - bounds[r]);
    EXPECT_EQ(l.shard_plan.tiles, (bounds[r + 1] - bounds[r] + plan.tile_items - 1) / plan.tile_items);
  }
  // Off a tile boundary, at the start or the end; past the global end.
  EXPECT_EQ(float_sum_layout(1, 2, true, plan.tile_items + 1, global, plan.tile_items).fault,
            tally::detail::shard_fault::off_tile_boundary);
  EXPECT_EQ(float_sum_layout(0, 2, true, 0, global, plan.tile_items + 3).fault,
            tally::detail::shard_fault::off_tile_boundary);
  EXPECT_EQ(float_sum_layout(1, 2, true, plan.tile_items, global, global).fault,
            tally::detail::shard_fault::past_global_end);
  EXPECT_EQ(float_sum_layout(1, 2, true, global + 1, global, 0).fault,
            tally::detail::shard_fault::past_global_end);
  // The last shard may end anywhere: at the global end.
  EXPECT_EQ(float_sum_layout(1, 2, true, plan.tile_items, global, global - plan.tile_items).fault,
            tally::detail::shard_fault::none);
  // An empty shard anywhere is fine.
  EXPECT_EQ(float_sum_layout(1, 2, true, 77, global, 0).fault, tally::detail::shard_fault::none);
  // Without .shard(): a slot per rank, each shard its own plan.
  const auto own = float_sum_layout(2, 4, false, 0, 0, 1000003);
  EXPECT_FALSE(own.on_plan_tiles);
  EXPECT_EQ(own.slot_count, 4u);
  EXPECT_EQ(own.first_slot, 2u);
  EXPECT_EQ(own.shard_plan.tiles, tally::detail::make_plan(1000003, 4).tiles);
  // Order-free operators (the extrema) take a slot per rank even with .shard().
  const auto extrema = tally::detail::layout_shard_of<tally::detail::keep_first_min<float, thrust::less<float>>>(
      1, 2, true, 12345, global, 999, 4);
  EXPECT_FALSE(extrema.on_plan_tiles);
  EXPECT_EQ(extrema.slot_count, 2u);
}

TEST(ShardLayout, fault_text_names_the_rank_and_the_remedy) {
  using namespace tally::detail;
  const std::string off = shard_fault_text(shard_status::rank_fault | (unsigned(shard_fault::off_tile_boundary) << 20) | 3u);
  EXPECT_NE(off.find("rank 3"), std::string::npos) << off;
  EXPECT_NE(off.find("tally::shard_bounds"), std::string::npos) << off;
  const std::string past = shard_fault_text(shard_status::rank_fault | (unsigned(shard_fault::past_global_end) << 20) | 1u);
  EXPECT_NE(past.find("rank 1"), std::string::npos) << past;
  EXPECT_NE(past.find("global size"), std::string::npos) << past;
  const std::string differs = shard_fault_text(shard_status::signature_mismatch | 2u);
  EXPECT_NE(differs.find("rank 2"), std::string::npos) << differs;
  EXPECT_NE(differs.find("same call"), std::string::npos) << differs;
  const std::string cover = shard_fault_text(shard_status::slot_not_once | 17u);
  EXPECT_NE(cover.find("tile 17"), std::string::npos) << cover;
}

TEST(ShardLayout, signatures_tell_calls_apart) {
  using namespace tally::detail;
  const unsigned a = call_signature<float, tally::plus<float>, float>(16, true);
  EXPECT_EQ(a, (call_signature<float, tally::plus<float>, float>(16, true)));
  EXPECT_NE(a, (call_signature<float, tally::multiplies<float>, float>(16, true)));
  EXPECT_NE(a, (call_signature<int, tally::plus<int>, int>(16, true)));
  EXPECT_NE(a, (call_signature<float, tally::plus<float>, double>(16, true)));
  EXPECT_NE(a, (call_signature<float, tally::plus<float>, float>(17, true)));
  EXPECT_NE(a, (call_signature<float, tally::plus<float>, float>(16, false)));
  EXPECT_NE(a, 0u);
}

TEST(NcclPolicy, a_null_communicator_is_refused) {
  EXPECT_THROW((void)tally::nccl(nullptr), std::invalid_argument);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (const char* worker = worker_environment()) {
    int rank = 0, ranks = 0;
    char id_file[4096] = {};
    if (std::sscanf(worker, "%d %d %4095s", &rank, &ranks, id_file) != 3) return 2;
    ncclUniqueId id;
    std::ifstream in(id_file, std::ios::binary);
    in.read(reinterpret_cast<char*>(&id), sizeof(id));
    if (!in) return 3;
    if (cudaSetDevice(0) != cudaSuccess) return 4;  // CUDA_VISIBLE_DEVICES shows this rank's GPU only
    rank_context& ctx = worker_context();
    if (ncclCommInitRank(&ctx.comm, ranks, id, rank) != ncclSuccess) return 5;
    ctx.rank = rank;
    ctx.ranks = ranks;
    cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking);
    for (const auto& [name, check] : every_check())
      ::testing::RegisterTest("two_devices_in_worker", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [check = check]() -> ::testing::Test* { return new InWorker(check); });
    const int result = RUN_ALL_TESTS();
    ncclCommDestroy(ctx.comm);
    return result;
  }
  for (const auto& [name, check] : every_check())
    ::testing::RegisterTest("two_devices_on_threads", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [check = check]() -> ::testing::Test* { return new OnThreads(check); });
  const int result = RUN_ALL_TESTS();
  if (threaded_state_made()) {
    for (ncclComm_t comm : threaded().comms) ncclCommDestroy(comm);
  }
  return result;
}
