// Must not compile: trips the static_assert in tally::warp::shuffle_down
// (include/tally/warp/reduce.cuh):
//   "tally::warp::shuffle_down needs a trivially copyable type"
// Warp reductions move values between lanes as 32-bit words; a type with a user-written copy
// constructor cannot be copied as bytes.
#include <tally/functional.cuh>
#include <tally/warp/reduce.cuh>

struct counted {
  int value;
  counted() = default;
  __device__ counted(const counted& other) : value(other.value) {}
  __device__ counted& operator=(const counted& other) {
    value = other.value;
    return *this;
  }
};

struct add_counted {
  __device__ counted operator()(const counted& a, const counted& b) const {
    counted sum;
    sum.value = a.value + b.value;
    return sum;
  }
};

__global__ void warp_sums(const counted* in, counted* out) {
  const counted sum = tally::warp::reduce(in[threadIdx.x], add_counted{});
  if (threadIdx.x == 0) *out = sum;
}
