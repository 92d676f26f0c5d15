// tally::reduce_rows, tally::reduce_columns and the transform_ forms of the segmented family on
// the device (issue 36): each row has the bits of tally::reduce over that row alone and each
// column the bits of tally::reduce over a contiguous copy of it, on the device and the host, for
// shapes whose rows or columns fall in every size class, with leading dimensions beyond cols and
// misaligned matrices; integer results equal an exact reference; outputs are poisoned first.

#include "support/test_support.cuh"
#include "tally/matrix_reduce.cuh"
#include "tally/tally.cuh"

#include <gtest/gtest.h>
#include <thrust/device_vector.h>
#include <thrust/copy.h>
#include <thrust/fill.h>
#include <thrust/host_vector.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

// Marked commutative, which it is not: every bit of a fold under it depends on the grouping and on
// each combine's operand order, so a column equals its own tally::reduce only where the kernel
// evaluated the plan's very tree, left operand first. (Outside the unnamed namespace: a member
// only a trait reads counts as unused there.)
struct lopsided_mix {
  static constexpr bool commutative = true;
  __host__ __device__ unsigned operator()(unsigned a, unsigned b) const { return (a * 33u) ^ b; }
};

namespace {

using namespace tally_test;

class matrix_device : public device_test {};

struct shape {
  std::int64_t rows, cols, ld;
};

// Rows and columns of every size class of segmented_reduce (a lane, lanes, a warp, a block, long)
// and of the column kernels.
const std::vector<shape>& shapes() {
  static const std::vector<shape> all = {
      {1000, 1, 1},  {1000, 3, 5},     {300, 33, 40},  {200, 129, 129}, {64, 1025, 1030}, {9, 8193, 8200},
      {3, 100001, 100003}, {1, 5, 5}, {5, 1, 9},      {4097, 64, 64},  {129, 300, 301},   {0, 5, 5},
      {5, 0, 3},
      // The column kernels' boundaries: the fewest rows they take, a thread per column up to
      // 32 VW rows, a subtree's chunks read at once up to 256 VW rows.
      {16, 40, 41}, {128, 50, 50}, {1024, 48, 50}, {1025, 47, 47},
      // Rows of one tile, a block each (one_tile_segments_kernel): partial tiles, a whole tile of
      // floats and of doubles, and more rows than the grid has blocks.
      {600, 2048, 2048}, {40, 4096, 4096}, {5, 8192, 8192}, {1100, 1100, 1103},
      // Rows of 2, 4 and 8 of the plan's warps, a warp each (warp_segments_kernel), more rows
      // than the grid has warps.
      {10000, 200, 200}, {700, 1000, 1003},
      // Rows of several tiles, a block per chain of the plan then a block per row
      // (equal_size_chains_kernel): more chains than the grid has blocks, and rows of more tiles
      // than the plan has chains (a chain of two tiles).
      {300, 20000, 20001}, {2, 2200000, 2200003}};
  return all;
}

template <class T>
void check_rows_and_columns(std::uint64_t salt, std::size_t offset) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  for (const shape& m : shapes()) {
    SCOPED_TRACE(std::to_string(m.rows) + " x " + std::to_string(m.cols) + ", ld " + std::to_string(m.ld));
    const std::size_t span = m.rows > 0 && m.cols > 0 ? std::size_t((m.rows - 1) * m.ld + m.cols) : 0;
    auto v = random_values<T>(span, s.rng);
    // Positive floats: a short column's sum then stands clear of 0, where the accurate check can
    // tell it from 0.
    if constexpr (std::is_floating_point_v<T>)
      for (auto& x : v) x = std::abs(x) + T(0.25);
    device_buffer<T> matrix(v, offset);
    const T init = T(2);
    const std::size_t rows = std::size_t(m.rows), cols = std::size_t(m.cols);
    thrust::device_vector<T> d_rows(poisoned_vector<T>(rows + 1)), d_cols(poisoned_vector<T>(cols + 1));
    const auto rows_end = tally::reduce_rows(tally::device, matrix.data(), m.rows, m.cols, m.ld, d_rows.begin(), init,
                                             tally::plus<T>{});
    const auto cols_end = tally::reduce_columns(tally::device, matrix.data(), m.rows, m.cols, m.ld, d_cols.begin(),
                                                init, tally::plus<T>{});
    EXPECT_EQ(rows_end - d_rows.begin(), m.rows);
    EXPECT_EQ(cols_end - d_cols.begin(), m.cols);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const thrust::host_vector<T> got_rows = d_rows, got_cols = d_cols;
    std::vector<T> host_rows = poisoned_vector<T>(rows), host_cols = poisoned_vector<T>(cols);
    tally::reduce_rows(tally::host, v.begin(), m.rows, m.cols, m.ld, host_rows.begin(), init, tally::plus<T>{});
    tally::reduce_columns(tally::host, v.begin(), m.rows, m.cols, m.ld, host_cols.begin(), init, tally::plus<T>{});
    for (std::size_t i = 0; i < rows; ++i) {
      const std::size_t b = i * std::size_t(m.ld), e = b + cols;
      const T alone = tally::reduce(tally::host, v.begin() + std::ptrdiff_t(b), v.begin() + std::ptrdiff_t(e), init,
                                    tally::plus<T>{});
      ASSERT_EQ(bits_of(got_rows[i]), bits_of(alone)) << "row " << i;
      ASSERT_EQ(bits_of(host_rows[i]), bits_of(alone)) << "row " << i << " on the host";
      if constexpr (std::is_integral_v<T>) ASSERT_EQ(got_rows[i], reference_sum<T>(v, b, e, init)) << "row " << i;
    }
    EXPECT_EQ(bits_of(got_rows[rows]), bits_of(poisoned_vector<T>(1)[0])) << "written past the rows";
    for (std::size_t j = 0; j < cols; ++j) {
      std::vector<T> column(rows);
      for (std::size_t i = 0; i < rows; ++i) column[i] = v[i * std::size_t(m.ld) + j];
      const T alone = tally::reduce(tally::host, column.begin(), column.end(), init, tally::plus<T>{});
      ASSERT_EQ(bits_of(got_cols[j]), bits_of(alone)) << "column " << j;
      ASSERT_EQ(bits_of(host_cols[j]), bits_of(alone)) << "column " << j << " on the host";
      if constexpr (std::is_integral_v<T>) {
        ASSERT_EQ(got_cols[j], reference_sum<T>(column, 0, rows, init)) << "column " << j;
      } else if (rows > 0) {
        ASSERT_TRUE(sum_is_near(got_cols[j], reference_sum<double>(column, 0, rows, double(init)),
                                sum_error_bound(column, 0, rows, double(init))))
            << "column " << j;
      }
    }
    EXPECT_EQ(bits_of(got_cols[cols]), bits_of(poisoned_vector<T>(1)[0])) << "written past the columns";
  }
}

