// The library's copies of the plain float and double sums
// (include/tally/detail/dispatch/prebuilt_sums.cuh): the instantiation a call site would
// compile, made once here.
#include "tally/detail/dispatch/device_dispatch.cuh"
#include "tally/functional.cuh"

namespace tally::detail {

void prebuilt_sum(const float* data, std::uint64_t n, float init, float* out, host_handoff* handoff,
                  const device_policy& policy, int device, const char* algorithm) {
  device_reduce_instantiated(data, n, init, tally::plus<float>{}, out, handoff, policy, device, algorithm);
}

void prebuilt_sum(const double* data, std::uint64_t n, double init, double* out, host_handoff* handoff,
                  const device_policy& policy, int device, const char* algorithm) {
  device_reduce_instantiated(data, n, init, tally::plus<double>{}, out, handoff, policy, device, algorithm);
}

}  // namespace tally::detail
