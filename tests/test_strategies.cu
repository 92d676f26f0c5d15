// The device strategies (tally::strategy) and the nondeterministic() policy: every
// strategy at every size class; the fixed-order ones and the exact integer atomics give the
// host backend's bits; floating-point atomics stay within the summation error bound; calls
// of different types and strategies on one stream leave each other's scratch clean; a
// strategy that cannot run a call throws and leaves the context usable; kernels that start
// before the one ahead of them on the stream has ended (launch.cuh) still read its writes.
#include "support/test_support.cuh"
#include "tally/reduce.cuh"

#include <thrust/functional.h>

#include <nv/target>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using tally::strategy;
using tally_test::bits_of;
using tally_test::device_buffer;
using tally_test::device_value;
using tally_test::random_values;
using tally_test::seeded;

constexpr strategy all_strategies[] = {strategy::automatic, strategy::single_pass, strategy::two_pass,
                                       strategy::block_atomic, strategy::warp_atomic};

const char* name_of(strategy s) {
  switch (s) {
    case strategy::automatic: return "automatic";
    case strategy::single_pass: return "single_pass";
    case strategy::two_pass: return "two_pass";
    case strategy::block_atomic: return "block_atomic";
    case strategy::warp_atomic: return "warp_atomic";
  }
  return "?";
}

bool is_atomic(strategy s) { return s == strategy::block_atomic || s == strategy::warp_atomic; }

std::vector<std::size_t> strategy_sizes() {
  auto sizes = tally_test::boundary_sizes();
  if (!tally_test::under_sanitizer()) {
    sizes.push_back((std::size_t(1) << 22) + 999);
    sizes.push_back((std::size_t(1) << 24) + 1);  // past the tile cap: multi-step tiles
  }
  return sizes;
}

class strategies : public tally_test::device_test {};

TEST_F(strategies, integer_ops_give_the_host_bits_under_every_strategy) {
  for (strategy st : all_strategies) {
    for (std::size_t n : strategy_sizes()) {
      seeded s(n * 7 + static_cast<int>(st));
      SCOPED_TRACE(std::string(name_of(st)) + ", n = " + std::to_string(n) + ", " + s.trace());
      const auto v = random_values<int>(n, s.rng);
      const auto w = random_values<unsigned long long>(n, s.rng);
      device_buffer<int> d(v, n % 3);
      device_buffer<unsigned long long> dw(w, n % 2);
      const auto policy = tally::device.strategy(st);

      EXPECT_EQ(tally::reduce(policy, d.begin(), d.end(), 5), tally::reduce(tally::host, v.begin(), v.end(), 5));
      EXPECT_EQ(tally::reduce(policy, d.begin(), d.end(), 0, tally::maximum<int>{}),
                tally::reduce(tally::host, v.begin(), v.end(), 0, tally::maximum<int>{}));
      EXPECT_EQ(tally::reduce(policy, d.begin(), d.end(), 1 << 30, thrust::minimum<int>{}),
                tally::reduce(tally::host, v.begin(), v.end(), 1 << 30, thrust::minimum<int>{}));
      EXPECT_EQ(tally::reduce(policy, dw.begin(), dw.end(), 3ull),
                tally::reduce(tally::host, w.begin(), w.end(), 3ull));
      EXPECT_EQ(tally::reduce(policy, dw.begin(), dw.end(), ~0ull, tally::bit_and<unsigned long long>{}),
                tally::reduce(tally::host, w.begin(), w.end(), ~0ull, tally::bit_and<unsigned long long>{}));
      EXPECT_EQ(tally::reduce(policy, dw.begin(), dw.end(), 0ull, tally::bit_xor<unsigned long long>{}),
                tally::reduce(tally::host, w.begin(), w.end(), 0ull, tally::bit_xor<unsigned long long>{}));

      device_value<long long> out;
      tally::reduce_into(policy, d.begin(), d.end(), out.get(), -7LL, tally::plus<long long>{});
      EXPECT_EQ(out.read(), tally::reduce(tally::host, v.begin(), v.end(), -7LL));
    }
  }
}