TEST_F(matrix_device, rows_and_columns_float) { check_rows_and_columns<float>(31, 0); }
TEST_F(matrix_device, rows_and_columns_float_misaligned) { check_rows_and_columns<float>(32, 1); }
TEST_F(matrix_device, rows_and_columns_double) { check_rows_and_columns<double>(33, 0); }
TEST_F(matrix_device, rows_and_columns_int) { check_rows_and_columns<int>(34, 3); }

// The column kernels split each plan warp's tree into subtrees of 1, 2, 4 or 8 of its leaves, a
// warp's task each, as many leaves as still leave two resident grids' worth of tasks. A forced
// grid size stands in for the GPU's size, so every subtree size runs: a grid of one block takes
// the largest subtrees, a huge grid single leaves. Short tiles (a chunk per plan thread, read at
// once) and long ones (a plan thread's steps one after another), partial last tiles, tiles of
// several plan warps and plans of several tiles; lanes of one column, and lanes of several
// neighbouring columns read in one load (where the start, the leading dimension and the column
// count allow it, and every lane of a warp has a run). Every column has the bits of tally::reduce over a copy of it.
template <class T>
void check_columns_by_every_subtree_size(std::uint64_t salt) {
  seeded s(salt);
  SCOPED_TRACE(s.trace());
  const std::vector<shape> all = {
      // Lanes of several columns (of 4 floats or ints, of 2 doubles) where the offset allows it,
      // with a run for every lane of a warp (64 columns: runs of doubles only).
      {129, 160, 160}, {600, 200, 200}, {1024, 128, 132}, {5000, 136, 140}, {20000, 128, 128}, {100000, 128, 128},
      {600, 64, 64},
      // Lanes of one column: a leading dimension or a column count that is not a multiple.
      {129, 40, 41}, {600, 100, 101}, {1024, 33, 33}, {5000, 70, 75}, {20000, 42, 44}, {100000, 33, 33}};
  for (const std::size_t offset : {std::size_t(0), std::size_t(1)}) {
    for (const shape& m : all) {
      SCOPED_TRACE(std::to_string(m.rows) + " x " + std::to_string(m.cols) + ", ld " + std::to_string(m.ld) +
                   ", offset " + std::to_string(offset));
      const std::size_t rows = std::size_t(m.rows), cols = std::size_t(m.cols);
      auto v = random_values<T>(std::size_t((m.rows - 1) * m.ld + m.cols), s.rng);
      if constexpr (std::is_floating_point_v<T>)
        for (auto& x : v) x = std::abs(x) + T(0.25);
      device_buffer<T> matrix(v, offset);
      std::vector<T> want(cols);
      for (std::size_t j = 0; j < cols; ++j) {
        std::vector<T> column(rows);
        for (std::size_t i = 0; i < rows; ++i) column[i] = v[i * std::size_t(m.ld) + j];
        want[j] = tally::reduce(tally::host, column.begin(), column.end(), T(2), tally::plus<T>{});
        if constexpr (std::is_integral_v<T>) ASSERT_EQ(want[j], reference_sum<T>(column, 0, rows, T(2)));
      }
      for (const unsigned grid : {1u, 3u, 7u, 1u << 20}) {
        SCOPED_TRACE("grid of " + std::to_string(grid) + " blocks");
        thrust::device_vector<T> d_cols(poisoned_vector<T>(cols + 1));
        tally::reduce_columns(tally::device.grid_size(grid), matrix.data(), m.rows, m.cols, m.ld, d_cols.begin(), T(2),
                              tally::plus<T>{});
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const thrust::host_vector<T> got = d_cols;
        for (std::size_t j = 0; j < cols; ++j) ASSERT_EQ(bits_of(got[j]), bits_of(want[j])) << "column " << j;
        EXPECT_EQ(bits_of(got[cols]), bits_of(poisoned_vector<T>(1)[0])) << "written past the columns";
      }
    }
  }
}

