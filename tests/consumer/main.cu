// Links against tally::tally and checks one host and (where a GPU exists) one device sum.
#include <tally/tally.cuh>

#include <thrust/device_vector.h>

#include <cstdio>
#include <random>
#include <vector>

int main() {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(-1000, 1000);
  std::vector<int> v(100000);
  long long expected = 0;
  for (auto& x : v) expected += (x = d(rng));

  const int host_sum = tally::reduce(v.begin(), v.end(), 0);
  if (host_sum != expected) {
    std::printf("consumer: host sum %d, expected %lld\n", host_sum, expected);
    return 1;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    thrust::device_vector<int> dv(v.begin(), v.end());
    if (tally::reduce(dv.begin(), dv.end(), 0) != expected) {
      std::printf("consumer: device sum differs\n");
      return 1;
    }
  }
  std::printf("consumer: tally::reduce works (%s)\n", devices > 0 ? "host and device" : "host; no GPU");
  return 0;
}
