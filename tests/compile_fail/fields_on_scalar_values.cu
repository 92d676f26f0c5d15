// Must not compile: trips the static_assert in tally::fields_op::operator()
// (include/tally/fields.cuh):
//   "tally::fields: the values must be tuple-like (cuda::std::tuple, a CUDA vector type, or a struct with tally::field_members)"
// tally::fields applies one operator per field; plain floats have no fields to apply them to.
#include <tally/fields.cuh>

#include <vector>

float sum_and_max(const std::vector<float>& v) {
  return tally::reduce(tally::host, v.begin(), v.end(), 0.0f, tally::fields(tally::plus<>{}, tally::maximum<>{}));
}
