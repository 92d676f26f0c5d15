#pragma once
// Transformed views over contiguous memory: thrust::transform_iterator over a contiguous
// base, and tally's pairing view (a transform over a zip of two contiguous ranges, which
// transform_reduce and inner_product build). Dispatch reads their bases with 16-byte vector
// loads and applies the functor in registers; the plan's vector width comes from the base
// elements, on the host and the device alike, so both still follow one plan.

#include "tally/detail/loads/iterators.cuh"
#include "tally/detail/loads/zip_views.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tuning.cuh"

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/tuple.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <type_traits>

namespace tally::detail {

// transform_op(a, b) over the pairs of a zip: the view transform_reduce's two-range forms
// and inner_product reduce.
template <class Transform>
struct apply_to_pair {
  // mutable: Thrust accepts a functor whose operator() is not const (its transform_iterator
  // keeps the functor mutable too).
  mutable Transform transform;
  // transform may be host-only under a host policy; the device instantiation is then never
  // used, so nvcc need not check it.
#pragma nv_exec_check_disable
  template <class Tuple>
  __host__ __device__ auto operator()(const Tuple& pair) const {
    return transform(thrust::get<0>(pair), thrust::get<1>(pair));
  }
};

// A functor of an index that reads element i of a contiguous base itself and pairs it with
// i: extrema.cuh's candidate readers, over a counting range. They declare
// `reads_base_at_index` and provide `first` (the base) and `make(element, index)`, so that
// dispatch can read the base 16 bytes at a time and still hand each element its index.
template <class F, class = void>
struct reads_base_at_index : std::false_type {};
template <class F>
struct reads_base_at_index<F, std::void_t<typename F::reads_base_at_index>>
    : std::bool_constant<std::is_pointer_v<decltype(std::declval<F>().first)>> {};

template <class It>
struct is_counting_iterator : std::false_type {};
template <class I, class S, class T, class D>
struct is_counting_iterator<thrust::counting_iterator<I, S, T, D>> : std::is_integral<I> {};

template <class It>
struct transform_view {
  static constexpr bool single = false;
  static constexpr bool paired = false;
  static constexpr bool indexed = false;
};

template <class F, class Base, class R, class V>
struct transform_view<thrust::transform_iterator<F, Base, R, V>> {
  static constexpr bool single = is_contiguous_v<Base>;
  static constexpr bool paired = false;
  static constexpr bool indexed = reads_base_at_index<F>::value && is_counting_iterator<Base>::value;
  using functor_t = F;
};

// The element type of an indexed view's base.
template <class F>
using indexed_base_element_t = std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<F>().first)>>;

template <class Transform, class It1, class It2, class R, class V>
struct transform_view<thrust::transform_iterator<apply_to_pair<Transform>, thrust::zip_iterator<thrust::tuple<It1, It2>>, R, V>> {
  static constexpr bool single = false;
  static constexpr bool indexed = false;
  static constexpr bool paired = is_contiguous_v<It1> && is_contiguous_v<It2> &&
                                 sizeof(iterator_value_t<It1>) == sizeof(iterator_value_t<It2>);
  using first_t = It1;
  using second_t = It2;
};

// The vector width of the plan for an iterator: its base's where dispatch reads a base.
// Contiguous arrays of 12- and 24-byte elements (float3, ...) take 48-byte chunks
// (zip_views.cuh); zips of equal-size contiguous bases take their elements' width.
template <class It>
constexpr int plan_vector_width() {
  if constexpr (transform_view<It>::single) {
    return array_chunk_width_v<iterator_value_t<typename It::base_type>>;
  } else if constexpr (transform_view<It>::paired) {
    return vector_width_v<iterator_value_t<typename transform_view<It>::first_t>>;
  } else if constexpr (transform_view<It>::indexed) {
    return vector_width_v<indexed_base_element_t<typename transform_view<It>::functor_t>>;
  } else if constexpr (zip_view<It>::vector_width > 1) {
    return zip_view<It>::vector_width;
  } else if constexpr (is_contiguous_v<It>) {
    return array_chunk_width_v<iterator_value_t<It>>;
  } else {
    return vector_width_v<iterator_value_t<It>>;
  }
}
template <class It>
inline constexpr int plan_vector_width_v = plan_vector_width<It>();

