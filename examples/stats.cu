// Mean and variance of a sample in one pass: transform_reduce maps x to (x, x * x, 1) and
// sums every field (float sums, an integer count). Then the kinetic energy of particles
// stored as an array of float3 velocities (read coalesced, 48 bytes at a time). Both
// checked against double-precision host computations.
#include <tally/tally.cuh>

#include <thrust/device_vector.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using moments = cuda::std::tuple<float, float, long long>;

struct to_moments {
  __host__ __device__ moments operator()(float x) const { return moments(x, x * x, 1); }
};
struct kinetic_energy {  // unit mass
  __host__ __device__ float operator()(const float3& v) const { return 0.5f * (v.x * v.x + v.y * v.y + v.z * v.z); }
};

int main() {
  const std::size_t n = 4'000'000;
  std::mt19937 rng(3);
  std::normal_distribution<float> sample(2.0f, 0.5f);
  std::vector<float> x(n);
  std::vector<float3> velocities(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = sample(rng);
    velocities[i] = {sample(rng), -sample(rng), 0.1f * sample(rng)};
  }
  double sum = 0, sum_sq = 0, energy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sum += x[i];
    sum_sq += double(x[i]) * x[i];
    const float3 v = velocities[i];
    energy += 0.5 * (double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z);
  }
  const double want_mean = sum / double(n), want_variance = sum_sq / double(n) - want_mean * want_mean;

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("stats: no GPU, skipped (host reference: mean %.6f, variance %.6f)\n", want_mean, want_variance);
    return 0;
  }
  thrust::device_vector<float> dx(x.begin(), x.end());
  const moments m = tally::transform_reduce(tally::device, dx.begin(), dx.end(), to_moments{}, moments(0, 0, 0),
                                            tally::plus<>{});
  const double count = double(cuda::std::get<2>(m));
  const double mean = cuda::std::get<0>(m) / count;
  const double variance = cuda::std::get<1>(m) / count - mean * mean;
  std::printf("stats: n %lld, mean %.6f (host %.6f), variance %.6f (host %.6f)\n", cuda::std::get<2>(m), mean, want_mean,
              variance, want_variance);

  thrust::device_vector<float3> dv(velocities.begin(), velocities.end());
  const float got_energy = tally::transform_reduce(tally::device, dv.begin(), dv.end(), kinetic_energy{}, 0.0f,
                                                   tally::plus<float>{});
  std::printf("kinetic energy %.6g (host %.6g)\n", got_energy, energy);

  const bool ok = cuda::std::get<2>(m) == static_cast<long long>(n) && std::fabs(mean - want_mean) < 1e-4 &&
                  std::fabs(variance - want_variance) < 1e-3 && std::fabs(got_energy - energy) < 1e-4 * energy;
  std::printf("%s\n", ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