TEST_F(strategies, fixed_order_strategies_give_the_host_bits_for_floating_point) {
  for (strategy st : {strategy::automatic, strategy::single_pass, strategy::two_pass}) {
    for (std::size_t n : strategy_sizes()) {
      seeded s(n * 11 + static_cast<int>(st));
      SCOPED_TRACE(std::string(name_of(st)) + ", n = " + std::to_string(n) + ", " + s.trace());
      // Bits alone are checked: inputs whose sums' bits show the order of the additions.
      const auto f = tally_test::order_sensitive_values<float>(n, s.rng);
      const auto g = tally_test::order_sensitive_values<double>(n, s.rng);
      device_buffer<float> df(f, n % 5);
      device_buffer<double> dg(g);
      const auto policy = tally::device.strategy(st);
      EXPECT_EQ(bits_of(tally::reduce(policy, df.begin(), df.end(), 0.5f)),
                bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.5f)));
      EXPECT_EQ(bits_of(tally::reduce(policy, dg.begin(), dg.end(), -2.0)),
                bits_of(tally::reduce(tally::host, g.begin(), g.end(), -2.0)));
      device_value<float> out;
      tally::reduce_into(policy, df.begin(), df.end(), out.get(), 0.0f, tally::maximum<float>{});
      EXPECT_EQ(bits_of(out.read()), bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.0f, tally::maximum<float>{})));
    }
  }
}

TEST_F(strategies, nondeterministic_atomics_stay_within_the_error_bound) {
  for (strategy st : {strategy::block_atomic, strategy::warp_atomic, strategy::automatic}) {
    for (std::size_t n : strategy_sizes()) {
      seeded s(n * 13 + static_cast<int>(st));
      SCOPED_TRACE(std::string(name_of(st)) + ", n = " + std::to_string(n) + ", " + s.trace());
      const auto f = random_values<float>(n, s.rng);
      const auto g = random_values<double>(n, s.rng);
      device_buffer<float> df(f);
      device_buffer<double> dg(g, 1);
      const auto policy = tally::device.nondeterministic().strategy(st);

      // Chains the plan does not fix: a thread of an atomic unit may fold a share of up to
      // n / 256 elements (a grid of one block), and the accumulator takes the units' results
      // one after another (at most 2048 blocks of 8 warps).
      const double atomic_depth = st == strategy::automatic ? 0.0 : double(n) / 256.0 + 16384.0;
      const float fs = tally::reduce(policy, df.begin(), df.end(), 1.0f);
      TALLY_EXPECT_SUM_NEAR(fs, tally_test::reference_sum(f, 0, n, 1.0L),
                            tally_test::sum_error_bound(f, 0, n, 1.0, atomic_depth));
      // init is not 0, so that the empty range has a sum the bound can tell from 0 too.
      const double gs = tally::reduce(policy, dg.begin(), dg.end(), -0.75);
      TALLY_EXPECT_SUM_NEAR(gs, tally_test::reference_sum(g, 0, n, -0.75L),
                            tally_test::sum_error_bound(g, 0, n, -0.75, atomic_depth));
      // min and max are exact whatever the order, except for the sign of zero.
      device_value<float> out;
      tally::reduce_into(policy, df.begin(), df.end(), out.get(), 1e30f, tally::minimum<float>{});
      EXPECT_EQ(out.read(), tally::reduce(tally::host, f.begin(), f.end(), 1e30f, tally::minimum<float>{}));
      device_value<double> out_d;
      tally::reduce_into(policy, dg.begin(), dg.end(), out_d.get(), -1.0, thrust::maximum<double>{});
      EXPECT_EQ(out_d.read(), tally::reduce(tally::host, g.begin(), g.end(), -1.0, thrust::maximum<double>{}));
    }
  }
}

// A user operator without a native atomic: the compare-and-swap loop.
struct saturating_add {
  __host__ __device__ unsigned operator()(unsigned a, unsigned b) const {
    const unsigned s = a + b;
    return s < a ? 0xFFFFFFFFu : s;
  }
};