#if defined(__CUDACC__)
// Reads 16 bytes of the base per chunk and transforms them: f(base[i]) as V. Full tiles
// keep the elements as read and transform each as it is folded (raw_type, raw_chunk,
// value). Transforming as the chunk is read would put an instruction that needs the loaded
// bytes where the fetch is: the next tile's fetch, which a block issues before its block
// reduction so that the loads are in flight meanwhile (tile/commutative_tile.cuh), would then make
// the block wait for them first (docs/decisions/0015-transforms-at-the-fold.md). Where V is
// wider than E (a count's 8-byte 0 or 1 from a 4-byte float), the raw elements also keep a
// step's loads in 32 registers, not 64.
template <class F, class E, class V, int VW>
struct transform_vector_loader {
  static_assert(sizeof(E) * VW == 16, "transform_vector_loader reads 16-byte chunks");
  using value_type = V;
  using raw_type = std::conditional_t<(tuning::transforms_at_fold || sizeof(V) > sizeof(E)), E, void>;
  static constexpr std::uint64_t bytes_per_element = sizeof(E);
  const E* data;
  mutable F f;  // a user's functor, whose operator() need not be const (as in Thrust)
  bool streaming = false;  // streams_reads

  __device__ __forceinline__ void raw_chunk(std::uint64_t first, E (&out)[VW]) const {
    const uint4 raw = read_16_bytes(data + first, streaming);
    std::memcpy(out, &raw, sizeof(raw));
  }
  __device__ __forceinline__ E raw_element(std::uint64_t i) const { return data[i]; }
  __device__ __forceinline__ V value(const E& e, std::uint64_t) const { return static_cast<V>(f(e)); }
  __device__ __forceinline__ void chunk(std::uint64_t first, V (&out)[VW]) const {
    E e[VW];
    raw_chunk(first, e);
#pragma unroll
    for (int j = 0; j < VW; ++j) out[j] = static_cast<V>(f(e[j]));
  }
  __device__ __forceinline__ V element(std::uint64_t i) const { return static_cast<V>(f(data[i])); }
};

// Element i of both bases, as read (pair_vector_loader's raw elements).
template <class E1, class E2>
struct element_pair {
  E1 first;
  E2 second;
};

// Two bases of equal element size, 16 bytes of each per chunk: transform(a[i], b[i]) as V.
// With Raw (dispatch asks for it where the operator is commutative) full tiles keep both
// elements as read and transform them as they are folded. A step's raw pairs are then 256
// bytes a thread, so the kernel does not fetch the next tile early (prefetches_next_tile):
// prefetching the raw pairs as well measured slower than transforming at the read
// (docs/decisions/0015-transforms-at-the-fold.md). The order-preserving kernel stages
// chunks of at most 16 bytes through shared memory (tile/ordered_tile.cuh), which a raw pair
// is not, so it takes transformed chunks.
template <class T, class E1, class E2, class V, int VW, bool Raw = false>
struct pair_vector_loader {
  static_assert(sizeof(E1) * VW == 16 && sizeof(E2) * VW == 16, "pair_vector_loader reads 16-byte chunks");
  using value_type = V;
  using raw_type = std::conditional_t<Raw, element_pair<E1, E2>, void>;
  static constexpr std::uint64_t bytes_per_element = sizeof(E1) + sizeof(E2);
  // Raw pairs of 4-byte elements read faster at many tiles from a kernel held to two blocks
  // per SM (has_two_block_variant, tile/commutative_tile.cuh); pairs of 8-byte ones read slower that
  // way (docs/decisions/0015-transforms-at-the-fold.md).
  static constexpr bool two_blocks_at_many_tiles = Raw && sizeof(E1) + sizeof(E2) <= 8;
  const E1* a;
  const E2* b;
  mutable T transform;  // a user's functor, whose operator() need not be const (as in Thrust)
  bool streaming = false;  // streams_reads

