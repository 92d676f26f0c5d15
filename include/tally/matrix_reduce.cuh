#pragma once
// tally::reduce_rows and tally::reduce_columns: one reduction per row or per column of a
// row-major matrix (issue 36; docs/segmented.md), and their transform_ forms.
//
//   OutIt reduce_rows(policy, first, rows, cols, ld, out[, init, op])
//       Row i is first[i * ld], ..., first[i * ld + cols - 1] (ld >= cols: the leading
//       dimension, as BLAS names it); out[i] = tally::reduce(row i, init, op), with the bits of
//       tally::reduce over that row alone. Returns out + rows.
//   OutIt reduce_columns(policy, first, rows, cols, ld, out[, init, op])
//       Column j is first[j], first[ld + j], ..., first[(rows - 1) * ld + j], taken from the top;
//       out[j] = tally::reduce(column j, init, op), with the bits of tally::reduce over a
//       contiguous copy of that column. Returns out + cols.
//   transform_reduce_rows / transform_reduce_columns(policy, first, rows, cols, ld, out,
//       unary_op, init, binary_op): each element through unary_op first, as tally::transform_reduce.
//
// Without init and op: sums, from the element type's zero. Under a device policy the matrix and
// out must be device-accessible and the call returns without waiting (like reduce_into).
//
// Rows run as segmented_reduce's fixed-size segments. Columns under a commutative operator, with
// at least 16 rows and 16 columns, take kernels of their own (dispatch/column_dispatch.cuh): a
// lane per column, so that a warp reads a row of 32 neighbouring columns at once, each lane
// replaying its column's plan. Other columns are read as the segments of a column-major view of
// the matrix, one element per row (docs/segmented.md; docs/decisions/0033).

#include "tally/detail/dispatch/column_dispatch.cuh"
#include "tally/segmented_reduce.cuh"

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/permutation_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>

namespace tally {
namespace detail {

// Element k of the column-major view of a rows x cols matrix with leading dimension ld.
struct column_major_index {
  std::int64_t rows;
  std::int64_t ld;
  __host__ __device__ std::int64_t operator()(std::int64_t k) const { return (k % rows) * ld + k / rows; }
};

template <class It>
auto column_major_view(It matrix, std::int64_t rows, std::int64_t ld) {
  return thrust::make_permutation_iterator(
      matrix, thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                              column_major_index{rows > 0 ? rows : 1, ld}));
}

// Rows of `size` elements, row s starting at s * ld.
struct strided_row_bounds {
  static constexpr bool equal_sizes = true;
  std::uint64_t ld;
  std::uint64_t size;
  TALLY_HOST_DEVICE segment_extent operator()(std::uint64_t s) const { return {s * ld, size}; }
};

// The checks of both forms; returns the number of elements the matrix spans.
inline std::uint64_t check_matrix(std::int64_t rows, std::int64_t cols, std::int64_t ld, const char* algorithm) {
  if (rows < 0 || cols < 0)
    throw_invalid_argument(algorithm, "rows and cols must not be negative");
  if (ld < cols)
    throw_invalid_argument(algorithm, "the leading dimension ld (" + std::to_string(ld) +
                                          ") is less than cols (" + std::to_string(cols) +
                                          "); row i begins at first + i * ld, so ld must be at least cols");
  if (rows == 0 || cols == 0) return 0;
  const std::uint64_t r = std::uint64_t(rows), c = std::uint64_t(cols), l = std::uint64_t(ld);
  if (r - 1 > (std::uint64_t(INT64_MAX) - c) / (l > 0 ? l : 1))
    throw_invalid_argument(algorithm, "(rows - 1) * ld + cols overflows 64 bits");
  return (r - 1) * l + c;
}

// The columns by the column kernels (dispatch/column_dispatch.cuh): each lane a column, the
// rows of 32 neighbouring columns read together.
template <int VW, class It, class OutIt, class T, class Op, bool MayForceStrategy>
OutIt device_columns(const basic_device_policy<MayForceStrategy>& policy, It base, std::uint64_t rows,
                     std::uint64_t cols, std::uint64_t ld, OutIt out, T init, Op op, const char* algorithm) {
  check_operator<T, Op, iterator_value_t<It>>();
  static_assert(moves_as_bytes_v<T>,
                "tally::reduce_columns: a device reduction moves init's type as bytes, so it must be trivially "
                "copyable, or copy-constructible and trivially destructible");
  if constexpr (operator_fits_v<T, Op, iterator_value_t<It>> && moves_as_bytes_v<T>) {
    algorithm_scope scope(algorithm);
    const int device = current_device();
    const auto in = device_view(base, true, device, "the matrix", algorithm);
    const auto to = device_view(out, true, device, "out", algorithm);
    device_column_reduce<T, VW>(in, rows, cols, ld, to, init, op, policy, device);
  }
  return out + static_cast<typename std::iterator_traits<OutIt>::difference_type>(cols);
}

template <class Policy, class It, class OutIt, class T, class Op>
OutIt reduce_rows_impl(const Policy& policy, It first, std::int64_t rows, std::int64_t cols, std::int64_t ld, OutIt out,
                       T init, Op op, const char* algorithm) {
  const std::uint64_t span = check_matrix(rows, cols, ld, algorithm);
  const auto p = normalize_policy(policy);
  const std::uint64_t r = std::uint64_t(rows), c = std::uint64_t(cols), l = std::uint64_t(ld);
  if constexpr (std::is_same_v<std::remove_cv_t<decltype(p)>, host_policy>) {
    check_operator<T, Op, iterator_value_t<It>>();
    for_each_segment(r, r * c, p.thread_count(), [&](std::uint64_t s) {
      out[static_cast<std::ptrdiff_t>(s)] =
          host::reduce(first + static_cast<std::ptrdiff_t>(s * l), c, init, op, 1u, plan_vector_width_v<It>);
    });
    return out + static_cast<std::ptrdiff_t>(r);
  } else {
    check_output_apart(out, r, first, span, "the matrix", algorithm);
    const auto bounds = [l, c](int) { return strided_row_bounds{l, c}; };
    return device_segmented(p, first, bounds, r, c == 0 ? 1 : c, out, init, op, c > 0, algorithm);
  }
}

template <class Policy, class It, class OutIt, class T, class Op>
OutIt reduce_columns_impl(const Policy& policy, It first, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                          OutIt out, T init, Op op, const char* algorithm) {
  const std::uint64_t span = check_matrix(rows, cols, ld, algorithm);
  const auto p = normalize_policy(policy);
  const std::uint64_t r = std::uint64_t(rows), c = std::uint64_t(cols);
  if constexpr (std::is_same_v<std::remove_cv_t<decltype(p)>, host_policy>) {
    check_operator<T, Op, iterator_value_t<It>>();
    const auto view = column_major_view(first, rows, ld);
    for_each_segment(c, r * c, p.thread_count(), [&](std::uint64_t j) {
      out[static_cast<std::ptrdiff_t>(j)] = host::reduce(view + static_cast<std::ptrdiff_t>(j * r), r, init, op, 1u,
                                                         plan_vector_width_v<decltype(view)>);
    });
    return out + static_cast<std::ptrdiff_t>(c);
  } else {
    check_output_apart(out, c, first, span, "the matrix", algorithm);
    const auto bounds = [r](int) { return fixed_size_bounds{r}; };
    // The view reads through a device pointer, so that the kernels take it as a device iterator.
    const auto base = readable_base(p, first, span > 0, "the matrix", algorithm);
    using view_t = decltype(column_major_view(base, rows, ld));
    constexpr int vw = plan_vector_width_v<view_t>;
    if constexpr (is_commutative_v<Op> && !is_exact_plus_v<Op> && !declares_exact_fields<Op>::value &&
                  column_kernels_take_v<T, vw>) {
      if (span > 0 && columns_by_column_kernels(r, c, make_plan(r, vw, plan_max_tiles_for<Op>).tiles))
        return device_columns<vw>(p, base, r, c, std::uint64_t(ld), out, init, op, algorithm);
    }
    return device_segmented(p, column_major_view(base, rows, ld), bounds, c, r == 0 ? 1 : r, out, init, op, r > 0,
                            algorithm);
  }
}

}  // namespace detail

