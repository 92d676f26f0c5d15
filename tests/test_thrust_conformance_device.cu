// Differential conformance against Thrust, device cases (docs/thrust.md, "Conformance
// program"; the helpers and what they check: tests/support/thrust_conformance.cuh). One program,
// test_thrust_conformance_device, of three translation units of similar compile time, each a
// share of the thrust_conformance_device cases:
//   this one                                 every algorithm under every device policy
//   thrust_conformance_device_types.cu       element types, init narrower and wider
//   thrust_conformance_device_operators.cu   kinds of operator and of iterator
// The cases skip, with the reason, without a GPU (tally_test::device_test).

#include "support/thrust_conformance.cuh"

#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace tally_test::conformance;
using tally_test::seeded;

// The sanitized host build (scripts/test) defines TALLY_TEST_HOST_ONLY and compiles no kernel tests.
#if !defined(TALLY_TEST_HOST_ONLY)

// A user allocator of temporary storage, as thrust::cuda::par(alloc) takes: counts its calls.
struct counting_allocator {
  using value_type = char;
  long* allocations;
  char* allocate(std::ptrdiff_t bytes) {
    ++*allocations;
    char* p = nullptr;
    if (cudaMalloc(&p, static_cast<std::size_t>(bytes)) != cudaSuccess) throw std::bad_alloc();
    return p;
  }
  void deallocate(char* p, std::size_t) { cudaFree(p); }
};

// A stream of its own, not synchronized with the legacy default stream.
class stream_owner {
 public:
  stream_owner() {
    if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess)
      throw std::runtime_error("cudaStreamCreateWithFlags failed");
  }
  ~stream_owner() { cudaStreamDestroy(stream_); }
  stream_owner(const stream_owner&) = delete;
  stream_owner& operator=(const stream_owner&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Every algorithm under every Thrust policy for them, and tally's own against Thrust's
// equivalent (one instantiation of tally's for all), then minmax_element with repeated
// extremes and the forms without a policy, on the same instantiations.
TEST_F(thrust_conformance_device, every_algorithm_under_every_policy) {
  stream_owner stream;
  long thrust_allocations = 0;
  counting_allocator alloc{&thrust_allocations};
  const cudaStream_t st = stream.get();
  for (std::size_t n : device_sizes()) {
    seeded s(1000 + n);
    SCOPED_TRACE(s.trace());
    const std::vector<int> a = integers<int>(n, s.rng), b = integers<int>(n, s.rng);
    const thrust::device_vector<int> da(a.begin(), a.end()), db(b.begin(), b.end());
    TEST_CUDA(cudaDeviceSynchronize());  // the copies, before other streams read them
    const auto fa = da.begin(), fb = db.begin();
    expect_family_agrees(thrust::device, tally::device, fa, fb, a, b, 3, "thrust::device against tally::device");
    expect_family_agrees(thrust::device, thrust::device, fa, fb, a, b, 3, "thrust::device");
    expect_family_agrees(thrust::cuda::par, thrust::cuda::par, fa, fb, a, b, 3, "thrust::cuda::par");
    expect_family_agrees(thrust::cuda::par.on(st), thrust::cuda::par.on(st), fa, fb, a, b, 3,
                         "thrust::cuda::par.on(stream)");
    expect_family_agrees(thrust::cuda::par.on(st), tally::device.on(st), fa, fb, a, b, 3,
                         "thrust::cuda::par.on(stream) against tally::device.on(stream)");
    expect_family_agrees(thrust::cuda::par_nosync, thrust::cuda::par_nosync, fa, fb, a, b, 3, "thrust::cuda::par_nosync");
    expect_family_agrees(thrust::cuda::par_nosync.on(st), thrust::cuda::par_nosync.on(st), fa, fb, a, b, 3,
                         "thrust::cuda::par_nosync.on(stream)");
    expect_family_agrees(thrust::cuda::par(alloc), thrust::cuda::par(alloc), fa, fb, a, b, 3,
                         "thrust::cuda::par(allocator)");
    expect_family_agrees(thrust::cuda::par(alloc).on(st), thrust::cuda::par(alloc).on(st), fa, fb, a, b, 3,
                         "thrust::cuda::par(allocator).on(stream)");

    // Raw device pointers and thrust::device_ptr: read through the same pointer path.
    const tally_test::device_buffer<int> misaligned(a, 1);
    expect_reduce_agrees(thrust::device, thrust::device, misaligned.data(), a, 3,
                         "raw device pointers (misaligned) under thrust::device");
    expect_minmax_agrees(thrust::device, tally::device, thrust::device_pointer_cast(misaligned.data()), n,
                         "thrust::device_ptr");

    const std::vector<int> ties = many_ties<int>(n, s.rng);
    const thrust::device_vector<int> dties(ties.begin(), ties.end());
    TEST_CUDA(cudaDeviceSynchronize());
    expect_ties_agree(thrust::device, tally::device, dties.begin(), n, "thrust::device against tally::device");
    expect_ties_agree(thrust::cuda::par_nosync.on(st), thrust::cuda::par_nosync.on(st), dties.begin(), n,
                      "thrust::cuda::par_nosync.on(stream)");

    const std::string no_policy = "without a policy, n = " + std::to_string(n);
    expect_agree(TALLY_CONFORM_NO_POLICY(reduce, da.begin(), da.end()), no_policy + ": reduce");
    expect_same_positions(TALLY_CONFORM_NO_POLICY(minmax_element, dties.begin(), dties.end()), dties.begin(),
                          no_policy + ": minmax_element");
  }
  // Thrust takes its temporary storage from the allocator. (tally's scratch is its own: its
  // use of the allocator is not Thrust's contract, and not checked.)
  EXPECT_GT(thrust_allocations, 0);
}

#endif  // !TALLY_TEST_HOST_ONLY

}  // namespace
