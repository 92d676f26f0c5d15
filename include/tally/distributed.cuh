#pragma once
// Reductions over a range split across the GPUs of an NCCL communicator, one shard per rank
// (the optional component tally::tally_nccl; docs/distributed.md).
//
//   auto policy = tally::nccl(comm).on(stream).shard(offset, global_size);
//   float total = tally::reduce(policy, shard.begin(), shard.end());   // on every rank
//
// Under the policy, reduce, reduce_into, transform_reduce(_into), inner_product(_into),
// count, count_if, the logical algorithms and tally::fields over zips reduce each rank's
// shard with tally's kernels and combine the ranks' contributions so that every rank
// receives the same result (all-reduce semantics). Every operator works, commutative or
// not, tuples too: the combine is not NCCL's reduction but tally's fold of the ranks' partials,
// run alike on every rank after one ncclAllReduce that only moves them.
//
// The bits:
//   - shards on the global plan's tile boundaries (tally::shard_bounds), each rank giving
//     .shard(offset, global_size): those of single-GPU tally::reduce over the whole range;
//   - without .shard(), whatever the split: each rank's shard reduced as tally::reduce reduces
//     it alone (without init), and those R results folded in rank order by the plan's fold of R
//     partials, then op(init, that). The same on every rank and in every run, but dependent
//     on the split. (A .shard() off the plan's tiles is refused on every rank.)
// Every rank makes the same call (same types, operator, init and global size), as for any
// NCCL collective; a rank whose call differs in a way the fold can see makes every rank
// throw std::invalid_argument naming it. reduce_into does not wait, so it cannot throw for
// what the fold finds: it leaves *out untouched instead.
//
// The extrema return global positions (offset + the position in the shard), or -1 when
// every shard is empty.
//
// An exact sum (tally::exact_plus<T>, through reduce, reduce_into, transform_reduce and
// inner_product) gives every rank the exact sum of init and the whole range, rounded once: the
// bits of the exact sum on one GPU or the host, whatever the split, with or without .shard().

#include "tally/detail/dispatch/distributed_dispatch.cuh"
#include "tally/detail/dispatch/distributed_exact_dispatch.cuh"
#include "tally/execution_policy.cuh"
#include "tally/extrema.cuh"
#include "tally/reduce.cuh"
#include "tally/transform_reduce.cuh"

#include <nccl.h>
#include <thrust/iterator/counting_iterator.h>

#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace tally {

using nccl_policy = detail::nccl_policy;

// The policy of a reduction over the ranks of comm (made by the application with
// ncclCommInitRank or ncclCommInitAll). Call with the communicator's device current.
inline nccl_policy nccl(ncclComm_t comm) { return nccl_policy(comm); }

template <>
struct is_execution_policy<nccl_policy> : std::true_type {};

namespace detail {
template <class T, class = void>
struct names_an_iterator : std::is_pointer<T> {};
template <class T>
struct names_an_iterator<T, std::void_t<typename std::iterator_traits<T>::iterator_category>> : std::true_type {};

template <class ItOrElement>
constexpr int shard_vector_width() {
  if constexpr (names_an_iterator<ItOrElement>::value) {
    return plan_vector_width_v<ItOrElement>;
  } else {
    return plan_vector_width_v<const ItOrElement*>;
  }
}
}  // namespace detail

// Shard boundaries for `ranks` ranks on the tile boundaries of the global plan of a range of
// global_size elements read through It (a pointer, a device_vector iterator, a zip...; or
// the element type itself for a plain array): rank r holds [bounds[r], bounds[r + 1]). The
// plan's tiles are dealt out as evenly as they go, so with fewer tiles than ranks some ranks
// hold none (an empty shard still takes part in the call).
template <class ItOrElement>
std::vector<std::uint64_t> shard_bounds(std::uint64_t global_size, int ranks) {
  if (ranks < 1) throw std::invalid_argument("tally::shard_bounds: ranks must be at least 1");
  constexpr int vector_width = detail::shard_vector_width<ItOrElement>();
  const detail::reduction_plan plan = detail::make_plan(global_size, vector_width);
  std::vector<std::uint64_t> bounds(std::size_t(ranks) + 1);
  for (int r = 0; r <= ranks; ++r) {
    const std::uint64_t tile = plan.tiles * std::uint64_t(r) / std::uint64_t(ranks);
    const std::uint64_t at = tile * plan.tile_items;
    bounds[std::size_t(r)] = at < global_size ? at : global_size;
  }
  return bounds;
}

