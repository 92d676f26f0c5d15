// The axis-aligned bounding box of points stored as x, y, z arrays, in one pass over
// memory: transform_reduce turns each point into (x, y, z, x, y, z) and tally::fields folds
// the first three fields by minimum and the last three by maximum. Checked against std::.
#include <tally/tally.cuh>

#include <thrust/device_vector.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

using point = cuda::std::tuple<float, float, float>;
using box = cuda::std::tuple<float, float, float, float, float, float>;

struct point_box {  // the box of one point: itself as both corners
  __host__ __device__ box operator()(const point& p) const {
    const float x = cuda::std::get<0>(p), y = cuda::std::get<1>(p), z = cuda::std::get<2>(p);
    return box(x, y, z, x, y, z);
  }
};

int main() {
  const std::size_t n = 5'000'003;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> coordinate(-100.0f, 100.0f);
  std::vector<float> x(n), y(n), z(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = coordinate(rng), y[i] = 0.5f * coordinate(rng), z[i] = coordinate(rng) + 7;
  const box want(*std::min_element(x.begin(), x.end()), *std::min_element(y.begin(), y.end()),
                 *std::min_element(z.begin(), z.end()), *std::max_element(x.begin(), x.end()),
                 *std::max_element(y.begin(), y.end()), *std::max_element(z.begin(), z.end()));

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bounding_box: no GPU, skipped\n");
    return 0;
  }
  thrust::device_vector<float> dx(x.begin(), x.end()), dy(y.begin(), y.end()), dz(z.begin(), z.end());
  const float inf = std::numeric_limits<float>::infinity();
  const auto min = tally::minimum<>{};
  const auto max = tally::maximum<>{};
  const auto points = tally::zip(dx.begin(), dy.begin(), dz.begin());
  const box got = tally::transform_reduce(tally::device, points, points + n, point_box{},
                                          box(inf, inf, inf, -inf, -inf, -inf), tally::fields(min, min, min, max, max, max));
  std::printf("bounding box: min (%g, %g, %g), max (%g, %g, %g)\n", cuda::std::get<0>(got), cuda::std::get<1>(got),
              cuda::std::get<2>(got), cuda::std::get<3>(got), cuda::std::get<4>(got), cuda::std::get<5>(got));
  const bool ok = got == want;
  std::printf("%s\n", ok ? "OK: equals std::min_element / std::max_element" : "MISMATCH with the host computation");
  return ok ? 0 : 1;
}
