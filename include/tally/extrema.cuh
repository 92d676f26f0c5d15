#pragma once
// tally::min_element, tally::max_element, tally::minmax_element: Thrust's signatures, one
// pass of tally::transform_reduce over (value, index) candidates.
//
//   It min_element(policy, first, last[, comp])      the first of the smallest elements
//   It max_element(policy, first, last[, comp])      the first of the largest elements
//   thrust::pair<It, It> minmax_element(policy, first, last[, comp])
//                                                    the first of the smallest and the
//                                                    first of the largest (Thrust's rule;
//                                                    std::minmax_element takes the last)
//   void min_element_into(policy, first, last, out[, comp])     the position (0 when empty)
//   void max_element_into(policy, first, last, out[, comp])     written to *out, an integer
//   void minmax_element_into(policy, first, last, out[, comp])  both: out[0] and out[1]
//        one launch with no host synchronization under a device policy (capturable in a
//        CUDA graph), the same answer as the returning forms
//   each returning form also without a policy: host or device from the iterator's system.
//   comp defaults to thrust::less<value_type>; an empty range returns last ({last, last}).
//
// The candidates are folded by a combine that keeps the one ranked first by (value under
// comp, index): a total order, so the combine is associative and commutative and the
// answer does not depend on the shape of the reduction tree, the grid or the backend.

#include "tally/transform_reduce.cuh"

#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/pair.h>

#include <cstdint>
#include <iterator>
#include <type_traits>

namespace tally {
namespace detail {

// An element's value and position. A negative index means "no element": the identity
// that init stands for, so that an empty side never wins. Inside a full tile (the threads'
// folds and the block tree), candidates carry a 32-bit position from the tile's first
// element instead (Index = std::uint32_t; read_candidate::make_local).
template <class V, class Index = std::int64_t>
struct indexed_value {
  V value;
  Index index;
};

template <class V, class Index = std::int64_t>
struct min_and_max {
  indexed_value<V, Index> min;
  indexed_value<V, Index> max;
};

// Which of two candidates to keep: the smaller value under comp (the larger, for a
// maximum); of equivalent values, the smaller index (the larger, with LastOfEquals).
template <class V, class Comp, bool Maximum, bool LastOfEquals>
struct keep_extremum {
  // Any tree of combines selects the same candidate (detail/plan.cuh, is_order_free).
  static constexpr bool order_free = true;
  static constexpr bool commutative = true;
  mutable Comp comp;  // its operator() need not be const (as in Thrust)

  // comp may be host-only (a plain lambda) under a host policy; the device instantiation
  // is then never used, so nvcc need not check it.
  //
  // Written without branches: the block trees apply it once per level, and as a chain of
  // early returns it compiled to a branch per case on the tree's critical path. comp is
  // therefore also asked about an empty candidate's value (a value-initialized V), and
  // the answer ignores it. Candidates of an unsigned Index (positions) are never empty.
#pragma nv_exec_check_disable
  template <class Index>
  __host__ __device__ indexed_value<V, Index> operator()(const indexed_value<V, Index>& a,
                                                         const indexed_value<V, Index>& b) const {
    bool a_empty = false, b_empty = false;
    if constexpr (std::is_signed_v<Index>) {
      a_empty = a.index < 0;
      b_empty = b.index < 0;
    }
    const bool a_ranks_first = Maximum ? comp(b.value, a.value) : comp(a.value, b.value);
    const bool b_ranks_first = Maximum ? comp(a.value, b.value) : comp(b.value, a.value);
    const bool a_wins_tie = (a.index < b.index) != LastOfEquals;
    const bool keep_a = !a_empty && (b_empty || a_ranks_first || (!b_ranks_first && a_wins_tie));
    return keep_a ? a : b;
  }

