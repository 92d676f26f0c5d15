// A probe, not part of the benchmark suite: what each CUDA call that tally's runtime makes on
// every reduce costs the host, so that a round trip's host time can be told apart from its
// device time (issue 33 compares round trips with an older commit to 2%). Each line is the
// mean of 200,000 calls after 1,000 warm-up calls, on one thread: the current device, the
// current context and its id (current_context), the stream's capture status and id (the
// scratch lease), the runtime's forms of the same stream queries (what the older runtime
// called), a pointer's attributes (is_device_accessible on a new address), a mutex and an
// atomic increment (the lease and the result slot pool), and the steady clock (take()).
// Launch calls are left out: back to back they measure the launch queue, not a call.
//
// The driver's functions are called through the runtime's entry points, as tally's runtime calls
// them. Built with the tools (TALLY_BUILD_TOOLS, target probe_runtime_calls); run on a GPU machine.

#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

namespace {

// The driver's functions through the runtime, as tally's runtime reaches them
// (lib/runtime.cpp), so that the probe needs no link to the driver library.
template <class Fn>
Fn driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<Fn>(fn);
}

template <class Call>
double mean_ns(Call call) {
  constexpr int warm = 1000, timed = 200000;
  for (int i = 0; i < warm; ++i) call();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < timed; ++i) call();
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count() / timed;
}

bool check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::printf("probe_runtime_calls: %s failed: %s\n", what, cudaGetErrorString(status));
  return false;
}

}  // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("probe_runtime_calls: no CUDA device; nothing to measure\n");
    return 0;
  }
  cudaStream_t stream = nullptr;
  void* device_memory = nullptr;
  if (!check(cudaFree(nullptr), "starting the context") ||
      !check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
      !check(cudaMalloc(&device_memory, 256), "cudaMalloc"))
    return 1;
  const auto ctx_get_current = driver_function<CUresult (*)(CUcontext*)>("cuCtxGetCurrent");
  const auto ctx_get_id = driver_function<CUresult (*)(CUcontext, unsigned long long*)>("cuCtxGetId");
  const auto stream_is_capturing =
      driver_function<CUresult (*)(CUstream, CUstreamCaptureStatus*)>("cuStreamIsCapturing");
  const auto stream_get_id = driver_function<CUresult (*)(CUstream, unsigned long long*)>("cuStreamGetId");
  CUcontext context = nullptr;
  if (!ctx_get_current || !ctx_get_id || !stream_is_capturing || !stream_get_id ||
      ctx_get_current(&context) != CUDA_SUCCESS || context == nullptr) {
    std::printf("probe_runtime_calls: the driver's functions or the current context were not found\n");
    return 1;
  }
  cudaDeviceProp props{};
  int device = 0;
  if (!check(cudaGetDevice(&device), "cudaGetDevice") || !check(cudaGetDeviceProperties(&props, device), "properties"))
    return 1;
  std::printf("# probe_runtime_calls: %s, host ns per call (mean of 200,000)\n\n| call | ns |\n|---|---:|\n", props.name);

  unsigned long long id = 0;
  CUstreamCaptureStatus driver_status = CU_STREAM_CAPTURE_STATUS_NONE;
  cudaStreamCaptureStatus runtime_status = cudaStreamCaptureStatusNone;
  cudaPointerAttributes attributes{};
  unsigned int flags = 0;
  std::mutex mutex;
  std::atomic<unsigned long long> counter{0};
  const auto row = [](const char* name, double ns) { std::printf("| %s | %.1f |\n", name, ns); };
  row("cudaGetDevice", mean_ns([&] { (void)cudaGetDevice(&device); }));
  row("cuCtxGetCurrent", mean_ns([&] { (void)ctx_get_current(&context); }));
  row("cuCtxGetId (the context)", mean_ns([&] { (void)ctx_get_id(context, &id); }));
  row("cuCtxGetId (null: the current one)", mean_ns([&] { (void)ctx_get_id(nullptr, &id); }));
  row("cuStreamIsCapturing (a stream)",
      mean_ns([&] { (void)stream_is_capturing(reinterpret_cast<CUstream>(stream), &driver_status); }));
  row("cuStreamIsCapturing (the legacy stream)", mean_ns([&] { (void)stream_is_capturing(CU_STREAM_LEGACY, &driver_status); }));
  row("cuStreamGetId", mean_ns([&] { (void)stream_get_id(reinterpret_cast<CUstream>(stream), &id); }));
  row("cudaStreamIsCapturing", mean_ns([&] { (void)cudaStreamIsCapturing(stream, &runtime_status); }));
  row("cudaStreamGetId", mean_ns([&] { (void)cudaStreamGetId(stream, &id); }));
  row("cudaPointerGetAttributes", mean_ns([&] { (void)cudaPointerGetAttributes(&attributes, device_memory); }));
  row("cudaGetDeviceFlags", mean_ns([&] { (void)cudaGetDeviceFlags(&flags); }));
  row("cudaGetLastError", mean_ns([&] { (void)cudaGetLastError(); }));
  row("std::mutex lock and unlock", mean_ns([&] {
        mutex.lock();
        mutex.unlock();
      }));
  row("atomic fetch_add", mean_ns([&] { counter.fetch_add(1); }));
  row("steady_clock::now", mean_ns([&] { (void)std::chrono::steady_clock::now(); }));
  const bool freed = check(cudaFree(device_memory), "cudaFree") && check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return freed ? 0 : 1;
}
