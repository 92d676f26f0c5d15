// The asynchronous forms of the family (issue 35, point 2): transform_reduce_into,
// inner_product_into, count_into, count_if_into, min/max/minmax_element_into and
// all/any/none_of_into. Each must write exactly what its returning form returns (the same
// bits for floats, the same positions and answers), on the host and the device, for empty,
// one-element and multi-tile ranges; under a device policy without waiting for the result,
// and from a CUDA graph replayed on another stream after its input changed. Answers are
// checked against the returning forms and, independently, against std:: references.
#include "support/test_support.cuh"
#include "tally/tally.cuh"

#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace tally_test;

struct is_negative {
  __host__ __device__ bool operator()(float x) const { return x < 0.0f; }
};
struct square {
  __host__ __device__ float operator()(float x) const { return x * x; }
};

// Every answer the family gives for one input, as the _into forms write them.
struct answers {
  float transformed_sum;       // transform_reduce_into(x * x, plus)
  float product_sum;           // transform_reduce_into(first1, last1, first2): std's products
  double inner_product;        // inner_product_into with a double init: products in double
  long long count;             // count_into(value)
  long long count_if;          // count_if_into(x < 0)
  long long min_position;      // min_element_into
  long long max_position;      // max_element_into
  long long minmax_positions[2];
  bool all_negative;
  bool any_negative;
  bool none_negative;
};

// The values drawn from a few levels, so that the smallest and the largest repeat and the
// positions' tie rule (the first of each, as Thrust) decides the answers.
std::vector<float> tied_values(std::size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> level(-6, 9);
  std::vector<float> v(n);
  for (auto& x : v) x = 0.25f * static_cast<float>(level(rng));
  return v;
}

template <class Policy, class It, class Answers>
void enqueue_every_into(const Policy& policy, It first, It last, float probe, Answers* out) {
  tally::transform_reduce_into(policy, first, last, &out->transformed_sum, square{}, 0.0f, tally::plus<float>{});
  tally::transform_reduce_into(policy, first, last, first, &out->product_sum, 0.0f);
  tally::inner_product_into(policy, first, last, first, &out->inner_product, 0.0);
  tally::count_into(policy, first, last, &out->count, probe);
  tally::count_if_into(policy, first, last, &out->count_if, is_negative{});
  tally::min_element_into(policy, first, last, &out->min_position);
  tally::max_element_into(policy, first, last, &out->max_position);
  tally::minmax_element_into(policy, first, last, out->minmax_positions);
  tally::all_of_into(policy, first, last, &out->all_negative, is_negative{});
  tally::any_of_into(policy, first, last, &out->any_negative, is_negative{});
  tally::none_of_into(policy, first, last, &out->none_negative, is_negative{});
}

// The returning forms' answers.
template <class Policy, class It>
answers returning_answers(const Policy& policy, It first, It last, float probe) {
  answers a{};
  a.transformed_sum = tally::transform_reduce(policy, first, last, square{}, 0.0f, tally::plus<float>{});
  a.product_sum = tally::transform_reduce(policy, first, last, first, 0.0f);
  a.inner_product = tally::inner_product(policy, first, last, first, 0.0);
  a.count = tally::count(policy, first, last, probe);
  a.count_if = tally::count_if(policy, first, last, is_negative{});
  a.min_position = tally::min_element(policy, first, last) - first;
  a.max_position = tally::max_element(policy, first, last) - first;
  const auto both = tally::minmax_element(policy, first, last);
  a.minmax_positions[0] = both.first - first;
  a.minmax_positions[1] = both.second - first;
  a.all_negative = tally::all_of(policy, first, last, is_negative{});
  a.any_negative = tally::any_of(policy, first, last, is_negative{});
  a.none_negative = tally::none_of(policy, first, last, is_negative{});
  return a;
}

void expect_same_answers(const answers& got, const answers& want, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(bits_of(got.transformed_sum), bits_of(want.transformed_sum)) << got.transformed_sum << " " << want.transformed_sum;
  EXPECT_EQ(bits_of(got.product_sum), bits_of(want.product_sum)) << got.product_sum << " " << want.product_sum;
  EXPECT_EQ(bits_of(got.inner_product), bits_of(want.inner_product)) << got.inner_product << " " << want.inner_product;
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.count_if, want.count_if);
  EXPECT_EQ(got.min_position, want.min_position);
  EXPECT_EQ(got.max_position, want.max_position);
  EXPECT_EQ(got.minmax_positions[0], want.minmax_positions[0]);
  EXPECT_EQ(got.minmax_positions[1], want.minmax_positions[1]);
  EXPECT_EQ(got.all_negative, want.all_negative);
  EXPECT_EQ(got.any_negative, want.any_negative);
  EXPECT_EQ(got.none_negative, want.none_negative);
}

