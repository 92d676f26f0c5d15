// Must not compile: trips the static_assert in tally::detail::reduce_impl for device policies
// (include/tally/reduce.cuh):
//   "tally: a device reduction moves init's type as bytes, so it must be trivially copyable, or copy-constructible and trivially destructible (a type that owns nothing); reduce into a plain value type instead"
// The accumulator travels between threads and to the host as bytes. A type with a destructor
// of its own owns something (here, a buffer) that a byte copy would share, so a device
// reduction must refuse it (the same call under tally::host is fine). A user-written copy
// constructor alone is accepted, as Thrust accepts it (tests/test_thrust_conformance.cu).
#include <tally/reduce.cuh>

#include <cstddef>

struct sample_buffer {
  float* samples = nullptr;
  std::size_t count = 0;
  sample_buffer() = default;
  __host__ __device__ sample_buffer(const sample_buffer& other) : samples(other.samples), count(other.count) {}
  __host__ __device__ ~sample_buffer() { samples = nullptr; }
};

struct keep_larger_buffer {
  __host__ __device__ sample_buffer operator()(const sample_buffer& a, const sample_buffer& b) const {
    return a.count < b.count ? b : a;
  }
};

sample_buffer largest(const sample_buffer* buffers, std::size_t n) {
  return tally::reduce(tally::device, buffers, buffers + n, sample_buffer{}, keep_larger_buffer{});
}
