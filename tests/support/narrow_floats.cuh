#pragma once
// Conversions between double and the element types of the tests, __half and __nv_bfloat16
// included (their conversions are functions, not casts): references compute in double and
// convert once, rounding to nearest even.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace tally_test {

template <class T>
double to_double(const T& x) {
  if constexpr (std::is_same_v<T, __half>) {
    return double(__half2float(x));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return double(__bfloat162float(x));
  } else {
    return double(x);
  }
}

template <class T>
T from_double(double x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(float(x));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(float(x));
  } else {
    return static_cast<T>(x);
  }
}

}  // namespace tally_test
