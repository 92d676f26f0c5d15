#pragma once
// The measurement both in-process A/B drivers share (tools/device_ab.cu, tools/family_ab.cu):
// blocks of timings of two builds, the build that goes first alternating from block to block,
// each block over every stream of each build; per build, the median of all its timings and the
// spread of its per-stream medians (max / min), which is what the scratch block's address
// alone does to the time.
#include <algorithm>
#include <vector>

struct ab_summary {
  double median[2];
  double spread[2];
};

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// time(side, stream) gives one timing of build `side` (0 or 1) on its stream `stream`.
template <class Time>
ab_summary time_alternating(int blocks, int streams, Time&& time) {
  std::vector<std::vector<double>> per[2] = {std::vector<std::vector<double>>(streams),
                                             std::vector<std::vector<double>>(streams)};
  for (int b = 0; b < blocks; ++b)
    for (int k = 0; k < 2; ++k) {
      const int s = (b % 2 == 0) ? k : 1 - k;
      for (int w = 0; w < streams; ++w) per[s][w].push_back(time(s, w));
    }
  ab_summary result{};
  for (int s = 0; s < 2; ++s) {
    std::vector<double> all, medians;
    for (int w = 0; w < streams; ++w) {
      all.insert(all.end(), per[s][w].begin(), per[s][w].end());
      medians.push_back(median_of(per[s][w]));
    }
    result.median[s] = median_of(all);
    result.spread[s] = *std::max_element(medians.begin(), medians.end()) / *std::min_element(medians.begin(), medians.end());
  }
  return result;
}
