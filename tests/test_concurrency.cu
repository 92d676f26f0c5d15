// The scratch pool under concurrency: many host threads, each on its own stream (spread over
// the devices where there are several), calling every algorithm with checked results; the pool holds one entry per stream used and does
// not grow when the same streams run again; a stream destroyed with its work in flight,
// then a new stream (which usually gets the same handle), reduces correctly.
#include "support/test_support.cuh"
#include "tally/extrema.cuh"
#include "tally/logical.cuh"
#include "tally/reduce.cuh"
#include "tally/transform_reduce.cuh"

#include <thrust/functional.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using tally_test::device_buffer;
using tally_test::device_value;
using tally_test::random_values;
using tally_test::reference_sum;
using tally_test::seeded;

struct square_wide {
  __host__ __device__ long long operator()(int x) const { return static_cast<long long>(x) * x; }
};

struct is_negative {
  __host__ __device__ bool operator()(int x) const { return x < 0; }
};

struct above {
  int bound;
  __host__ __device__ bool operator()(int x) const { return x > bound; }
};

// One round of every algorithm on `stream` over random ints; the first failure's text, or
// an empty string. Device outputs are poisoned before each call that writes one.
std::string run_every_algorithm(cudaStream_t stream, std::size_t n, std::mt19937_64& rng, int* data,
                                device_value<long long>& out) {
  const auto v = random_values<int>(n, rng);
  if (cudaMemcpyAsync(data, v.data(), n * sizeof(int), cudaMemcpyHostToDevice, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess)
    return "copy failed";
  const auto policy = tally::device.on(stream);
  const int* first = data;
  const int* last = data + n;
  const std::string at = " (n " + std::to_string(n) + ")";

  if (tally::reduce(policy, first, last, 7) != reference_sum<int>(v, 0, n, 7)) return "reduce" + at;

  out.poison();
  tally::reduce_into(policy, first, last, out.get(), 3LL, tally::plus<long long>{});
  if (cudaStreamSynchronize(stream) != cudaSuccess) return "reduce_into: stream failed" + at;
  if (out.read() != reference_sum<long long>(v, 0, n, 3LL)) return "reduce_into" + at;

  long long squares = 0;
  for (int x : v) squares += static_cast<long long>(x) * x;  // below 2^63: |x| <= 10^6, n <= 2^20
  if (tally::transform_reduce(policy, first, last, square_wide{}, 0LL, thrust::plus<long long>{}) != squares)
    return "transform_reduce" + at;

  if (tally::count_if(policy, first, last, is_negative{}) != std::count_if(v.begin(), v.end(), is_negative{}))
    return "count_if" + at;

  if (tally::min_element(policy, first, last) - first != std::min_element(v.begin(), v.end()) - v.begin())
    return "min_element" + at;

  const auto both = tally::minmax_element(policy, first, last);
  const auto expected = tally_test::first_min_first_max(v.begin(), v.end());
  if (both.first - first != expected.first - v.begin() || both.second - first != expected.second - v.begin())
    return "minmax_element" + at;

  const above bound{v[n / 2] - 1};  // false at some element unless v[n/2] is the minimum
  if (tally::all_of(policy, first, last, bound) != std::all_of(v.begin(), v.end(), bound)) return "all_of" + at;
  return "";
}

class pool : public tally_test::device_test {};

// Threads take the devices in turn where there are several: thread t works on device
// t % devices, with a stream of that device.
TEST_F(pool, concurrent_calls_of_every_algorithm_keep_one_scratch_entry_per_stream) {
  const int threads = 8;
  const int rounds = tally_test::under_sanitizer() ? 2 : 20;
  const std::size_t max_n = tally_test::under_sanitizer() ? 1u << 13 : 1u << 20;
  const int devices = tally_test::device_count();
  std::vector<cudaStream_t> streams(threads);
  for (int t = 0; t < threads; ++t) {
    TEST_CUDA(cudaSetDevice(t % devices));
    TEST_CUDA(cudaStreamCreateWithFlags(&streams[t], cudaStreamNonBlocking));
  }
  TEST_CUDA(cudaSetDevice(0));
  const std::size_t entries_before = tally::detail::scratch_entries();

  // Runs every thread's rounds; returns the failures, each with the seed that replays it.
  const auto run_all = [&](std::uint64_t salt) {
    std::vector<std::string> failures(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        seeded s(salt + t);
        try {
          if (cudaSetDevice(t % devices) != cudaSuccess) throw std::runtime_error("cudaSetDevice failed");
          int* data = nullptr;
          if (cudaMalloc(&data, max_n * sizeof(int)) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
          device_value<long long> out;
          std::uniform_int_distribution<std::size_t> size(1, max_n);
          for (int r = 0; r < rounds && failures[t].empty(); ++r) {
            const std::string failure = run_every_algorithm(streams[t], size(s.rng), s.rng, data, out);
            if (!failure.empty()) failures[t] = failure + ", round " + std::to_string(r) + ", " + s.trace();
          }
          cudaFree(data);
        } catch (const std::exception& e) {
          failures[t] = std::string("threw: ") + e.what() + ", " + s.trace();
        }
      });
    }
    for (auto& w : workers) w.join();
    return failures;
  };

  auto failures = run_all(100);
  for (int t = 0; t < threads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  const std::size_t entries = tally::detail::scratch_entries();
  const auto slots = tally::detail::result_slots();
  // At most one entry per stream used.
  EXPECT_LE(entries, entries_before + threads);

  // The same streams again: nothing new in either pool.
  failures = run_all(200);
  for (int t = 0; t < threads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t << ", second run";
  EXPECT_EQ(tally::detail::scratch_entries(), entries);
  EXPECT_EQ(tally::detail::result_slots().slabs, slots.slabs);
  for (int t = 0; t < threads; ++t) {
    TEST_CUDA(cudaSetDevice(t % devices));
    TEST_CUDA(cudaStreamDestroy(streams[t]));
  }
  TEST_CUDA(cudaSetDevice(0));
  RecordProperty("devices", devices);
}

// cudaStreamPerThread is one handle for a different stream on every host thread; the pool
// keeps an entry per host thread for it, so these threads never share scratch while their
// kernels run at the same time.
TEST_F(pool, concurrent_calls_on_the_per_thread_default_stream) {
  const int threads = 4;
  const int calls = tally_test::under_sanitizer() ? 3 : 40;
  std::vector<std::string> failures(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      seeded s(300 + t);
      try {
        const auto v = random_values<int>(tally_test::under_sanitizer() ? 20011 : (1u << 20) + 3, s.rng);
        device_buffer<int> d(v);
        const int expected = reference_sum<int>(v, 0, v.size(), t);
        for (int c = 0; c < calls && failures[t].empty(); ++c) {
          if (tally::reduce(tally::device.on(cudaStreamPerThread), d.begin(), d.end(), t) != expected)
            failures[t] = "call " + std::to_string(c) + ", " + s.trace();
        }
      } catch (const std::exception& e) {
        failures[t] = std::string("threw: ") + e.what() + ", " + s.trace();
      }
    });
  }
  for (auto& w : workers) w.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

// The driver hands a destroyed stream's handle to the next stream created, even while the
// destroyed stream's kernels are still queued. Were scratch keyed by handle, the new
// stream's reduction would share scratch with the old one's, running at the same time.
// The pool keys scratch by the streams' ids (cudaStreamGetId), so the new stream gets a
// block of its own; the old one stays until it is the least recently used past the pool's
// limit, or released.
TEST_F(pool, a_stream_destroyed_with_work_in_flight_then_a_new_stream) {
  const int rounds = tally_test::under_sanitizer() ? 2 : 10;
  const std::size_t n = tally_test::under_sanitizer() ? 70001 : (1u << 22) + 5;
  const long long spin_cycles = tally_test::under_sanitizer() ? 1000000 : 20000000;  // ~10 ms at 2 GHz
  seeded s(500);
  SCOPED_TRACE(s.trace());
  const auto a = random_values<int>(n, s.rng);
  const auto b = random_values<int>(n, s.rng);
  device_buffer<int> da(a), db(b);
  device_value<int> out_a, out_b;
  std::set<cudaStream_t> handles;
  cudaStream_t first_stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&first_stream, cudaStreamNonBlocking));
  tally::reduce(tally::device.on(first_stream), da.begin(), da.end(), 0);  // its scratch exists
  const std::size_t entries = tally::detail::scratch_entries();
  handles.insert(first_stream);

  cudaStream_t old_stream = first_stream;
  for (int r = 0; r < rounds; ++r) {
    out_a.poison();
    out_b.poison();
    // The old stream's reduction waits behind a spin, and the stream is destroyed at once.
    tally_test::keep_stream_busy<><<<1, 1, 0, old_stream>>>(spin_cycles);
    tally::reduce_into(tally::device.on(old_stream), da.begin(), da.end(), out_a.get(), 1, tally::plus<int>{});
    TEST_CUDA(cudaStreamDestroy(old_stream));
    cudaStream_t new_stream;
    TEST_CUDA(cudaStreamCreateWithFlags(&new_stream, cudaStreamNonBlocking));
    handles.insert(new_stream);
    // The same spin, so that both reductions run at about the same time.
    tally_test::keep_stream_busy<><<<1, 1, 0, new_stream>>>(spin_cycles);
    tally::reduce_into(tally::device.on(new_stream), db.begin(), db.end(), out_b.get(), 2, tally::plus<int>{});
    TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_EQ(out_a.read(), reference_sum<int>(a, 0, n, 1)) << "round " << r << ": the destroyed stream's result";
    EXPECT_EQ(out_b.read(), reference_sum<int>(b, 0, n, 2)) << "round " << r << ": the new stream's result";
    // And a call that waits for its value, on a stream whose scratch is now cached.
    EXPECT_EQ(tally::reduce(tally::device.on(new_stream), db.begin(), db.end(), 0), reference_sum<int>(b, 0, n, 0));
    old_stream = new_stream;
  }
  TEST_CUDA(cudaStreamDestroy(old_stream));
  // Streams are told apart by id, not handle: each new stream got a block of its own, and the
  // pool holds at most one entry per stream seen, never more than its limit per context.
  EXPECT_LE(tally::detail::scratch_entries(), entries + std::size_t(rounds)) << handles.size() << " distinct handles";
  EXPECT_LE(tally::detail::scratch_entries(), std::max(entries, tally::detail::max_scratch_entries));
}

}  // namespace