// Independent of tally: every answer that is exact (the sums are of quarter-integers, exact in
// any order while they stay below 2^22 in magnitude) from the standard library.
answers std_answers(const std::vector<float>& v, float probe) {
  answers a{};
  double squares = 0, products = 0;
  for (float x : v) {
    squares += double(x) * x;
    products += double(x) * x;
  }
  a.transformed_sum = float(squares);
  a.product_sum = float(products);
  a.inner_product = products;
  a.count = std::count(v.begin(), v.end(), probe);
  a.count_if = std::count_if(v.begin(), v.end(), is_negative{});
  a.min_position = std::min_element(v.begin(), v.end()) - v.begin();
  a.max_position = std::max_element(v.begin(), v.end()) - v.begin();
  const auto both = first_min_first_max(v.begin(), v.end());
  a.minmax_positions[0] = both.first - v.begin();
  a.minmax_positions[1] = both.second - v.begin();
  a.all_negative = std::all_of(v.begin(), v.end(), is_negative{});
  a.any_negative = std::any_of(v.begin(), v.end(), is_negative{});
  a.none_negative = std::none_of(v.begin(), v.end(), is_negative{});
  return a;
}

// Every byte 0xA5: no answer of the family looks like it.
answers poisoned_answers() {
  answers a;
  std::memset(static_cast<void*>(&a), 0xA5, sizeof(a));
  return a;
}

std::vector<std::size_t> into_sizes() {
  if (under_sanitizer()) return {0, 1, 2, 1000, 8193};
  return {0, 1, 2, 31, 1000, 4097, 16385, 65539};
}

}  // namespace

// ---- host ----

TEST(into_forms_host, write_what_the_returning_forms_return) {
  seeded s(3501);
  SCOPED_TRACE(s.trace());
  for (std::size_t n : into_sizes()) {
    const auto v = tied_values(n, s.rng);
    const float probe = n ? v[n / 2] : 0.5f;
    answers got = poisoned_answers();
    enqueue_every_into(tally::host, v.begin(), v.end(), probe, &got);
    expect_same_answers(got, returning_answers(tally::host, v.begin(), v.end(), probe), "host n=" + std::to_string(n));
    expect_same_answers(got, std_answers(v, probe), "host vs std n=" + std::to_string(n));
  }
}

TEST(into_forms_host, thrust_policies_and_an_empty_range) {
  const std::vector<float> none;
  answers got = poisoned_answers();
  enqueue_every_into(thrust::seq, none.begin(), none.end(), 1.0f, &got);
  EXPECT_EQ(bits_of(got.transformed_sum), bits_of(0.0f));
  EXPECT_EQ(got.inner_product, 0.0);
  EXPECT_EQ(got.count, 0);
  EXPECT_EQ(got.min_position, 0);  // last - first
  EXPECT_EQ(got.minmax_positions[0], 0);
  EXPECT_EQ(got.minmax_positions[1], 0);
  EXPECT_TRUE(got.all_negative);
  EXPECT_FALSE(got.any_negative);
  EXPECT_TRUE(got.none_negative);
  const std::vector<float> one{-2.0f};
  got = poisoned_answers();
  enqueue_every_into(thrust::host, one.begin(), one.end(), -2.0f, &got);
  expect_same_answers(got, std_answers(one, -2.0f), "thrust::host, one element");
}

#if !defined(TALLY_TEST_HOST_ONLY)

// ---- device ----

class into_forms_device : public device_test {};

TEST_F(into_forms_device, write_what_the_returning_forms_return_without_waiting) {
  seeded s(3502);
  SCOPED_TRACE(s.trace());
  cudaStream_t stream;
  TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto sizes = into_sizes();
  if (!under_sanitizer()) sizes.push_back((std::size_t(1) << 20) + 7);
  for (std::size_t n : sizes) {
    const auto v = tied_values(n, s.rng);
    const float probe = n ? v[n / 2] : 0.5f;
    for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {  // aligned and misaligned starts
      device_buffer<float> d(v, offset);
      device_value<answers> out;  // poisoned
      enqueue_every_into(tally::device.on(stream), d.begin(), d.end(), probe, out.get());
      TEST_CUDA(cudaStreamSynchronize(stream));
      const std::string where = "device n=" + std::to_string(n) + " offset=" + std::to_string(offset);
      const answers got = out.read();
      expect_same_answers(got, returning_answers(tally::device.on(stream), d.begin(), d.end(), probe), where);
      if (n <= 65539) expect_same_answers(got, std_answers(v, probe), where + " vs std");
      // The host backend follows the same plan: the same bits.
      expect_same_answers(got, returning_answers(tally::host, v.begin(), v.end(), probe), where + " vs host");
    }
  }
  TEST_CUDA(cudaStreamDestroy(stream));
}

