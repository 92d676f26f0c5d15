#pragma once
// Tuple-like types: values made of fields that tally's operators combine field by field.
//   cuda::std::tuple (thrust::tuple is the same type in CCCL 2 and later)
//   CUDA vector types: every char, uchar, short, ushort, int, uint, long, ulong, longlong,
//   ulonglong, float and double vector of 1 to 4 fields
//   user structs that specialize tally::field_members (docs/fields.md)
// Field access goes through tally::detail::field<I>(value) whatever the kind, so the
// fieldwise operators below are written once.

#include <cuda/std/tuple>
#include <cuda/std/utility>
#include <vector_types.h>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace tally {

// Specialize for a struct to make it tuple-like: list() returns its members, in order, as
// a cuda::std::tuple of pointers to members. Every tally operator then works on the struct
// field by field.
//
//   struct particle { float x, y, z; int count; };
//   template <> struct tally::field_members<particle> {
//     __host__ __device__ static constexpr auto list() {
//       return cuda::std::make_tuple(&particle::x, &particle::y, &particle::z, &particle::count);
//     }
//   };
template <class T>
struct field_members;

namespace detail {
// The members of a CUDA vector type of F fields. A class template, so that no list() (and
// no tuple of member pointers) is instantiated for a vector type that a program never
// reduces: as plain explicit specializations, the sixty types below cost every translation
// unit their tuples at parse time.
template <class V, int F>
struct vector_field_members;
template <class V>
struct vector_field_members<V, 1> {
  __host__ __device__ static constexpr auto list() { return cuda::std::make_tuple(&V::x); }
};
template <class V>
struct vector_field_members<V, 2> {
  __host__ __device__ static constexpr auto list() { return cuda::std::make_tuple(&V::x, &V::y); }
};
template <class V>
struct vector_field_members<V, 3> {
  __host__ __device__ static constexpr auto list() { return cuda::std::make_tuple(&V::x, &V::y, &V::z); }
};
template <class V>
struct vector_field_members<V, 4> {
  __host__ __device__ static constexpr auto list() { return cuda::std::make_tuple(&V::x, &V::y, &V::z, &V::w); }
};
}  // namespace detail

#define TALLY_VECTOR_FIELDS_1(V) \
  template <>                    \
  struct field_members<V> : detail::vector_field_members<V, 1> {};
#define TALLY_VECTOR_FIELDS_2(V) \
  template <>                    \
  struct field_members<V> : detail::vector_field_members<V, 2> {};
#define TALLY_VECTOR_FIELDS_3(V) \
  template <>                    \
  struct field_members<V> : detail::vector_field_members<V, 3> {};
#define TALLY_VECTOR_FIELDS_4(V) \
  template <>                    \
  struct field_members<V> : detail::vector_field_members<V, 4> {};
#define TALLY_VECTOR_FIELDS_1_TO_3(T) TALLY_VECTOR_FIELDS_1(T##1) TALLY_VECTOR_FIELDS_2(T##2) TALLY_VECTOR_FIELDS_3(T##3)
TALLY_VECTOR_FIELDS_1_TO_3(char)
TALLY_VECTOR_FIELDS_1_TO_3(uchar)
TALLY_VECTOR_FIELDS_1_TO_3(short)
TALLY_VECTOR_FIELDS_1_TO_3(ushort)
TALLY_VECTOR_FIELDS_1_TO_3(int)
TALLY_VECTOR_FIELDS_1_TO_3(uint)
TALLY_VECTOR_FIELDS_1_TO_3(long)
TALLY_VECTOR_FIELDS_1_TO_3(ulong)
TALLY_VECTOR_FIELDS_1_TO_3(longlong)
TALLY_VECTOR_FIELDS_1_TO_3(ulonglong)
TALLY_VECTOR_FIELDS_1_TO_3(float)
TALLY_VECTOR_FIELDS_1_TO_3(double)
TALLY_VECTOR_FIELDS_4(char4)
TALLY_VECTOR_FIELDS_4(uchar4)
TALLY_VECTOR_FIELDS_4(short4)
TALLY_VECTOR_FIELDS_4(ushort4)
TALLY_VECTOR_FIELDS_4(int4)
TALLY_VECTOR_FIELDS_4(uint4)
TALLY_VECTOR_FIELDS_4(float4)
#undef TALLY_VECTOR_FIELDS_1_TO_3
// CUDA 13 deprecates the 32-byte vectors (double4, long4, ulong4, longlong4, ulonglong4) in
// favour of their _16a/_32a variants; the old ones are still the types users have, so they
// are supported without passing the warning on to them.
__NV_SILENCE_DEPRECATION_BEGIN
TALLY_VECTOR_FIELDS_4(double4)
TALLY_VECTOR_FIELDS_4(long4)
TALLY_VECTOR_FIELDS_4(ulong4)
TALLY_VECTOR_FIELDS_4(longlong4)
TALLY_VECTOR_FIELDS_4(ulonglong4)
__NV_SILENCE_DEPRECATION_END
#if defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 13
TALLY_VECTOR_FIELDS_4(double4_16a)
TALLY_VECTOR_FIELDS_4(double4_32a)
TALLY_VECTOR_FIELDS_4(long4_16a)
TALLY_VECTOR_FIELDS_4(long4_32a)
TALLY_VECTOR_FIELDS_4(ulong4_16a)
TALLY_VECTOR_FIELDS_4(ulong4_32a)
TALLY_VECTOR_FIELDS_4(longlong4_16a)
TALLY_VECTOR_FIELDS_4(longlong4_32a)
TALLY_VECTOR_FIELDS_4(ulonglong4_16a)
TALLY_VECTOR_FIELDS_4(ulonglong4_32a)
#endif
#undef TALLY_VECTOR_FIELDS_1
#undef TALLY_VECTOR_FIELDS_2
#undef TALLY_VECTOR_FIELDS_3
#undef TALLY_VECTOR_FIELDS_4

