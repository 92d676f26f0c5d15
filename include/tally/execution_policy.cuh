#pragma once
// Execution policies: where a tally algorithm runs.
//   tally::host                 the multithreaded CPU backend
//   tally::device               the current CUDA device, default stream
//   tally::device.on(stream)    the current CUDA device, a given stream
//   .nondeterministic()         allows floating-point atomics (results may vary in the last bits)
//   .strategy(tally::strategy::...)  forces a device strategy, for benchmarking; its type,
//                               strategy_forcing_policy, makes the call site compile the
//                               kernels of every strategy, which plain policies leave out
// Thrust's policies (thrust::host, thrust::device, thrust::seq, thrust::cuda::par.on(s),
// par_nosync, those with an allocator) are accepted wherever these are and mean the same;
// thrust::seq runs on the calling thread alone. A user-defined Thrust system is refused at
// compile time (detail::thrust_policy_kind_of).

#include <cuda_runtime_api.h>
#include <thrust/execution_policy.h>

// OpenMP's and TBB's par, named without their headers (a program that uses them includes those).
THRUST_NAMESPACE_BEGIN
namespace system::omp::detail {
struct par_t;
}
namespace system::tbb::detail {
struct par_t;
}
THRUST_NAMESPACE_END

#include <type_traits>

namespace tally {

// How a device reduction combines the blocks' results. automatic lets tally choose from N,
// the type, the operator and the determinism the policy asks for.
enum class strategy {
  automatic,
  single_pass,   // tile partials folded in a fixed order by one block of the same launch
  two_pass,      // the same fold in a second launch
  block_atomic,  // each block's result combined into one accumulator with atomics
  warp_atomic,   // each warp's result combined with atomics
};

class host_policy {
 public:
  constexpr host_policy() = default;
  // Caps the worker threads (0: one per hardware thread). Results do not depend on it.
  constexpr host_policy threads(unsigned count) const {
    host_policy p = *this;
    p.threads_ = count;
    return p;
  }
  constexpr unsigned thread_count() const { return threads_; }

 private:
  unsigned threads_ = 0;
};

// A device policy. Whether it may force a strategy is part of its type: plain
// tally::device and everything made from it with on(), grid_size() and nondeterministic()
// run tally's own choice, so a call site compiles only the kernels that choice can launch;
// strategy() returns the kind that may force one, whose call sites also compile the two-pass
// and atomic kernels (docs/decisions/0021-forced-strategies-in-the-policy-type.md).
template <bool MayForceStrategy>
class basic_device_policy {
 public:
  static constexpr bool may_force_strategy = MayForceStrategy;

  constexpr basic_device_policy() = default;
  // Any device policy converts to one that may force a strategy (keeping its choice).
  template <bool Other, std::enable_if_t<MayForceStrategy && !Other, int> = 0>
  constexpr basic_device_policy(const basic_device_policy<Other>& other)
      : stream_(other.stream()), grid_size_(other.forced_grid_size()), nondeterministic_(other.is_nondeterministic()) {}

  constexpr basic_device_policy on(cudaStream_t stream) const {
    basic_device_policy p = *this;
    p.stream_ = stream;
    return p;
  }
  constexpr cudaStream_t stream() const { return stream_; }

  // Test and benchmark hook: fixes the number of blocks in the grid (0: sized from the
  // device). Results are the same bits for every grid size; the tests prove it.
  constexpr basic_device_policy grid_size(unsigned blocks) const {
    basic_device_policy p = *this;
    p.grid_size_ = blocks;
    return p;
  }
  constexpr unsigned forced_grid_size() const { return grid_size_; }

  // Forces a strategy (a benchmark and test hook). The atomic ones need an integer type with
  // an exact operator, or nondeterministic(); a strategy that cannot run the call throws
  // std::invalid_argument. The policy returned is of the kind that may force one.
  constexpr basic_device_policy<true> strategy(tally::strategy s) const {
    basic_device_policy<true> p = *this;
    p.strategy_ = s;
    return p;
  }
  constexpr tally::strategy forced_strategy() const { return strategy_; }

  // Gives up bit-for-bit reproducibility: floating-point atomics may then combine partial
  // results in whatever order they arrive (with an atomic strategy forced).
  constexpr basic_device_policy nondeterministic() const {
    basic_device_policy p = *this;
    p.nondeterministic_ = true;
    return p;
  }
  constexpr bool is_nondeterministic() const { return nondeterministic_; }

 private:
  template <bool>
  friend class basic_device_policy;

