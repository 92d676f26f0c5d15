// One side of tools/roundtrip-ab: tally::reduce as a user calls it, built against one
// tree's headers and library into a shared object of its own.
#include <tally/reduce.cuh>
#include <cuda_runtime.h>
#include <chrono>
#include <cstddef>

namespace {
cudaStream_t stream = nullptr;
}

extern "C" __attribute__((visibility("default"))) int ab_init() {
  return cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess ? 0 : 1;
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
