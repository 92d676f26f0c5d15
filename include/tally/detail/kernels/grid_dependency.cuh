#pragma once
// The kernels' side of programmatic dependent launch (dispatch/launch.cuh launches them).

#include "tally/detail/tuning.cuh"

#include <nv/target>

namespace tally::detail {

// First statement of every tally kernel. Lets the stream's next kernel be scheduled, then
// waits for the kernel before this one (no-op without PDL or when nothing came before).
__device__ __forceinline__ void wait_for_prior_grid() {
  if constexpr (tuning::programmatic_launch) {
    NV_IF_TARGET(NV_PROVIDES_SM_90, (asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
                                     asm volatile("griddepcontrol.wait;" ::: "memory");))
  }
}

}  // namespace tally::detail
