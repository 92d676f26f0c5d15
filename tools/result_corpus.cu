// The result bits of a fixed corpus of calls, host and device, as one hash per case: built
// at two commits (tools/corpus-compare), the two outputs show whether a change moved any
// result's bits. It uses the public API only, so that it builds at older commits too.
//
// The inputs are seeded and spread over many exponents, so that a sum's bits depend on the
// order of its combines: a plan, tree or loader that combined in another order would show.
// The sizes cover one tile, two tiles, the single pass with and without block 0 reducing
// tiles, multi-step tiles and a partial last tile, aligned and misaligned.
//
// Usage: result_corpus [--host-only]. Prints "case hash" lines, then "corpus HASH".

#include "tally/tally.cuh"

#include <thrust/device_vector.h>
#include <thrust/iterator/counting_iterator.h>

#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

// FNV-1a over bytes.
struct fnv1a {
  std::uint64_t state = 1469598103934665603ull;
  void add(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) state = (state ^ p[i]) * 1099511628211ull;
  }
  template <class T>
  void add_value(const T& value) {
    add(&value, sizeof(T));
  }
};

fnv1a corpus;

void report(const std::string& name, const fnv1a& h) {
  std::printf("%s %016llx\n", name.c_str(), static_cast<unsigned long long>(h.state));
  corpus.add_value(h.state);
}

// A sum whose bits depend on its order: left to right, declared neither commutative nor
// known, so tally takes the order-preserving plan.
struct ordered_plus {
  __host__ __device__ float operator()(float a, float b) const { return a + b; }
};
struct square {
  __host__ __device__ float operator()(float x) const { return x * x; }
};
struct above_half {
  __host__ __device__ bool operator()(float x) const { return x > 0.5f; }
};
struct finite_value {
  __host__ __device__ bool operator()(float x) const { return x == x; }
};

std::vector<float> spread_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<float> v(n);
  for (auto& x : v) x = std::ldexp(unit(rng), exponent(rng));
  return v;
}

const std::size_t sizes[] = {1, 7, 1000, 2048, 8191, 16384, 65541, 262145, 1048583, 4194319, 33554467};

template <class Policy, class Float, class Double, class Int, class Half>
void run_family(const char* side, const Policy& policy, const Float* f, const Double* d, const Int* i, const Half* h,
                const Float* g, std::size_t n, std::size_t offset) {
  const std::string tag = std::string(side) + "/n" + std::to_string(n) + "+" + std::to_string(offset);
  const Float* fb = f + offset;
  fnv1a sums;
  sums.add_value(tally::reduce(policy, fb, fb + n, 0.0f));
  sums.add_value(tally::reduce(policy, d + offset, d + offset + n, 0.0));
  sums.add_value(tally::reduce(policy, i + offset, i + offset + n, 0));
  sums.add_value(tally::reduce(policy, h + offset, h + offset + n, 0.0f));
  sums.add_value(tally::reduce(policy, fb, fb + n, 1.5f, tally::maximum<float>{}));
  report(tag + "/sums", sums);

  fnv1a ordered;
  ordered.add_value(tally::reduce(policy, fb, fb + n, 0.25f, ordered_plus{}));
  report(tag + "/ordered", ordered);

  fnv1a family;
  family.add_value(tally::transform_reduce(policy, fb, fb + n, square{}, 0.0f, tally::plus<float>{}));
  family.add_value(tally::inner_product(policy, fb, fb + n, g + offset, 0.0f));
  family.add_value(static_cast<long long>(tally::count_if(policy, fb, fb + n, above_half{})));
  family.add_value(tally::all_of(policy, fb, fb + n, finite_value{}));
  family.add_value(static_cast<long long>(tally::min_element(policy, fb, fb + n) - fb));
  family.add_value(static_cast<long long>(tally::max_element(policy, fb, fb + n) - fb));
  const auto both = tally::minmax_element(policy, fb, fb + n);
  family.add_value(static_cast<long long>(both.first - fb));
  family.add_value(static_cast<long long>(both.second - fb));
  report(tag + "/family", family);

  fnv1a fields;
  using xyz = cuda::std::tuple<float, float, double>;
  const auto points = tally::zip(fb, g + offset, d + offset);
  const xyz sum = tally::reduce(policy, points, points + n, xyz(0.0f, 0.0f, 0.0), tally::plus<>{});
  fields.add_value(cuda::std::get<0>(sum));
  fields.add_value(cuda::std::get<1>(sum));
  fields.add_value(cuda::std::get<2>(sum));
  report(tag + "/fields", fields);
}

bool check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "result_corpus: %s: %s\n", what, cudaGetErrorString(status));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const bool host_only = argc > 1 && std::string(argv[1]) == "--host-only";
  const std::size_t largest = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1] + 1;
  const std::vector<float> f = spread_floats(largest, 1);
  const std::vector<float> g = spread_floats(largest, 2);
  std::vector<double> d(largest);
  std::vector<int> i(largest);
  std::vector<__half> h(largest);
  {
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    std::uniform_int_distribution<int> exponent(-30, 30);
    std::uniform_int_distribution<int> small(-1000, 1000);
    for (std::size_t k = 0; k < largest; ++k) {
      d[k] = std::ldexp(unit(rng), exponent(rng));
      i[k] = small(rng);
      h[k] = __float2half(f[k] * 0.5f);
    }
  }
  for (std::size_t n : sizes)
    for (std::size_t offset : {0, 1})
      run_family("host", tally::host, f.data(), d.data(), i.data(), h.data(), g.data(), n, offset);

  if (!host_only) {
    int devices = 0;
    if (!check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount") || devices == 0) {
      std::fprintf(stderr, "result_corpus: no GPU; pass --host-only for the host cases alone\n");
      return 2;
    }
    thrust::device_vector<float> df(f.begin(), f.end()), dg(g.begin(), g.end());
    thrust::device_vector<double> dd(d.begin(), d.end());
    thrust::device_vector<int> di(i.begin(), i.end());
    thrust::device_vector<__half> dh(h.begin(), h.end());
    for (std::size_t n : sizes)
      for (std::size_t offset : {0, 1})
        run_family("device", tally::device, thrust::raw_pointer_cast(df.data()), thrust::raw_pointer_cast(dd.data()),
                   thrust::raw_pointer_cast(di.data()), thrust::raw_pointer_cast(dh.data()),
                   thrust::raw_pointer_cast(dg.data()), n, offset);
    if (!check(cudaDeviceSynchronize(), "the device's work")) return 1;
  }
  std::printf("corpus %016llx\n", static_cast<unsigned long long>(corpus.state));
  return 0;
}
