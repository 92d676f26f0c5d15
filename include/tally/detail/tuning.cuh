#pragma once
// The performance knobs of the device kernels and their dispatch, in one place. Each picks
// between ways of computing the same result: none of them changes a result's bits or its
// correctness (the plan, which decides the bits, has fixed constants of its own: plan.cuh).
// They are constants, not macros, so that no translation unit can be built with other
// values than the rest of a program. tools/tune measures other values by compiling its
// program against a copy of this header with the values changed (docs/benchmarks.md).
//
// The decision records under docs/decisions/ have the measurements behind each value.

namespace tally::detail::tuning {

// ---- block 0 of the single pass (kernels/reduce_kernels.cuh, fold_block_role) -------------

// Partials of up to 8 bytes that each thread of block 0 reads at once before polling them
// one by one: the L2 latencies of a batch overlap (docs/decisions/0009-fold-polling.md).
inline constexpr int fold_batch = 16;

// Block 0 reduces no tile of its own while the tiles are at most this many per tile block:
// it polls from the start instead (docs/decisions/0008-block-0-roles.md).
inline constexpr unsigned fold_block_gate = 2;

// Where block 0 does reduce tiles, it takes the share that ends soonest (the last block's,
// the smallest where the tiles do not divide evenly), so that it starts folding early.
inline constexpr bool fold_block_takes_last_share = true;

// Block 0's fallback after a wait ran out (kernels/reduce_kernels.cuh) is called out of line
// for loaders of plain elements and inlined for the views (transforms, counting iterators,
// zips): each measured the faster of the two for its kind
// (docs/decisions/0043-fallback-inlined-for-views.md). false: out of line for every loader.
inline constexpr bool fallback_inlined_for_views = true;

// A fold of at most 32 partials runs warp 0's tree alone, without the block stage's two
// barriers (the same bits: the other warps hold nothing). For the commutative and the
// ordered plan.
inline constexpr bool fold_few_partials_by_warp = true;
inline constexpr bool ordered_fold_few_partials_by_warp = true;

// ---- tile blocks (tile/commutative_tile.cuh) --------------------------------------------

// A partial step reads every chunk, the step's first in place of each one that is not
// whole, so that all its loads are in flight at once (docs/decisions/0006-one-tile-kernels.md);
// false reads only the whole chunks.
inline constexpr bool partial_step_reads_every_chunk = true;

// A block fetches its next tile's first step before the block reduction of the current one
// where a step's chunks take at most this many bytes per thread
// (docs/decisions/0005-next-tile-prefetch.md).
inline constexpr unsigned prefetch_max_step_bytes = 128;

// Resident blocks per SM that a kernel's register budget must allow (__launch_bounds__):
// kernels that prefetch their next tile, and the others.
inline constexpr int prefetch_min_resident_blocks = 2;
inline constexpr int min_resident_blocks = 1;

// A loader that says two_blocks_at_many_tiles gets a second single-pass kernel compiled
// for two resident blocks per SM, taken where the tiles outnumber one block per SM
// (docs/decisions/0015-transforms-at-the-fold.md).
inline constexpr bool two_block_variant = true;

// The extrema's threads and block trees carry 32-bit positions within a tile where the
// operator offers combine_in_order (tile/commutative_tile.cuh, folds_local_positions).
inline constexpr bool local_positions = true;

// Transform loaders keep the elements as read and transform each as it is folded
// (docs/decisions/0015-transforms-at-the-fold.md); false transforms each chunk as it is read.
inline constexpr bool transforms_at_fold = true;

// ---- segmented reductions (kernels/segmented_kernels.cuh) ----------------------------------

// The first launch's grid: where its groups of segments outnumber a resident grid's warps, up to
// this many resident grids' worth of blocks, each grid's worth striding over its own share of the
// groups. A group's cost varies by orders of magnitude with its segments' sizes; a block that
// finishes its share early frees its slot for the next one instead of idling while the warps
// that drew long segments run (docs/decisions/0046-packed-lane-groups-and-grid-slices.md).
inline constexpr unsigned segments_by_size_slices = 4;

// ---- column reductions (kernels/column_kernels.cuh) -----------------------------------------

// Matrices with at least this many columns and rows take the column kernels, a lane per
// column; narrower or shorter ones the segmented kernels over the column-major view. Every
// shape bench_matrix times (16 columns or rows and up) is faster in the column kernels
// (docs/decisions/0033); below 16 nothing was measured, and with fewer than 16 columns most of
// a warp's 32 lanes would hold no column.
inline constexpr unsigned long long column_kernels_min_cols = 16;
inline constexpr unsigned long long column_kernels_min_rows = 16;

// Resident blocks per SM that the subtrees kernel's register budget must allow, for lanes of
// one column and of several: unbounded, it takes registers for every address of a step's loads
// at once and runs a block per SM; its loads need many warps in flight instead. Lanes of several
// columns hold a tree and a fold for each, and spill at the budget of four blocks
// (docs/decisions/0038).
inline constexpr int column_subtrees_min_resident_blocks = 4;
inline constexpr int column_run_subtrees_min_resident_blocks = 3;

// A plan thread's chunks of a step that a column subtree task reads at once before folding
// them (divided by the columns a lane takes in one load): all loads_per_step, or fewer, to hold
// fewer values in registers.
inline constexpr int column_chunks_at_once = 2;

// ---- kernels for small plans (dispatch/device_dispatch.cuh) ---------------------------------------

// The one-tile kernel of the fewest loads per thread tried first: 1, 2, 4, ... below
// loads_per_step (docs/decisions/0006-one-tile-kernels.md). loads_per_step makes every
// one-tile call take the whole step's kernel.
inline constexpr int single_tile_fewest_loads = 1;

// Plans of two tiles run in one block of two runs (tile_pair_reduce_kernel,
// docs/decisions/0007-tile-pair-kernel.md).
inline constexpr bool tile_pair_kernel = true;

// Ordered plans of one or two tiles run in the small ordered kernels, not the ordered
// single pass.
inline constexpr bool ordered_small_kernels = true;

// ---- loads (loads/loads.cuh) --------------------------------------------------------------------

// When an input is read with the evict-first hint: never, always, or where its bytes
// exceed the L2's size over stream_reads_l2_fraction (docs/decisions/0014-evict-first-loads.md).
enum class stream_reads_when { never, always, above_l2_fraction };
inline constexpr stream_reads_when stream_reads = stream_reads_when::above_l2_fraction;
inline constexpr unsigned long long stream_reads_l2_fraction = 8;

// ---- launches and warps -------------------------------------------------------------------

// Kernels launch with programmatic dependent launch where the device and the loaded code
// allow it (dispatch/launch.cuh, docs/decisions/0017-programmatic-dependent-launch.md).
inline constexpr bool programmatic_launch = true;

// 32-bit integers under an exact operator fold a warp in one redux.sync on compute
// capability 8.0 and later (tally/warp/reduce.cuh, docs/decisions/0016-integer-trees-by-redux.md).
inline constexpr bool warp_integer_redux = true;

// The block tree's last stage (the tree over the warps' results, which ends every tile
// block's work) is evaluated by one thread from shared memory where the values are small, not
// by shuffles: the same tree, with less latency (tally/warp/reduce.cuh, tree_of_slots;
// docs/decisions/0029-shorter-trees-at-the-end-of-a-call.md).
inline constexpr bool last_tree_levels_in_one_thread = true;

// ---- the atomic strategies (kernels/atomic_kernels.cuh) ------------------------------------

// Blocks per SM of the warp_atomic strategy's grid: every warp of every block combines into
// the same words, so more warps wait on each other where the input is large; the block
// strategy takes the kernel's resident grid (docs/decisions/0030-warp-atomic-grid.md).
inline constexpr unsigned warp_atomic_blocks_per_sm = 2;

}  // namespace tally::detail::tuning
