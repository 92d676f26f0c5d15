// Must not compile: trips the static_assert in tally::detail::launch_reduce
// (include/tally/detail/dispatch/device_dispatch.cuh):
//   "tally: the accumulator type is too large (256 bytes at most)"
// A 128-bin histogram (512 bytes) as the accumulator: every partial of a device reduction
// lives in fixed-size scratch cells and result slots of at most 256 bytes.
#include <tally/reduce.cuh>

#include <cstddef>

struct histogram {
  unsigned int bins[128];
};

struct add_histograms {
  __host__ __device__ histogram operator()(const histogram& a, const histogram& b) const {
    histogram sum;
    for (int i = 0; i < 128; ++i) sum.bins[i] = a.bins[i] + b.bins[i];
    return sum;
  }
};

histogram merge(const histogram* per_block, std::size_t n) {
  return tally::reduce(tally::device, per_block, per_block + n, histogram{}, add_histograms{});
}
