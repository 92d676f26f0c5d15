// The library's copies of the plain int and unsigned sums
// (include/tally/detail/dispatch/prebuilt_sums.cuh): the instantiation a call site would
// compile, made once here.
#include "tally/detail/dispatch/device_dispatch.cuh"
#include "tally/functional.cuh"

namespace tally::detail {

void prebuilt_sum(const int* data, std::uint64_t n, int init, int* out, host_handoff* handoff,
                  const device_policy& policy, int device, const char* algorithm) {
  device_reduce_instantiated(data, n, init, tally::plus<int>{}, out, handoff, policy, device, algorithm);
}

void prebuilt_sum(const unsigned* data, std::uint64_t n, unsigned init, unsigned* out, host_handoff* handoff,
                  const device_policy& policy, int device, const char* algorithm) {
  device_reduce_instantiated(data, n, init, tally::plus<unsigned>{}, out, handoff, policy, device, algorithm);
}

}  // namespace tally::detail
