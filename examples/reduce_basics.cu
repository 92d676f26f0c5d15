// Where you wrote thrust::reduce, write tally::reduce: same arguments, same result.
// Prints a device sum (where a GPU exists) and the host backend's, and checks that they
// are the same bits (tally's determinism contract).
#include <tally/tally.cuh>

#include <thrust/device_vector.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

int main() {
  std::mt19937 rng(2026);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(1 << 22);
  for (auto& x : values) x = dist(rng);

  const float host_sum = tally::reduce(tally::host, values.begin(), values.end(), 0.0f);
  std::printf("host   sum = %.9g\n", host_sum);

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU: device part skipped\n");
    return 0;
  }
  thrust::device_vector<float> d(values.begin(), values.end());
  const float device_sum = tally::reduce(d.begin(), d.end(), 0.0f);      // device, from the iterator
  const float largest = tally::reduce(tally::device, d.begin(), d.end(), -1e30f, tally::maximum<float>{});
  std::printf("device sum = %.9g, max = %.9g\n", device_sum, largest);

  const bool same_bits = std::memcmp(&host_sum, &device_sum, sizeof(float)) == 0;
  std::printf("host and device sums are %s\n", same_bits ? "bitwise equal" : "DIFFERENT");
  return same_bits ? 0 : 1;
}