TEST_F(strategies, compare_and_swap_loops_serve_operators_without_a_native_atomic) {
  seeded s(5);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : strategy_sizes()) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto v = random_values<unsigned>(n, s.rng);
    for (auto& x : v) x %= 1000;
    device_buffer<unsigned> d(v);
    const unsigned want = tally::reduce(tally::host, v.begin(), v.end(), 1u, saturating_add{});
    for (strategy st : {strategy::block_atomic, strategy::warp_atomic}) {
      // Not in the exact list, so it needs nondeterministic() even though this one is exact;
      // and as a user functor it must be marked commutative to be combined by atomics.
      EXPECT_EQ(tally::reduce(tally::device.nondeterministic().strategy(st), d.begin(), d.end(), 1u,
                              tally::commutative(saturating_add{})),
                want);
    }
  }
}

// An integer operator that computes in another type is not exact for the accumulator:
// thrust::plus<float> over int rounds each sum through float. The plan gives the host's
// bits; the atomic strategies refuse it under the default policy (with nondeterministic()
// they combine by op itself, a compare-and-swap loop, not by the int atomicAdd).
TEST_F(strategies, operators_that_compute_in_another_type_are_not_taken_for_exact) {
  static_assert(!tally::detail::is_exact_integer_op_v<int, thrust::plus<float>>);
  static_assert(tally::detail::is_exact_integer_op_v<int, thrust::plus<int>>);
  static_assert(tally::detail::is_exact_integer_op_v<int, tally::plus<>>);
  seeded s(6);
  SCOPED_TRACE(s.trace());
  const std::size_t n = 70001;
  std::vector<int> v(n);
  // Sums pass 2^24, where float stops holding every integer, and stay below 2^31.
  std::uniform_int_distribution<int> values(256, 4096);
  for (auto& x : v) x = values(s.rng);
  device_buffer<int> d(v);
  const thrust::plus<float> in_float;
  const int want = tally::reduce(tally::host, v.begin(), v.end(), 0, in_float);
  EXPECT_EQ(tally::reduce(tally::device, d.begin(), d.end(), 0, in_float), want);
  for (strategy st : {strategy::block_atomic, strategy::warp_atomic}) {
    SCOPED_TRACE(name_of(st));
    EXPECT_THROW(tally::reduce(tally::device.strategy(st), d.begin(), d.end(), 0, in_float), std::invalid_argument);
  }
  EXPECT_EQ(tally::reduce(tally::device, d.begin(), d.end(), 0, in_float), want);  // the context still works
}

TEST_F(strategies, results_do_not_depend_on_the_grid) {
  seeded s(77);
  SCOPED_TRACE(s.trace());
  const std::size_t n = tally_test::under_sanitizer() ? 100003 : 3000017;
  const auto v = random_values<int>(n, s.rng);
  const auto f = random_values<float>(n, s.rng);
  device_buffer<int> d(v);
  device_buffer<float> df(f);
  const int want = tally::reduce(tally::host, v.begin(), v.end(), 0);
  const auto want_bits = bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.0f));
  for (unsigned grid : {1u, 2u, 3u, 7u, 64u, 1000u, 5000u}) {
    SCOPED_TRACE("grid = " + std::to_string(grid));
    for (strategy st : all_strategies) {
      SCOPED_TRACE(name_of(st));
      EXPECT_EQ(tally::reduce(tally::device.grid_size(grid).strategy(st), d.begin(), d.end(), 0), want);
      if (!is_atomic(st))
        EXPECT_EQ(bits_of(tally::reduce(tally::device.grid_size(grid).strategy(st), df.begin(), df.end(), 0.0f)), want_bits);
    }
  }
}

