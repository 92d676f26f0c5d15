// Must not compile: trips the static_assert in tally::detail::check_outlives_call
// (include/tally/ranges.cuh):
//   "tally: the extrema return an iterator into the range, which a temporary would leave dangling; pass a range that outlives the call"
// The iterator min_element returns would point into a vector destroyed at the end of the
// full expression.
#include <tally/ranges.cuh>

#include <vector>

std::vector<int> load_scores();

int lowest_score() {
  return *tally::min_element(tally::host, load_scores());
}
