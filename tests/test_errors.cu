// Errors: misuse throws before any launch and the context stays usable; CUDA failures
// throw tally::cuda_error naming the call; memory the runtime cannot allocate throws
// tally::bad_alloc (a std::bad_alloc), leaves the pools as they were, and the next call works.
#include "support/test_support.cuh"
#include "tally/reduce.cuh"
#include "tally/transform_reduce.cuh"

#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>

#include <algorithm>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace {

using tally_test::random_values;
using tally_test::reference_sum;
using tally_test::device_value;
using tally_test::seeded;

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

TEST(errors, cuda_error_is_a_sentence_naming_the_algorithm_the_error_and_the_remedy) {
  tally::detail::algorithm_scope scope("reduce");
  try {
    tally::detail::check_cuda_call(cudaErrorMemoryAllocation, "allocating scratch");
    FAIL() << "check_cuda_call did not throw";
  } catch (const tally::cuda_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("tally::reduce: allocating scratch failed with cudaErrorMemoryAllocation", 0), 0u) << what;
    EXPECT_TRUE(contains(what, "tally::release_scratch()")) << "the remedy: " << what;
    EXPECT_EQ(what.back(), '.') << what;
    EXPECT_FALSE(contains(what, "!=") || contains(what, "?") || contains(what, ".cuh") || contains(what, ".cpp"))
        << "no source text in messages: " << what;
    EXPECT_EQ(e.code(), cudaErrorMemoryAllocation);
  }
  try {
    tally::detail::check_cuda_call(cudaErrorIllegalAddress, "waiting for the result");
    FAIL() << "check_cuda_call did not throw";
  } catch (const tally::cuda_error& e) {
    EXPECT_TRUE(contains(e.what(), "context is lost")) << e.what();
  }
  static_assert(std::is_base_of_v<std::runtime_error, tally::cuda_error>);
}

// Runs everywhere: without a GPU a device policy says so; with one, the call works.
TEST(errors, device_policy_without_a_gpu_throws_cuda_error_else_works) {
  seeded s(1);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(1000, s.rng);
  if (!tally_test::gpu_available()) {
    int dummy = 0;
    try {
      tally::reduce(tally::device, &dummy, &dummy + 1, 0);
      FAIL() << "a device policy without a GPU must throw";
    } catch (const tally::cuda_error& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
    }
  } else {
    thrust::device_vector<int> d(v.begin(), v.end());
    EXPECT_EQ(tally::reduce(tally::device, d.begin(), d.end(), 0), reference_sum<int>(v, 0, v.size(), 0));
  }
}

TEST(errors, bad_alloc_is_a_std_bad_alloc_naming_the_memory_and_the_error) {
  static_assert(std::is_base_of_v<std::bad_alloc, tally::bad_alloc>);
  try {
    tally::detail::throw_allocation_error(cudaErrorMemoryAllocation, "the scratch of stream 0x5d0 on device 0", 2228480);
    FAIL() << "throw_allocation_error did not throw";
  } catch (const std::bad_alloc& e) {
    const auto* ours = dynamic_cast<const tally::bad_alloc*>(&e);
    ASSERT_NE(ours, nullptr) << "not a tally::bad_alloc: " << e.what();
    EXPECT_EQ(ours->code(), cudaErrorMemoryAllocation);
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "the scratch of stream 0x5d0 on device 0")) << what;
    EXPECT_TRUE(contains(what, "2228480 bytes")) << what;
    EXPECT_TRUE(contains(what, "cudaErrorMemoryAllocation")) << what;
  }
  // Any other failure of an allocation is a cuda_error, not an out-of-memory condition.
  EXPECT_THROW(tally::detail::throw_allocation_error(cudaErrorInvalidValue, "x", 1), tally::cuda_error);
}