namespace detail {

// The algorithms' entry under an NCCL policy. The family's generic code (transform_reduce,
// count, the logical algorithms) calls reduce_impl and reduce_into_impl unqualified, and finds
// these by the policy's namespace.
// Exact sums (exact_plus) take their own combine (distributed_exact_dispatch.cuh); fields of
// exact sums have none across ranks yet.
template <class Op>
inline constexpr bool refuses_exact_sums_v = declares_exact_fields<Op>::value;

template <class Acc, class It, class Op>
Acc reduce_impl(const nccl_policy& policy, It first, It last, Acc init, Op op) {
  check_operator<Acc, Op, iterator_value_t<It>>();
  static_assert(!refuses_exact_sums_v<Op>, "tally::fields of tally::exact_plus: exact sums of fields over several "
                                           "GPUs are not built yet (issue 37); sum each field with tally::exact_plus");
  if constexpr (!operator_fits_v<Acc, Op, iterator_value_t<It>> || !moves_as_bytes_v<Acc> || refuses_exact_sums_v<Op>) {
    return init;
  } else if constexpr (is_exact_plus_v<Op>) {
    static_assert(std::is_same_v<Op, exact_plus<Acc>>, "tally::exact_plus<T>: init must be a T");
    const char* algorithm = current_algorithm() ? current_algorithm() : "reduce";
    algorithm_scope scope(algorithm);
    const std::uint64_t n = checked_distance(first, last, algorithm);
    const nccl_policy p = normalize_policy(policy);
    const int device = current_device();
    result_slot slot(device);
    distributed_exact_sum(p, first, n, init, static_cast<Acc*>(nullptr), slot.handoff(), device, algorithm);
    Acc result;
    slot.take(p.stream(), &result, sizeof(result));
    return result;
  } else {
    static_assert(sizeof(checked_shard_result<Acc>) <= max_accumulator_bytes,
                  "tally: a distributed reduce hands its value and a status word to the host: 252 bytes at most");
    const char* algorithm = current_algorithm() ? current_algorithm() : "reduce";
    algorithm_scope scope(algorithm);
    const std::uint64_t n = checked_distance(first, last, algorithm);
    const nccl_policy p = normalize_policy(policy);
    if (p.has_shard() && p.global_size() == 0 && n == 0) return init;  // every rank knows: nothing to combine
    const int device = current_device();
    result_slot slot(device);
    distributed_reduce(p, first, n, init, op, static_cast<checked_shard_result<Acc>*>(nullptr), slot.handoff(),
                       device, algorithm);
    checked_shard_result<Acc> result;
    slot.take(p.stream(), &result, sizeof(result));
    if (result.status != 0) throw_invalid_argument(algorithm, shard_fault_text(result.status));
    return result.value;
  }
}

template <class Acc, class It, class OutIt, class Op>
void reduce_into_impl(const nccl_policy& policy, It first, It last, OutIt out, Acc init, Op op,
                      const char* algorithm = "reduce_into") {
  check_operator<Acc, Op, iterator_value_t<It>>();
  static_assert(is_contiguous_v<OutIt>,
                "tally::reduce_into: out must be a pointer, thrust::device_ptr or a device_vector iterator");
  static_assert(!refuses_exact_sums_v<Op>, "tally::fields of tally::exact_plus: exact sums of fields over several "
                                           "GPUs are not built yet (issue 37); sum each field with tally::exact_plus");
  if constexpr (operator_fits_v<Acc, Op, iterator_value_t<It>> && is_contiguous_v<OutIt> && moves_as_bytes_v<Acc> &&
                !refuses_exact_sums_v<Op>) {
    algorithm_scope scope(algorithm);
    const std::uint64_t n = checked_distance(first, last, algorithm);
    const nccl_policy p = normalize_policy(policy);
    const int device = current_device();
    const auto* const_out = raw_pointer(out);
    using out_t = std::remove_cv_t<std::remove_pointer_t<decltype(const_out)>>;
    auto* out_ptr = const_cast<out_t*>(const_out);
    check_device_accessible(out_ptr, properties(device), algorithm, "out");
    if constexpr (is_exact_plus_v<Op>) {
      static_assert(std::is_same_v<Op, exact_plus<Acc>> && std::is_same_v<out_t, Acc>,
                    "tally::exact_plus<T>: init must be a T, and the result is written as T");
      distributed_exact_sum(p, first, n, init, out_ptr, static_cast<host_handoff*>(nullptr), device, algorithm);
    } else {
      distributed_reduce(p, first, n, init, op, out_ptr, static_cast<host_handoff*>(nullptr), device, algorithm);
    }
  }
}

}  // namespace detail

