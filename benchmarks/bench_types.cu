// Sums of narrow and wide types against CUB and the streaming-read ceiling, in one run, for
// N = 2^10, 2^11, 2^12, 2^13, 2^14, 2^16, ..., 2^28 seeded random values (std::mt19937_64, seed + N per input):
//
//   type    values                                       init (the accumulator)
//   int8    std::int8_t uniform in [-100, 100]           int
//   half    __half uniform on the multiples of 2^-11     float
//           in [0, 1) (exact in half)
//   bf16    __nv_bfloat16 uniform on the multiples of    float
//           2^-8 in [0, 1) (exact in bf16)
//   double  double uniform in [0, 1) (53 random bits)    double
//
//   device/<type>/tally     GPU time from events around k back-to-back calls on one stream
//                           (k = 20 for N <= 2^20, else 5), divided by k, of
//                           tally::reduce_into(tally::device.on(s), in, in + N, out, Acc{},
//                           tally::plus<Acc>{}), Acc being init's type above
//   device/<type>/cub       the same for cub::DeviceReduce::Reduce(temp, bytes, in, out, N,
//                           plus_to<Acc>{}, Acc{}, s), a plus that converts both operands to Acc
//                           and returns Acc (so CUB accumulates in Acc too); temporary storage
//                           allocated outside the timing
//   device/<type>/ceiling   our streaming read of the same N * sizeof(value) bytes: the float
//                           kernel of support/timing.cu (16-byte loads) over N * sizeof(value) / 4
//                           32-bit words (bench::read_ceiling::read_bytes); the bits are
//                           arbitrary as floats, so at worst the kernel writes one float to out
//
// Inputs rotate over up to 8 copies (bench::rotation_copies) so that small ones are not all
// L2 hits. Counters: GBps (N * sizeof(value) bytes / time, 1e9 bytes per second) and N. Each
// benchmark runs 3 repetitions of about 0.03 s of wall time and reports aggregates only;
// scripts/bench_types_report.py reads the medians.
//
// Checks before timing, once per (type, library, N), against a host reference computed while
// the input is drawn: int8 exactly, against the int64 sum wrapped to 32 bits as an int
// accumulator wraps (zero-mean values: no partial sum comes near 2^31 in practice); half and
// bf16 within a relative 1e-5 (float accumulation) of their exact sum (an integer count of
// 2^-11 or 2^-8); double within a relative 1e-12 of a compensated (Neumaier) double sum. A
// mismatch or an exception marks that benchmark as an error and leaves the rest of the run
// alone.

#include "support/harness.cuh"
#include "support/timing.cuh"
#include "tally/tally.cuh"

#include <benchmark/benchmark.h>
#include <cub/device/device_reduce.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

constexpr int repetitions = 3;
constexpr double min_time_s = 0.03;
constexpr std::uint64_t seed = 0x7E5E'B17E'2026ull;

// Per value type: its name, init's type, the check's tolerance and how its values are drawn.
// fill() draws host[0..n) from rng and returns the reference sum.
template <class T>
struct element;

template <>
struct element<std::int8_t> {
  using acc = int;
  using reference = int;
  static constexpr const char* name = "int8";  // compared exactly
  static constexpr std::uint64_t seed_offset = 0;
  // Four values from each 64-bit draw: (16 random bits * 201) >> 16 is in [0, 200].
  static reference fill(std::vector<std::int8_t>& host, std::mt19937_64& rng) {
    std::int64_t sum = 0;
    std::size_t i = 0;
    while (i < host.size()) {
      std::uint64_t bits = rng();
      for (int k = 0; k < 4 && i < host.size(); ++k, ++i, bits >>= 16) {
        const int v = static_cast<int>(((bits & 0xFFFFu) * 201u) >> 16) - 100;
        host[i] = static_cast<std::int8_t>(v);
        sum += v;
      }
    }
    return static_cast<int>(static_cast<std::uint32_t>(sum));  // int's wraparound, should it occur
  }
};

template <>
struct element<__half> {
  using acc = float;
  using reference = double;
  static constexpr const char* name = "half";
  static constexpr double tolerance = 1e-5;  // relative, float accumulation
  static constexpr std::uint64_t seed_offset = 1ull << 40;
  // k / 2^11 for k in [0, 2^11): at most 11 significant bits, exact in half. Five values
  // from each 64-bit draw.
  static reference fill(std::vector<__half>& host, std::mt19937_64& rng) {
    std::uint64_t units = 0;
    std::size_t i = 0;
    while (i < host.size()) {
      std::uint64_t bits = rng();
      for (int k = 0; k < 5 && i < host.size(); ++k, ++i, bits >>= 11) {
        const unsigned u = static_cast<unsigned>(bits & 0x7FFu);
        host[i] = __float2half_rn(static_cast<float>(u) * (1.0f / 2048.0f));
        units += u;
      }
    }
    return static_cast<double>(units) / 2048.0;  // exact: units < 2^39
  }
};