// The hook's bookkeeping needs no GPU: it only counts.
TEST(errors, allocation_failure_hook_counts_what_is_pending) {
  tally::detail::fail_next_allocations(3);
  EXPECT_EQ(tally::detail::pending_allocation_failures(), 3);
  tally::detail::fail_next_allocations(0);
  EXPECT_EQ(tally::detail::pending_allocation_failures(), 0);
  tally::detail::fail_next_allocations(-2);
  EXPECT_EQ(tally::detail::pending_allocation_failures(), 0);
}

// The override of pageable memory access (set_pageable_access_override) is off unless a test
// turns it on; setting it needs no GPU.
TEST(errors, pageable_access_override_is_off_by_default) {
  EXPECT_FALSE(tally::detail::pageable_access_overridden());
  tally::detail::set_pageable_access_override(true);
  EXPECT_TRUE(tally::detail::pageable_access_overridden());
  tally::detail::set_pageable_access_override(false);
  EXPECT_FALSE(tally::detail::pageable_access_overridden());
}

TEST(errors, reversed_range_throws_before_touching_the_device) {
  std::vector<int> v(4, 1);
  EXPECT_THROW(tally::reduce(tally::device, v.data() + 4, v.data(), 0), std::invalid_argument);
}

// Without a policy the ranges choose the side; a host range and a device range leave none
// that can read both. Refused before either range is read (the device range here is null and
// no GPU is needed), naming both systems; ranges of one system then work.
TEST(errors, two_ranges_of_different_systems_without_a_policy) {
  seeded s(4);
  SCOPED_TRACE(s.trace());
  auto v = random_values<int>(3001, s.rng);
  for (auto& x : v) x %= 40000;  // the products are formed in int, as std::inner_product's are
  const thrust::device_ptr<const int> device_range{nullptr};
  try {
    tally::inner_product(v.begin(), v.end(), device_range, 0LL);
    FAIL() << "a host range and a device range must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "tally::inner_product")) << e.what();
    EXPECT_TRUE(contains(e.what(), "the first range is of the host system and the second of the device system"))
        << e.what();
  }
  try {
    tally::transform_reduce(device_range, device_range + 3001, v.begin(), 0LL);
    FAIL() << "a device range and a host range must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "tally::transform_reduce")) << e.what();
    EXPECT_TRUE(contains(e.what(), "the first range is of the device system and the second of the host system"))
        << e.what();
  }
  long long expected = 0;
  for (std::size_t i = 0; i < v.size(); ++i) expected += static_cast<long long>(v[i]) * v[v.size() - 1 - i];
  EXPECT_EQ(tally::inner_product(v.begin(), v.end(), v.rbegin(), 0LL), expected);
}

// The sanitized host build (scripts/test) defines TALLY_TEST_HOST_ONLY and compiles no kernel tests.
#if !defined(TALLY_TEST_HOST_ONLY)
class device_errors : public tally_test::device_test {
 protected:
  // After an error, a correct reduction on the same context still works.
  void expect_context_usable() {
    seeded s(99);
    SCOPED_TRACE(s.trace());
    const auto v = random_values<int>(70001, s.rng);
    thrust::device_vector<int> d(v.begin(), v.end());
    EXPECT_EQ(tally::reduce(tally::device, d.begin(), d.end(), 0), reference_sum<int>(v, 0, v.size(), 0));
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
};

TEST_F(device_errors, pageable_host_pointer_under_a_device_policy) {
  seeded s(2);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(5000, s.rng);
  int pageable = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0), cudaSuccess);
  if (pageable) {
    // This GPU reads pageable memory (HMM or ATS): the call is legal and must be right.
    EXPECT_EQ(tally::reduce(tally::device, v.data(), v.data() + v.size(), 0), reference_sum<int>(v, 0, v.size(), 0));
  } else {
    try {
      tally::reduce(tally::device, v.data(), v.data() + v.size(), 0);
      FAIL() << "a pageable host pointer must be refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("pageable host memory"), std::string::npos) << e.what();
    }
  }
  expect_context_usable();
}

