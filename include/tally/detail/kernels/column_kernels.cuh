#pragma once
// The kernels of a column reduction of a row-major matrix (reduce_columns under a commutative
// operator; tile/column_tile.cuh has the per-tile work and why its bits are tally::reduce's):
//   column_subtrees_kernel  a warp per task (tile, plan warp w, subtree s, group of 32 runs of C
//                           columns), a lane per run (column_run: C columns in one load where
//                           the matrix allows): the tree of the subtree's plan threads' folds,
//                           into scratch at subtrees[((tile * plan_warps + w) * subtrees + s) *
//                           cols + column]. Neighbouring warps take neighbouring groups of the
//                           same rows; a grid of resident blocks walks the tasks
//   column_tile_trees_kernel a block per (tile, group), a warp per plan warp that holds rows:
//                           warp w the plan warp's tree over its subtrees, warp 0 the block
//                           tree over the warps. A one-tile plan
//                           writes op(init, partial) to out; a longer one leaves the partials in
//                           scratch, partials[tile * cols + column]
//   short_columns_kernel    columns of at most warp_threads * VW rows, whose plan holds only warp
//                           0's first lanes: a thread per column evaluates that lane tree depth
//                           first (segment_by_thread_tree), the warp's loads of one row together
//   column_fold_kernel      a block per group of 32 columns folds the plan's tile partials: warp
//                           w the plan's chains 32w .. 32w + 31 (chain t is partials t, t + 256,
//                           ... in order), the warp tree over them, then warp 0's tree over the
//                           warps.

#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tile/column_tile.cuh"
#include "tally/detail/tuning.cuh"

#include <cstdint>
#include <iterator>

