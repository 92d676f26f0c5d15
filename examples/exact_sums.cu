// Exact sums (docs/exact.md): the real-number sum of the inputs, rounded once, whatever the
// order, the grid or the split. The input here is built so that its exact sum is known: small
// multiples of 2^-10, and large values that cancel in pairs far apart in the array. A float sum
// in any order loses the small values under the large ones; tally::exact_plus does not, on the
// host, on the GPU, through an accumulator that takes the input in pieces, and for x/y fields
// in one call. Each result is checked against the integer sum of the small values.
#include <tally/exact.cuh>
#include <tally/tally.cuh>

#include <cuda/std/tuple>
#include <thrust/device_vector.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  const std::size_t n = 4'000'000;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-(1 << 20), 1 << 20);
  std::uniform_int_distribution<int> large(1 << 20, 1 << 23);
  std::vector<float> x(n);
  long long small_units = 0;  // the sum of the small values, in units of 2^-10
  for (std::size_t i = 0; i < n / 2; ++i) {
    const int k = small(rng);
    small_units += k;
    x[i] = std::ldexp(float(k), -10);
  }
  for (std::size_t i = n / 2; i < n; i += 2) {  // +L and -L: each pair cancels exactly
    x[i] = float(large(rng)) * 64.0f;
    x[i + 1] = -x[i];
  }
  std::shuffle(x.begin(), x.end(), rng);
  // The exact sum, rounded once: small_units * 2^-10 is exact as a double (below 2^42 units).
  const float want = static_cast<float>(std::ldexp(double(small_units), -10));

  const float naive = tally::reduce(tally::host, x.begin(), x.end(), 0.0f);
  const float host_exact = tally::reduce(tally::host, x.begin(), x.end(), 0.0f, tally::exact_plus<float>{});
  std::printf("exact sums: want %.9g; the host's plain float sum %.9g, its exact sum %.9g\n", want, naive, host_exact);
  bool ok = host_exact == want;

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("exact sums: no GPU, the device part skipped\n%s\n", ok ? "OK" : "MISMATCH");
    return ok ? 0 : 1;
  }
  thrust::device_vector<float> dx(x.begin(), x.end());
  const float device_exact = tally::reduce(tally::device, dx.begin(), dx.end(), 0.0f, tally::exact_plus<float>{});

  // The same input in three pieces, added on the GPU to one accumulator in device memory.
  tally::exact_accumulator<float>* accumulator = nullptr;
  const tally::exact_accumulator<float> empty;
  if (cudaMalloc(&accumulator, sizeof(empty)) != cudaSuccess ||
      cudaMemcpy(accumulator, &empty, sizeof(empty), cudaMemcpyHostToDevice) != cudaSuccess) {
    std::printf("exact sums: could not make the accumulator\n");
    return 1;
  }
  const std::size_t cuts[] = {0, n / 3, n / 2 + 7, n};
  for (int piece = 0; piece < 3; ++piece)
    tally::reduce_into(tally::device, dx.begin() + cuts[piece], dx.begin() + cuts[piece + 1], accumulator);
  tally::exact_accumulator<float> held;
  if (cudaMemcpy(&held, accumulator, sizeof(held), cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::printf("exact sums: could not read the accumulator\n");
    return 1;
  }
  cudaFree(accumulator);

  // x and y fields in one call: y is x reversed, so both fields have the same exact sum.
  const std::vector<float> reversed(x.rbegin(), x.rend());
  thrust::device_vector<float> dy(reversed.begin(), reversed.end());
  using xy = cuda::std::tuple<float, float>;
  const auto points = tally::zip(dx.begin(), dy.begin());
  const xy fields = tally::reduce(tally::device, points, points + std::ptrdiff_t(n), xy(0.0f, 0.0f),
                                  tally::fields(tally::exact_plus<float>{}, tally::exact_plus<float>{}));

  std::printf("exact sums on the GPU: one call %.9g, three pieces %.9g, fields %.9g and %.9g\n", device_exact,
              held.value(), cuda::std::get<0>(fields), cuda::std::get<1>(fields));
  ok = ok && device_exact == want && held.value() == want && cuda::std::get<0>(fields) == want &&
       cuda::std::get<1>(fields) == want;
  std::printf("%s\n", ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