template <>
struct element<__nv_bfloat16> {
  using acc = float;
  using reference = double;
  static constexpr const char* name = "bf16";
  static constexpr double tolerance = 1e-5;  // relative, float accumulation
  static constexpr std::uint64_t seed_offset = 2ull << 40;
  // k / 2^8 for k in [0, 2^8): at most 8 significant bits, exact in bf16. Eight values from
  // each 64-bit draw.
  static reference fill(std::vector<__nv_bfloat16>& host, std::mt19937_64& rng) {
    std::uint64_t units = 0;
    std::size_t i = 0;
    while (i < host.size()) {
      std::uint64_t bits = rng();
      for (int k = 0; k < 8 && i < host.size(); ++k, ++i, bits >>= 8) {
        const unsigned u = static_cast<unsigned>(bits & 0xFFu);
        host[i] = __float2bfloat16_rn(static_cast<float>(u) * (1.0f / 256.0f));
        units += u;
      }
    }
    return static_cast<double>(units) / 256.0;  // exact: units < 2^36
  }
};

template <>
struct element<double> {
  using acc = double;
  using reference = double;
  static constexpr const char* name = "double";
  static constexpr double tolerance = 1e-12;  // relative
  static constexpr std::uint64_t seed_offset = 3ull << 40;
  // 53 random bits each, as bench::fill_random; the reference is Neumaier's compensated sum.
  static reference fill(std::vector<double>& host, std::mt19937_64& rng) {
    constexpr double scale = 1.0 / 9007199254740992.0;  // 2^-53
    double sum = 0.0, compensation = 0.0;
    for (double& v : host) {
      v = static_cast<double>(rng() >> 11) * scale;
      const double t = sum + v;
      compensation += std::fabs(sum) >= std::fabs(v) ? (sum - t) + v : (v - t) + sum;
      sum = t;
    }
    return sum + compensation;
  }
};

// What a CUB user writes to sum narrow values in a wider type: both operands become Acc.
template <class Acc>
struct plus_to {
  __host__ __device__ Acc operator()(const Acc& a, const Acc& b) const { return a + b; }
};

struct context {
  cudaStream_t stream = nullptr;
  void* out = nullptr;  // device result of the asynchronous calls (up to 256 bytes)
  std::unique_ptr<bench::read_ceiling> ceiling;
};
context* ctx = nullptr;

using bench::calls_per_timing;
using bench::clock_kind;