TEST_F(device_errors, null_pointer_with_a_non_empty_range) {
  const float* null = nullptr;
  try {
    tally::reduce(tally::device, null, null + 10, 0.0f);
    FAIL() << "a null pointer must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("null pointer"), std::string::npos) << e.what();
  }
  // An empty range at null is fine: it returns init.
  EXPECT_EQ(tally::reduce(tally::device, null, null, 3.0f), 3.0f);
  expect_context_usable();
}

TEST_F(device_errors, reduce_into_a_null_or_pageable_output) {
  thrust::device_vector<int> d(100, 1);
  int* null = nullptr;
  EXPECT_THROW(tally::reduce_into(tally::device, d.begin(), d.end(), null, 0, tally::plus<int>{}), std::invalid_argument);
  int pageable = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0), cudaSuccess);
  if (!pageable) {
    int host_out = 0;
    EXPECT_THROW(tally::reduce_into(tally::device, d.begin(), d.end(), &host_out, 0, tally::plus<int>{}),
                 std::invalid_argument);
  }
  expect_context_usable();
}

// The scratch of a stream that has never run a reduction is allocated by the first call on
// it; that allocation fails here. The result slot comes from the free list (a reduction ran
// before), so the scratch is the only allocation the call makes.
TEST_F(device_errors, scratch_allocation_failure_throws_bad_alloc_and_the_next_call_works) {
  seeded s(3);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(300007, s.rng);
  const int expected = reference_sum<int>(v, 0, v.size(), 5);
  thrust::device_vector<int> d(v.begin(), v.end());
  ASSERT_EQ(tally::reduce(tally::device, d.begin(), d.end(), 5), expected);  // slots and default scratch exist
  cudaStream_t fresh;
  TEST_CUDA(cudaStreamCreateWithFlags(&fresh, cudaStreamNonBlocking));
  const std::size_t entries = tally::detail::scratch_entries();
  const auto slots = tally::detail::result_slots();

  tally::detail::fail_next_allocations(1);
  try {
    tally::reduce(tally::device.on(fresh), d.begin(), d.end(), 5);
    FAIL() << "the injected scratch allocation failure must throw";
  } catch (const tally::bad_alloc& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "scratch of stream")) << what;
    EXPECT_TRUE(contains(what, "cudaErrorMemoryAllocation")) << what;
    EXPECT_EQ(e.code(), cudaErrorMemoryAllocation);
  }
  EXPECT_EQ(tally::detail::pending_allocation_failures(), 0);
  EXPECT_EQ(tally::detail::scratch_entries(), entries) << "a failed allocation must not leave an entry";
  EXPECT_EQ(tally::detail::result_slots().free, slots.free) << "the call's result slot must go back";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  // reduce_into fails the same way, and is caught as any std::bad_alloc.
  device_value<int> out;
  tally::detail::fail_next_allocations(1);
  EXPECT_THROW(tally::reduce_into(tally::device.on(fresh), d.begin(), d.end(), out.get(), 5, tally::plus<int>{}),
               std::bad_alloc);
  EXPECT_EQ(tally::detail::scratch_entries(), entries);

  // The next calls on the same stream allocate its scratch and are right.
  EXPECT_EQ(tally::reduce(tally::device.on(fresh), d.begin(), d.end(), 5), expected);
  const std::size_t after = tally::detail::scratch_entries();
  // One more entry, or the same number where the new stream took a destroyed stream's
  // handle and its entry was released.
  EXPECT_TRUE(after == entries + 1 || after == entries) << after << " entries, " << entries << " before";
  out.poison();
  tally::reduce_into(tally::device.on(fresh), d.begin(), d.end(), out.get(), 5, tally::plus<int>{});
  TEST_CUDA(cudaStreamSynchronize(fresh));
  EXPECT_EQ(out.read(), expected);
  EXPECT_EQ(tally::detail::scratch_entries(), after);
  TEST_CUDA(cudaStreamDestroy(fresh));
  expect_context_usable();
}

