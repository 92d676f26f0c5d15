// One side of tools/roundtrip-ab --family: the tally calls behind scripts/bench's other
// programs (bench_family, bench_fields, bench_types), built against one tree's headers and
// library into a shared object of its own, so that tools/family_ab.cu can time two builds in
// one process. Every call is written with the public API, or with the views bench_family
// itself hands to reduce_into, so that both trees compile it.
//
// Device cases (kind 0) time k back-to-back asynchronous calls with bench::event_timer, the
// stream held while they are enqueued, as the benchmarks' device rows do. Round-trip cases
// (kind 1) time k calls that return their answer to the host, by the host's clock.
#include <tally/tally.cuh>

#include "support/family_predicates.cuh"
#include "support/timing.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace {

using bench::above_two;
using bench::below_half;
using bench::below_two;
using bench::square;

using xyz = cuda::std::tuple<float, float, float>;
using box = cuda::std::tuple<float, float, float, float, float, float>;
struct point_box {
  __host__ __device__ box operator()(const xyz& p) const {
    const float x = cuda::std::get<0>(p), y = cuda::std::get<1>(p), z = cuda::std::get<2>(p);
    return box(x, y, z, x, y, z);
  }
};

constexpr int max_streams = 16;
cudaStream_t streams[max_streams] = {};
void* device_out = nullptr;  // 256 bytes: the asynchronous cases' results

// The inputs of one call: three float arrays x, y, z of n values in [0, 1) (the same bytes
// read as int8, half, bf16 or double by the cases of narrow and wide types).
struct inputs {
  const float* x;
  const float* y;
  const float* z;
};

template <class T>
const T* as(const float* p) {
  return reinterpret_cast<const T*>(p);
}

// ---- the cases: one call each, on stream s ----

void device_case(int which, const inputs& in, std::size_t n, cudaStream_t s) {
  const auto policy = tally::device.on(s);
  const float* x = in.x;
  switch (which) {
    case 0: {  // transform_reduce's view
      tally::reduce_into(policy, thrust::make_transform_iterator(x, square{}), thrust::make_transform_iterator(x + n, square{}),
                         static_cast<float*>(device_out), 0.0f, tally::plus<float>{});
      break;
    }
    case 1: {  // inner_product's view
      using pair_product = tally::detail::apply_to_pair<tally::multiplies<>>;
      const auto first = thrust::make_transform_iterator(thrust::make_zip_iterator(thrust::make_tuple(x, in.y)), pair_product{});
      tally::reduce_into(policy, first, first + static_cast<std::ptrdiff_t>(n), static_cast<float*>(device_out), 0.0f,
                         tally::plus<float>{});
      break;
    }
    case 2: {  // count_if's view
      using predicate = tally::detail::count_predicate<below_half, std::ptrdiff_t>;
      tally::reduce_into(policy, thrust::make_transform_iterator(x, predicate{}), thrust::make_transform_iterator(x + n, predicate{}),
                         static_cast<std::ptrdiff_t*>(device_out), std::ptrdiff_t{0}, tally::plus<std::ptrdiff_t>{});
      break;
    }
    case 3: {  // min_element's view
      using candidate = tally::detail::indexed_value<float>;
      const tally::detail::read_candidate<const float*, float> reader{x};
      const thrust::counting_iterator<std::int64_t> i(0);
      tally::reduce_into(policy, thrust::make_transform_iterator(i, reader),
                         thrust::make_transform_iterator(i + static_cast<std::int64_t>(n), reader),
                         static_cast<candidate*>(device_out), tally::detail::no_candidate<float>(),
                         tally::detail::keep_first_min<float, thrust::less<float>>{});
      break;
    }
    case 4: {  // minmax_element's view
      using candidates = tally::detail::min_and_max<float>;
      const tally::detail::read_candidate_pair<const float*, float> reader{x};
      const thrust::counting_iterator<std::int64_t> i(0);
      tally::reduce_into(policy, thrust::make_transform_iterator(i, reader),
                         thrust::make_transform_iterator(i + static_cast<std::int64_t>(n), reader),
                         static_cast<candidates*>(device_out),
                         candidates{tally::detail::no_candidate<float>(), tally::detail::no_candidate<float>()},
                         tally::detail::keep_min_and_max<float, thrust::less<float>>{});
      break;
    }
    case 5: {  // any_of's view
      using answer = tally::detail::predicate_answer<above_two, false>;
      tally::reduce_into(policy, thrust::make_transform_iterator(x, answer{}), thrust::make_transform_iterator(x + n, answer{}),
                         static_cast<unsigned*>(device_out), 0u, tally::bit_or<unsigned>{});
      break;
    }
    case 6: {  // bench_fields: the x/y/z sums over a zip
      const auto first = tally::zip(x, in.y, in.z);
      tally::reduce_into(policy, first, first + n, static_cast<xyz*>(device_out), xyz(0, 0, 0), tally::plus<>{});
      break;
    }
    case 7: {  // bench_fields: the bounding box in one pass
      const float inf = INFINITY;
      const auto op = tally::fields(tally::minimum<float>{}, tally::minimum<float>{}, tally::minimum<float>{},
                                    tally::maximum<float>{}, tally::maximum<float>{}, tally::maximum<float>{});
      const auto first = thrust::make_transform_iterator(tally::zip(x, in.y, in.z), point_box{});
      tally::reduce_into(policy, first, first + static_cast<std::ptrdiff_t>(n), static_cast<box*>(device_out),
                         box(inf, inf, inf, -inf, -inf, -inf), op);
      break;
    }
    // bench_types: n values of the type in init's accumulator (the buffers hold 8n bytes)
    case 8: tally::reduce_into(policy, as<std::int8_t>(x), as<std::int8_t>(x) + n, static_cast<int*>(device_out), 0, tally::plus<int>{}); break;
    case 9: tally::reduce_into(policy, as<__half>(x), as<__half>(x) + n, static_cast<float*>(device_out), 0.0f, tally::plus<float>{}); break;
    case 10: tally::reduce_into(policy, as<__nv_bfloat16>(x), as<__nv_bfloat16>(x) + n, static_cast<float*>(device_out), 0.0f, tally::plus<float>{}); break;
    default: tally::reduce_into(policy, as<double>(x), as<double>(x) + n, static_cast<double*>(device_out), 0.0, tally::plus<double>{}); break;
  }
}
constexpr int device_cases = 12;
const char* device_names[device_cases] = {"transform_reduce", "inner_product", "count_if", "min_element",
                                          "minmax_element", "any_of", "xyz_sum", "bounding_box",
                                          "int8", "half", "bf16", "double"};