TEST_F(matrix_device, columns_by_every_subtree_size_float) { check_columns_by_every_subtree_size<float>(35); }
TEST_F(matrix_device, columns_by_every_subtree_size_double) { check_columns_by_every_subtree_size<double>(36); }
TEST_F(matrix_device, columns_by_every_subtree_size_int) { check_columns_by_every_subtree_size<int>(37); }

// Values made on the device from their index: positive, with mantissas that differ, so that a
// column's float sum rounds differently in any other order than its plan's.
struct hashed_value {
  __host__ __device__ float operator()(long long k) const {
    const unsigned h = unsigned(k) * 2654435761u;
    return float(h >> 12) * (1.0f / 1048576.0f) + 0.25f;
  }
};

// Element (i, j) of the hashed matrix with leading dimension ld, for a column's contiguous copy.
struct hashed_column_entry {
  long long ld, j;
  __host__ __device__ float operator()(long long i) const { return hashed_value{}(i * ld + j); }
};

// Columns of several tiles take the column kernels' two launches: the tiles' partials, then
// their fold (chains of two partials past 256 tiles, tiles of two steps past 2048). Each column
// has the bits of tally::reduce over a contiguous copy of it, and its sum is near the exact one.
// The matrix is a transform of a counting iterator, so that tall ones cost no memory.
TEST_F(matrix_device, columns_of_many_tiles_have_the_bits_of_their_own_reduce) {
  std::vector<shape> tall = {{20000, 40, 45}, {300000, 33, 33}, {8193, 100, 100}, {40000, 16, 16}};
  if (!under_sanitizer()) {
    tall.push_back({2100000, 17, 20});
    tall.push_back({(std::int64_t(2048) * 8192) + 12345, 16, 16});
  }
  const auto matrix = thrust::make_transform_iterator(thrust::counting_iterator<long long>(0), hashed_value{});
  for (const shape& m : tall) {
    SCOPED_TRACE(std::to_string(m.rows) + " x " + std::to_string(m.cols) + ", ld " + std::to_string(m.ld));
    const std::size_t rows = std::size_t(m.rows), cols = std::size_t(m.cols);
    thrust::device_vector<float> d_cols(poisoned_vector<float>(cols + 1));
    tally::reduce_columns(tally::device, matrix, m.rows, m.cols, m.ld, d_cols.begin(), 2.0f, tally::plus<float>{});
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const thrust::host_vector<float> got = d_cols;
    thrust::device_vector<float> column(rows);
    for (std::size_t j = 0; j < cols; ++j) {
      thrust::copy_n(thrust::make_transform_iterator(thrust::counting_iterator<long long>(0),
                                                     hashed_column_entry{m.ld, static_cast<long long>(j)}),
                     rows, column.begin());
      const float alone = tally::reduce(tally::device, column.begin(), column.end(), 2.0f, tally::plus<float>{});
      ASSERT_EQ(bits_of(got[j]), bits_of(alone)) << "column " << j;
      const thrust::host_vector<float> h = column;
      const std::vector<float> values(h.begin(), h.end());
      ASSERT_TRUE(sum_is_near(got[j], reference_sum<double>(values, 0, rows, 2.0),
                              sum_error_bound(values, 0, rows, 2.0)))
          << "column " << j;
    }
    EXPECT_EQ(bits_of(got[cols]), bits_of(poisoned_vector<float>(1)[0])) << "written past the columns";
  }
}

