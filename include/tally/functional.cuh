#pragma once
// Function objects for reductions. Each works on host and device; the void specialization
// is transparent (deduces its argument types), like std::plus<>.

namespace tally {

template <class T = void>
struct plus {
  __host__ __device__ constexpr T operator()(const T& a, const T& b) const { return a + b; }
};
template <>
struct plus<void> {
  template <class A, class B>
  __host__ __device__ constexpr auto operator()(const A& a, const B& b) const -> decltype(a + b) {
    return a + b;
  }
};

template <class T = void>
struct minimum {
  __host__ __device__ constexpr T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
template <>
struct minimum<void> {
  template <class A, class B>
  __host__ __device__ constexpr auto operator()(const A& a, const B& b) const -> decltype(b < a ? b : a) {
    return b < a ? b : a;
  }
};

template <class T = void>
struct maximum {
  __host__ __device__ constexpr T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
template <>
struct maximum<void> {
  template <class A, class B>
  __host__ __device__ constexpr auto operator()(const A& a, const B& b) const -> decltype(a < b ? b : a) {
    return a < b ? b : a;
  }
};

template <class T = void>
struct multiplies {
  __host__ __device__ constexpr T operator()(const T& a, const T& b) const { return a * b; }
};
template <>
struct multiplies<void> {
  template <class A, class B>
  __host__ __device__ constexpr auto operator()(const A& a, const B& b) const -> decltype(a * b) {
    return a * b;
  }
};

// Bitwise operators, for integer reductions (and the atomic strategies' exact integer ops).
#define TALLY_DEFINE_BITWISE_OP(name, symbol)                                                          \
  template <class T = void>                                                                           \
  struct name {                                                                                       \
    __host__ __device__ constexpr T operator()(const T& a, const T& b) const { return a symbol b; }   \
  };                                                                                                  \
  template <>                                                                                         \
  struct name<void> {                                                                                 \
    template <class A, class B>                                                                       \
    __host__ __device__ constexpr auto operator()(const A& a, const B& b) const -> decltype(a symbol b) { \
      return a symbol b;                                                                              \
    }                                                                                                 \
  };
TALLY_DEFINE_BITWISE_OP(bit_and, &)
TALLY_DEFINE_BITWISE_OP(bit_or, |)
TALLY_DEFINE_BITWISE_OP(bit_xor, ^)
#undef TALLY_DEFINE_BITWISE_OP

}  // namespace tally