namespace tally::detail {

// Where task `task`'s subtree values go: subtree s of plan warp w of `tile`.
__host__ __device__ inline std::uint64_t column_subtree_slot(const column_shape& shape, std::uint64_t tile,
                                                             unsigned w, unsigned s) {
  return ((tile * shape.plan_warps + w) << (5 - shape.subtree_shift)) + s;
}

template <class Acc, int VW, int C, class It, class Op>
__global__ void __launch_bounds__(block_threads, C == 1 ? tuning::column_subtrees_min_resident_blocks
                                                       : tuning::column_run_subtrees_min_resident_blocks)
    column_subtrees_kernel(It matrix, column_shape shape, Op op, Acc* subtrees) {
  wait_for_prior_grid();
  constexpr unsigned warps = block_threads / warp_threads;
  const unsigned lane = threadIdx.x % warp_threads;
  const unsigned per_warp = warp_threads / shape.subtree;
  // Tasks are numbered slot * groups + group; a slot (column_subtree_slot) is below 2^19 and a
  // group count below 2^31 (columns_by_column_kernels), so each warp divides once and then
  // steps its slot and group on by the grid's stride with a carry, in 32 bits.
  const unsigned per_tile = shape.plan_warps * per_warp;
  const unsigned groups = unsigned(shape.task_groups);
  const std::uint64_t tasks = shape.plan.tiles * per_tile * shape.task_groups;
  const std::uint64_t stride = std::uint64_t(gridDim.x) * warps;
  const unsigned stride_slots = unsigned(stride / groups), stride_groups = unsigned(stride % groups);
  std::uint64_t task = std::uint64_t(blockIdx.x) * warps + threadIdx.x / warp_threads;
  unsigned slot = unsigned(task / groups), group = unsigned(task % groups);
  for (; task < tasks; task += stride) {
    // The lane's run of C columns; with C > 1 the column count is a multiple of C.
    const std::uint64_t col = (std::uint64_t(group) * warp_threads + lane) * C;
    if (col < shape.cols) {
      const unsigned tile = slot / per_tile, in_tile = slot % per_tile;
      const std::uint64_t tile_begin = shape.plan.tile_begin(tile);
      const std::uint64_t len = shape.plan.tile_is_full(tile) ? shape.plan.tile_items : shape.rows - tile_begin;
      bool valid = false;
      const column_run<Acc, C> value = column_subtree<Acc, VW, C>(matrix, shape, col, tile_begin, len,
                                                                  in_tile / per_warp, in_tile % per_warp, op, valid);
      if (valid) {
        Acc* const to = subtrees + std::uint64_t(slot) * shape.cols + col;
#pragma unroll
        for (int c = 0; c < C; ++c) to[c] = value.v[c];
      }
    }
    group += stride_groups;
    slot += stride_slots;
    if (group >= groups) {
      group -= groups;
      ++slot;
    }
  }
}

template <class Acc, int VW, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    column_tile_trees_kernel(column_shape shape, Acc init, Op op, OutIt out, const Acc* subtrees, Acc* partials) {
  wait_for_prior_grid();
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  constexpr unsigned warps = block_threads / warp_threads;
  __shared__ alignas(Acc) unsigned char slot_bytes[warps * warp_threads * sizeof(Acc)];
  __shared__ bool slot_valid[warps * warp_threads];
  Acc* const slots = reinterpret_cast<Acc*>(slot_bytes);
  const unsigned lane = threadIdx.x % warp_threads;
  const unsigned warp = threadIdx.x / warp_threads;
  // Neighbouring blocks take neighbouring groups of the same tile (a grid below 2^31 blocks).
  const unsigned group = blockIdx.x % unsigned(shape.groups);
  const unsigned tile = blockIdx.x / unsigned(shape.groups);
  const std::uint64_t col = std::uint64_t(group) * warp_threads + lane;
  const bool has_column = col < shape.cols;
  const std::uint64_t tile_begin = shape.plan.tile_begin(tile);
  const std::uint64_t len = shape.plan.tile_is_full(tile) ? shape.plan.tile_items : shape.rows - tile_begin;
  if (has_column) {
    bool valid = false;
    Acc value{};
    if (warp < shape.plan_warps) {
      // A subtree holds a value exactly when its first leaf's plan thread holds a row: the
      // threads that hold rows are a prefix, and a leaf run's first leaf is its lowest thread.
      const std::uint64_t holding_rows = (len + VW - 1) / VW;
      const unsigned holding = holding_rows < block_threads ? unsigned(holding_rows) : unsigned(block_threads);
      const Acc* const warp_values =
          subtrees + column_subtree_slot(shape, tile, warp, 0) * shape.cols + col;  // then one row of cols a subtree
      value = plan_warp_over_subtrees<Acc>(
          shape.subtree_shift,
          [&](unsigned s, bool& ok) {
            ok = plan_thread_of_leaf(warp, s << shape.subtree_shift) < holding;
            return ok ? warp_values[std::uint64_t(s) * shape.cols] : Acc{};
          },
          op, valid);
    }
    slots[warp * warp_threads + lane] = value;
    slot_valid[warp * warp_threads + lane] = valid;
  }
  __syncthreads();
  if (warp != 0 || !has_column) return;
  // The block has a warp for each plan warp that holds rows (plan_warps); the later plan warps
  // hold nothing, so that more of these short-lived blocks fit on a multiprocessor at once.
  const unsigned held = blockDim.x / warp_threads;
  bool valid = false;
  const Acc partial = block_tree_over_plan_warps<Acc>(
      [&](unsigned w, bool& ok) {
        ok = w < held && slot_valid[w * warp_threads + lane];
        return ok ? slots[w * warp_threads + lane] : Acc{};
      },
      op, valid);
  if (shape.plan.tiles == 1) {
    out[static_cast<out_diff>(col)] = static_cast<Acc>(op(init, partial));
  } else {
    partials[tile * shape.cols + col] = partial;
  }
}

template <class Acc, int VW, class It, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    short_columns_kernel(It matrix, column_shape shape, Acc init, Op op, OutIt out) {
  wait_for_prior_grid();
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  using diff_t = typename std::iterator_traits<It>::difference_type;
  for (std::uint64_t col = std::uint64_t(blockIdx.x) * block_threads + threadIdx.x; col < shape.cols;
       col += std::uint64_t(gridDim.x) * block_threads) {
    const column_loader<It> load{matrix + static_cast<diff_t>(col), static_cast<diff_t>(shape.ld)};
    out[static_cast<out_diff>(col)] = shape.rows <= std::uint64_t(VW)
                                          ? segment_by_thread<Acc, VW>(load, shape.rows, init, op)
                                          : segment_by_thread_tree<Acc, VW>(load, shape.rows, init, op);
  }
}

template <class Acc, class Op, class OutIt>
__global__ void __launch_bounds__(block_threads)
    column_fold_kernel(column_shape shape, Acc init, Op op, OutIt out, const Acc* partials) {
  wait_for_prior_grid();
  using out_diff = typename std::iterator_traits<OutIt>::difference_type;
  constexpr unsigned warps = block_threads / warp_threads;
  static_assert(warps == 8, "warp 0's tree over 8 warps: 4 levels");
  __shared__ alignas(Acc) unsigned char slot_bytes[warps * warp_threads * sizeof(Acc)];
  __shared__ bool slot_valid[warps * warp_threads];
  Acc* const slots = reinterpret_cast<Acc*>(slot_bytes);
  const unsigned lane = threadIdx.x % warp_threads;
  const unsigned warp = threadIdx.x / warp_threads;
  const std::uint64_t col = std::uint64_t(blockIdx.x) * warp_threads + lane;
  const bool has_column = col < shape.cols;
  const std::uint64_t tiles = shape.plan.tiles;
  if (has_column) {
    // The chains' first partials are read a batch at a time before the batch's combines, so
    // that the reads are in flight together; chains of more than one partial (past
    // block_threads tiles) go on after. The batches run as a loop, so that the kernel stays
    // small (plan_warp_over_subtrees says why).
    constexpr unsigned batch = 8;
    flat_tree<Acc, 6> tree;
#pragma unroll 1
    for (unsigned first = 0; first < warp_threads; first += batch) {
      Acc chain[batch];
      bool valid[batch];
#pragma unroll
      for (unsigned j = 0; j < batch; ++j) {
        const std::uint64_t t = warp * warp_threads + reverse_bits(first + j, 5);
        valid[j] = t < tiles;
        chain[j] = valid[j] ? partials[t * shape.cols + col] : Acc{};
      }
      if (tiles > block_threads) {
#pragma unroll
        for (unsigned j = 0; j < batch; ++j) {
          const std::uint64_t t = warp * warp_threads + reverse_bits(first + j, 5);
          for (std::uint64_t i = t + block_threads; i < tiles; i += block_threads)
            chain[j] = static_cast<Acc>(op(chain[j], partials[i * shape.cols + col]));
        }
      }
#pragma unroll
      for (unsigned j = 0; j < batch; ++j) tree.push(chain[j], valid[j], op);
    }
    slots[warp * warp_threads + lane] = tree.root();
    slot_valid[warp * warp_threads + lane] = tree.root_valid();
  }
  __syncthreads();
  if (warp != 0 || !has_column) return;
  bool valid = false;
  const Acc total = block_tree_over_plan_warps<Acc>(
      [&](unsigned w, bool& ok) {
        ok = slot_valid[w * warp_threads + lane];
        return ok ? slots[w * warp_threads + lane] : Acc{};
      },
      op, valid);
  out[static_cast<out_diff>(col)] = static_cast<Acc>(op(init, total));
}

}  // namespace tally::detail