// Rows of each size class of their own kernels (lanes, a warp, a block a row, and several tiles:
// a block a chain, then the chains' folds in the graph's own scratch), captured in a graph and
// replayed on another stream after the capturing stream is gone, beside direct calls on the
// per-thread and the legacy default streams: each row keeps the bits of tally::reduce.
TEST_F(matrix_device, rows_of_every_size_class_captured_and_replayed_beside_direct_calls) {
  seeded s(35);
  SCOPED_TRACE(s.trace());
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{3000, 40}, {3000, 700}, {3000, 3000},
                                   {300, 20000}}) {
    SCOPED_TRACE(std::to_string(cols) + " columns");
    auto v = random_values<float>(std::size_t(rows * cols), s.rng);
    for (auto& x : v) x = std::abs(x) + 0.25f;
    const thrust::device_vector<float> matrix(v.begin(), v.end());
    std::vector<float> want(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i)
      want[std::size_t(i)] = tally::reduce(tally::host, v.begin() + i * cols, v.begin() + (i + 1) * cols, 2.0f,
                                           tally::plus<float>{});
    thrust::device_vector<float> d_rows(poisoned_vector<float>(std::size_t(rows)));
    cudaStream_t capturing, other;
    ASSERT_EQ(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    tally::reduce_rows(tally::device.on(capturing), matrix.data().get(), rows, cols, cols, d_rows.begin(), 2.0f,
                       tally::plus<float>{});
    ASSERT_EQ(cudaStreamEndCapture(capturing, &graph), cudaSuccess);
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(capturing), cudaSuccess);
    for (int replay = 0; replay < 2; ++replay) {
      thrust::fill(d_rows.begin(), d_rows.end(), -1.0f);
      thrust::device_vector<float> per_thread(poisoned_vector<float>(std::size_t(rows)));
      thrust::device_vector<float> legacy(poisoned_vector<float>(std::size_t(rows)));
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, other), cudaSuccess);
      tally::reduce_rows(tally::device.on(cudaStreamPerThread), matrix.data().get(), rows, cols, cols,
                         per_thread.begin(), 2.0f, tally::plus<float>{});
      tally::reduce_rows(tally::device.on(cudaStreamLegacy), matrix.data().get(), rows, cols, cols, legacy.begin(),
                         2.0f, tally::plus<float>{});
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const thrust::host_vector<float> got = d_rows, got_per_thread = per_thread, got_legacy = legacy;
      for (std::size_t i = 0; i < std::size_t(rows); ++i) {
        ASSERT_EQ(bits_of(got[i]), bits_of(want[i])) << "replay " << replay << ", row " << i;
        ASSERT_EQ(bits_of(got_per_thread[i]), bits_of(want[i])) << "per-thread stream, row " << i;
        ASSERT_EQ(bits_of(got_legacy[i]), bits_of(want[i])) << "legacy stream, row " << i;
      }
    }
    ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(other), cudaSuccess);
  }
}