  // The same answer when b follows a and both are real candidates: what a thread's own
  // fold over its elements sees, one comparison per element (detail/tile/commutative_tile.cuh).
  // The choice looks at the values alone, so it holds for candidates of any index type.
#pragma nv_exec_check_disable
  template <class Index>
  __host__ __device__ indexed_value<V, Index> combine_in_order(const indexed_value<V, Index>& a,
                                                               const indexed_value<V, Index>& b) const {
    if constexpr (!Maximum) {
      return comp(b.value, a.value) ? b : a;
    } else if constexpr (LastOfEquals) {
      return comp(b.value, a.value) ? a : b;
    } else {
      return comp(a.value, b.value) ? b : a;
    }
  }
};

template <class V, class Comp>
using keep_first_min = keep_extremum<V, Comp, false, false>;
template <class V, class Comp>
using keep_first_max = keep_extremum<V, Comp, true, false>;
template <class V, class Comp>
using keep_last_max = keep_extremum<V, Comp, true, true>;

template <class V, class Comp>
struct keep_min_and_max {
  static constexpr bool order_free = true;
  static constexpr bool commutative = true;
  mutable Comp comp;  // its operator() need not be const (as in Thrust)

  template <class Index>
  __host__ __device__ min_and_max<V, Index> operator()(const min_and_max<V, Index>& a,
                                                       const min_and_max<V, Index>& b) const {
    return {keep_first_min<V, Comp>{comp}(a.min, b.min), keep_first_max<V, Comp>{comp}(a.max, b.max)};
  }
  template <class Index>
  __host__ __device__ min_and_max<V, Index> combine_in_order(const min_and_max<V, Index>& a,
                                                             const min_and_max<V, Index>& b) const {
    return {keep_first_min<V, Comp>{comp}.combine_in_order(a.min, b.min),
            keep_first_max<V, Comp>{comp}.combine_in_order(a.max, b.max)};
  }
};

// Element i of the input as a candidate, or as both candidates of a min_and_max.
// Over a raw pointer, dispatch reads the elements 16 bytes at a time and calls make()
// itself (detail/transform_views.cuh, reads_base_at_index).
// make_local and globalize: the same candidates with a 32-bit position from a first index
// (detail/transform_views.cuh, indexed_vector_loader); localize undoes globalize, for a
// tile's partial on its way through the scratch (detail/tile/commutative_tile.cuh, partial_codec).
template <class It, class V>
struct read_candidate {
  using reads_base_at_index = void;
  using local_type = indexed_value<V, std::uint32_t>;
  It first;

  template <class E>
  __host__ __device__ indexed_value<V> make(const E& element, std::int64_t i) const {
    return {static_cast<V>(element), i};
  }
  template <class E>
  __host__ __device__ local_type make_local(const E& element, std::uint32_t position) const {
    return {static_cast<V>(element), position};
  }
  __host__ __device__ indexed_value<V> globalize(const local_type& c, std::int64_t first_index) const {
    return {c.value, first_index + std::int64_t(c.index)};
  }
  __host__ __device__ local_type localize(const indexed_value<V>& c, std::int64_t first_index) const {
    return {c.value, std::uint32_t(c.index - first_index)};
  }
  // A host-only iterator (std::vector's) is read only under a host policy.
#pragma nv_exec_check_disable
  __host__ __device__ indexed_value<V> operator()(std::int64_t i) const {
    return make(first[static_cast<typename std::iterator_traits<It>::difference_type>(i)], i);
  }
};

template <class It, class V>
struct read_candidate_pair {
  using reads_base_at_index = void;
  using local_type = min_and_max<V, std::uint32_t>;
  It first;

