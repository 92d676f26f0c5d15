#pragma once
// tally::reduce_by_key and tally::reduce_by_key_into: one reduction per run of consecutive equal
// keys (issue 36; docs/segmented.md).
//
//   pair<KeysOut, ValuesOut> reduce_by_key(policy, keys_first, keys_last, values_first, keys_out,
//                                          values_out[, key_equal[, op]])
//       Thrust's signature and result. Each run of consecutive keys that key_equal (default ==)
//       calls equal, comparing each key with the one before it, gives its first key and the
//       reduction of its values with op (default plus) and no init: as in Thrust, a run's result
//       is its first value combined with the rest, so its bits are those of
//       tally::reduce(the run's second value .. its end, its first value, op). Returns the ends
//       of the two outputs. Under a device policy it returns once the outputs are written.
//   void reduce_by_key_into(policy, keys_first, keys_last, values_first, keys_out, values_out,
//                           run_count[, key_equal[, op]])
//       The same, with the number of runs written to *run_count (an integer in device memory
//       under a device policy) instead of returned: asynchronous on the policy's stream, and
//       capturable in a CUDA graph.
//
// The device backend takes fewer than 2^32 - 1 keys and values of at most 64 bytes. The outputs
// must not begin inside the keys or the values (the kernels read them while they write): an
// output that does is refused before anything runs.

#include "tally/detail/dispatch/key_runs_dispatch.cuh"
#include "tally/segmented_reduce.cuh"

#include <cstdint>
#include <functional>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tally {
namespace detail {

// The default key comparison, callable on the host and the device.
struct keys_equal {
  template <class A, class B>
  __host__ __device__ bool operator()(const A& a, const B& b) const {
    return a == b;
  }
};

// The host backend: the runs found in one pass, then each run reduced by one thread.
template <class KeysIt, class ValuesIt, class KeysOut, class ValuesOut, class KeyEqual, class Op>
std::uint64_t host_reduce_by_key(const host_policy& policy, KeysIt keys_first, KeysIt keys_last, ValuesIt values_first,
                                 KeysOut keys_out, ValuesOut values_out, KeyEqual key_equal, Op op,
                                 const char* algorithm) {
  using value_t = typename std::iterator_traits<ValuesIt>::value_type;
  check_operator<value_t, Op, value_t>();
  const std::uint64_t n = checked_distance(keys_first, keys_last, algorithm);
  std::vector<std::uint64_t> run_begins;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (i == 0 ||
        !key_equal(keys_first[static_cast<std::ptrdiff_t>(i - 1)], keys_first[static_cast<std::ptrdiff_t>(i)]))
      run_begins.push_back(i);
  }
  const std::uint64_t runs = run_begins.size();
  run_begins.push_back(n);
  for_each_segment(runs, n, policy.thread_count(), [&](std::uint64_t r) {
    const auto b = static_cast<std::ptrdiff_t>(run_begins[r]);
    const std::uint64_t length = run_begins[r + 1] - run_begins[r];
    keys_out[static_cast<std::ptrdiff_t>(r)] = keys_first[b];
    values_out[static_cast<std::ptrdiff_t>(r)] =
        host::reduce(values_first + (b + 1), length - 1, static_cast<value_t>(values_first[b]), op, 1u,
                     plan_vector_width_v<ValuesIt>);
  });
  return runs;
}

// Refuses an output whose first element lies inside an input the kernels still read. (The
// outputs' lengths are not known before the runs are counted, so only their beginnings are
// checked: an output that begins before an input and runs into it is not caught.)
template <class OutIt, class InIt>
void check_output_begins_apart(OutIt out, InIt in, std::uint64_t n, const char* algorithm, const char* out_name,
                               const char* in_name) {
  if constexpr (is_contiguous_v<OutIt> && is_contiguous_v<InIt>) {
    const auto* o = raw_pointer(out);
    const auto* i = raw_pointer(in);
    if (overlaps(o, 1, i, n * sizeof(*i)))
      throw_invalid_argument(algorithm, std::string(out_name) + " begins inside " + in_name +
                                            ", which the reduction still reads while it writes; pass an output "
                                            "range of its own");
  } else {
    (void)out, (void)in, (void)n, (void)algorithm, (void)out_name, (void)in_name;
  }
}

// The device backend's checks and launches; count_out: the user's device word, or null for
// reduce_by_key, which takes the count through `handoff`.
template <class KeysIt, class ValuesIt, class KeysOut, class ValuesOut, class KeyEqual, class Op, class Count,
          bool MayForceStrategy>