// ---- reduce and reduce_into ----

template <class It, class T, class Op>
T reduce(const nccl_policy& policy, It first, It last, T init, Op op) {
  return detail::reduce_impl(policy, first, last, init, op);
}
template <class It, class T>
T reduce(const nccl_policy& policy, It first, It last, T init) {
  return tally::reduce(policy, first, last, init, plus<T>{});
}
template <class It>
detail::iterator_value_t<It> reduce(const nccl_policy& policy, It first, It last) {
  return tally::reduce(policy, first, last, detail::default_init<detail::iterator_value_t<It>>());
}

template <class It, class OutIt, class T, class Op>
void reduce_into(const nccl_policy& policy, It first, It last, OutIt out, T init, Op op) {
  detail::reduce_into_impl(policy, first, last, out, init, op);
}
template <class It, class OutIt, class T>
void reduce_into(const nccl_policy& policy, It first, It last, OutIt out, T init) {
  tally::reduce_into(policy, first, last, out, init, plus<T>{});
}
template <class It, class OutIt>
void reduce_into(const nccl_policy& policy, It first, It last, OutIt out) {
  tally::reduce_into(policy, first, last, out, detail::default_init<detail::iterator_value_t<It>>());
}

// ---- the extrema: global positions ----

namespace detail {

// The candidates of a shard, their positions the whole range's (reduce_candidates, first_index).
template <template <class, class> class Read, class It, class Candidate, class Keep>
Candidate reduce_shard_candidates(const nccl_policy& policy, It first, It last, Candidate none, Keep keep,
                                  const char* algorithm) {
  algorithm_scope scope(algorithm);
  if (!policy.has_shard() && policy.ranks() > 1)
    throw_invalid_argument(algorithm, "a global position needs each rank's offset; pass it with .shard(offset, global_size)");
  const std::int64_t offset = policy.has_shard() ? std::int64_t(policy.offset()) : 0;
  return reduce_candidates<Read>(policy, first, last, none, keep, algorithm, offset, false);
}

}  // namespace detail

template <class It, class Comp>
std::int64_t min_element(const nccl_policy& policy, It first, It last, Comp comp) {
  using V = detail::iterator_value_t<It>;
  return detail::reduce_shard_candidates<detail::read_candidate>(policy, first, last, detail::no_candidate<V>(),
                                                                 detail::keep_first_min<V, Comp>{comp}, "min_element")
      .index;
}
template <class It>
std::int64_t min_element(const nccl_policy& policy, It first, It last) {
  return tally::min_element(policy, first, last, thrust::less<detail::iterator_value_t<It>>{});
}

template <class It, class Comp>
std::int64_t max_element(const nccl_policy& policy, It first, It last, Comp comp) {
  using V = detail::iterator_value_t<It>;
  return detail::reduce_shard_candidates<detail::read_candidate>(policy, first, last, detail::no_candidate<V>(),
                                                                 detail::keep_first_max<V, Comp>{comp}, "max_element")
      .index;
}
template <class It>
std::int64_t max_element(const nccl_policy& policy, It first, It last) {
  return tally::max_element(policy, first, last, thrust::less<detail::iterator_value_t<It>>{});
}

template <class It, class Comp>
std::pair<std::int64_t, std::int64_t> minmax_element(const nccl_policy& policy, It first, It last, Comp comp) {
  using V = detail::iterator_value_t<It>;
  const detail::min_and_max<V> none{detail::no_candidate<V>(), detail::no_candidate<V>()};
  const auto best = detail::reduce_shard_candidates<detail::read_candidate_pair>(
      policy, first, last, none, detail::keep_min_and_max<V, Comp>{comp}, "minmax_element");
  return {best.min.index, best.max.index};
}
template <class It>
std::pair<std::int64_t, std::int64_t> minmax_element(const nccl_policy& policy, It first, It last) {
  return tally::minmax_element(policy, first, last, thrust::less<detail::iterator_value_t<It>>{});
}

}  // namespace tally
