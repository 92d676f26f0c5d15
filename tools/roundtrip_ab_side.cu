// One side of tools/roundtrip-ab: tally::reduce as a user calls it, built against one
// tree's headers and library into a shared object of its own.
#include <tally/reduce.cuh>

#include "support/timing.cuh"

#include <cuda_runtime.h>
#include <chrono>
#include <cstdlib>
#include <cstddef>
#include <type_traits>

namespace {
// Round trips run on one of ROUNDTRIP_AB_STREAMS streams of this side's own (default 16, at
// most 16), chosen by ab_use_stream before each block of calls. Each stream has its own scratch
// block at its own address, and a call that takes scratch spends much of its time in dependent
// trips to a few words of it, which move by several percent with the block's address
// (docs/decisions/0034): with one stream a side, a comparison of two builds is also one of two
// addresses. A block stays on its stream, so that the runtime's per-thread caches of the last
// stream hit as they do in a user's loop.
constexpr int max_round_trip_streams = 16;
cudaStream_t round_trip_streams[max_round_trip_streams] = {};
int round_trip_stream_count = max_round_trip_streams;
cudaStream_t stream = nullptr;
}  // namespace

// The stream of the calls that follow: stream k % ROUNDTRIP_AB_STREAMS; returns that count.
extern "C" __attribute__((visibility("default"))) int ab_use_stream(int k) {
  stream = round_trip_streams[k % round_trip_stream_count];
  return round_trip_stream_count;
}

extern "C" __attribute__((visibility("default"))) int ab_init() {
  if (const char* wanted = std::getenv("ROUNDTRIP_AB_STREAMS")) {
    const int n = std::atoi(wanted);
    round_trip_stream_count = n < 1 ? 1 : n > max_round_trip_streams ? max_round_trip_streams : n;
  }
  for (int k = 0; k < round_trip_stream_count; ++k)
    if (cudaStreamCreateWithFlags(&round_trip_streams[k], cudaStreamNonBlocking) != cudaSuccess) return 1;
  stream = round_trip_streams[0];
  return 0;
}

extern "C" __attribute__((visibility("default"))) double ab_reduce(int type, const void* data, std::size_t n) {
  const auto policy = tally::device.on(stream);
  switch (type) {
    case 0: { auto p = static_cast<const float*>(data); return tally::reduce(policy, p, p + n, 0.0f); }
    case 1: { auto p = static_cast<const int*>(data); return tally::reduce(policy, p, p + n, 0); }
    default: { auto p = static_cast<const double*>(data); return tally::reduce(policy, p, p + n, 0.0); }
  }
}

// The host's part alone: reduce_into to device memory, timed from the call to its return;
// the stream is drained (untimed) before the next call.
extern "C" __attribute__((visibility("default"))) double ab_enqueue(int type, const void* data, std::size_t n) {
  static void* out = nullptr;
  if (!out && cudaMalloc(&out, 8) != cudaSuccess) return -1;
  const auto policy = tally::device.on(stream);
  const auto t0 = std::chrono::steady_clock::now();
  switch (type) {
    case 0: { auto p = static_cast<const float*>(data); tally::reduce_into(policy, p, p + n, static_cast<float*>(out), 0.0f); break; }
    case 1: { auto p = static_cast<const int*>(data); tally::reduce_into(policy, p, p + n, static_cast<int*>(out), 0); break; }
    default: { auto p = static_cast<const double*>(data); tally::reduce_into(policy, p, p + n, static_cast<double*>(out), 0.0); break; }
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (cudaStreamSynchronize(stream) != cudaSuccess) return -1;  // the driver stops on a negative time
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

// Device time of k back-to-back reduce_into calls, over the `copies` inputs in turn, with a
// forced strategy (0 automatic, 1 two_pass, 2 block_atomic, 3 warp_atomic) on stream `which`
// (of 16) of this side's own, timed as bench_reduce's device rows are (bench::event_timer:
// the stream held while the k calls are enqueued). Each stream has its own scratch block, at
// its own address. k == 0 makes one unheld call, to warm the stream up.
namespace {
constexpr int device_streams = 16;
cudaStream_t streams[device_streams] = {};
void* device_out = nullptr;

template <class T>
void enqueue(int strategy, const T* p, std::size_t n, cudaStream_t s) {
  auto policy = tally::device.on(s);
  const tally::strategy chosen = strategy == 1   ? tally::strategy::two_pass
                                 : strategy == 2 ? tally::strategy::block_atomic
                                 : strategy == 3 ? tally::strategy::warp_atomic
                                                 : tally::strategy::automatic;
  auto forced = std::is_integral_v<T> ? policy.strategy(chosen) : policy.nondeterministic().strategy(chosen);
  tally::reduce_into(forced, p, p + n, static_cast<T*>(device_out), T{});
}
}  // namespace

extern "C" __attribute__((visibility("default"))) double ab_device(int type, int strategy, int which,
                                                                   const void* const* data, int copies, std::size_t n,
                                                                   int k) {
  static bench::event_timer timer;
  if (!streams[0]) {
    for (auto& s : streams)
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return -1;
    if (cudaMalloc(&device_out, 8) != cudaSuccess) return -1;
  }
  cudaStream_t s = streams[which % device_streams];
  int i = 0;
  // k == 0: one call, not held, then synchronize. The first call of a kernel, size or strategy
  // may load a module or grow the stream's scratch (a cudaFree, which waits for the device); made
  // while event_timer holds the stream, it would wait for the hold and time out.
  if (k == 0) {
    switch (type) {
      case 0: enqueue(strategy, static_cast<const float*>(data[0]), n, s); break;
      case 1: enqueue(strategy, static_cast<const int*>(data[0]), n, s); break;
      default: enqueue(strategy, static_cast<const double*>(data[0]), n, s); break;
    }
    return cudaStreamSynchronize(s) == cudaSuccess ? 0.0 : -1.0;
  }
  const double seconds = timer.seconds_per_call(s, k, [&] {
    const void* input = data[i++ % copies];
    switch (type) {
      case 0: enqueue(strategy, static_cast<const float*>(input), n, s); break;
      case 1: enqueue(strategy, static_cast<const int*>(input), n, s); break;
      default: enqueue(strategy, static_cast<const double*>(input), n, s); break;
    }
  });
  return seconds * 1e6;
}
