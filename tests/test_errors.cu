// Errors: misuse throws before any launch and the context stays usable; CUDA failures
// throw tally::cuda_error naming the call.
#include "support/test_support.cuh"
#include "tally/reduce.cuh"

#include <thrust/device_vector.h>

#include <string>
#include <vector>

namespace {

using tally_test::random_values;
using tally_test::reference_sum;
using tally_test::seeded;

TEST(errors, cuda_error_names_the_call_and_the_error) {
  try {
    tally::detail::check_cuda(cudaErrorMemoryAllocation, "cudaMalloc(&p, bytes)", "src/some_file.cu", 42);
    FAIL() << "check_cuda did not throw";
  } catch (const tally::cuda_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaMalloc(&p, bytes)"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorMemoryAllocation"), std::string::npos) << what;
    EXPECT_NE(what.find("some_file.cu:42"), std::string::npos) << what;
    EXPECT_EQ(what.find("src/"), std::string::npos) << "no build paths in messages: " << what;
    EXPECT_EQ(e.code(), cudaErrorMemoryAllocation);
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

TEST(errors, reversed_range_throws_before_touching_the_device) {
  std::vector<int> v(4, 1);
  EXPECT_THROW(tally::reduce(tally::device, v.data() + 4, v.data(), 0), std::invalid_argument);
}

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

}  // namespace
