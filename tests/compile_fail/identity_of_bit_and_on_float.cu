// Must not compile: trips the static_assert in tally::detail::identity_value
// (include/tally/functional.cuh):
//   "tally::identity_of: bit_and has an identity only for integers"
// All bits set is bit_and's identity for integers; floats have no bitwise and.
#include <tally/functional.cuh>

float all_ones() { return tally::identity_of<float>(tally::bit_and<>{}); }
