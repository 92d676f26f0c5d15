"""The mutants of scripts/mutate: deliberate defects, each a replacement of one piece of text
that occurs exactly once in one library file, and the test programs that must catch it.

host   the host backend and the plan: caught by tests that run without a GPU
device kernels, tile work and loads: their tests run only where a GPU is present

Each defect is one a real change could bring: an element, a chunk, a tile or a partial
dropped; init applied twice or never; an ordered fold's operands swapped; a tree in another
shape; a plan that no longer covers N.
"""

HOST_BACKEND = "include/tally/detail/dispatch/host_backend.cuh"
PLAN = "include/tally/detail/plan.cuh"
COMMUTATIVE_TILE = "include/tally/detail/tile/commutative_tile.cuh"
COMMUTATIVE_FOLD = "include/tally/detail/tile/commutative_fold.cuh"
ORDERED_TILE = "include/tally/detail/tile/ordered_tile.cuh"
REDUCE_KERNELS = "include/tally/detail/kernels/reduce_kernels.cuh"
LOADS = "include/tally/detail/loads/loads.cuh"
WARP = "include/tally/warp/reduce.cuh"

HOST_TESTS = ["test_plan", "test_reduce_host", "test_random"]
ORDERED_HOST_TESTS = HOST_TESTS + ["test_operators"]  # the left folds of operators that are not commutative
# Each device mutant names one program that should catch it, the smallest that does: each is
# minutes of one core's compile for sm_90, so a program more per mutant costs a lent GPU
# machine's time. Any failing test of it catches the mutant.
#   test_special_values  exact sums (integer shadows) at every size class, init never 0,
#                        aligned and misaligned starts, signed zeros (an empty lane is skipped)
#   test_huge_ranges     exact sums past 2^31 under every strategy, init never 0
#   test_operators       operators that are not commutative, against the left fold
SPECIAL_VALUES = ["test_special_values"]
HUGE_RANGES = ["test_huge_ranges"]
ORDERED_DEVICE = ["test_operators"]
ORDERED_FOLD = "include/tally/detail/tile/ordered_fold.cuh"
ATOMIC_KERNELS = "include/tally/detail/kernels/atomic_kernels.cuh"
# Segmented reductions: each segment must have its own reduce's bits (test_segmented_device's
# small_segments case runs warps of 32 segments of differing sizes with an operator whose every
# bit depends on the tree).
SEGMENT_REPLAY = "include/tally/detail/tile/segment_replay.cuh"
SEGMENTED = ["test_segmented_device"]
SEGMENTED_KERNELS = "include/tally/detail/kernels/segmented_kernels.cuh"
BLOCK_COUNTS = "include/tally/detail/kernels/block_counts.cuh"
# The combine of reductions over several GPUs (tally::tally_nccl): caught by test_distributed on
# a machine with two GPUs (kind two_devices).
SHARD_KERNELS = "include/tally/detail/kernels/shard_kernels.cuh"
DISTRIBUTED_DISPATCH = "include/tally/detail/dispatch/distributed_dispatch.cuh"
DISTRIBUTED = ["test_distributed"]
# The trees that end a short call (docs/decisions/0029-shorter-trees-at-the-end-of-a-call.md):
# test_building_blocks replays the block tree under an operator that reveals each combine's
# operand order; test_reduce_device folds 1 to 33 tile partials under such an operator.
BUILDING_BLOCKS = ["test_building_blocks"]
REDUCE_DEVICE = ["test_reduce_device"]
# The runtime's scratch pool (docs/decisions/0032-cached-scratch-lease.md): test_lifecycle frees
# blocks under threads that loop calls on their own streams, and checks that every block the pool
# allocated is one it still lists.
RUNTIME = "lib/runtime.cpp"
LIFECYCLE = ["test_lifecycle"]
# The column kernels of reduce_columns (docs/decisions/0033-column-kernels.md): test_matrix_device
# compares every column with tally::reduce over a copy of it, bit for bit, from 16 rows to tiles of
# two steps (the tall shapes run outside the sanitizer).
COLUMN_TILE = "include/tally/detail/tile/column_tile.cuh"
COLUMN_KERNELS = "include/tally/detail/kernels/column_kernels.cuh"
MATRIX = ["test_matrix_device"]
# The host backends of the segmented, by-key and matrix forms (the public headers' host paths):
# test_segmented_host checks each segment, run, row and column against its own tally::reduce
# on the host or an exact sum, with a nonzero init in the segments' and the integer rows' and
# columns' checks, a leading dimension wider than the row, and enough elements for the host's
# split over threads.
SEGMENTED_REDUCE = "include/tally/segmented_reduce.cuh"
REDUCE_BY_KEY = "include/tally/reduce_by_key.cuh"
MATRIX_REDUCE = "include/tally/matrix_reduce.cuh"
SEGMENTED_HOST = ["test_segmented_host"]
# The extrema's choice among equal values (the first minimum, the first or last maximum, as in
# Thrust and std::): shared by the host and the device, caught by test_extrema's host cases,
# whose inputs hold many ties.
EXTREMA = "include/tally/extrema.cuh"
EXTREMA_TESTS = ["test_extrema"]

