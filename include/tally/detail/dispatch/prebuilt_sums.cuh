#pragma once
// Sums the tally library compiles once, so that the call sites that ask for them compile no
// kernel (docs/decisions/0025-prebuilt-sums.md).
//
// A plain sum over contiguous device memory (float, double, int, unsigned int and the 64-bit
// integers, tally's own choice of strategy) is the call users write most, and its kernels
// were most of what a call site cost to compile. lib/prebuilt_sums_*.cu instantiate exactly
// the code a call site would (device_reduce_instantiated, device_dispatch.cuh) for these
// types, and the call site calls it through the functions declared here. The kernels, the
// plan and so the result bits are the same either way; only the translation unit that
// compiles them differs.
//
// The library holds them for the CUDA architectures it was built for (CMake's
// CMAKE_CUDA_ARCHITECTURES, inherited from the project that adds tally as a subproject): a
// program running on a GPU that none of them covers gets tally::cuda_error naming the remedy.

#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/op_kind.cuh"
#include "tally/execution_policy.cuh"

#include <cstdint>
#include <type_traits>

namespace tally::detail {

// data: contiguous device-readable memory of n > 0 elements. out and handoff as
// device_reduce's (device_dispatch.cuh). Errors name `algorithm`.
void prebuilt_sum(const float* data, std::uint64_t n, float init, float* out, host_handoff* handoff,
                  const device_policy& policy, int device, const char* algorithm);
void prebuilt_sum(const double* data, std::uint64_t n, double init, double* out, host_handoff* handoff,
                  const device_policy& policy, int device, const char* algorithm);
void prebuilt_sum(const int* data, std::uint64_t n, int init, int* out, host_handoff* handoff,
                  const device_policy& policy, int device, const char* algorithm);
void prebuilt_sum(const unsigned* data, std::uint64_t n, unsigned init, unsigned* out, host_handoff* handoff,
                  const device_policy& policy, int device, const char* algorithm);
void prebuilt_sum(const long long* data, std::uint64_t n, long long init, long long* out, host_handoff* handoff,
                  const device_policy& policy, int device, const char* algorithm);
void prebuilt_sum(const unsigned long long* data, std::uint64_t n, unsigned long long init,
                  unsigned long long* out, host_handoff* handoff, const device_policy& policy, int device,
                  const char* algorithm);

// The library's type for a sum of T: T itself for the six types above; for the other 64-bit
// integers (long and unsigned long on LP64 systems: std::int64_t and std::uint64_t) the long long
// of the same signedness, whose sum is the same bits (integer addition wraps alike in both);
// void for any other T.
template <class T>
constexpr auto prebuilt_sum_type_of() {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int> ||
                std::is_same_v<T, unsigned> || std::is_same_v<T, long long> ||
                std::is_same_v<T, unsigned long long>) {
    return static_cast<T*>(nullptr);
  } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) == sizeof(long long)) {
    return static_cast<std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>*>(nullptr);
  } else {
    return static_cast<void*>(nullptr);
  }
}
template <class T>
using prebuilt_sum_type_t = std::remove_pointer_t<decltype(prebuilt_sum_type_of<T>())>;

// Whether a call with these types runs the library's sum: the element, the accumulator and
// the output are one prebuilt type, the operator is a sum computed in that type (tally::,
// thrust::, cuda::std:: or std::plus), and the policy is the plain device policy (a policy
// that may force a strategy compiles the other strategies' kernels at its call site).
template <class Elem, class Acc, class Op, class Out, class Policy>
inline constexpr bool runs_prebuilt_sum_v =
    std::is_same_v<Policy, device_policy> && std::is_same_v<Elem, Acc> &&
    std::is_same_v<Out, Acc> && !std::is_void_v<prebuilt_sum_type_t<Acc>> &&
    op_kind_v<Op> == op_kind::sum && op_computes_in_v<Acc, Op>;

template <class T>
void run_prebuilt_sum(const T* data, std::uint64_t n, T init, T* out, host_handoff* handoff,
                      const device_policy& policy, int device, const char* algorithm) {
  using library_type = prebuilt_sum_type_t<T>;
  static_assert(sizeof(library_type) == sizeof(T) && alignof(library_type) == alignof(T));
  prebuilt_sum(reinterpret_cast<const library_type*>(data), n, static_cast<library_type>(init),
               reinterpret_cast<library_type*>(out), handoff, policy, device, algorithm);
}

}  // namespace tally::detail