  cudaStream_t stream_ = nullptr;
  unsigned grid_size_ = 0;
  tally::strategy strategy_ = tally::strategy::automatic;  // automatic unless MayForceStrategy
  bool nondeterministic_ = false;
};

// tally::device's type: runs tally's choice of strategy.
using device_policy = basic_device_policy<false>;
// What device.strategy(...) returns: a device policy that may force a strategy.
using strategy_forcing_policy = basic_device_policy<true>;

inline constexpr host_policy host{};
inline constexpr device_policy device{};

namespace detail {

template <class D>
std::true_type derives_from_thrust_policy(const thrust::execution_policy<D>*);
std::false_type derives_from_thrust_policy(...);

template <class P>
inline constexpr bool is_thrust_policy_v = decltype(derives_from_thrust_policy(static_cast<const P*>(nullptr)))::value;

// What a Thrust policy means to tally. Thrust's own policies are named one by one: a type
// that merely derives from one of them is a user-defined system, whose own overloads Thrust
// would call, and which tally cannot honour (normalize_policy refuses it at compile time).
//   device       thrust::device, thrust::cuda::par and par_nosync, .on(stream), and those
//                with an allocator (tally's scratch is its own, so the allocator is unused)
//   host         thrust::host (and OpenMP's and TBB's par): tally's host backend
//   sequential   thrust::seq: the host backend on the calling thread alone, as Thrust runs it
enum class thrust_policy_kind { device, host, sequential, user_defined };

template <thrust_policy_kind K>
using policy_kind_constant = std::integral_constant<thrust_policy_kind, K>;
using runs_on_device = policy_kind_constant<thrust_policy_kind::device>;
using runs_on_host = policy_kind_constant<thrust_policy_kind::host>;
using runs_sequentially = policy_kind_constant<thrust_policy_kind::sequential>;

template <class P>
struct thrust_policy_kind_of : policy_kind_constant<thrust_policy_kind::user_defined> {};
template <>
struct thrust_policy_kind_of<thrust::cuda_cub::par_t> : runs_on_device {};
template <>
struct thrust_policy_kind_of<thrust::cuda_cub::par_nosync_t> : runs_on_device {};
template <>
struct thrust_policy_kind_of<thrust::cuda_cub::execute_on_stream> : runs_on_device {};
template <>
struct thrust_policy_kind_of<thrust::cuda_cub::execute_on_stream_nosync> : runs_on_device {};
template <class Allocator>
struct thrust_policy_kind_of<
    thrust::detail::execute_with_allocator<Allocator, thrust::cuda_cub::execute_on_stream_base>>
    : runs_on_device {};
template <class Allocator>
struct thrust_policy_kind_of<
    thrust::detail::execute_with_allocator<Allocator, thrust::cuda_cub::execute_on_stream_nosync_base>>
    : runs_on_device {};
template <>
struct thrust_policy_kind_of<thrust::system::cpp::detail::par_t> : runs_on_host {};
template <class Allocator>
struct thrust_policy_kind_of<
    thrust::detail::execute_with_allocator<Allocator, thrust::system::cpp::detail::execution_policy>>
    : runs_on_host {};
template <>
struct thrust_policy_kind_of<thrust::system::omp::detail::par_t> : runs_on_host {};
template <>
struct thrust_policy_kind_of<thrust::system::tbb::detail::par_t> : runs_on_host {};
template <>
struct thrust_policy_kind_of<thrust::detail::seq_t> : runs_sequentially {};
template <class Allocator>
struct thrust_policy_kind_of<
    thrust::detail::execute_with_allocator<Allocator, thrust::system::detail::sequential::execution_policy>>
    : runs_sequentially {};

template <class P>
inline constexpr thrust_policy_kind thrust_policy_kind_v = thrust_policy_kind_of<std::remove_cv_t<P>>::value;

}  // namespace detail

// True for tally's and Thrust's execution policies; selects the overloads that take one.
template <class P>
struct is_execution_policy
    : std::bool_constant<std::is_same_v<P, host_policy> || std::is_same_v<P, device_policy> ||
                         std::is_same_v<P, strategy_forcing_policy> || detail::is_thrust_policy_v<P>> {};

template <class P>
inline constexpr bool is_execution_policy_v = is_execution_policy<std::remove_cv_t<std::remove_reference_t<P>>>::value;

namespace detail {

// The stream that stream 0 names in the calling translation unit: the per-thread default
// stream where it is compiled with `nvcc --default-stream per-thread` (which defines
// CUDA_API_PER_THREAD_DEFAULT_STREAM), else the legacy default stream. Resolved here, in the
// user's code, because tally's compiled runtime cannot know how the caller was compiled and
// would otherwise take 0 for the legacy stream. These functions live in an inline namespace
// named after the mode, so that translation units built with and without the flag get
// functions of different names rather than two bodies under one name. tally's algorithm
// templates are still one name in both: as with Thrust, a program should not instantiate
// the same algorithm with the same types in translation units of both kinds.
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
inline namespace per_thread_default_stream {
#else
inline namespace legacy_default_stream {
#endif
inline cudaStream_t default_stream() {
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
  return cudaStreamPerThread;
#else
  return cudaStreamLegacy;
#endif
}

// Maps any accepted policy onto tally's own two, with stream 0 resolved (default_stream).
inline host_policy normalize_policy(const host_policy& p) { return p; }
template <bool MayForceStrategy>
basic_device_policy<MayForceStrategy> normalize_policy(const basic_device_policy<MayForceStrategy>& p) {
  return p.stream() == nullptr ? p.on(default_stream()) : p;
}

template <class P, std::enable_if_t<is_thrust_policy_v<P>, int> = 0>
auto normalize_policy(const P& p) {
  constexpr thrust_policy_kind kind = thrust_policy_kind_v<P>;
  static_assert(kind != thrust_policy_kind::user_defined,
                "tally: this policy is a user-defined Thrust system, whose own algorithms tally cannot call; "
                "pass it to Thrust's algorithm, or pass tally::device, tally::host, thrust::device or "
                "thrust::host to tally's");
  if constexpr (kind == thrust_policy_kind::device) {
    P copy = p;  // thrust's stream accessor takes a non-const reference
    return normalize_policy(device_policy{}.on(thrust::cuda_cub::stream(copy)));
  } else if constexpr (kind == thrust_policy_kind::sequential) {
    return host_policy{}.threads(1);
  } else {
    return host_policy{};
  }
}

}  // inline namespace of the default stream's mode

template <class P>
using normalized_policy_t = decltype(normalize_policy(std::declval<const P&>()));

}  // namespace detail
}  // namespace tally
