// The library's copies of the plain long long and unsigned long long sums
// (include/tally/detail/dispatch/prebuilt_sums.cuh): the instantiation a call site would
// compile, made once here.
#include "tally/detail/dispatch/device_dispatch.cuh"
#include "tally/functional.cuh"

namespace tally::detail {

void prebuilt_sum(const long long* data, std::uint64_t n, long long init, long long* out, host_handoff* handoff,
                  const device_policy& policy, int device, const char* algorithm) {
  device_reduce_instantiated(data, n, init, tally::plus<long long>{}, out, handoff, policy, device, algorithm);
}

void prebuilt_sum(const unsigned long long* data, std::uint64_t n, unsigned long long init,
                  unsigned long long* out, host_handoff* handoff, const device_policy& policy, int device,
                  const char* algorithm) {
  device_reduce_instantiated(data, n, init, tally::plus<unsigned long long>{}, out, handoff, policy, device, algorithm);
}

}  // namespace tally::detail