namespace detail {

template <class T>
struct is_cuda_tuple : std::false_type {};
template <class... Ts>
struct is_cuda_tuple<cuda::std::tuple<Ts...>> : std::true_type {};

template <class T, class = void>
struct has_field_members : std::false_type {};
template <class T>
struct has_field_members<T, std::void_t<decltype(field_members<T>::list())>> : std::true_type {};

template <class T>
inline constexpr bool is_tuple_like_v =
    is_cuda_tuple<std::remove_cv_t<T>>::value || has_field_members<std::remove_cv_t<T>>::value;

template <class T, bool = is_cuda_tuple<T>::value>
struct field_count_of : std::integral_constant<std::size_t, cuda::std::tuple_size<T>::value> {};
template <class T>
struct field_count_of<T, false>
    : std::integral_constant<std::size_t, cuda::std::tuple_size<decltype(field_members<T>::list())>::value> {};

template <class T>
inline constexpr std::size_t field_count_v = field_count_of<std::remove_cv_t<T>>::value;

// Field I of a tuple-like value, as an lvalue of the value's constness.
template <std::size_t I, class T>
__host__ __device__ constexpr decltype(auto) field(T& value) {
  using plain = std::remove_cv_t<T>;
  if constexpr (is_cuda_tuple<plain>::value) {
    return cuda::std::get<I>(value);
  } else {
    return (value.*cuda::std::get<I>(field_members<plain>::list()));
  }
}

template <std::size_t I, class T>
using field_t = std::remove_cv_t<std::remove_reference_t<decltype(field<I>(std::declval<T&>()))>>;

// out with field I = ops_I(a.I, b.I) for every I: all fields computed in one expression, so
// their arithmetic is independent and the compiler interleaves it.
// The operators may be host-only under a host policy; the device instantiation is then never used.
#pragma nv_exec_check_disable
template <class T, class OpTuple, std::size_t... I>
__host__ __device__ constexpr T apply_fieldwise(const T& a, const T& b, OpTuple& ops, std::index_sequence<I...>) {
  T out = a;
  ((field<I>(out) = static_cast<field_t<I, T>>(cuda::std::get<I>(ops)(field<I>(a), field<I>(b)))), ...);
  return out;
}

// The same operator on every field.
#pragma nv_exec_check_disable
template <class T, class Op, std::size_t... I>
__host__ __device__ constexpr T apply_to_every_field(const T& a, const T& b, Op&& op, std::index_sequence<I...>) {
  T out = a;
  ((field<I>(out) = static_cast<field_t<I, T>>(op(field<I>(a), field<I>(b)))), ...);
  return out;
}

template <class T, class Op>
__host__ __device__ constexpr T every_field(const T& a, const T& b, Op&& op) {
  return apply_to_every_field(a, b, op, std::make_index_sequence<field_count_v<T>>{});
}

}  // namespace detail
}  // namespace tally