TEST_F(strategies, calls_of_mixed_types_and_strategies_on_one_stream_leave_the_scratch_clean) {
  // Each type lays its partials out differently in the same scratch; a cell left flagged
  // by one call would be read as a partial by the next.
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const auto on = tally::device.on(stream);
  seeded s(91);
  SCOPED_TRACE(s.trace());
  const std::size_t n = tally_test::under_sanitizer() ? 70001 : 2000003;
  const auto f = random_values<float>(n, s.rng);
  const auto g = random_values<double>(n, s.rng);
  const auto c = random_values<unsigned char>(n, s.rng);
  const auto w = random_values<long long>(n, s.rng);
  device_buffer<float> df(f);
  device_buffer<double> dg(g);
  device_buffer<unsigned char> dc(c);
  device_buffer<long long> dw(w);
  const auto f_bits = bits_of(tally::reduce(tally::host, f.begin(), f.end(), 0.0f));
  const auto g_bits = bits_of(tally::reduce(tally::host, g.begin(), g.end(), 0.0));
  const unsigned c_sum = tally::reduce(tally::host, c.begin(), c.end(), 0u);
  const long long w_max = tally::reduce(tally::host, w.begin(), w.end(), -1LL, tally::maximum<long long>{});
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    EXPECT_EQ(bits_of(tally::reduce(on, dg.begin(), dg.end(), 0.0)), g_bits);
    EXPECT_EQ(bits_of(tally::reduce(on, df.begin(), df.end(), 0.0f)), f_bits);
    EXPECT_EQ(tally::reduce(on.strategy(strategy::block_atomic), dw.begin(), dw.end(), -1LL, tally::maximum<long long>{}),
              w_max);
    EXPECT_EQ(tally::reduce(on.strategy(strategy::two_pass), dc.begin(), dc.end(), 0u), c_sum);
    EXPECT_EQ(bits_of(tally::reduce(on.strategy(strategy::two_pass), dg.begin(), dg.end(), 0.0)), g_bits);
    EXPECT_EQ(tally::reduce(on.strategy(strategy::warp_atomic), dc.begin(), dc.end(), 0u), c_sum);
    EXPECT_EQ(bits_of(tally::reduce(on.strategy(strategy::single_pass), df.begin(), df.end(), 0.0f)), f_bits);
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

struct not_exact_op {
  __host__ __device__ float operator()(float a, float b) const { return a + b; }
};

TEST_F(strategies, an_atomic_strategy_that_cannot_run_the_call_throws_and_the_next_call_works) {
  const std::vector<float> f = {1.0f, 2.0f, 3.0f};
  const std::vector<short> h = {1, 2, 3};
  device_buffer<float> df(f);
  device_buffer<short> dh(h);
  for (strategy st : {strategy::block_atomic, strategy::warp_atomic}) {
    SCOPED_TRACE(name_of(st));
    try {
      tally::reduce(tally::device.strategy(st), df.begin(), df.end(), 0.0f);
      ADD_FAILURE() << "a float atomic without nondeterministic() did not throw";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("nondeterministic()"), std::string::npos) << e.what();
    }
    EXPECT_THROW(tally::reduce(tally::device.strategy(st), df.begin(), df.end(), 0.0f, not_exact_op{}),
                 std::invalid_argument);
    try {
      tally::reduce(tally::device.nondeterministic().strategy(st), dh.begin(), dh.end(), short(0));
      ADD_FAILURE() << "a 2-byte accumulator did not throw";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("4 or 8 bytes"), std::string::npos) << e.what();
    }
    EXPECT_EQ(tally::reduce(tally::device.nondeterministic().strategy(st), df.begin(), df.end(), 0.0f), 6.0f);
    EXPECT_EQ(tally::reduce(tally::device.strategy(st), dh.begin(), dh.end(), 0), 6);
  }
}

// The architecture the running device code was compiled for (__CUDA_ARCH__, e.g. 900).
__global__ void report_compiled_arch(int* arch) {
#if defined(__CUDA_ARCH__)
  *arch = __CUDA_ARCH__;
#endif
}