void device_reduce_by_key_call(const basic_device_policy<MayForceStrategy>& policy, KeysIt keys_first, std::uint64_t n,
                               ValuesIt values_first, KeysOut keys_out, ValuesOut values_out, KeyEqual key_equal,
                               Op op, Count* count_out, host_handoff* handoff, int device, const char* algorithm) {
  using value_t = typename std::iterator_traits<ValuesIt>::value_type;
  if (n > max_device_keys)
    throw_invalid_argument(algorithm, "the device backend takes fewer than 2^32 - 1 keys; split the call into calls "
                                      "of fewer, at run boundaries");
  check_output_begins_apart(keys_out, keys_first, n, algorithm, "keys_out", "the keys");
  check_output_begins_apart(keys_out, values_first, n, algorithm, "keys_out", "the values");
  check_output_begins_apart(values_out, keys_first, n, algorithm, "values_out", "the keys");
  check_output_begins_apart(values_out, values_first, n, algorithm, "values_out", "the values");
  const auto keys = device_view(keys_first, true, device, "the keys", algorithm);
  const auto values = device_view(values_first, true, device, "the values", algorithm);
  const auto keys_to = device_view(keys_out, true, device, "keys_out", algorithm);
  const auto values_to = device_view(values_out, true, device, "values_out", algorithm);
  device_reduce_by_key<value_t>(keys, values, n, keys_to, values_to, key_equal, op, count_out, handoff, policy, device);
}

template <class ValuesIt, class Op>
constexpr bool reduce_by_key_fits() {
  using value_t = typename std::iterator_traits<ValuesIt>::value_type;
  return operator_fits_v<value_t, Op, value_t> && moves_as_bytes_v<value_t>;
}

template <class ValuesIt, class Op>
void check_reduce_by_key_values() {
  using value_t = typename std::iterator_traits<ValuesIt>::value_type;
  check_operator<value_t, Op, value_t>();
  static_assert(moves_as_bytes_v<value_t>,
                "tally::reduce_by_key: a device reduction moves the values' type as bytes, so it must be trivially "
                "copyable, or copy-constructible and trivially destructible");
}

}  // namespace detail

template <class Policy, class KeysIt, class ValuesIt, class KeysOut, class ValuesOut, class KeyEqual, class Op,
          detail::enable_if_policy_t<Policy> = 0>
std::pair<KeysOut, ValuesOut> reduce_by_key(const Policy& policy, KeysIt keys_first, KeysIt keys_last,
                                            ValuesIt values_first, KeysOut keys_out, ValuesOut values_out,
                                            KeyEqual key_equal, Op op) {
  constexpr const char* algorithm = "reduce_by_key";
  const auto p = detail::normalize_policy(policy);
  std::uint64_t runs = 0;
  if constexpr (std::is_same_v<std::remove_cv_t<decltype(p)>, host_policy>) {
    runs = detail::host_reduce_by_key(p, keys_first, keys_last, values_first, keys_out, values_out, key_equal, op,
                                      algorithm);
  } else {
    detail::check_reduce_by_key_values<ValuesIt, Op>();
    if constexpr (detail::reduce_by_key_fits<ValuesIt, Op>()) {
      detail::algorithm_scope scope(algorithm);
      const std::uint64_t n = detail::checked_distance(keys_first, keys_last, algorithm);
      if (n > 0) {
        const int device = detail::current_device();
        detail::result_slot slot(device);
        detail::device_reduce_by_key_call(p, keys_first, n, values_first, keys_out, values_out, key_equal, op,
                                          static_cast<unsigned long long*>(nullptr), slot.handoff(), device,
                                          algorithm);
        // As Thrust's: the outputs are written when the call returns. The count has landed by then.
        detail::wait_for_stream(p.stream(), "waiting for the reduction of the runs");
        unsigned long long count = 0;
        slot.take(p.stream(), &count, sizeof(count));
        runs = count;
      }
    }
  }
  return {keys_out + static_cast<typename std::iterator_traits<KeysOut>::difference_type>(runs),
          values_out + static_cast<typename std::iterator_traits<ValuesOut>::difference_type>(runs)};
}

template <class Policy, class KeysIt, class ValuesIt, class KeysOut, class ValuesOut, class KeyEqual,
          detail::enable_if_policy_t<Policy> = 0>