// reduce takes a pinned result slot; with every slot in use it allocates a new slab, and
// that allocation fails here.
TEST_F(device_errors, result_slot_allocation_failure_throws_bad_alloc_and_the_next_call_works) {
  seeded s(4);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(5003, s.rng);
  const int expected = reference_sum<int>(v, 0, v.size(), 0);
  thrust::device_vector<int> d(v.begin(), v.end());
  ASSERT_EQ(tally::reduce(tally::device, d.begin(), d.end(), 0), expected);
  std::vector<std::unique_ptr<tally::detail::result_slot>> held;
  while (tally::detail::result_slots().free > 0) held.push_back(std::make_unique<tally::detail::result_slot>());
  const auto slots = tally::detail::result_slots();

  tally::detail::fail_next_allocations(1);
  try {
    tally::reduce(tally::device, d.begin(), d.end(), 0);
    FAIL() << "the injected result slot allocation failure must throw";
  } catch (const std::bad_alloc& e) {
    const auto* ours = dynamic_cast<const tally::bad_alloc*>(&e);
    ASSERT_NE(ours, nullptr) << "not a tally::bad_alloc: " << e.what();
    EXPECT_TRUE(contains(e.what(), "pinned result slots")) << e.what();
  }
  EXPECT_EQ(tally::detail::result_slots().slabs, slots.slabs) << "a failed allocation must not leave a slab";
  EXPECT_EQ(tally::detail::result_slots().free, 0u);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  // The next call allocates the slab and is right; releasing the held slots frees them all.
  EXPECT_EQ(tally::reduce(tally::device, d.begin(), d.end(), 0), expected);
  EXPECT_EQ(tally::detail::result_slots().slabs, slots.slabs + 1);
  held.clear();
  const auto released = tally::detail::result_slots();
  EXPECT_EQ(released.free, released.slots);
  expect_context_usable();
}

// Under a device policy each range is checked on its own, and the message says which.
TEST_F(device_errors, a_pageable_second_range_under_a_device_policy) {
  int pageable = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0), cudaSuccess);
  seeded s(6);
  SCOPED_TRACE(s.trace());
  auto v = random_values<int>(4099, s.rng);
  for (auto& x : v) x %= 40000;  // the products are formed in int
  thrust::device_vector<int> d(v.begin(), v.end());
  long long expected = 0;
  for (int x : v) expected += static_cast<long long>(x) * x;
  if (pageable) {
    EXPECT_EQ(tally::inner_product(tally::device, d.begin(), d.end(), v.data(), 0LL), expected);
  } else {
    try {
      tally::inner_product(tally::device, d.begin(), d.end(), v.data(), 0LL);
      FAIL() << "a pageable second range must be refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(contains(e.what(), "the second range points to pageable host memory")) << e.what();
    }
  }
  EXPECT_EQ(tally::inner_product(tally::device, d.begin(), d.end(), d.begin(), 0LL), expected);
  expect_context_usable();
}

// The identity as transform_reduce's transform, so that its sums are reduce's.
struct same_int {
  __host__ __device__ int operator()(int x) const { return x; }
};

// Takes pageable memory access away for one scope: the hook is process-wide, and the guard
// turns it off again however the test ends.
class without_pageable_access {
 public:
  without_pageable_access() { tally::detail::set_pageable_access_override(true); }
  ~without_pageable_access() { tally::detail::set_pageable_access_override(false); }
  without_pageable_access(const without_pageable_access&) = delete;
  without_pageable_access& operator=(const without_pageable_access&) = delete;
};

