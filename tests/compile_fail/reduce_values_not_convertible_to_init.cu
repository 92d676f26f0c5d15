// Must not compile: trips the static_assert in tally::detail::check_operator
// (include/tally/reduce.cuh):
//   "tally: the range's values must convert to init's type"
// init's type is the accumulator: a float init cannot take float2 values, though a user may
// expect the fields to be summed into one float.
#include <tally/reduce.cuh>

#include <cstddef>

float total_speed(const float2* velocities, std::size_t n) {
  return tally::reduce(tally::device, velocities, velocities + n, 0.0f);
}