// Returns something of the answer, so that the call cannot be dropped.
double roundtrip_case(int which, const inputs& in, std::size_t n, cudaStream_t s) {
  const auto policy = tally::device.on(s);
  const float* x = in.x;
  switch (which) {
    case 0: return tally::transform_reduce(policy, x, x + n, square{}, 0.0f, tally::plus<float>{});
    case 1: return tally::inner_product(policy, x, x + n, in.y, 0.0f);
    case 2: return double(tally::count_if(policy, x, x + n, below_half{}));
    case 3: return double(tally::count(policy, x, x + n, 0.5f));
    case 4: return double(tally::min_element(policy, x, x + n) - x);
    case 5: return double(tally::max_element(policy, x, x + n) - x);
    case 6: { const auto r = tally::minmax_element(policy, x, x + n); return double(r.first - x) + double(r.second - x); }
    case 7: return tally::all_of(policy, x, x + n, below_two{});
    case 8: return tally::any_of(policy, x, x + n, above_two{});
    case 9: return tally::none_of(policy, x, x + n, above_two{});
    default: {
      const auto first = tally::zip(x, in.y, in.z);
      const xyz r = tally::reduce(policy, first, first + n, xyz(0, 0, 0), tally::plus<>{});
      return cuda::std::get<0>(r) + cuda::std::get<1>(r) + cuda::std::get<2>(r);
    }
  }
}
constexpr int roundtrip_cases = 11;
const char* roundtrip_names[roundtrip_cases] = {"transform_reduce", "inner_product", "count_if", "count",
                                                "min_element", "max_element", "minmax_element", "all_of",
                                                "any_of", "none_of", "xyz_sum"};
}  // namespace

#define AB_EXPORT extern "C" __attribute__((visibility("default")))

AB_EXPORT int ab_family_init() {
  for (auto& s : streams)
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 1;
  return cudaMalloc(&device_out, 256) == cudaSuccess ? 0 : 1;
}

// The number of cases of a kind (0 device, 1 round trip) and each one's name.
AB_EXPORT int ab_family_cases(int kind) { return kind == 0 ? device_cases : roundtrip_cases; }
AB_EXPORT const char* ab_family_name(int kind, int which) {
  return kind == 0 ? device_names[which] : roundtrip_names[which];
}

// Microseconds per call of k calls of case `which` on this side's stream `stream`, over the
// copies of the inputs in turn; k == 0 makes one call, unheld, to warm the stream up (a first
// call may load a module or grow the stream's scratch, which would wait for the hold).
// Negative on a CUDA error.
AB_EXPORT double ab_family_run(int kind, int which, int stream, const float* const* x, const float* const* y,
                               const float* const* z, int copies, std::size_t n, int k) {
  static bench::event_timer timer;
  cudaStream_t s = streams[stream % max_streams];
  int next = 0;
  const auto input = [&] {
    const int c = next++ % copies;
    return inputs{x[c], y[c], z[c]};
  };
  double sink = 0;
  try {
    if (k == 0) {
      if (kind == 0) device_case(which, input(), n, s); else sink += roundtrip_case(which, input(), n, s);
      return cudaStreamSynchronize(s) == cudaSuccess ? 0.0 * sink : -1.0;
    }
    if (kind == 0) return 1e6 * timer.seconds_per_call(s, k, [&] { device_case(which, input(), n, s); });
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < k; ++i) sink += roundtrip_case(which, input(), n, s);
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / k + 0.0 * sink;
  } catch (...) {
    return -1.0;
  }
}
