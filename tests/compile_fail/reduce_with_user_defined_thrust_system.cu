// Must not compile: trips the static_assert in tally::detail::normalize_policy
// (include/tally/execution_policy.cuh):
//   "tally: this policy is a user-defined Thrust system, whose own algorithms tally cannot call; pass it to Thrust's algorithm, or pass tally::device, tally::host, thrust::device or thrust::host to tally's"
// A Thrust system of the user's own derives from a Thrust policy and brings its own overloads,
// which Thrust calls and tally cannot; running tally's device code instead would silently
// ignore them.
#include <tally/reduce.cuh>

#include <cstddef>

struct tracing_system : thrust::device_execution_policy<tracing_system> {};

int total(const int* values, std::size_t n) {
  return tally::reduce(tracing_system{}, values, values + n, 0);
}
