// Must not compile: trips the static_assert in tally::detail::reduce_impl for device policies
// (include/tally/reduce.cuh):
//   "tally: a device reduction needs a trivially copyable init type"
// The accumulator is copied between host and device as bytes; a user-written copy
// constructor makes it not trivially copyable, so a device reduction must refuse it (the
// same call under tally::host is fine).
#include <tally/reduce.cuh>

#include <cstddef>

struct running_sum {
  double sum = 0;
  long long count = 0;
  running_sum() = default;
  __host__ __device__ running_sum(double s, long long c) : sum(s), count(c) {}
  __host__ __device__ running_sum(const running_sum& other) : sum(other.sum), count(other.count) {}
  __host__ __device__ running_sum& operator=(const running_sum& other) {
    sum = other.sum;
    count = other.count;
    return *this;
  }
};

struct add_sums {
  __host__ __device__ running_sum operator()(const running_sum& a, const running_sum& b) const {
    return running_sum(a.sum + b.sum, a.count + b.count);
  }
};

running_sum total(const running_sum* parts, std::size_t n) {
  return tally::reduce(tally::device, parts, parts + n, running_sum{}, add_sums{});
}