// Outputs of other element types: positions as int, answers as int and unsigned char, the
// count as a double, through device_vector iterators and thrust::device_ptr.
TEST_F(into_forms_device, outputs_of_other_element_types_and_iterator_kinds) {
  seeded s(3503);
  SCOPED_TRACE(s.trace());
  const auto v = tied_values(20000, s.rng);
  thrust::device_vector<float> d(v.begin(), v.end());
  thrust::device_vector<int> positions(4, -7);
  thrust::device_vector<int> flags(3, 5);
  thrust::device_vector<unsigned char> small_flag(1, 9);
  thrust::device_vector<double> count(1, -1.0);
  const auto p = thrust::cuda::par.on(cudaStreamPerThread);
  tally::min_element_into(p, d.begin(), d.end(), positions.begin());
  tally::minmax_element_into(p, d.begin(), d.end(), thrust::device_pointer_cast(positions.data().get() + 1));
  tally::max_element_into(p, d.begin(), d.end(), positions.begin() + 3);
  tally::all_of_into(p, d.begin(), d.end(), flags.begin(), is_negative{});
  tally::any_of_into(p, d.begin(), d.end(), flags.begin() + 1, is_negative{});
  tally::none_of_into(p, d.begin(), d.end(), flags.begin() + 2, is_negative{});
  tally::any_of_into(p, d.begin(), d.end(), small_flag.begin(), is_negative{});
  tally::count_if_into(p, d.begin(), d.end(), count.begin(), is_negative{});
  TEST_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
  const auto want = std_answers(v, 0.0f);
  EXPECT_EQ(positions[0], want.min_position);
  EXPECT_EQ(positions[1], want.minmax_positions[0]);
  EXPECT_EQ(positions[2], want.minmax_positions[1]);
  EXPECT_EQ(positions[3], want.max_position);
  EXPECT_EQ(flags[0], int(want.all_negative));
  EXPECT_EQ(flags[1], int(want.any_negative));
  EXPECT_EQ(flags[2], int(want.none_negative));
  EXPECT_EQ(small_flag[0], (unsigned char)(want.any_negative));
  EXPECT_EQ(count[0], double(want.count_if));
}

// Captured once, replayed on another stream after the input changed and after the capturing
// stream is gone: every answer is the new input's.
TEST_F(into_forms_device, captured_in_a_graph_and_replayed_on_another_stream) {
  seeded s(3504);
  SCOPED_TRACE(s.trace());
  const std::size_t n = under_sanitizer() ? 9000 : (std::size_t(1) << 18) + 5;
  auto v = tied_values(n, s.rng);
  device_buffer<float> d(v);
  device_value<answers> out;
  cudaStream_t capturing, replaying;
  TEST_CUDA(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking));
  TEST_CUDA(cudaStreamCreateWithFlags(&replaying, cudaStreamNonBlocking));
  const float probe = 0.25f;
  cudaGraph_t graph;
  TEST_CUDA(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeGlobal));
  enqueue_every_into(tally::device.on(capturing), d.begin(), d.end(), probe, out.get());
  TEST_CUDA(cudaStreamEndCapture(capturing, &graph));
  cudaGraphExec_t exec;
  TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  TEST_CUDA(cudaStreamDestroy(capturing));
  for (int replay = 0; replay < 3; ++replay) {
    v = tied_values(n, s.rng);  // new data each replay: the graph must read it
    TEST_CUDA(cudaMemcpy(d.data(), v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    out.poison();
    TEST_CUDA(cudaGraphLaunch(exec, replaying));
    TEST_CUDA(cudaStreamSynchronize(replaying));
    const answers got = out.read();
    expect_same_answers(got, std_answers(v, probe), "replay " + std::to_string(replay));
    expect_same_answers(got, returning_answers(tally::host, v.begin(), v.end(), probe),
                        "replay " + std::to_string(replay) + " vs host");
  }
  TEST_CUDA(cudaGraphExecDestroy(exec));
  TEST_CUDA(cudaGraphDestroy(graph));
  TEST_CUDA(cudaStreamDestroy(replaying));
}

// The same checks as the returning forms, and messages that name the _into form.
TEST_F(into_forms_device, refuse_what_the_device_cannot_write_naming_the_form) {
  std::vector<float> v(100, 1.0f);
  device_buffer<float> d(v);
  long long pageable_count = -1;
  int pageable_flag = 0;
  // The path of a GPU that cannot reach pageable memory, forced whatever GPU runs the test
  // (runtime.cuh, set_pageable_access_override), and turned off again however the test ends.
  struct without_pageable_access {
    without_pageable_access() { tally::detail::set_pageable_access_override(true); }
    ~without_pageable_access() { tally::detail::set_pageable_access_override(false); }
  } forced;
  try {
    tally::count_into(tally::device, d.begin(), d.end(), &pageable_count, 1.0f);
    ADD_FAILURE() << "count_into wrote to pageable host memory";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tally::count_into"), std::string::npos) << e.what();
  }
  try {
    tally::all_of_into(tally::device, d.begin(), d.end(), &pageable_flag, is_negative{});
    ADD_FAILURE() << "all_of_into wrote to pageable host memory";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tally::all_of_into"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pageable_count, -1);
  EXPECT_EQ(pageable_flag, 0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // the context is still usable
}

#endif  // !TALLY_TEST_HOST_ONLY