// The path of a GPU that cannot read pageable memory, forced on whatever GPU runs the test
// (the tests above take only the path of the GPU at hand): ordinary host memory, a
// std::vector's included, is refused under a device policy before anything is allocated or
// launched, with a message naming the algorithm and the range; pinned and managed host
// memory, which such a GPU reads, still give exact sums.
TEST_F(device_errors, forced_no_pageable_access_refuses_host_memory_and_reads_pinned_and_managed) {
  seeded s(8);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(100003, s.rng);
  const int expected = reference_sum<int>(v, 0, v.size(), 3);
  thrust::device_vector<int> d(v.begin(), v.end());
  ASSERT_EQ(tally::reduce(tally::device, d.begin(), d.end(), 3), expected);  // slots and default scratch exist
  TEST_CUDA(cudaDeviceSynchronize());  // the host writes managed memory below
  const std::size_t entries = tally::detail::scratch_entries();
  const auto slots = tally::detail::result_slots();
  {
    without_pageable_access forced;
    const auto expect_refused = [](const char* what, const char* message, auto call) {
      SCOPED_TRACE(what);
      try {
        call();
        ADD_FAILURE() << "pageable host memory must be refused where the GPU cannot read it";
      } catch (const std::invalid_argument& e) {
        EXPECT_TRUE(contains(e.what(), message)) << e.what();
      }
    };
    expect_refused("reduce over a std::vector",
                   "tally::reduce: the input range points to pageable host memory, which this GPU cannot read",
                   [&] { (void)tally::reduce(tally::device, v.begin(), v.end(), 3); });
    expect_refused("reduce over a host pointer", "tally::reduce: the input range points to pageable host memory",
                   [&] { (void)tally::reduce(tally::device, v.data(), v.data() + v.size(), 3); });
    expect_refused("transform_reduce over a std::vector",
                   "tally::transform_reduce: the input range points to pageable host memory", [&] {
                     (void)tally::transform_reduce(tally::device, v.begin(), v.end(), same_int{}, 3,
                                                   tally::plus<int>{});
                   });
    expect_refused("inner_product with a std::vector as its second range",
                   "tally::inner_product: the second range points to pageable host memory",
                   [&] { (void)tally::inner_product(tally::device, d.begin(), d.end(), v.begin(), 0LL); });
    int host_out = 0;
    expect_refused("reduce_into a host int", "tally::reduce_into: out points to pageable host memory",
                   [&] { tally::reduce_into(tally::device, d.begin(), d.end(), &host_out, 3, tally::plus<int>{}); });
    EXPECT_EQ(tally::detail::scratch_entries(), entries) << "a refused call allocated scratch";
    EXPECT_EQ(tally::detail::result_slots().free, slots.free) << "a refused call kept a result slot";
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);

    int* pinned_memory = nullptr;
    TEST_CUDA(cudaMallocHost(&pinned_memory, v.size() * sizeof(int)));
    const std::unique_ptr<int, cudaError_t (*)(void*)> pinned(pinned_memory, cudaFreeHost);
    int* managed_memory = nullptr;
    TEST_CUDA(cudaMallocManaged(&managed_memory, v.size() * sizeof(int)));
    const std::unique_ptr<int, cudaError_t (*)(void*)> managed(managed_memory, cudaFree);
    std::copy(v.begin(), v.end(), pinned.get());
    std::copy(v.begin(), v.end(), managed.get());
    EXPECT_EQ(tally::reduce(tally::device, pinned.get(), pinned.get() + v.size(), 3), expected) << "pinned input";
    EXPECT_EQ(tally::reduce(tally::device, managed.get(), managed.get() + v.size(), 3), expected) << "managed input";
    EXPECT_EQ(tally::transform_reduce(tally::device, pinned.get(), pinned.get() + v.size(), same_int{}, 3,
                                      tally::plus<int>{}),
              expected)
        << "pinned input to transform_reduce";
    TEST_CUDA(cudaDeviceSynchronize());
    pinned.get()[0] = 0x5a5a5a5a;  // poisoned: reduce_into must write over it
    tally::reduce_into(tally::device, d.begin(), d.end(), pinned.get(), 3, tally::plus<int>{});
    TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_EQ(pinned.get()[0], expected) << "reduce_into pinned host memory";
  }
  // The hook off, the GPU's own attribute decides again.
  EXPECT_FALSE(tally::detail::pageable_access_overridden());
  int pageable = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0), cudaSuccess);
  if (pageable) EXPECT_EQ(tally::reduce(tally::device, v.begin(), v.end(), 3), expected) << "pageable input, hook off";
  expect_context_usable();
}

