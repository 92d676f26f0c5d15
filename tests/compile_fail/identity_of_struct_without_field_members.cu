// Must not compile: trips the static_assert in tally::detail::identity_value
// (include/tally/functional.cuh):
//   "tally::identity_of: no identity is known for this type"
// A struct is tuple-like only with a tally::field_members specialization; without one its
// identity under plus is unknown.
#include <tally/functional.cuh>

struct rgb {
  float r, g, b;
};

rgb black() { return tally::identity_of<rgb>(tally::plus<>{}); }
