#pragma once
// Device dispatch of a column reduction of a row-major matrix under a commutative operator
// (kernels/column_kernels.cuh): one launch for columns of a few rows; else the subtrees'
// launch, the tiles' trees over them and, where a column's plan has more than one tile, the
// fold of the tile partials, in scratch leased for the call.

#include "tally/detail/dispatch/device_dispatch.cuh"
#include "tally/detail/dispatch/launch.cuh"
#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/kernels/column_kernels.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tuning.cuh"

#include <climits>
#include <cstdint>
#include <type_traits>
#include <utility>

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

// Columns a lane of the subtrees kernel takes in one load: 16 bytes of plain 4- or 8-byte
// values through a pointer, with an accumulator of at most 8 bytes (a lane holds C of them in
// each tree); else 1.
template <class Acc, class It, bool = std::is_pointer_v<It>>
inline constexpr int column_run_width_v = 1;
template <class Acc, class It>
inline constexpr int column_run_width_v<Acc, It, true> =
    std::is_arithmetic_v<std::remove_cv_t<std::remove_pointer_t<It>>> &&
            (sizeof(*std::declval<It>()) == 4 || sizeof(*std::declval<It>()) == 8) && sizeof(Acc) <= 8
        ? int(16 / sizeof(*std::declval<It>()))
        : 1;

// The subtrees' launch, the tiles' trees over them and, where a column's plan has more than
// one tile, the fold of the tile partials, in scratch leased for the call; lanes of C columns.
template <class Acc, int VW, int C, class It, class OutIt, class Op, class Policy>
void launch_column_subtrees(It matrix, column_shape shape, OutIt out, Acc init, Op op, const Policy& policy,
                            int device) {
  const cudaStream_t stream = policy.stream();
  const std::uint64_t cols = shape.cols;
  shape.task_groups = (cols + std::uint64_t(warp_threads) * C - 1) / (std::uint64_t(warp_threads) * C);
  // Each task a subtree of as many leaves as still leaves two resident grids' worth of warps
  // with a task each: more leaves a task mean fewer subtree values written and read again, fewer
  // mean more warps to keep loads in flight (docs/decisions/0038).
  constexpr auto subtrees_kernel = &column_subtrees_kernel<Acc, VW, C, It, Op>;
  const std::uint64_t resident_warps = resident_grid<subtrees_kernel>(policy, device) * (block_threads / warp_threads);
  const std::uint64_t leaves = shape.plan.tiles * shape.plan_warps * warp_threads * shape.task_groups;
  shape.subtree = 1;
  while (shape.subtree < column_subtree_max && leaves / (2 * shape.subtree) >= 2 * resident_warps) {
    shape.subtree *= 2;
    ++shape.subtree_shift;
  }
  const std::uint64_t tasks = leaves / shape.subtree;
  const std::uint64_t resident_blocks = resident_warps / (block_threads / warp_threads);
  const std::uint64_t task_blocks = (tasks + block_threads / warp_threads - 1) / (block_threads / warp_threads);
  const std::size_t partial_bytes = shape.plan.tiles == 1 ? 0 : std::size_t(shape.plan.tiles * cols * sizeof(Acc));
  const std::size_t subtree_bytes = std::size_t(tasks / shape.task_groups * cols * sizeof(Acc));
  scratch_lease lease(device, stream, partial_bytes + subtree_bytes, false);
  unsigned char* const scratch = static_cast<unsigned char*>(lease.scratch().partials);
  Acc* const partials = shape.plan.tiles == 1 ? nullptr : reinterpret_cast<Acc*>(scratch);
  Acc* const subtrees = reinterpret_cast<Acc*>(scratch + partial_bytes);
  launch_kernel<subtrees_kernel>(unsigned(task_blocks < resident_blocks ? task_blocks : resident_blocks),
                                 block_threads, stream, device, matrix, shape, op, subtrees);
  launch_kernel<column_tile_trees_kernel<Acc, VW, Op, OutIt>>(unsigned(shape.groups * shape.plan.tiles),
                                                               shape.plan_warps * warp_threads, stream, device, shape,
                                                               init, op, out, static_cast<const Acc*>(subtrees),
                                                               partials);
  if (shape.plan.tiles > 1)
    launch_kernel<column_fold_kernel<Acc, Op, OutIt>>(unsigned(shape.groups), block_threads, stream, device, shape,
                                                       init, op, out, static_cast<const Acc*>(partials));
  lease.launched();
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
  // The plan's warps that hold rows of the first (the longest) tile.
  const std::uint64_t first_len = rows < shape.plan.tile_items ? rows : shape.plan.tile_items;
  const std::uint64_t threads_holding = (first_len + VW - 1) / VW;
  shape.plan_warps = unsigned(threads_holding >= block_threads ? block_threads / warp_threads
                                                               : (threads_holding + warp_threads - 1) / warp_threads);
  // A lane takes C neighbouring columns in one 16-byte load where the matrix allows it and
  // every lane of a warp still has columns: fewer instructions for each byte read (decision 0038).
  constexpr int run = column_run_width_v<Acc, It>;
  bool runs = false;
  if constexpr (run > 1)
    runs = reinterpret_cast<std::uintptr_t>(matrix) % (run * sizeof(*matrix)) == 0 && ld % run == 0 &&
           cols % run == 0 && cols >= std::uint64_t(warp_threads) * run;
  if (runs) {
    launch_column_subtrees<Acc, VW, run>(matrix, shape, out, init, op, policy, device);
  } else {
    launch_column_subtrees<Acc, VW, 1>(matrix, shape, out, init, op, policy, device);
  }
}

}  // namespace tally::detail