// The column kernels' two launches, captured in a graph and replayed on another stream after the
// capturing stream is gone, beside a direct call of another matrix on the per-thread stream: the
// graph owns its partials' scratch, so neither call disturbs the other's columns.
TEST_F(matrix_device, tall_columns_captured_and_replayed_beside_direct_calls) {
  const std::int64_t rows = 50000, cols = 70, ld = 72;  // 7 tiles: the tiles' launch, then the fold
  const auto matrix = thrust::make_transform_iterator(thrust::counting_iterator<long long>(0), hashed_value{});
  const auto other_matrix = thrust::make_transform_iterator(thrust::counting_iterator<long long>(12345), hashed_value{});
  thrust::device_vector<float> want(cols), want_other(cols);
  tally::reduce_columns(tally::device, matrix, rows, cols, ld, want.begin(), 2.0f, tally::plus<float>{});
  tally::reduce_columns(tally::device, other_matrix, rows, cols, ld, want_other.begin(), 2.0f, tally::plus<float>{});
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const thrust::host_vector<float> h_want = want, h_want_other = want_other;
  // The two matrices' columns differ, so that a call that read the other's partials would show.
  ASSERT_NE(bits_of(h_want[0]), bits_of(h_want_other[0]));
  for (std::int64_t j = 0; j < cols; j += 23) {
    thrust::device_vector<float> column(rows);
    thrust::copy_n(thrust::make_transform_iterator(thrust::counting_iterator<long long>(0),
                                                   hashed_column_entry{ld, static_cast<long long>(j)}),
                   rows, column.begin());
    ASSERT_EQ(bits_of(h_want[std::size_t(j)]),
              bits_of(tally::reduce(tally::device, column.begin(), column.end(), 2.0f, tally::plus<float>{})))
        << "column " << j;
  }
  thrust::device_vector<float> d_cols(poisoned_vector<float>(std::size_t(cols)));
  cudaStream_t capturing, other;
  ASSERT_EQ(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  tally::reduce_columns(tally::device.on(capturing), matrix, rows, cols, ld, d_cols.begin(), 2.0f,
                        tally::plus<float>{});
  ASSERT_EQ(cudaStreamEndCapture(capturing, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(capturing), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    thrust::fill(d_cols.begin(), d_cols.end(), -1.0f);
    thrust::device_vector<float> d_direct(poisoned_vector<float>(std::size_t(cols)));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, other), cudaSuccess);
    tally::reduce_columns(tally::device.on(cudaStreamPerThread), other_matrix, rows, cols, ld, d_direct.begin(), 2.0f,
                          tally::plus<float>{});
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const thrust::host_vector<float> got = d_cols, direct = d_direct;
    for (std::size_t j = 0; j < std::size_t(cols); ++j) {
      ASSERT_EQ(bits_of(got[j]), bits_of(h_want[j])) << "replay " << replay << ", column " << j;
      ASSERT_EQ(bits_of(direct[j]), bits_of(h_want_other[j])) << "direct call " << replay << ", column " << j;
    }
  }
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(other), cudaSuccess);
}

struct square {
  __host__ __device__ double operator()(float v) const { return double(v) * double(v); }
};