// bench::basic_rotating_input for any T, with the reference sum of its values:
// rotation_copies() device buffers holding the same values, handed out in turn by next().
template <class T>
class typed_input {
 public:
  typed_input(std::size_t n, std::uint64_t input_seed) {
    std::vector<T> host(n);
    std::mt19937_64 rng(input_seed);
    reference_ = element<T>::fill(host, rng);
    buffers_.assign(static_cast<std::size_t>(bench::rotation_copies(n * sizeof(T), bench::l2_cache_bytes())), nullptr);
    for (T*& b : buffers_) {
      BENCH_CUDA_CHECK(cudaMalloc(&b, n * sizeof(T)));
      BENCH_CUDA_CHECK(cudaMemcpy(b, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    }
  }
  ~typed_input() {
    for (T* b : buffers_) cudaFree(b);
  }
  typed_input(const typed_input&) = delete;
  typed_input& operator=(const typed_input&) = delete;

  typename element<T>::reference reference() const { return reference_; }
  const T* next() {
    const T* p = buffers_[cursor_];
    cursor_ = (cursor_ + 1) % buffers_.size();
    return p;
  }

 private:
  typename element<T>::reference reference_{};
  std::vector<T*> buffers_;
  std::size_t cursor_ = 0;
};

// Freed in main, before the CUDA runtime shuts down.
template <class T>
std::map<std::size_t, std::unique_ptr<typed_input<T>>>& inputs() {
  static std::map<std::size_t, std::unique_ptr<typed_input<T>>> by_size;
  return by_size;
}

template <class T>
typed_input<T>& input_for(std::size_t n) {
  auto& slot = inputs<T>()[n];
  if (!slot) slot = std::make_unique<typed_input<T>>(n, seed + element<T>::seed_offset + n);
  return *slot;
}

// The shared harness (support/harness.cuh) on this program's stream.
template <class T>
T read_back(const void* device_value) {
  return bench::read_back<T>(ctx->stream, device_value);
}
template <class Enqueue>
void time_device(benchmark::State& state, double bytes_per_call, Enqueue&& enqueue) {
  const int k = calls_per_timing(static_cast<std::size_t>(state.range(0)));
  bench::time_device(state, ctx->stream, k, bytes_per_call, enqueue);
}
template <class Check>
bool checks_out(benchmark::State& state, const std::string& what, Check&& check) {
  return bench::checks_out(state, "bench_types", what.c_str(), check);
}

// Empty when got matches the reference within element<T>::tolerance, else what differs.
template <class T>
std::string compare(typename element<T>::acc got, typename element<T>::reference want) {
  char message[200];
  if constexpr (std::is_integral_v<typename element<T>::acc>) {
    if (got == want) return "";
    std::snprintf(message, sizeof message, "sum %lld, reference %lld", static_cast<long long>(got),
                  static_cast<long long>(want));
  } else {
    const double g = static_cast<double>(got);
    const double relative = std::fabs(g - want) / std::fmax(std::fabs(want), 1e-300);
    if (relative <= element<T>::tolerance) return "";
    std::snprintf(message, sizeof message, "sum %.17g, reference %.17g (relative %.3g > %.3g)", g, want, relative,
                  element<T>::tolerance);
  }
  return message;
}

template <class T>
void device_tally(benchmark::State& state) {
  using acc = typename element<T>::acc;
  const auto n = static_cast<std::size_t>(state.range(0));
  typed_input<T>& in = input_for<T>(n);
  const auto policy = tally::device.on(ctx->stream);
  acc* out = static_cast<acc*>(ctx->out);
  auto enqueue = [&] {
    const T* x = in.next();
    tally::reduce_into(policy, x, x + n, out, acc{}, tally::plus<acc>{});
  };
  if (!checks_out(state, std::string(element<T>::name) + " tally", [&] {
        enqueue();
        return compare<T>(read_back<acc>(out), in.reference());
      }))
    return;
  time_device(state, static_cast<double>(n * sizeof(T)), enqueue);
}

// CUB's sum of n values of T in element<T>::acc, with temporary storage owned by the caller.
template <class T>
class cub_sum {
 public:
  using acc = typename element<T>::acc;
  explicit cub_sum(std::size_t n) : n_(static_cast<int>(n)) {
    BENCH_CUDA_CHECK(cub::DeviceReduce::Reduce(nullptr, bytes_, static_cast<const T*>(nullptr),
                                               static_cast<acc*>(nullptr), n_, plus_to<acc>{}, acc{}));
    BENCH_CUDA_CHECK(cudaMalloc(&temp_, bytes_ > 0 ? bytes_ : 1));
  }
  ~cub_sum() { cudaFree(temp_); }
  cub_sum(const cub_sum&) = delete;
  cub_sum& operator=(const cub_sum&) = delete;

  void operator()(const T* in, acc* out, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cub::DeviceReduce::Reduce(temp_, bytes_, in, out, n_, plus_to<acc>{}, acc{}, stream));
  }

 private:
  int n_;
  std::size_t bytes_ = 0;
  void* temp_ = nullptr;
};

template <class T>
void device_cub(benchmark::State& state) {
  using acc = typename element<T>::acc;
  const auto n = static_cast<std::size_t>(state.range(0));
  typed_input<T>& in = input_for<T>(n);
  acc* out = static_cast<acc*>(ctx->out);
  cub_sum<T> cub(n);
  auto enqueue = [&] { cub(in.next(), out, ctx->stream); };
  if (!checks_out(state, std::string(element<T>::name) + " cub", [&] {
        enqueue();
        return compare<T>(read_back<acc>(out), in.reference());
      }))
    return;
  time_device(state, static_cast<double>(n * sizeof(T)), enqueue);
}

template <class T>
void device_ceiling(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  typed_input<T>& in = input_for<T>(n);
  float* out = static_cast<float*>(ctx->out);
  time_device(state, static_cast<double>(n * sizeof(T)),
              [&] { ctx->ceiling->read_bytes(in.next(), n * sizeof(T), out, ctx->stream); });
}

template <class F>
void register_family(const std::string& name, F fn) {
  bench::register_sizes(name, clock_kind::device, repetitions, min_time_s, fn);
}

template <class T>
void register_type() {
  const std::string prefix = std::string("device/") + element<T>::name + "/";
  register_family(prefix + "tally", device_tally<T>);
  register_family(prefix + "cub", device_cub<T>);
  register_family(prefix + "ceiling", device_ceiling<T>);
}

}  // namespace

int main(int argc, char** argv) {
  bool bad_arguments = false;
  if (!bench::start(&argc, argv, "bench_types", &bad_arguments)) return bad_arguments ? 1 : 0;

  context c;
  BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  BENCH_CUDA_CHECK(cudaMalloc(&c.out, 256));
  c.ceiling = std::make_unique<bench::read_ceiling>();
  ctx = &c;

  register_type<std::int8_t>();
  register_type<__half>();
  register_type<__nv_bfloat16>();
  register_type<double>();

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  inputs<std::int8_t>().clear();
  inputs<__half>().clear();
  inputs<__nv_bfloat16>().clear();
  inputs<double>().clear();
  c.ceiling.reset();
  BENCH_CUDA_CHECK(cudaFree(c.out));
  BENCH_CUDA_CHECK(cudaStreamDestroy(c.stream));
  ctx = nullptr;
  return 0;
}