  template <class E>
  __host__ __device__ min_and_max<V> make(const E& element, std::int64_t i) const {
    const indexed_value<V> candidate{static_cast<V>(element), i};
    return {candidate, candidate};
  }
  template <class E>
  __host__ __device__ local_type make_local(const E& element, std::uint32_t position) const {
    const indexed_value<V, std::uint32_t> candidate{static_cast<V>(element), position};
    return {candidate, candidate};
  }
  __host__ __device__ min_and_max<V> globalize(const local_type& c, std::int64_t first_index) const {
    return {{c.min.value, first_index + std::int64_t(c.min.index)}, {c.max.value, first_index + std::int64_t(c.max.index)}};
  }
  __host__ __device__ local_type localize(const min_and_max<V>& c, std::int64_t first_index) const {
    return {{c.min.value, std::uint32_t(c.min.index - first_index)}, {c.max.value, std::uint32_t(c.max.index - first_index)}};
  }
  // As read_candidate: a host-only iterator is read only under a host policy.
#pragma nv_exec_check_disable
  __host__ __device__ min_and_max<V> operator()(std::int64_t i) const {
    return make(first[static_cast<typename std::iterator_traits<It>::difference_type>(i)], i);
  }
};

// A contiguous range is read through its raw pointer: under a device policy as
// tally::reduce's loaders read it, rather than through device_reference proxies; under a
// host policy too, so that a std::vector's iterators take the plan a pointer takes (vector
// width from the element, as on the device). The answer is the same either way, except
// under a comp that is not a strict weak ordering, where the plan's tree decides it and
// host and device then agree (docs/extrema.md, Determinism).
template <class Policy, class It>
auto element_source(const Policy&, It first) {
  if constexpr (is_contiguous_v<It>) {
    return raw_pointer(first);
  } else {
    return first;
  }
}

// One pass over [first, last): Read makes each element a candidate, Keep folds them.
// Returns `none` for an empty range. The checks that tally::reduce makes on a contiguous
// input run here, since the reduction sees only a view over the indices. Positions count from
// first_index: a shard of a range split across GPUs (<tally/distributed.cuh>) passes its
// offset, so that the positions are the whole range's; its reader's base is then moved back by
// as much, and is only ever indexed from first_index on. A shard that is empty still takes
// part in the collective, so it is not answered here.
template <template <class, class> class Read, class Policy, class It, class Candidate, class Keep>
Candidate reduce_candidates(const Policy& policy, It first, It last, Candidate none, Keep keep, const char* algorithm,
                            std::int64_t first_index = 0, bool empty_returns_none = true) {
  const auto p = normalize_policy(policy);
  const std::uint64_t n = checked_distance(first, last, algorithm);
  if (n == 0 && empty_returns_none) return none;
  check_base(p, first, n, algorithm);
  auto base = element_source(p, first);
  if (first_index != 0) base -= static_cast<std::ptrdiff_t>(first_index);
  using reader = Read<decltype(base), iterator_value_t<It>>;
  const thrust::counting_iterator<std::int64_t> indices(first_index);
  return transform_reduce_impl(p, indices, indices + static_cast<std::ptrdiff_t>(n), reader{base}, none, keep,
                               algorithm);
}

// What min_element_into and max_element_into write: the candidate's index, or 0 (last -
// first) for an empty range's `none`. Laid out as the output element (reduce_into_through).
template <class E>
struct position_writer {
  E position;
  template <class V>
  __host__ __device__ explicit position_writer(const indexed_value<V>& best)
      : position(static_cast<E>(best.index < 0 ? 0 : best.index)) {}
  template <class OutIt>
  void assign_to(OutIt out) const {  // the host backend's write
    *out = position;
  }
};

// What minmax_element_into writes: the two positions, in two consecutive output elements.
template <class E>
struct position_pair_writer {
  E min_position;
  E max_position;
  template <class V>
  __host__ __device__ explicit position_pair_writer(const min_and_max<V>& best)
      : min_position(static_cast<E>(best.min.index < 0 ? 0 : best.min.index)),
        max_position(static_cast<E>(best.max.index < 0 ? 0 : best.max.index)) {}
  template <class OutIt>
  void assign_to(OutIt out) const {  // the host backend's write
    *out = min_position;
    ++out;
    *out = max_position;
  }
};

// reduce_candidates' pass, written to out by one launch (device) or assigned (host).
template <template <class, class> class Read, template <class> class Writer, class Policy, class It, class OutIt,
          class Candidate, class Keep>
void reduce_candidates_into(const Policy& policy, It first, It last, OutIt out, Candidate none, Keep keep,
                            const char* algorithm) {
  const auto p = normalize_policy(policy);
  if constexpr (std::is_same_v<decltype(p), const host_policy>) {
    using element = typename std::iterator_traits<OutIt>::value_type;
    Writer<element>(reduce_candidates<Read>(p, first, last, none, keep, algorithm)).assign_to(out);
  } else {
    algorithm_scope scope(algorithm);
    const std::uint64_t n = checked_distance(first, last, algorithm);
    if (n > 0) check_base(p, first, n, algorithm);
    using reader = Read<decltype(element_source(p, first)), iterator_value_t<It>>;
    const thrust::counting_iterator<std::int64_t> indices(0), indices_end(static_cast<std::int64_t>(n));
    const auto candidates = thrust::make_transform_iterator(indices, reader{element_source(p, first)});
    reduce_into_through<Writer>(p, candidates, candidates + static_cast<std::ptrdiff_t>(n), out, none, keep,
                                algorithm);
  }
}

template <class It>
It advance_to(It first, std::int64_t index) {
  return first + static_cast<typename std::iterator_traits<It>::difference_type>(index);
}

template <class V>
constexpr indexed_value<V> no_candidate() {
  return {V{}, -1};
}

}  // namespace detail

// ---- min_element ----

template <class Policy, class It, class Comp, detail::enable_if_policy_t<Policy> = 0>
It min_element(const Policy& policy, It first, It last, Comp comp) {
  using V = detail::iterator_value_t<It>;
  const auto best = detail::reduce_candidates<detail::read_candidate>(
      policy, first, last, detail::no_candidate<V>(), detail::keep_first_min<V, Comp>{comp}, "min_element");
  return best.index < 0 ? last : detail::advance_to(first, best.index);
}

template <class Policy, class It, detail::enable_if_policy_t<Policy> = 0>
It min_element(const Policy& policy, It first, It last) {
  return tally::min_element(policy, first, last, thrust::less<detail::iterator_value_t<It>>{});
}

template <class It, class Comp, detail::enable_if_iterator_t<It> = 0>
It min_element(It first, It last, Comp comp) {
  return tally::min_element(detail::policy_for_iterator<It>(), first, last, comp);
}

template <class It, detail::enable_if_iterator_t<It> = 0>
It min_element(It first, It last) {
  return tally::min_element(detail::policy_for_iterator<It>(), first, last);
}

// The position of the first of the smallest elements (0 for an empty range) written to
// *out, an integer element, by one launch without waiting (a device policy), or assigned.
template <class Policy, class It, class OutIt, class Comp, detail::enable_if_policy_t<Policy> = 0>
void min_element_into(const Policy& policy, It first, It last, OutIt out, Comp comp) {
  using V = detail::iterator_value_t<It>;
  detail::reduce_candidates_into<detail::read_candidate, detail::position_writer>(
      policy, first, last, out, detail::no_candidate<V>(), detail::keep_first_min<V, Comp>{comp}, "min_element_into");
}

template <class Policy, class It, class OutIt, detail::enable_if_policy_t<Policy> = 0>
void min_element_into(const Policy& policy, It first, It last, OutIt out) {
  tally::min_element_into(policy, first, last, out, thrust::less<detail::iterator_value_t<It>>{});
}

// ---- max_element ----

template <class Policy, class It, class Comp, detail::enable_if_policy_t<Policy> = 0>
It max_element(const Policy& policy, It first, It last, Comp comp) {
  using V = detail::iterator_value_t<It>;
  const auto best = detail::reduce_candidates<detail::read_candidate>(
      policy, first, last, detail::no_candidate<V>(), detail::keep_first_max<V, Comp>{comp}, "max_element");
  return best.index < 0 ? last : detail::advance_to(first, best.index);
}

template <class Policy, class It, detail::enable_if_policy_t<Policy> = 0>
It max_element(const Policy& policy, It first, It last) {
  return tally::max_element(policy, first, last, thrust::less<detail::iterator_value_t<It>>{});
}

template <class It, class Comp, detail::enable_if_iterator_t<It> = 0>
It max_element(It first, It last, Comp comp) {
  return tally::max_element(detail::policy_for_iterator<It>(), first, last, comp);
}

template <class It, detail::enable_if_iterator_t<It> = 0>
It max_element(It first, It last) {
  return tally::max_element(detail::policy_for_iterator<It>(), first, last);
}

template <class Policy, class It, class OutIt, class Comp, detail::enable_if_policy_t<Policy> = 0>
void max_element_into(const Policy& policy, It first, It last, OutIt out, Comp comp) {
  using V = detail::iterator_value_t<It>;
  detail::reduce_candidates_into<detail::read_candidate, detail::position_writer>(
      policy, first, last, out, detail::no_candidate<V>(), detail::keep_first_max<V, Comp>{comp}, "max_element_into");
}

template <class Policy, class It, class OutIt, detail::enable_if_policy_t<Policy> = 0>
void max_element_into(const Policy& policy, It first, It last, OutIt out) {
  tally::max_element_into(policy, first, last, out, thrust::less<detail::iterator_value_t<It>>{});
}

// ---- minmax_element ----

template <class Policy, class It, class Comp, detail::enable_if_policy_t<Policy> = 0>
thrust::pair<It, It> minmax_element(const Policy& policy, It first, It last, Comp comp) {
  using V = detail::iterator_value_t<It>;
  const detail::min_and_max<V> none{detail::no_candidate<V>(), detail::no_candidate<V>()};
  const auto best = detail::reduce_candidates<detail::read_candidate_pair>(
      policy, first, last, none, detail::keep_min_and_max<V, Comp>{comp}, "minmax_element");
  if (best.min.index < 0) return {last, last};
  return {detail::advance_to(first, best.min.index), detail::advance_to(first, best.max.index)};
}

template <class Policy, class It, detail::enable_if_policy_t<Policy> = 0>
thrust::pair<It, It> minmax_element(const Policy& policy, It first, It last) {
  return tally::minmax_element(policy, first, last, thrust::less<detail::iterator_value_t<It>>{});
}

// The two positions written to out[0] and out[1] (integer elements; 0 and 0 for an empty range).
template <class Policy, class It, class OutIt, class Comp, detail::enable_if_policy_t<Policy> = 0>
void minmax_element_into(const Policy& policy, It first, It last, OutIt out, Comp comp) {
  using V = detail::iterator_value_t<It>;
  const detail::indexed_value<V> none = detail::no_candidate<V>();
  detail::reduce_candidates_into<detail::read_candidate_pair, detail::position_pair_writer>(
      policy, first, last, out, detail::min_and_max<V>{none, none}, detail::keep_min_and_max<V, Comp>{comp},
      "minmax_element_into");
}

template <class Policy, class It, class OutIt, detail::enable_if_policy_t<Policy> = 0>
void minmax_element_into(const Policy& policy, It first, It last, OutIt out) {
  tally::minmax_element_into(policy, first, last, out, thrust::less<detail::iterator_value_t<It>>{});
}

template <class It, class Comp, detail::enable_if_iterator_t<It> = 0>
thrust::pair<It, It> minmax_element(It first, It last, Comp comp) {
  return tally::minmax_element(detail::policy_for_iterator<It>(), first, last, comp);
}

template <class It, detail::enable_if_iterator_t<It> = 0>
thrust::pair<It, It> minmax_element(It first, It last) {
  return tally::minmax_element(detail::policy_for_iterator<It>(), first, last);
}

}  // namespace tally
