#pragma once
// How tally launches its kernels: with programmatic dependent launch (PDL) where the GPU has
// it (compute capability 9.0+). A kernel so launched may be scheduled while the kernel before
// it on the stream is still running, once every block of that one has started: its launch
// and block start-up then overlap the earlier kernel's tail instead of following it. Every
// tally kernel therefore starts with wait_for_prior_grid(), which waits until the earlier
// kernel has finished and its writes are visible, before it reads or writes global memory;
// the stream's order is kept for every kernel before it, tally's or not. Each tally kernel
// also lets the next kernel be scheduled early from its first instruction: that costs the
// kernel nothing, because the next one waits as this one does.
//
// What it buys: back-to-back reductions on one stream (and a reduction after a kernel that
// allows it) start up to a launch latency earlier. A single call after a kernel launched the
// ordinary way, or after a host synchronize, gains nothing and loses nothing.
// tuning::programmatic_launch = false launches every kernel the ordinary way (tools/tune
// compares the two; docs/decisions/0017-programmatic-dependent-launch.md has the figures).

#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/tuning.cuh"

#include <cuda_runtime.h>
#include <nv/target>

#include <atomic>

namespace tally::detail {

// An answer about Kernel on `device` that does not change while the process runs (its
// occupancy, the architecture its loaded code was compiled for): Question::ask<Kernel>(device)
// returns a positive int, asked once per kernel, question and device, then read lock-free
// (the first 64 devices; any later device is asked every time).
template <class Question, auto Kernel>
int asked_once(int device) {
  constexpr int cached_devices = 64;
  static std::atomic<int> known[cached_devices];  // 0: not asked yet
  const bool cached = device >= 0 && device < cached_devices;
  int answer = cached ? known[device].load(std::memory_order_relaxed) : 0;
  if (answer < 1) {
    answer = Question::template ask<Kernel>(device);
    if (cached) known[device].store(answer, std::memory_order_relaxed);
  }
  return answer;
}

// The virtual architecture of the code the device runs for Kernel (90 for sm_90 code).
struct code_architecture {
  template <auto Kernel>
  static int ask(int) {
    cudaFuncAttributes attributes{};
    check_cuda_call(cudaFuncGetAttributes(&attributes, Kernel), "asking a kernel's attributes");
    return attributes.ptxVersion > 0 ? attributes.ptxVersion : 1;
  }
};

// Whether Kernel may be launched with PDL on `device`: the device has it, and the code the
// device runs for Kernel was compiled for compute capability 9.0 or later, so that
// wait_for_prior_grid() holds the wait. A program built only for an older architecture runs
// on a newer GPU from PTX without the wait, and must then be launched the ordinary way.
template <auto Kernel>
bool launches_programmatically(int device) {
  if constexpr (tuning::programmatic_launch) {
    return properties(device).programmatic_launch && asked_once<code_architecture, Kernel>(device) >= 90;
  } else {
    (void)device;
    return false;
  }
}

// Launches Kernel<<<grid, threads, 0, stream>>>(args...) on `device` (the current one),
// allowing it to overlap the stream's previous kernel where launches_programmatically. The
// launch's own status decides: an error the application left pending is not read (through
// cudaGetLastError, which would also clear it), so a launch that succeeded is never reported
// as failed, and the application still finds its own error where it left it.
template <auto Kernel, class... Args>
void launch_kernel(unsigned grid, unsigned threads, cudaStream_t stream, int device, const Args&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  if (launches_programmatically<Kernel>(device)) {
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  check_cuda_call(cudaLaunchKernelEx(&config, Kernel, args...), "launching a kernel");
}

// Launches Kernel the ordinary way: it starts only once the stream's previous work has
// finished. For a kernel that follows work tally did not launch (an NCCL collective), whose
// kernels tally cannot vouch for: launched programmatically behind an NCCL all-reduce, the
// fold of its output read stale words on one rank of two (bench_distributed, H200).
template <auto Kernel, class... Args>
void launch_kernel_in_order(unsigned grid, unsigned threads, cudaStream_t stream, const Args&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  check_cuda_call(cudaLaunchKernelEx(&config, Kernel, args...), "launching a kernel");
}

}  // namespace tally::detail