std::pair<KeysOut, ValuesOut> reduce_by_key(const Policy& policy, KeysIt keys_first, KeysIt keys_last,
                                            ValuesIt values_first, KeysOut keys_out, ValuesOut values_out,
                                            KeyEqual key_equal) {
  using value_t = typename std::iterator_traits<ValuesIt>::value_type;
  return tally::reduce_by_key(policy, keys_first, keys_last, values_first, keys_out, values_out, key_equal,
                              plus<value_t>{});
}

template <class Policy, class KeysIt, class ValuesIt, class KeysOut, class ValuesOut,
          detail::enable_if_policy_t<Policy> = 0>
std::pair<KeysOut, ValuesOut> reduce_by_key(const Policy& policy, KeysIt keys_first, KeysIt keys_last,
                                            ValuesIt values_first, KeysOut keys_out, ValuesOut values_out) {
  return tally::reduce_by_key(policy, keys_first, keys_last, values_first, keys_out, values_out,
                              detail::keys_equal{});
}

template <class Policy, class KeysIt, class ValuesIt, class KeysOut, class ValuesOut, class CountOut, class KeyEqual,
          class Op, detail::enable_if_policy_t<Policy> = 0>
void reduce_by_key_into(const Policy& policy, KeysIt keys_first, KeysIt keys_last, ValuesIt values_first,
                        KeysOut keys_out, ValuesOut values_out, CountOut run_count, KeyEqual key_equal, Op op) {
  constexpr const char* algorithm = "reduce_by_key_into";
  const auto p = detail::normalize_policy(policy);
  if constexpr (std::is_same_v<std::remove_cv_t<decltype(p)>, host_policy>) {
    *run_count = detail::host_reduce_by_key(p, keys_first, keys_last, values_first, keys_out, values_out, key_equal,
                                            op, algorithm);
  } else {
    static_assert(detail::is_contiguous_v<CountOut>,
                  "tally::reduce_by_key_into: run_count must be a pointer, thrust::device_ptr or a device_vector "
                  "iterator to an integer in device memory");
    detail::check_reduce_by_key_values<ValuesIt, Op>();
    if constexpr (detail::reduce_by_key_fits<ValuesIt, Op>() && detail::is_contiguous_v<CountOut>) {
      using count_t = detail::output_element_t<CountOut>;
      static_assert(std::is_integral_v<count_t>, "tally::reduce_by_key_into: run_count must point to an integer");
      detail::algorithm_scope scope(algorithm);
      const std::uint64_t n = detail::checked_distance(keys_first, keys_last, algorithm);
      const int device = detail::current_device();
      auto* count_ptr = const_cast<count_t*>(detail::raw_pointer(run_count));
      detail::check_device_accessible(count_ptr, detail::properties(device), algorithm, "run_count");
      if (n == 0) {
        detail::check_stream_of_device(p.stream(), device);
        detail::launch_kernel<detail::write_value_kernel<count_t, count_t>>(1, 1, p.stream(), device, count_ptr,
                                                                            count_t(0));
        return;
      }
      detail::device_reduce_by_key_call(p, keys_first, n, values_first, keys_out, values_out, key_equal, op, count_ptr,
                                        static_cast<detail::host_handoff*>(nullptr), device, algorithm);
    }
  }
}

template <class Policy, class KeysIt, class ValuesIt, class KeysOut, class ValuesOut, class CountOut, class KeyEqual,
          detail::enable_if_policy_t<Policy> = 0>
void reduce_by_key_into(const Policy& policy, KeysIt keys_first, KeysIt keys_last, ValuesIt values_first,
                        KeysOut keys_out, ValuesOut values_out, CountOut run_count, KeyEqual key_equal) {
  using value_t = typename std::iterator_traits<ValuesIt>::value_type;
  tally::reduce_by_key_into(policy, keys_first, keys_last, values_first, keys_out, values_out, run_count, key_equal,
                            plus<value_t>{});
}

template <class Policy, class KeysIt, class ValuesIt, class KeysOut, class ValuesOut, class CountOut,
          detail::enable_if_policy_t<Policy> = 0>
void reduce_by_key_into(const Policy& policy, KeysIt keys_first, KeysIt keys_last, ValuesIt values_first,
                        KeysOut keys_out, ValuesOut values_out, CountOut run_count) {
  tally::reduce_by_key_into(policy, keys_first, keys_last, values_first, keys_out, values_out, run_count,
                            detail::keys_equal{});
}

}  // namespace tally
