// Must not compile: trips the static_assert in tally::fields_op::operator()
// (include/tally/fields.cuh):
//   "tally::fields: one operator per field"
// Three fields (x, y, z) but operators for two: the third field would have none.
#include <tally/fields.cuh>

#include <cuda/std/tuple>

#include <vector>

using xyz = cuda::std::tuple<float, float, float>;

xyz extent(const std::vector<xyz>& points) {
  return tally::reduce(tally::host, points.begin(), points.end(), xyz(0, 0, 0),
                       tally::fields(tally::maximum<>{}, tally::maximum<>{}));
}