  __device__ __forceinline__ void raw_chunk(std::uint64_t first, element_pair<E1, E2> (&out)[VW]) const {
    const uint4 raw_a = read_16_bytes(a + first, streaming);
    const uint4 raw_b = read_16_bytes(b + first, streaming);
    E1 x[VW];
    E2 y[VW];
    std::memcpy(x, &raw_a, sizeof(raw_a));
    std::memcpy(y, &raw_b, sizeof(raw_b));
#pragma unroll
    for (int j = 0; j < VW; ++j) out[j] = {x[j], y[j]};
  }
  __device__ __forceinline__ element_pair<E1, E2> raw_element(std::uint64_t i) const { return {a[i], b[i]}; }
  __device__ __forceinline__ V value(const element_pair<E1, E2>& e, std::uint64_t) const {
    return static_cast<V>(transform(e.first, e.second));
  }
  __device__ __forceinline__ void chunk(std::uint64_t first, V (&out)[VW]) const {
    element_pair<E1, E2> e[VW];
    raw_chunk(first, e);
#pragma unroll
    for (int j = 0; j < VW; ++j) out[j] = value(e[j], first + j);
  }
  __device__ __forceinline__ V element(std::uint64_t i) const { return static_cast<V>(transform(a[i], b[i])); }
};

// The candidate type of F's positions (F::local_type), or void where F has none.
template <class F, class = void>
struct local_type_of {
  using type = void;
};
template <class F>
struct local_type_of<F, std::void_t<typename F::local_type>> {
  using type = typename F::local_type;
};

// An indexed view over a counting range starting at `offset`: element k is
// f.make(base[offset + k], offset + k), the base read 16 bytes at a time. Full tiles keep
// the base elements as read and make each candidate as it is folded (raw_chunk, value),
// with a 32-bit position in place of the index where F offers that (make_local, globalize;
// tile/commutative_tile.cuh, folds_local_positions).
template <class F, class E, class V, int VW>
struct indexed_vector_loader {
  static_assert(sizeof(E) * VW == 16, "indexed_vector_loader reads 16-byte chunks");
  using value_type = V;
  using raw_type = E;
  using local_type = typename local_type_of<F>::type;
  static constexpr std::uint64_t bytes_per_element = sizeof(E);
  F f;
  std::int64_t offset;
  bool streaming = false;  // streams_reads

  template <class L = local_type>
  __device__ __forceinline__ L local_value(const E& e, std::uint32_t position) const {
    return f.make_local(e, position);
  }
  // The value of a local candidate whose position 0 is element `first` of the view.
  template <class L>
  __device__ __forceinline__ V globalize(const L& local, std::uint64_t first) const {
    return static_cast<V>(f.globalize(local, offset + static_cast<std::int64_t>(first)));
  }
  // The inverse, for a value whose indices lie in [first, first + 2^32) of the view.
  template <class A, class L = local_type>
  __device__ __forceinline__ L localize(const A& value, std::uint64_t first) const {
    return f.localize(static_cast<V>(value), offset + static_cast<std::int64_t>(first));
  }

  __device__ __forceinline__ void raw_chunk(std::uint64_t first, E (&out)[VW]) const {
    const uint4 raw = read_16_bytes(f.first + offset + static_cast<std::int64_t>(first), streaming);
    std::memcpy(out, &raw, sizeof(raw));
  }
  __device__ __forceinline__ E raw_element(std::uint64_t i) const { return f.first[offset + static_cast<std::int64_t>(i)]; }
  __device__ __forceinline__ V value(const E& e, std::uint64_t i) const {
    return static_cast<V>(f.make(e, offset + static_cast<std::int64_t>(i)));
  }
  __device__ __forceinline__ void chunk(std::uint64_t first, V (&out)[VW]) const {
    E e[VW];
    raw_chunk(first, e);
#pragma unroll
    for (int j = 0; j < VW; ++j) out[j] = value(e[j], first + j);
  }
  __device__ __forceinline__ V element(std::uint64_t i) const {
    const std::int64_t index = offset + static_cast<std::int64_t>(i);
    return static_cast<V>(f.make(f.first[index], index));
  }
};
#endif

}  // namespace tally::detail
