#pragma once
// The transform and the predicates of bench_family's calls, shared with
// tools/family_ab_side.cu so that the A/B tool times the calls the benchmark makes.

namespace bench {

struct square {
  __host__ __device__ float operator()(float x) const { return x * x; }
};
struct below_half {
  __host__ __device__ bool operator()(float x) const { return x < 0.5f; }
};
// The logical algorithms' predicates hold everywhere (below_two) or nowhere (above_two) on
// values in [0, 1), so that no algorithm can stop early.
struct below_two {
  __host__ __device__ bool operator()(float x) const { return x < 2.0f; }
};
struct above_two {
  __host__ __device__ bool operator()(float x) const { return x > 2.0f; }
};

}  // namespace bench
