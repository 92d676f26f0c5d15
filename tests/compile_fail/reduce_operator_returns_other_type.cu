// Must not compile: trips the static_assert in tally::detail::check_operator
// (include/tally/reduce.cuh):
//   "tally: op(init, init) must return a type convertible to init's type"
// An arg-min operator that returns the smaller value instead of the smaller {value, index}
// cannot be folded again into the accumulator.
#include <tally/reduce.cuh>

#include <cstddef>

struct best {
  float value;
  int index;
};

struct smaller_value {
  __host__ __device__ float operator()(const best& a, const best& b) const {
    return a.value < b.value ? a.value : b.value;
  }
};

best arg_min(const best* candidates, std::size_t n) {
  return tally::reduce(tally::device, candidates, candidates + n, best{3.0e38f, -1}, smaller_value{});
}