// A stream belongs to the device that was current when it was made; a kernel launched on it
// from another device fails with "invalid resource handle". tally says which devices instead,
// before anything is allocated, and both devices work afterwards.
class two_devices : public tally_test::two_device_test {};

TEST_F(two_devices, a_stream_of_another_device_is_refused_and_both_devices_still_work) {
  seeded s(7);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(100003, s.rng);
  const int expected = reference_sum<int>(v, 0, v.size(), 0);
  TEST_CUDA(cudaSetDevice(1));
  cudaStream_t stream_of_1 = nullptr;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream_of_1, cudaStreamNonBlocking));
  TEST_CUDA(cudaSetDevice(0));
  {
    thrust::device_vector<int> on_0(v.begin(), v.end());
    const std::size_t entries = tally::detail::scratch_entries();
    try {
      tally::reduce(tally::device.on(stream_of_1), on_0.begin(), on_0.end(), 0);
      FAIL() << "a stream of device 1 must be refused while device 0 is current";
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(contains(e.what(), "belongs to device 1 but the current device is 0")) << e.what();
    }
    device_value<int> out;
    EXPECT_THROW(tally::reduce_into(tally::device.on(stream_of_1), on_0.begin(), on_0.end(), out.get(), 0,
                                    tally::plus<int>{}),
                 std::invalid_argument);
    // Calls that need no scratch are refused the same way: one tile (no partials), and an
    // empty range (only init is written).
    try {
      tally::reduce_into(tally::device.on(stream_of_1), on_0.begin(), on_0.begin() + 1000, out.get(), 0,
                         tally::plus<int>{});
      FAIL() << "a one-tile call on a stream of device 1 must be refused while device 0 is current";
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(contains(e.what(), "belongs to device 1 but the current device is 0")) << e.what();
    }
    EXPECT_THROW(tally::reduce_into(tally::device.on(stream_of_1), on_0.begin(), on_0.begin(), out.get(), 0,
                                    tally::plus<int>{}),
                 std::invalid_argument);
    EXPECT_EQ(tally::detail::scratch_entries(), entries) << "a refused call allocated scratch";
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(tally::reduce(tally::device, on_0.begin(), on_0.end(), 0), expected);
    EXPECT_EQ(tally::reduce(tally::device, on_0.begin(), on_0.begin() + 1000, 0),
              reference_sum<int>(v, 0, 1000, 0));
  }
  // On its own device the stream works, and device 0 still does afterwards.
  TEST_CUDA(cudaSetDevice(1));
  {
    thrust::device_vector<int> on_1(v.begin(), v.end());
    EXPECT_EQ(tally::reduce(tally::device.on(stream_of_1), on_1.begin(), on_1.end(), 0), expected);
    device_value<int> out;
    tally::reduce_into(tally::device.on(stream_of_1), on_1.begin(), on_1.end(), out.get(), 5, tally::plus<int>{});
    TEST_CUDA(cudaStreamSynchronize(stream_of_1));
    EXPECT_EQ(out.read(), reference_sum<int>(v, 0, v.size(), 5));
  }
  TEST_CUDA(cudaStreamDestroy(stream_of_1));
  TEST_CUDA(cudaSetDevice(0));
  thrust::device_vector<int> again(v.begin(), v.end());
  EXPECT_EQ(tally::reduce(tally::device, again.begin(), again.end(), 0), expected);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

#endif  // !TALLY_TEST_HOST_ONLY

}  // namespace