// The transform_ forms over raw device pointers: the bits of tally::transform_reduce over each
// row and segment alone, and of tally::reduce over each column of transformed values; the sums
// without init and op.
TEST_F(matrix_device, transform_forms_and_default_sums) {
  seeded s(35);
  SCOPED_TRACE(s.trace());
  const std::int64_t rows = 700, cols = 300, ld = 333;
  const auto v = random_values<float>(std::size_t((rows - 1) * ld + cols), s.rng);
  device_buffer<float> matrix(v, 1);
  thrust::device_vector<double> d_rows(poisoned_vector<double>(rows)), d_cols(poisoned_vector<double>(cols));
  tally::transform_reduce_rows(tally::device, matrix.data(), rows, cols, ld, d_rows.begin(), square{}, 0.0,
                               tally::plus<double>{});
  tally::transform_reduce_columns(tally::device, matrix.data(), rows, cols, ld, d_cols.begin(), square{}, 0.0,
                                  tally::plus<double>{});
  thrust::device_vector<float> d_sums(poisoned_vector<float>(rows));
  tally::reduce_rows(tally::device, matrix.data(), rows, cols, ld, d_sums.begin());
  // Segments of the flat range through transform_segmented_reduce, both forms.
  const std::vector<std::int64_t> offsets{0, 1, 5, 100, 4000, 4001, 70000, 150000};
  const thrust::device_vector<std::int64_t> d_offsets(offsets.begin(), offsets.end());
  thrust::device_vector<double> d_segments(poisoned_vector<double>(offsets.size() - 1)), d_fixed(poisoned_vector<double>(10));
  tally::transform_segmented_reduce(tally::device, matrix.data(), d_offsets.begin(), d_offsets.end(),
                                    d_segments.begin(), square{}, 0.0, tally::plus<double>{});
  tally::transform_segmented_reduce(tally::device, matrix.data(), 10, 1234, d_fixed.begin(), square{}, 0.0,
                                    tally::plus<double>{});
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const thrust::host_vector<double> got_rows = d_rows, got_cols = d_cols, got_segments = d_segments,
                                    got_fixed = d_fixed;
  const thrust::host_vector<float> sums = d_sums;
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto b = v.begin() + i * ld;
    ASSERT_EQ(bits_of(got_rows[std::size_t(i)]),
              bits_of(tally::transform_reduce(tally::host, b, b + cols, square{}, 0.0, tally::plus<double>{})))
        << "row " << i;
    ASSERT_EQ(bits_of(sums[std::size_t(i)]), bits_of(tally::reduce(tally::host, b, b + cols, 0.0f, tally::plus<float>{})))
        << "row " << i;
  }
  for (std::int64_t j = 0; j < cols; ++j) {
    std::vector<double> column(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i) column[std::size_t(i)] = square{}(v[std::size_t(i * ld + j)]);
    ASSERT_EQ(bits_of(got_cols[std::size_t(j)]),
              bits_of(tally::reduce(tally::host, column.begin(), column.end(), 0.0, tally::plus<double>{})))
        << "column " << j;
  }
  for (std::size_t k = 0; k + 1 < offsets.size(); ++k) {
    const auto b = v.begin() + offsets[k], e = v.begin() + offsets[k + 1];
    ASSERT_EQ(bits_of(got_segments[k]),
              bits_of(tally::transform_reduce(tally::host, b, e, square{}, 0.0, tally::plus<double>{})))
        << "segment " << k;
  }
  for (std::size_t k = 0; k < 10; ++k) {
    const auto b = v.begin() + std::ptrdiff_t(k * 1234);
    ASSERT_EQ(bits_of(got_fixed[k]),
              bits_of(tally::transform_reduce(tally::host, b, b + 1234, square{}, 0.0, tally::plus<double>{})))
        << "fixed segment " << k;
  }
}

// An operator that is not commutative keeps each column's top-to-bottom order.