MUTANTS = [
    # ---- host ----------------------------------------------------------------------------
    dict(id="H01", kind="host", file=HOST_BACKEND, tests=HOST_TESTS,
         defect="the last element of every partial tile is dropped",
         old="for (std::uint64_t i = chunk_first; i < std::min(end, chunk_first + vw); ++i) {",
         new="for (std::uint64_t i = chunk_first; i < std::min(end - 1, chunk_first + vw); ++i) {"),
    dict(id="H02", kind="host", file=HOST_BACKEND, tests=HOST_TESTS,
         defect="the fold of the tile partials skips the last partial",
         old="""  for (std::size_t k = 0; k < partials.size(); ++k) {
    lane_value<Acc> p{partials[k], true};
    combine(lanes[k % block_threads], p, op);""",
         new="""  for (std::size_t k = 0; k + 1 < partials.size(); ++k) {
    lane_value<Acc> p{partials[k], true};
    combine(lanes[k % block_threads], p, op);"""),
    dict(id="H03", kind="host", file=HOST_BACKEND, tests=HOST_TESTS,
         defect="each worker leaves its last tile unreduced",
         old="for (std::uint64_t tile = from; tile < to; ++tile) {",
         new="for (std::uint64_t tile = from; tile + 1 < to; ++tile) {"),
    dict(id="H04", kind="host", file=HOST_BACKEND, tests=HOST_TESTS,
         defect="init is applied twice",
         old="return static_cast<Acc>(op(init, total));",
         new="return static_cast<Acc>(op(init, static_cast<Acc>(op(init, total))));"),
    dict(id="H05", kind="host", file=HOST_BACKEND, tests=HOST_TESTS,
         defect="init is never applied",
         old="return static_cast<Acc>(op(init, total));",
         new="(void)init;\n  return total;"),
    dict(id="H06", kind="host", file=HOST_BACKEND, tests=HOST_TESTS,
         defect="an empty range returns the accumulator's zero instead of init",
         old="if (n == 0) return init;",
         new="if (n == 0) return Acc{};"),
    dict(id="H07", kind="host", file=HOST_BACKEND, tests=HOST_TESTS,
         defect="the warp tree combines neighbours first (another tree: other float bits)",
         old="""  for (int delta = warp_threads / 2; delta > 0; delta /= 2)
    for (int i = 0; i < delta; ++i) combine(lanes[i], lanes[i + delta], op);
  return lanes[0];""",
         new="""  for (int delta = 1; delta < warp_threads; delta *= 2)
    for (int i = 0; i + delta < warp_threads; i += 2 * delta) combine(lanes[i], lanes[i + delta], op);
  return lanes[0];"""),
    dict(id="H08", kind="host", file=HOST_BACKEND, tests=HOST_TESTS,
         defect="a full tile skips the second element of each lane's first chunk",
         old="        j = 1;\n",
         new="        j = 2;\n"),
    dict(id="H09", kind="host", file=HOST_BACKEND, tests=ORDERED_HOST_TESTS,
         defect="the ordered plan folds each lane's run right to left",
         old="lane.value = lane.valid ? static_cast<Acc>(op(lane.value, x)) : x;",
         new="lane.value = lane.valid ? static_cast<Acc>(op(x, lane.value)) : x;"),
    dict(id="H10", kind="host", file=HOST_BACKEND, tests=ORDERED_HOST_TESTS,
         defect="the ordered fold of the partials deals them round robin, out of order",
         old="combine(lanes[k / per_thread], p, op);",
         new="combine(lanes[k % block_threads], p, op);"),
    dict(id="H11", kind="host", file=HOST_BACKEND, tests=HOST_TESTS,
         defect="every worker but the first skips the first tile of its share",
         old="const std::uint64_t from = w * per_thread, to",
         new="const std::uint64_t from = w * per_thread + (w > 0), to"),
    dict(id="H12", kind="host", file=HOST_BACKEND, tests=HOST_TESTS,
         defect="a full tile is walked one element per chunk, whatever the vector width",
         old="""  const int vw = plan.vector_width;
  const std::uint64_t chunk_groups""",
         new="""  const int vw = 1;
  const std::uint64_t chunk_groups"""),
    dict(id="H13", kind="host", file=PLAN, tests=HOST_TESTS,
         defect="the plan rounds the steps per tile down, so more tiles than the scratch holds",
         old="std::uint64_t steps_per_tile = steps / max_tiles + (steps % max_tiles != 0);",
         new="std::uint64_t steps_per_tile = steps / max_tiles;"),
    dict(id="H14", kind="host", file=PLAN, tests=HOST_TESTS,
         defect="the plan's tile count rounds down: the last, partial tile is never reduced",
         old="plan.tiles = n / plan.tile_items + (n % plan.tile_items != 0);",
         new="plan.tiles = n / plan.tile_items + (n % plan.tile_items != 0 && n < plan.tile_items);"),
    dict(id="H15", kind="host", file=HOST_BACKEND, tests=HOST_TESTS,
         defect="an empty lane contributes the accumulator's zero instead of being skipped",
         old="""  if (!other.valid) return;
  into.value = into.valid ? static_cast<Acc>(op(into.value, other.value)) : other.value;""",
         new="""  const Acc other_value = other.valid ? other.value : Acc{};
  into.value = into.valid ? static_cast<Acc>(op(into.value, other_value)) : other_value;"""),
    # ---- device --------------------------------------------------------------------------
    dict(id="H16", kind="host", file=SEGMENTED_REDUCE, tests=SEGMENTED_HOST,
         defect="the host's split of segments over threads leaves each thread's last segment unwritten",
         old="        for (std::uint64_t s = from; s < to; ++s) one(s);",
         new="        for (std::uint64_t s = from; s + 1 < to; ++s) one(s);"),
    dict(id="H17", kind="host", file=SEGMENTED_REDUCE, tests=SEGMENTED_HOST,
         defect="each host segment starts from the accumulator's zero instead of init",
         old="        host::reduce(segment_first, begins[s + 1] - begins[s], init, op, 1u, plan_vector_width_v<It>);",
         new="        host::reduce(segment_first, begins[s + 1] - begins[s], T{}, op, 1u, plan_vector_width_v<It>);"),
    dict(id="H18", kind="host", file=REDUCE_BY_KEY, tests=SEGMENTED_HOST,
         defect="the host's reduce_by_key counts each run's first value twice",
         old="        host::reduce(values_first + (b + 1), length - 1, static_cast<value_t>(values_first[b]), op, 1u,",
         new="        host::reduce(values_first + b, length, static_cast<value_t>(values_first[b]), op, 1u,"),
    dict(id="H19", kind="host", file=MATRIX_REDUCE, tests=SEGMENTED_HOST,
         defect="the host's row sums step from row to row by the row's length, not the leading dimension",
         old="          host::reduce(first + static_cast<std::ptrdiff_t>(s * l), c, init, op, 1u, plan_vector_width_v<It>);",
         new="          host::reduce(first + static_cast<std::ptrdiff_t>(s * c), c, init, op, 1u, plan_vector_width_v<It>);"),
    dict(id="H20", kind="host", file=MATRIX_REDUCE, tests=SEGMENTED_HOST,
         defect="the host's column sums leave out each column's last row",
         old="      out[static_cast<std::ptrdiff_t>(j)] = host::reduce(view + static_cast<std::ptrdiff_t>(j * r), r, init, op, 1u,",
         new="      out[static_cast<std::ptrdiff_t>(j)] = host::reduce(view + static_cast<std::ptrdiff_t>(j * r), r - 1, init, op, 1u,"),
    dict(id="H21", kind="host", file=EXTREMA, tests=EXTREMA_TESTS,
         defect="of two equal candidates the extrema keep the later position, not the earlier",
         old="    const bool a_wins_tie = (a.index < b.index) != LastOfEquals;",
         new="    const bool a_wins_tie = (a.index > b.index) != LastOfEquals;"),
    dict(id="H22", kind="host", file=EXTREMA, tests=EXTREMA_TESTS,
         defect="a thread's own fold for a minimum takes a later equal element over the one it holds",
         old="      return comp(b.value, a.value) ? b : a;",
         new="      return comp(a.value, b.value) ? a : b;"),
    dict(id="D01", kind="device", file=COMMUTATIVE_TILE, tests=SPECIAL_VALUES,
         defect="a step reads one chunk too few",
         old="""  __device__ __forceinline__ void fetch(const Loader& load, std::uint64_t step_begin) {
#pragma unroll
    for (int u = 0; u < Loads; ++u) {""",
         new="""  __device__ __forceinline__ void fetch(const Loader& load, std::uint64_t step_begin) {
#pragma unroll
    for (int u = 0; u + 1 < Loads; ++u) {"""),
    dict(id="D02", kind="device", file=COMMUTATIVE_TILE, tests=SPECIAL_VALUES,
         defect="a partial step skips a chunk that ends exactly at the end of the input",
         old="    if (offset(u) + VW <= remaining) {",
         new="    if (offset(u) + VW < remaining) {"),
    dict(id="D03", kind="device", file=COMMUTATIVE_FOLD, tests=SPECIAL_VALUES,
         defect="block 0's fold skips the last tile partial",
         old="if (k < tiles && !warp_gave_up) {",
         new="if (k + 1 < tiles && !warp_gave_up) {"),
    dict(id="D04", kind="device", file=REDUCE_KERNELS, tests=SPECIAL_VALUES,
         defect="the single pass applies init twice",
         old="""      total = refold_unpublished<Acc, VW>(load, plan, op, codec, cells, sync);
    }
  }
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), handoff);""",
         new="""      total = refold_unpublished<Acc, VW>(load, plan, op, codec, cells, sync);
    }
  }
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, static_cast<Acc>(op(init, total))))), handoff);"""),
    dict(id="D05", kind="device", file=REDUCE_KERNELS, tests=SPECIAL_VALUES,
         defect="the tile pair never applies init",
         old="publish(out, static_cast<Out>(static_cast<Acc>(op(init, static_cast<Acc>(op(partials[0], partials[1]))))), handoff);",
         new="publish(out, static_cast<Out>(static_cast<Acc>(op(partials[0], partials[1]))), handoff);"),
    dict(id="D06", kind="device", file=REDUCE_KERNELS, tests=SPECIAL_VALUES,
         defect="the one-tile kernel never applies init",
         old="""    total = reduce_partial_tile_of_block<Acc, VW>(load, 0, n, op);
  }
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), handoff);""",
         new="""    total = reduce_partial_tile_of_block<Acc, VW>(load, 0, n, op);
  }
  if (threadIdx.x == 0) publish(out, static_cast<Out>(total), handoff);"""),
    dict(id="D07", kind="device", file=ORDERED_TILE, tests=ORDERED_DEVICE,
         defect="the ordered tile's checked fold swaps its operands",
         old="        acc = valid ? static_cast<Acc>(op(acc, x)) : x;",
         new="        acc = valid ? static_cast<Acc>(op(x, acc)) : x;"),
    dict(id="D08", kind="device", file=LOADS, tests=SPECIAL_VALUES,
         defect="the element loader of fancy and misaligned inputs reads one element late",
         old="""  __device__ __forceinline__ V element(std::uint64_t i) const {
    return static_cast<V>(first_[static_cast<difference_type>(i)]);""",
         new="""  __device__ __forceinline__ V element(std::uint64_t i) const {
    return static_cast<V>(first_[static_cast<difference_type>(i + 1)]);"""),
    dict(id="D10", kind="device", file=WARP, tests=SPECIAL_VALUES,
         defect="the warp tree takes an empty lane's value instead of skipping it",
         old="if (other_valid) value = valid ? static_cast<T>(op(value, other)) : other;",
         new="value = valid ? static_cast<T>(op(value, other)) : other;"),
    dict(id="D09", kind="device", file=LOADS, tests=SPECIAL_VALUES,
         defect="an aligned vector chunk is read 16 bytes late",
         old="const uint4 raw = read_16_bytes(data + first, streaming);",
         new="const uint4 raw = read_16_bytes(data + first + VW, streaming);"),
    dict(id="D11", kind="device", file=ORDERED_FOLD, tests=ORDERED_DEVICE,
         defect="block 0's ordered fold of the tile partials takes each partial's operands swapped",
         old="      acc = valid ? static_cast<Acc>(op(acc, value)) : value;",
         new="      acc = valid ? static_cast<Acc>(op(value, acc)) : value;"),
    dict(id="D12", kind="device", file=ATOMIC_KERNELS, tests=HUGE_RANGES,
         defect="the atomic strategies drop every unit's result but the first one's",
         old="""    while (stored.load(cuda::std::memory_order_acquire) == 0) {
    }
    atomic_combine(accumulator, value, op);""",
         new="""    while (stored.load(cuda::std::memory_order_acquire) == 0) {
    }"""),
    dict(id="D13", kind="device", file=REDUCE_KERNELS, tests=HUGE_RANGES,
         defect="the second launch of the two pass never applies init",
         old="""                                                 false, gave_up);
  if (threadIdx.x == 0) publish(out, static_cast<Out>(static_cast<Acc>(op(init, total))), handoff);""",
         new="""                                                 false, gave_up);
  if (threadIdx.x == 0) publish(out, static_cast<Out>(total), handoff);"""),
    dict(id="D14", kind="device", file=ATOMIC_KERNELS, tests=HUGE_RANGES,
         defect="a warp-atomic unit contributes its lane 0's own fold instead of the warp's",
         old="""    acc = tally::warp::reduce(acc, valid, op);
    if (threadIdx.x % warp_threads == 0) {""",
         new="""    if (threadIdx.x % warp_threads == 0) {"""),
    dict(id="D15", kind="device", file=SEGMENT_REPLAY, tests=MATRIX,
         defect="a lane replaying its column's lane tree combines each pair right operand first",
         old="if (valid[Depth]) stack[Depth - 1] = static_cast<Acc>(op(stack[Depth - 1], stack[Depth]));",
         new="if (valid[Depth]) stack[Depth - 1] = static_cast<Acc>(op(stack[Depth], stack[Depth - 1]));"),
    dict(id="D16", kind="device", file=SEGMENT_REPLAY, tests=MATRIX,
         defect="a lane replaying its column's lane tree takes the chunks in lane order, not bit-reversed",
         old="const unsigned lane = bits == 0 ? 0u : __brev(K) >> (32u - bits);",
         new="const unsigned lane = bits == 0 ? 0u : K;"),
    dict(id="D25", kind="device", file=BLOCK_COUNTS, tests=SEGMENTED + ["test_reduce_by_key_device"],
         defect="the block scan of counts (runs' starts, split segments' chains) leaves each lane's left neighbour out of its sum",
         old="    if (lane >= unsigned(delta)) inclusive += other;",
         new="    if (lane > unsigned(delta)) inclusive += other;"),
    dict(id="D26", kind="device", file=SEGMENTED_KERNELS, tests=SEGMENTED,
         defect="the long segments beyond the split ones are not reduced",
         old="  const auto whole = static_cast<std::uint32_t>(lists.long_segments() - split);",
         new="  const auto whole = static_cast<std::uint32_t>(0 * (lists.long_segments() - split));"),
    dict(id="D27", kind="device", file=SEGMENT_REPLAY, tests=SEGMENTED,
         defect="a warp replaying a one-tile segment reads a round's slots as chunk k / held of pass k % held",
         old="    const unsigned thread = (w0 + (unsigned(k) >> shift)) * warp_threads + lane;\n    return ((unsigned(k) & (held - 1)) * block_threads + thread) * unsigned(VW);",
         new="    const unsigned thread = (w0 + (unsigned(k) & (held - 1))) * warp_threads + lane;\n    return ((unsigned(k) >> shift) * block_threads + thread) * unsigned(VW);"),
    dict(id="D28", kind="device", file=SEGMENTED_KERNELS, tests=SEGMENTED,
         defect="the long segments' launch leaves the count of listed one-tile segments for the next call",
         old="    *lists.block_count = 0;\n    *lists.long_count = 0;",
         new="    *lists.long_count = 0;"),
    dict(id="D29", kind="device", file=SEGMENTED_KERNELS, tests=SEGMENTED,
         defect="the blocks reducing listed one-tile segments stride past one warp's worth of them",
         old="         k += warps) {\n      const unsigned int s = lists.ids[k];",
         new="         k += warps + 1) {\n      const unsigned int s = lists.ids[k];"),
    dict(id="D30", kind="device", file=SEGMENTED_KERNELS, tests=SEGMENTED,
         defect="a block's run of split segments' chains skips the first chain of each segment after its first",
         old="      q = start + end_chain;",
         new="      q = start + end_chain + 1;"),
    dict(id="D33", kind="device", file=SEGMENTED_KERNELS, tests=SEGMENTED,
         defect="few segments: a block whose run of chains ends inside a segment leaves the run's last chain uncomputed",
         old="const std::uint32_t end_chain = q_end - start >= chains ? chains : q_end - start;",
         new="const std::uint32_t end_chain = q_end - start >= chains ? chains : q_end - start - 1;"),
    dict(id="D34", kind="device", file=SEGMENTED_KERNELS, tests=SEGMENTED,
         defect="few segments: an empty segment gives the accumulator's zero instead of init",
         old="      if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = own_init;\n      continue;",
         new="      if (threadIdx.x == 0) out[static_cast<out_diff>(s)] = Acc{};\n      continue;"),
    dict(id="D32", kind="device", file=SEGMENTED_KERNELS, tests=SEGMENTED,
         defect="each packed lane group reduces the segment ranked after its own",
         old="source_of_rank, int(group_rank % warp_threads));",
         new="source_of_rank, int((group_rank + 1) % warp_threads));"),
    dict(id="D35", kind="device", file=SEGMENTED_KERNELS, tests=SEGMENTED,
         defect="every slice of the first segmented launch's grid takes the first slice's share of the groups",
         old="  const std::uint64_t slice_first = (blockIdx.x / slice_blocks) * slice_segments;",
         new="  const std::uint64_t slice_first = 0 * (blockIdx.x / slice_blocks) * slice_segments;"),
    dict(id="D36", kind="device", file=SEGMENTED_KERNELS, tests=SEGMENTED,
         defect="lane groups of one width rank every pass's groups as the first pass's",
         old="      group_rank = ranks_before + (lane >> widest_shift);",
         new="      group_rank = lane >> widest_shift;"),
    dict(id="D37", kind="device", file=SEGMENTED_KERNELS, tests=SEGMENTED,
         defect="a run of groups of tiny segments keeps its first group's bounds instead of the next group's",
         old="      mine = has ? fetch::extent(words) : segment_extent{};",
         new="      mine = has ? mine : segment_extent{};"),
    dict(id="D38", kind="device", file=SEGMENTED_KERNELS, tests=SEGMENTED,
         defect="a group with a wider segment leaves its segments of at most VW elements unreduced",
         old="    if (has && route_size <= unsigned(VW))\n      out[",
         new="    if (false)\n      out["),
    dict(id="D31", kind="device", file=COMMUTATIVE_FOLD, tests=REDUCE_DEVICE,
         defect="block 0's threads without an exact integer partial keep what they hold instead of the identity",
         old="    if (!valid) acc = lanes::redux_identity<Acc, Op>();",
         new="    if (!valid) acc = Acc{};"),
    dict(id="D17", kind="device", file=WARP, tests=BUILDING_BLOCKS,
         defect="the block tree's last stage, evaluated by one thread, combines each pair right operand first",
         old="    return static_cast<T>(op(left, right));",
         new="    return static_cast<T>(op(right, left));"),
    dict(id="D18", kind="device", file=WARP, tests=REDUCE_DEVICE,
         defect="warp 0's fold of a few tile partials also combines the first lane past the partials",
         old="      if (lane + delta < count) value = static_cast<T>(op(value, other));",
         new="      if (lane + delta <= count) value = static_cast<T>(op(value, other));"),
    dict(id="D23", kind="device", file=RUNTIME, tests=LIFECYCLE,
         defect="a long wait for a result queries the stream in the thread's own capture mode, breaking another thread's capture in global mode",
         old="""      relaxing_asked = true;
      if (stream_not_captured(stream)) relaxed.emplace();""",
         new="      relaxing_asked = true;"),
    dict(id="D19", kind="device", file=RUNTIME, tests=LIFECYCLE,
         defect="a thread's cached lease is trusted without checking the pool's generation",
         old="""    if (p.generation.load(std::memory_order_relaxed) != c.generation) return nullptr;
    scratch_entry* entry = c.entry.get();
    entry->leases.fetch_add(1);
    if (p.generation.load() != c.generation) {""",
         new="""    scratch_entry* entry = c.entry.get();
    entry->leases.fetch_add(1);
    if (false) {"""),
    dict(id="D20", kind="device", file=COLUMN_TILE, tests=MATRIX,
         defect="the block tree over a column's plan warps takes them in order, not in bit-reversed order",
         old="    const unsigned w = reverse_bits(m, 3);",
         new="    const unsigned w = m;"),
    # D22 (the subtree values at the tree's first leaves instead of their runs' first leaves) is
    # gone: it was an equivalent mutant. Packed at the left, the values meet in the same perfect
    # tree, with the same empty leaves skipped, as spread one a run: the same bits, which no test
    # can tell apart (it survived on an H200 at 43d0416). D24 takes the runs out of order instead.
    dict(id="D24", kind="device", file=COLUMN_TILE, tests=MATRIX,
         defect="a plan warp's tree takes its subtrees' values in bit-reversed order, not in run order",
         old="      if ((leaf & (subtree_leaves - 1)) == 0) value[j] = subtree(leaf >> subtree_shift, ok[j]);",
         new="      if ((leaf & (subtree_leaves - 1)) == 0) value[j] = subtree(reverse_bits(leaf >> subtree_shift, 5 - subtree_shift), ok[j]);"),
    dict(id="D21", kind="device", file=COLUMN_KERNELS, tests=MATRIX,
         defect="a column's chain of tile partials skips its second partial (plans of more than 256 tiles)",
         old="for (std::uint64_t i = t + block_threads; i < tiles; i += block_threads)",
         new="for (std::uint64_t i = t + 2 * block_threads; i < tiles; i += block_threads)"),
    # ---- two devices: the combine of tally::tally_nccl ------------------------------------
    dict(id="N01", kind="two_devices", file=SHARD_KERNELS, tests=DISTRIBUTED,
         defect="the fold of the ranks' slots skips the last slot",
         old="""    for (std::uint64_t k = threadIdx.x; k < count; k += block_threads) {
      if (slots[k].filled != 1) continue;""",
         new="""    for (std::uint64_t k = threadIdx.x; k + 1 < count; k += block_threads) {
      if (slots[k].filled != 1) continue;"""),
    dict(id="N02", kind="two_devices", file=SHARD_KERNELS, tests=DISTRIBUTED,
         defect="a rank leaves the other ranks' words after its own unzeroed",
         old="      if (w < keep_begin || w >= keep_end) words[w] = 0;",
         new="      if (w < keep_begin) words[w] = 0;"),
    dict(id="N03", kind="two_devices", file=SHARD_KERNELS, tests=DISTRIBUTED,
         defect="the fold no longer compares the ranks' call signatures",
         old="    if (header.signature[r] != header.my_signature) return",
         new="    if (false) return"),
    dict(id="N04", kind="two_devices", file=DISTRIBUTED_DISPATCH, tests=DISTRIBUTED,
         defect="a rank's tile partials go one slot too far",
         old="      layout.first_slot = n > 0 ? offset / global.tile_items : 0;",
         new="      layout.first_slot = n > 0 ? offset / global.tile_items + (offset > 0) : 0;"),
    dict(id="N05", kind="two_devices", file=SHARD_KERNELS, tests=DISTRIBUTED,
         defect="the fold after the collective applies init twice",
         old="  const Acc result = valid ? static_cast<Acc>(op(init, total)) : init;",
         new="  const Acc result = valid ? static_cast<Acc>(op(init, static_cast<Acc>(op(init, total)))) : init;"),
    dict(id="N06", kind="two_devices", file=SHARD_KERNELS, tests=DISTRIBUTED,
         defect="the ordered fold of the slots takes each slot's operands swapped",
         old="""    for (std::uint64_t k = from; k < to; ++k) {
      if (slots[k].filled != 1) continue;
      acc = valid ? static_cast<Acc>(op(acc, slots[k].value)) : slots[k].value;""",
         new="""    for (std::uint64_t k = from; k < to; ++k) {
      if (slots[k].filled != 1) continue;
      acc = valid ? static_cast<Acc>(op(slots[k].value, acc)) : slots[k].value;"""),
]
