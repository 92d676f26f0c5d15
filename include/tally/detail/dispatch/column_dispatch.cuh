#pragma once
// Device dispatch of a column reduction of a row-major matrix under a commutative operator
// (kernels/column_kernels.cuh): one launch where a column's plan has one tile, else the tiles'
// launch and the fold of their partials, in scratch leased for the call.

#include "tally/detail/dispatch/device_dispatch.cuh"
#include "tally/detail/dispatch/launch.cuh"
#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/kernels/column_kernels.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tuning.cuh"

#include <climits>
#include <cstdint>
#include <type_traits>

namespace tally::detail {

// Whether a matrix's columns take the column kernels: a commutative operator (the caller
// checks), an accumulator the block's slots hold, chunks of at most four elements (a thread
// keeps a step's loads_per_step * VW values in flight), and a shape whose warps have work.
template <class Acc, int VW>
inline constexpr bool column_kernels_take_v = sizeof(Acc) <= 16 && VW <= 4;

inline bool columns_by_column_kernels(std::uint64_t rows, std::uint64_t cols, std::uint64_t tiles) {
  const std::uint64_t groups = (cols + warp_threads - 1) / warp_threads;
  return cols >= tuning::column_kernels_min_cols && rows >= tuning::column_kernels_min_rows &&
         groups <= std::uint64_t(INT_MAX) / tiles;
}

// out[j] = op(init, column j's plan) for the columns of the matrix at `matrix` (a device
// iterator: element (i, j) at matrix[i * ld + j]).
template <class Acc, int VW, class It, class OutIt, class Op, class Policy>
void device_column_reduce(It matrix, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, OutIt out, Acc init,
                          Op op, const Policy& policy, int device) {
  column_shape shape;
  shape.rows = rows;
  shape.cols = cols;
  shape.ld = ld;
  shape.groups = (cols + warp_threads - 1) / warp_threads;
  shape.plan = make_plan(rows, VW, plan_max_tiles_for<Op>);
  const cudaStream_t stream = policy.stream();
  if (rows <= std::uint64_t(warp_threads) * VW) {  // only the plan's warp 0 holds rows: a thread per column
    check_stream_of_device(stream, device);
    constexpr auto short_kernel = &short_columns_kernel<Acc, VW, It, Op, OutIt>;
    const std::uint64_t blocks = (cols + block_threads - 1) / block_threads;
    const std::uint64_t resident = resident_grid<short_kernel>(policy, device);
    launch_kernel<short_kernel>(unsigned(blocks < resident ? blocks : resident), block_threads, stream, device, matrix,
                                shape, init, op, out);
    return;
  }
  const unsigned grid = unsigned(shape.groups * shape.plan.tiles);
  // Warps for the plan warps that hold rows of the first (the longest) tile, four each.
  const std::uint64_t first_len = rows < shape.plan.tile_items ? rows : shape.plan.tile_items;
  const std::uint64_t threads_holding = (first_len + VW - 1) / VW;
  const std::uint64_t plan_warps = threads_holding >= block_threads ? block_threads / warp_threads
                                                                    : (threads_holding + warp_threads - 1) / warp_threads;
  const unsigned threads = unsigned(plan_warps * warp_threads * column_quarters);
  constexpr auto tiles_kernel = &column_tiles_kernel<Acc, VW, It, Op, OutIt>;
  if (shape.plan.tiles == 1) {
    check_stream_of_device(stream, device);
    launch_kernel<tiles_kernel>(grid, threads, stream, device, matrix, shape, init, op, out,
                                static_cast<Acc*>(nullptr));
    return;
  }
  scratch_lease lease(device, stream, std::size_t(shape.plan.tiles * cols * sizeof(Acc)), false);
  Acc* const partials = static_cast<Acc*>(lease.scratch().partials);
  launch_kernel<tiles_kernel>(grid, threads, stream, device, matrix, shape, init, op, out, partials);
  launch_kernel<column_fold_kernel<Acc, Op, OutIt>>(unsigned(shape.groups), block_threads, stream, device, shape, init,
                                                     op, out, static_cast<const Acc*>(partials));
  lease.launched();
}

}  // namespace tally::detail
