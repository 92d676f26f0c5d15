// Must not compile: trips the static_assert in tally::warp::shuffle_down
// (include/tally/warp/reduce.cuh):
//   "tally::warp::shuffle_down needs a type whose copy is its bytes: trivially copyable, or copy-constructible and trivially destructible"
// Warp reductions move values between lanes as 32-bit words; a type with a destructor of its
// own owns something that a byte copy would share.
#include <tally/functional.cuh>
#include <tally/warp/reduce.cuh>

struct counted {
  int value;
  counted() = default;
  __device__ counted(const counted& other) : value(other.value) {}
  __device__ ~counted() { value = 0; }
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
  if (threadIdx.x == 0) out->value = sum.value;
}
