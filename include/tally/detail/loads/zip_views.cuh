#pragma once
// Multi-field inputs (docs/fields.md):
//   structure of arrays  a thrust::zip_iterator of contiguous ranges (tally::zip), or a
//                        transform_iterator over one: every base is read 16 bytes at a time
//                        when it is 16-byte aligned and element by element otherwise, and
//                        the tuple (or the functor's result) is formed in registers
//   array of structures  12- and 24-byte elements (float3, int3, double3, ...): a chunk is
//                        the 48 bytes of 4 (or 2) consecutive elements, read as three
//                        16-byte loads, so a warp reads one contiguous 1536-byte span
// Either way the plan's vector width comes from the base element type (plan_vector_width in
// transform_views.cuh), on the host and the device alike, so both follow one plan and the
// bits do not depend on alignment.

#include "tally/detail/loads/iterators.cuh"
#include "tally/detail/loads/loads.cuh"
#include "tally/detail/plan.cuh"

#include <cuda/std/tuple>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace tally::detail {

// ---- arrays of 12- and 24-byte structures ----

inline constexpr int wide_chunk_bytes = 48;

// Elements per chunk for a contiguous array of E: 16-byte chunks where E divides 16,
// 48-byte chunks for 12- and 24-byte elements, else one element.
template <class E>
inline constexpr int array_chunk_width_v =
    ((sizeof(E) == 12 || sizeof(E) == 24) && alignof(E) >= 4 && std::is_trivially_copyable_v<E>)
        ? int(wide_chunk_bytes / sizeof(E))
        : vector_width_v<E>;

struct same_value {
  template <class X>
  __host__ __device__ const X& operator()(const X& x) const {
    return x;
  }
};

#if defined(__CUDACC__)
// 48 bytes of the base per chunk, three 16-byte loads: f(base[i]) as V.
template <class F, class E, class V, int VW>
struct wide_chunk_loader {
  static_assert(sizeof(E) * VW == wide_chunk_bytes, "wide_chunk_loader reads 48-byte chunks");
  using value_type = V;
  static constexpr std::uint64_t bytes_per_element = sizeof(E);
  const E* data;
  mutable F f;  // a user's functor, whose operator() need not be const (as in Thrust)
  bool streaming = false;  // streams_reads

  __device__ __forceinline__ void chunk(std::uint64_t first, V (&out)[VW]) const {
    const uint4* p = reinterpret_cast<const uint4*>(data + first);
    const uint4 raw[3] = {read_16_bytes(p, streaming), read_16_bytes(p + 1, streaming),
                          read_16_bytes(p + 2, streaming)};
    E e[VW];
    std::memcpy(e, raw, sizeof(raw));
#pragma unroll
    for (int j = 0; j < VW; ++j) out[j] = static_cast<V>(f(e[j]));
  }
  __device__ __forceinline__ V element(std::uint64_t i) const { return static_cast<V>(f(data[i])); }
};
#endif

// ---- structures of arrays: zips of contiguous ranges ----

template <class E, int VW>
struct base_chunk {
  E values[VW];
};

#if defined(__CUDACC__)
// One chunk of every base, then value j is f(tuple(base_0[j], base_1[j], ...)) as V. Base k
// is read with a 16-byte load when bit k of vector_bases is set (it is 16-byte aligned),
// element by element otherwise: the same values either way.
template <class F, class V, int VW, class... E>
struct zip_vector_loader {
  using value_type = V;
  static constexpr std::uint64_t bytes_per_element = (sizeof(E) + ...);
  cuda::std::tuple<const E*...> bases;
  unsigned vector_bases;
  mutable F f;  // a user's functor, whose operator() need not be const (as in Thrust)
  bool streaming = false;  // streams_reads

  template <std::size_t K, class Ek>
  __device__ __forceinline__ void load_base(std::uint64_t first, Ek (&out)[VW]) const {
    const Ek* base = cuda::std::get<K>(bases) + first;
    if (vector_bases & (1u << K)) {
      const uint4 raw = read_16_bytes(base, streaming);
      std::memcpy(out, &raw, sizeof(raw));
    } else {
#pragma unroll
      for (int j = 0; j < VW; ++j) out[j] = base[j];
    }
  }