template <class Policy, class It, class OutIt, class T, class Op, detail::enable_if_policy_t<Policy> = 0>
OutIt reduce_rows(const Policy& policy, It first, std::int64_t rows, std::int64_t cols, std::int64_t ld, OutIt out,
                  T init, Op op) {
  return detail::reduce_rows_impl(policy, first, rows, cols, ld, out, init, op, "reduce_rows");
}

template <class Policy, class It, class OutIt, detail::enable_if_policy_t<Policy> = 0>
OutIt reduce_rows(const Policy& policy, It first, std::int64_t rows, std::int64_t cols, std::int64_t ld, OutIt out) {
  using T = detail::iterator_value_t<It>;
  return detail::reduce_rows_impl(policy, first, rows, cols, ld, out, T{}, plus<T>{}, "reduce_rows");
}

template <class Policy, class It, class OutIt, class T, class Op, detail::enable_if_policy_t<Policy> = 0>
OutIt reduce_columns(const Policy& policy, It first, std::int64_t rows, std::int64_t cols, std::int64_t ld, OutIt out,
                     T init, Op op) {
  return detail::reduce_columns_impl(policy, first, rows, cols, ld, out, init, op, "reduce_columns");
}

template <class Policy, class It, class OutIt, detail::enable_if_policy_t<Policy> = 0>
OutIt reduce_columns(const Policy& policy, It first, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                     OutIt out) {
  using T = detail::iterator_value_t<It>;
  return detail::reduce_columns_impl(policy, first, rows, cols, ld, out, T{}, plus<T>{}, "reduce_columns");
}

template <class Policy, class It, class OutIt, class UnaryOp, class T, class BinaryOp,
          detail::enable_if_policy_t<Policy> = 0>
OutIt transform_reduce_rows(const Policy& policy, It first, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                            OutIt out, UnaryOp unary_op, T init, BinaryOp binary_op) {
  const auto base = detail::readable_base(policy, first, rows > 0 && cols > 0, "the matrix", "transform_reduce_rows");
  return detail::reduce_rows_impl(policy, thrust::make_transform_iterator(base, unary_op), rows, cols, ld, out, init,
                                  binary_op, "transform_reduce_rows");
}

template <class Policy, class It, class OutIt, class UnaryOp, class T, class BinaryOp,
          detail::enable_if_policy_t<Policy> = 0>
OutIt transform_reduce_columns(const Policy& policy, It first, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                               OutIt out, UnaryOp unary_op, T init, BinaryOp binary_op) {
  const auto base =
      detail::readable_base(policy, first, rows > 0 && cols > 0, "the matrix", "transform_reduce_columns");
  return detail::reduce_columns_impl(policy, thrust::make_transform_iterator(base, unary_op), rows, cols, ld, out,
                                     init, binary_op, "transform_reduce_columns");
}

}  // namespace tally