TEST_F(matrix_device, columns_keep_their_order_under_an_operator_that_is_not_commutative) {
  seeded s(36);
  SCOPED_TRACE(s.trace());
  const std::int64_t rows = 3000, cols = 70, ld = 72;
  std::vector<affine_map> v(std::size_t((rows - 1) * ld + cols));
  std::uniform_int_distribution<std::uint64_t> any;
  for (auto& m : v) m = {any(s.rng) | 1u, any(s.rng)};
  const thrust::device_vector<affine_map> d_v(v.begin(), v.end());
  thrust::device_vector<affine_map> d_cols(cols, affine_map{0, 0}), d_rows(rows, affine_map{0, 0});
  const affine_map identity{1, 0};
  tally::reduce_columns(tally::device, d_v.begin(), rows, cols, ld, d_cols.begin(), identity, compose_affine{});
  tally::reduce_rows(tally::device, d_v.begin(), rows, cols, ld, d_rows.begin(), identity, compose_affine{});
  const thrust::host_vector<affine_map> got_cols = d_cols, got_rows = d_rows;
  for (std::int64_t j = 0; j < cols; ++j) {
    affine_map want = identity;
    for (std::int64_t i = 0; i < rows; ++i) want = compose_affine{}(want, v[std::size_t(i * ld + j)]);
    ASSERT_TRUE(got_cols[std::size_t(j)].a == want.a && got_cols[std::size_t(j)].b == want.b) << "column " << j;
  }
  for (std::int64_t i = 0; i < rows; ++i) {
    affine_map want = identity;
    for (std::int64_t j = 0; j < cols; ++j) want = compose_affine{}(want, v[std::size_t(i * ld + j)]);
    ASSERT_TRUE(got_rows[std::size_t(i)].a == want.a && got_rows[std::size_t(i)].b == want.b) << "row " << i;
  }
}

// Columns of 16 to 32 VW rows go a lane each, which replays the lane tree of the column's plan
// depth first (segment_by_thread_tree): each must equal tally::reduce over its own elements on the
// host under an operator that tells every combine's operands apart.
TEST_F(matrix_device, short_columns_replay_their_plans_tree_operand_by_operand) {
  seeded s(38);
  SCOPED_TRACE(s.trace());
  std::uniform_int_distribution<unsigned> value(0, 0xffffffffu);
  for (const std::int64_t rows : {16, 17, 33, 77, 128}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    const std::int64_t cols = 40, ld = 43;
    std::vector<unsigned> m(std::size_t(rows * ld));
    for (auto& x : m) x = value(s.rng);
    const thrust::device_vector<unsigned> d_m(m.begin(), m.end());
    thrust::device_vector<unsigned> d_cols(poisoned_vector<unsigned>(std::size_t(cols)));
    tally::reduce_columns(tally::device, d_m.begin(), rows, cols, ld, d_cols.begin(), 7u, lopsided_mix{});
    const thrust::host_vector<unsigned> got = d_cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      std::vector<unsigned> column(static_cast<std::size_t>(rows));
      for (std::int64_t r = 0; r < rows; ++r) column[std::size_t(r)] = m[std::size_t(r * ld + c)];
      const unsigned want = tally::reduce(tally::host, column.begin(), column.end(), 7u, lopsided_mix{});
      ASSERT_EQ(got[std::size_t(c)], want) << "column " << c;
    }
  }
}

TEST_F(matrix_device, refused_arguments) {
  thrust::device_vector<float> d_m(1000, 1.0f);
  thrust::device_vector<float> d_out(100, -1.0f);
  const auto expect_refused = [](auto call, const char* algorithm, const char* words) {
    try {
      call();
      ADD_FAILURE() << "not refused: " << words;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(algorithm), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_refused([&] { tally::reduce_rows(tally::device, d_m.begin(), 10, 20, 19, d_out.begin()); }, "reduce_rows",
                 "leading dimension");
  expect_refused([&] { tally::reduce_columns(tally::device, d_m.begin(), -1, 20, 20, d_out.begin()); },
                 "reduce_columns", "negative");
  expect_refused([&] { tally::reduce_rows(tally::device, d_m.begin(), 10, 20, 20, d_m.begin() + 50); }, "reduce_rows",
                 "overlaps");
  expect_refused([&] {
    tally::reduce_columns(tally::device, static_cast<const float*>(nullptr), 10, 20, 20, d_out.begin());
  }, "reduce_columns", "null pointer");
  expect_refused([&] {
    tally::transform_reduce_rows(tally::device, static_cast<const float*>(nullptr), 10, 20, 20, d_out.begin(),
                                 square{}, 0.0, tally::plus<double>{});
  }, "transform_reduce_rows", "null pointer");
  const thrust::host_vector<float> out = d_out;
  for (float x : out) ASSERT_EQ(x, -1.0f) << "written before a refusal";
  EXPECT_EQ(tally::reduce(tally::device, d_m.begin(), d_m.end()), 1000.0f) << "the context is still usable";
}

}  // namespace
