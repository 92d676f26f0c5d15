// Per-cell centroids of a point cloud sorted by cell, in one pass over x, y and z: the points of
// each grid cell are a run of equal cell ids, and tally::reduce_by_key sums each run's
// (x, y, z, 1) tuples, so that every cell's sums and its count come out together. Each cell's
// sums have the bits of tally::reduce over that cell's points alone: the same on the host, on
// every GPU and from run to run. Checks the device result against the host backend's bits and a
// double-precision reference.
#include <tally/reduce_by_key.cuh>
#include <tally/tally.cuh>

#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/iterator/constant_iterator.h>

#include <cuda/std/functional>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

using sums = cuda::std::tuple<float, float, float, int>;  // x, y, z and the number of points

int main() {
  // Points in a 16 x 16 x 16 grid of unit cells, sorted by cell id, as a particle code keeps them.
  const std::size_t n = 2'000'000;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> coordinate(0.0f, 16.0f);
  std::vector<float> px(n), py(n), pz(n);
  std::vector<int> cell(n);
  for (std::size_t i = 0; i < n; ++i) {
    px[i] = coordinate(rng), py[i] = coordinate(rng), pz[i] = coordinate(rng);
    cell[i] = (int(pz[i]) * 16 + int(py[i])) * 16 + int(px[i]);
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cell[a] < cell[b]; });
  std::vector<float> x(n), y(n), z(n);
  std::vector<int> cells(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = px[order[i]], y[i] = py[order[i]], z[i] = pz[order[i]], cells[i] = cell[order[i]];

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cell_centroids: no GPU, skipped\n");
    return 0;
  }
  const thrust::device_vector<float> dx(x.begin(), x.end()), dy(y.begin(), y.end()), dz(z.begin(), z.end());
  const thrust::device_vector<int> d_cells(cells.begin(), cells.end());
  const auto points = tally::zip(dx.begin(), dy.begin(), dz.begin(), thrust::constant_iterator<int>(1));
  thrust::device_vector<int> d_cell_ids(n);
  thrust::device_vector<sums> d_sums(n);
  const auto ends = tally::reduce_by_key(tally::device, d_cells.begin(), d_cells.end(), points, d_cell_ids.begin(),
                                         d_sums.begin(), cuda::std::equal_to<>{}, tally::plus<>{});
  const std::size_t occupied = std::size_t(ends.first - d_cell_ids.begin());
  const thrust::host_vector<int> cell_ids(d_cell_ids.begin(), d_cell_ids.begin() + std::ptrdiff_t(occupied));
  const thrust::host_vector<sums> cell_sums(d_sums.begin(), d_sums.begin() + std::ptrdiff_t(occupied));

  // The host backend: the same cells, the same bits.
  const auto host_points = tally::zip(x.begin(), y.begin(), z.begin(), thrust::constant_iterator<int>(1));
  std::vector<int> host_ids(n);
  std::vector<sums> host_sums(n);
  const auto host_ends = tally::reduce_by_key(tally::host, cells.begin(), cells.end(), host_points, host_ids.begin(),
                                              host_sums.begin(), cuda::std::equal_to<>{}, tally::plus<>{});
  bool ok = std::size_t(host_ends.first - host_ids.begin()) == occupied;
  for (std::size_t c = 0; ok && c < occupied; ++c)
    ok = cell_ids[c] == host_ids[c] && std::memcmp(&cell_sums[c], &host_sums[c], sizeof(sums)) == 0;
  std::printf("%zu occupied cells; device and host backend sums are %s\n", occupied, ok ? "bitwise equal" : "DIFFERENT");

  // A double-precision reference for every cell's centroid.
  std::vector<double> want(4096 * 3, 0.0);
  std::vector<int> count(4096, 0);
  for (std::size_t i = 0; i < n; ++i) {
    want[std::size_t(cells[i]) * 3 + 0] += x[i];
    want[std::size_t(cells[i]) * 3 + 1] += y[i];
    want[std::size_t(cells[i]) * 3 + 2] += z[i];
    ++count[std::size_t(cells[i])];
  }
  double worst = 0;
  for (std::size_t c = 0; ok && c < occupied; ++c) {
    const int id = cell_ids[c];
    const int points_in_cell = cuda::std::get<3>(cell_sums[c]);
    ok = points_in_cell == count[std::size_t(id)];
    const float centroid[3] = {cuda::std::get<0>(cell_sums[c]) / float(points_in_cell),
                               cuda::std::get<1>(cell_sums[c]) / float(points_in_cell),
                               cuda::std::get<2>(cell_sums[c]) / float(points_in_cell)};
    for (int k = 0; k < 3; ++k)
      worst = std::max(worst, std::fabs(centroid[k] - want[std::size_t(id) * 3 + std::size_t(k)] / points_in_cell));
  }
  ok = ok && worst < 1e-4;
  if (occupied > 0) {
    const sums& first = cell_sums[0];
    std::printf("cell %d: %d points, centroid (%.4f, %.4f, %.4f); largest error against double: %.2e\n", cell_ids[0],
                cuda::std::get<3>(first), cuda::std::get<0>(first) / cuda::std::get<3>(first),
                cuda::std::get<1>(first) / cuda::std::get<3>(first), cuda::std::get<2>(first) / cuda::std::get<3>(first),
                worst);
  }
  std::printf("%s\n", ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