TEST_F(strategies, kernels_are_launched_with_pdl_exactly_where_their_code_holds_the_wait) {
  // The wait is compiled in for compute capability 9.0+ only; a kernel that runs older code
  // (PTX of an older architecture on a newer GPU) must be launched the ordinary way.
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  device_value<int> arch;
  report_compiled_arch<<<1, 1>>>(arch.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const int compiled_for = arch.read();
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  using kernel_loader = tally::detail::vector_loader<float, 4>;
  constexpr auto kernel = tally::detail::single_tile_reduce_kernel<float, 4, 8, kernel_loader, tally::plus<float>, float>;
  const bool expected = tally::detail::tuning::programmatic_launch && major >= 9 && compiled_for >= 900;
  EXPECT_EQ(tally::detail::launches_programmatically<kernel>(device), expected)
      << "compute capability " << major << ".x, device code compiled for " << compiled_for;
}

// A kernel of the caller's that lets the stream's next kernel be scheduled from its first
// instruction (as a kernel written for programmatic dependent launch may), and only then,
// after a delay, writes dst from src. A reduction launched behind it that read before the
// kernel had ended would see the previous round's values.
__global__ void write_late_after_early_trigger(int* dst, const int* src, std::size_t n, long long delay_cycles) {
  NV_IF_TARGET(NV_PROVIDES_SM_90, (asm volatile("griddepcontrol.launch_dependents;" ::: "memory");))
  tally_test::spin_for_cycles(delay_cycles);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

TEST_F(strategies, reductions_that_start_early_still_see_the_writes_of_the_kernels_before_them) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const auto on = tally::device.on(stream);
  const bool small = tally_test::under_sanitizer();
  // One tile, two tiles (one block of two runs), a few tiles, many tiles.
  for (std::size_t n : {std::size_t(5001), std::size_t(12289), std::size_t(70001), small ? std::size_t(300007) : std::size_t(4000037)}) {
    seeded s(400 + n);
    SCOPED_TRACE(s.trace() + ", n " + std::to_string(n));
    constexpr int rounds = 3;
    std::vector<std::vector<int>> values;
    std::vector<std::unique_ptr<device_buffer<int>>> sources;
    std::vector<long long> want(rounds);
    for (int r = 0; r < rounds; ++r) {
      values.push_back(random_values<int>(n, s.rng));
      sources.push_back(std::make_unique<device_buffer<int>>(values.back()));
      want[r] = tally::reduce(tally::host, values.back().begin(), values.back().end(), 0LL);
    }
    device_buffer<int> data(std::vector<int>(n, 0));
    for (strategy st : all_strategies) {
      SCOPED_TRACE(name_of(st));
      const auto policy = on.strategy(st);
      std::vector<long long> poison(rounds + 1, 0);
      std::memset(poison.data(), 0xA5, poison.size() * sizeof(long long));
      device_buffer<long long> sums(poison);
      // No host synchronization from here to the end: the stream's order alone must hold.
      for (int r = 0; r < rounds; ++r) {
        write_late_after_early_trigger<<<264, 256, 0, stream>>>(data.data(), sources[r]->data(), n, 40000);
        ASSERT_EQ(cudaGetLastError(), cudaSuccess);
        tally::reduce_into(policy, data.begin(), data.end(), sums.data() + r, 0LL, tally::plus<long long>{});
      }
      // A reduction of the reductions' results: it starts while the last of them may still run.
      tally::reduce_into(on, sums.data(), sums.data() + rounds, sums.data() + rounds, 0LL, tally::plus<long long>{});
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      std::vector<long long> got(rounds + 1);
      ASSERT_EQ(cudaMemcpy(got.data(), sums.data(), got.size() * sizeof(long long), cudaMemcpyDeviceToHost), cudaSuccess);
      for (int r = 0; r < rounds; ++r) EXPECT_EQ(got[r], want[r]) << "round " << r;
      EXPECT_EQ(got[rounds], want[0] + want[1] + want[2]);
    }
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(strategies, every_strategy_can_be_captured_in_a_graph_and_replayed) {
  seeded s(3);
  SCOPED_TRACE(s.trace());
  const std::size_t n = 300007;
  const auto v = random_values<int>(n, s.rng);
  device_buffer<int> d(v);
  const int want = tally::reduce(tally::host, v.begin(), v.end(), 0);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (strategy st : all_strategies) {
    SCOPED_TRACE(name_of(st));
    device_value<int> out;
    device_value<int> then;  // a second captured call reads the first one's result
    const auto policy = tally::device.on(stream).strategy(st);
    tally::reduce_into(policy, d.begin(), d.end(), out.get(), 0);  // scratch exists before capture
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    out.poison();
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    tally::reduce_into(policy, d.begin(), d.end(), out.get(), 0);
    tally::reduce_into(tally::device.on(stream), out.get(), out.get() + 1, then.get(), 5);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int replay = 0; replay < 3; ++replay) {
      out.poison();
      then.poison();
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_EQ(out.read(), want) << "replay " << replay;
      EXPECT_EQ(then.read(), static_cast<int>(static_cast<unsigned>(want) + 5u)) << "replay " << replay;
    }
    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
