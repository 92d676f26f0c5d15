// The centroid of a point cloud stored as a structure of arrays (x, y, z), in one pass:
// tally::zip makes one iterator of (x, y, z) tuples and tally::plus sums every field.
// Checks the device result against a double-precision host sum and the host backend's bits.
#include <tally/tally.cuh>

#include <thrust/device_vector.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using xyz = cuda::std::tuple<float, float, float>;

int main() {
  const std::size_t n = 3'000'000;
  std::mt19937 rng(7);
  std::normal_distribution<float> spread(0.0f, 2.0f);
  std::vector<float> x(n), y(n), z(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = 1.0f + spread(rng);
    y[i] = -3.0f + spread(rng);
    z[i] = 0.5f + spread(rng);
  }
  double want[3] = {0, 0, 0};
  for (std::size_t i = 0; i < n; ++i) want[0] += x[i], want[1] += y[i], want[2] += z[i];
  for (double& w : want) w /= double(n);

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("centroid: no GPU, skipped (host reference: %.5f %.5f %.5f)\n", want[0], want[1], want[2]);
    return 0;
  }
  thrust::device_vector<float> dx(x.begin(), x.end()), dy(y.begin(), y.end()), dz(z.begin(), z.end());
  const auto points = tally::zip(dx.begin(), dy.begin(), dz.begin());
  const xyz sum = tally::reduce(tally::device, points, points + n, xyz(0, 0, 0), tally::plus<>{});
  const double got[3] = {cuda::std::get<0>(sum) / double(n), cuda::std::get<1>(sum) / double(n),
                         cuda::std::get<2>(sum) / double(n)};
  std::printf("centroid: device (%.5f, %.5f, %.5f), host double (%.5f, %.5f, %.5f)\n", got[0], got[1], got[2], want[0],
              want[1], want[2]);

  const auto host_points = tally::zip(x.begin(), y.begin(), z.begin());
  const xyz host_sum = tally::reduce(tally::host, host_points, host_points + n, xyz(0, 0, 0), tally::plus<>{});
  bool ok = std::memcmp(&sum, &host_sum, sizeof(xyz)) == 0;
  std::printf("device and host backend sums are %s\n", ok ? "bitwise equal" : "DIFFERENT");
  for (int k = 0; k < 3; ++k) ok = ok && std::fabs(got[k] - want[k]) < 1e-3;
  std::printf("%s\n", ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