  template <std::size_t... K>
  __device__ __forceinline__ void chunk_of_every_base(std::uint64_t first, V (&out)[VW],
                                                      std::index_sequence<K...>) const {
    cuda::std::tuple<base_chunk<E, VW>...> parts;
    (load_base<K>(first, cuda::std::get<K>(parts).values), ...);  // every base's load in flight at once
#pragma unroll
    for (int j = 0; j < VW; ++j) out[j] = static_cast<V>(f(cuda::std::tuple<E...>(cuda::std::get<K>(parts).values[j]...)));
  }
  __device__ __forceinline__ void chunk(std::uint64_t first, V (&out)[VW]) const {
    chunk_of_every_base(first, out, std::index_sequence_for<E...>{});
  }

  template <std::size_t... K>
  __device__ __forceinline__ V element_of_every_base(std::uint64_t i, std::index_sequence<K...>) const {
    return static_cast<V>(f(cuda::std::tuple<E...>(cuda::std::get<K>(bases)[i]...)));
  }
  __device__ __forceinline__ V element(std::uint64_t i) const {
    return element_of_every_base(i, std::index_sequence_for<E...>{});
  }
};
#endif

// What dispatch knows about the bases of a zip.
template <class... Its>
struct zip_bases {
  static constexpr bool is_zip = true;
  static constexpr bool all_contiguous = (is_contiguous_v<Its> && ...);
  static constexpr std::size_t first_size = sizeof(iterator_value_t<std::tuple_element_t<0, std::tuple<Its...>>>);
  static constexpr bool equal_sizes = ((sizeof(iterator_value_t<Its>) == first_size) && ...);
  static_assert(sizeof...(Its) <= 32, "tally: a zip of at most 32 ranges");
  // Elements per chunk of the vectorized loader; 0 where the bases cannot take it.
  static constexpr int vector_width =
      (all_contiguous && equal_sizes && vector_width_v<iterator_value_t<std::tuple_element_t<0, std::tuple<Its...>>>> > 1)
          ? vector_width_v<iterator_value_t<std::tuple_element_t<0, std::tuple<Its...>>>>
          : 0;

  // fn(raw pointer) for every contiguous base (for dispatch's pointer checks). The zip
  // must be dereferenceable (n > 0).
  template <class Zip, class Fn>
  static void for_each_contiguous_base(const Zip& zip, Fn&& fn) {
    for_each_base(zip.get_iterator_tuple(), fn, std::index_sequence_for<Its...>{});
  }

#if defined(__CUDACC__)
  template <class V, int VW, class Zip, class F>
  static auto loader(const Zip& zip, F f) {
    return make_loader<V, VW>(zip.get_iterator_tuple(), f, std::index_sequence_for<Its...>{});
  }
#endif

 private:
  template <class Tuple, class Fn, std::size_t... K>
  static void for_each_base(const Tuple& its, Fn& fn, std::index_sequence<K...>) {
    auto visit = [&](const auto& it) {
      if constexpr (is_contiguous_v<std::decay_t<decltype(it)>>) fn(static_cast<const void*>(raw_pointer(it)));
    };
    (visit(cuda::std::get<K>(its)), ...);
  }
#if defined(__CUDACC__)
  template <class V, int VW, class Tuple, class F, std::size_t... K>
  static auto make_loader(const Tuple& its, F f, std::index_sequence<K...>) {
    using loader_t = zip_vector_loader<F, V, VW, std::remove_cv_t<iterator_value_t<Its>>...>;
    const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    const unsigned vector_bases = ((aligned(raw_pointer(cuda::std::get<K>(its))) ? (1u << K) : 0u) | ...);
    return loader_t{cuda::std::make_tuple(raw_pointer(cuda::std::get<K>(its))...), vector_bases, f};
  }
#endif
};

template <class It>
struct zip_view {
  static constexpr bool is_zip = false;
  static constexpr int vector_width = 0;
};

// A plain zip: the loader's functor passes the tuple through.
template <class... Its>
struct zip_view<thrust::zip_iterator<cuda::std::tuple<Its...>>> : zip_bases<Its...> {
  template <class It>
  static const It& zip(const It& first) {
    return first;
  }
  template <class It>
  static same_value functor(const It&) {
    return {};
  }
};

// A transform over a zip: the functor is applied to the tuple in registers.
template <class F, class... Its, class R, class V>
struct zip_view<thrust::transform_iterator<F, thrust::zip_iterator<cuda::std::tuple<Its...>>, R, V>>
    : zip_bases<Its...> {
  template <class It>
  static auto zip(const It& first) {
    return first.base();
  }
  template <class It>
  static F functor(const It& first) {
    return first.functor();
  }
};

}  // namespace tally::detail
