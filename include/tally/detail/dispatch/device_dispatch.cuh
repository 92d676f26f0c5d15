#pragma once
// Device dispatch: check the arguments, classify the input, make the plan, launch.

#include "tally/detail/exact_sum.cuh"
#include "tally/detail/dispatch/exact_dispatch.cuh"
#include "tally/detail/dispatch/launch.cuh"
#include "tally/detail/dispatch/prebuilt_sums.cuh"
#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/kernels/atomic_kernels.cuh"
#include "tally/detail/kernels/ordered_kernels.cuh"
#include "tally/detail/kernels/reduce_kernels.cuh"
#include "tally/detail/loads/iterators.cuh"
#include "tally/detail/loads/transform_views.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tuning.cuh"
#include "tally/error.cuh"
#include "tally/execution_policy.cuh"
#include "tally/operator_traits.cuh"

#include <cstdint>
#include <string>

namespace tally::detail {

// How many blocks of Kernel an SM of the device holds at once (at least 1).
struct resident_blocks_per_multiprocessor {
  template <auto Kernel>
  static int ask(int) {
    int blocks = 0;
    check_cuda_call(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Kernel, block_threads, 0),
                    "asking a kernel's occupancy");
    return blocks > 0 ? blocks : 1;
  }
};

// Every block of Kernel resident at once on this device (more would only queue), or the
// forced grid size. The result does not depend on it. The occupancy is asked once per
// kernel and device (asked_once, launch.cuh).
template <auto Kernel, class Policy>
std::uint64_t resident_grid(const Policy& policy, int device) {
  const std::uint64_t forced = policy.forced_grid_size();
  if (forced != 0) return forced;
  const int blocks = asked_once<resident_blocks_per_multiprocessor, Kernel>(device);
  return std::uint64_t(properties(device).multiprocessors) * std::uint64_t(blocks);
}

// The strategy a call runs: the forced one if it can run the call, else tally's choice.
// The fixed-order single pass is the default for every type: it measured at least as fast
// as the atomic strategies and is reproducible for every operator
// (docs/decisions/0018-atomic-strategies-opt-in.md).
template <class Acc, class Op, bool MayForceStrategy>
tally::strategy choose_strategy(const basic_device_policy<MayForceStrategy>& policy, const char* algorithm) {
  if constexpr (!MayForceStrategy) {
    return tally::strategy::single_pass;
  } else {
    const tally::strategy forced = policy.forced_strategy();
    if (forced == tally::strategy::block_atomic || forced == tally::strategy::warp_atomic) {
      if constexpr (!is_commutative_v<Op>) {
        throw_invalid_argument(algorithm,
                               "the atomic strategies combine results in arrival order, so they need a commutative "
                               "operator; if this one is, pass tally::commutative(op)");
      } else if constexpr (!fits_atomic_word_v<Acc>) {
        throw_invalid_argument(algorithm, "the atomic strategies need an accumulator (init's type) of 4 or 8 bytes");
      } else if (!policy.is_nondeterministic() && !is_exact_integer_op_v<Acc, Op>) {
        throw_invalid_argument(algorithm,
                               "an atomic strategy on this type and operator would make the result depend on the order "
                               "of the atomics; ask for it with tally::device.nondeterministic()");
      }
      return forced;
    }
    return forced == tally::strategy::two_pass ? forced : tally::strategy::single_pass;
  }
}

// Launches Kernel on the policy's stream with resident_grid's blocks, never more than
// the plan's tiles.
template <auto Kernel, class Policy, class... Args>
void launch_on_plan_grid(const reduction_plan& plan, const Policy& policy, int device, const Args&... args) {
  const std::uint64_t resident = resident_grid<Kernel>(policy, device);
  const std::uint64_t grid = resident < plan.tiles ? resident : plan.tiles;
  launch_kernel<Kernel>(unsigned(grid), block_threads, policy.stream(), device, args...);
}

// Launches the single pass with block 0's role (fold_block_role, kernels/reduce_kernels.cuh): it
// reduces no tile while the tiles are at most fold_block_gate per tile block, and the
// grid then has one block more than the tiles need. A forced grid size counts every block.
template <auto Kernel, class Policy, class... Args>
void launch_single_pass(const reduction_plan& plan, const Policy& policy, int device, const Args&... args) {
  const std::uint64_t resident = resident_grid<Kernel>(policy, device);
  std::uint64_t grid = resident < plan.tiles ? resident : plan.tiles;
  fold_block_role role = fold_block_role::reduces_first;
  if (resident >= 2 && plan.tiles >= 2 && plan.tiles <= fold_block_gate * (resident - 1)) {
    role = fold_block_role::folds_only;
    grid = (resident - 1 < plan.tiles ? resident - 1 : plan.tiles) + 1;
  }
  launch_kernel<Kernel>(unsigned(grid), block_threads, policy.stream(), device, args..., role);
}

// The one-tile kernel (single_tile_reduce_kernel): of Loads loads per thread where n is
// exactly block_threads * VW * Loads, trying Loads, 2 * Loads, ... below loads_per_step;
// otherwise of loads_per_step loads.
inline constexpr int single_tile_fewest_loads = tuning::single_tile_fewest_loads;
static_assert((loads_per_step & (loads_per_step - 1)) == 0 &&
                  (single_tile_fewest_loads & (single_tile_fewest_loads - 1)) == 0 &&
                  single_tile_fewest_loads <= loads_per_step,
              "one-tile kernels double their loads from single_tile_fewest_loads up to loads_per_step");

template <class Acc, int VW, int Loads, class Loader, class Op, class Out>
void launch_single_tile(const Loader& load, std::uint64_t n, Acc init, Op op, Out* out, host_handoff* handoff,
                        cudaStream_t stream, int device) {
  if constexpr (Loads < loads_per_step) {
    if (n != std::uint64_t(block_threads) * Loads * VW) {
      launch_single_tile<Acc, VW, 2 * Loads>(load, n, init, op, out, handoff, stream, device);
      return;
    }
  }
  launch_kernel<single_tile_reduce_kernel<Acc, VW, Loads, Loader, Op, Out>>(1, block_threads, stream, device, load, n,
                                                                           init, op, out, handoff);
}

// The commutative plan: the single pass, the two pass or an atomic strategy.
template <class Acc, int VW, bool Fallback, class Loader, class Op, class Out, bool MayForceStrategy>
void launch_commutative_reduce(const Loader& load, std::uint64_t n, Acc init, Op op, Out* out, host_handoff* handoff,
                               const basic_device_policy<MayForceStrategy>& policy, int device,
                               tally::strategy chosen) {
  const reduction_plan plan = make_plan(n, VW, plan_max_tiles_for<Op>);
  const bool atomic = chosen == tally::strategy::block_atomic || chosen == tally::strategy::warp_atomic;
  if (plan.tiles == 1 && !atomic) {  // one block, no partials: no scratch to look up either
    check_stream_of_device(policy.stream(), device);
    // A fallback's exact fills take the whole step's kernel too (docs/decisions/0006).
    constexpr int fewest = Fallback ? loads_per_step : single_tile_fewest_loads;
    launch_single_tile<Acc, VW, fewest>(load, n, init, op, out, handoff, policy.stream(), device);
    return;
  }
  // Two tiles: one block of a run of block_threads threads per tile (tile_pair_reduce_kernel),
  // the single pass's bits in one launch without partials in the scratch. A forced grid size
  // keeps the general kernel, which the determinism tests compare against it.
  if constexpr (tuning::tile_pair_kernel && !Fallback) {
    if (plan.tiles == 2 && !atomic && chosen != tally::strategy::two_pass && policy.forced_grid_size() == 0) {
      check_stream_of_device(policy.stream(), device);
      launch_kernel<tile_pair_reduce_kernel<Acc, VW, Loader, Op, Out>>(1, tile_pair_runs * block_threads,
                                                                       policy.stream(), device, load, plan, init, op,
                                                                       out, handoff);
      return;
    }
  }
  using codec_for = partial_codec_for<Acc, Loader>;
  using codec_t = typename codec_for::type;
  using cell_t = partial_cell<typename codec_t::partial_type>;
  // The lease holds the stream's scratch (and its lock) until every launch of the call is
  // enqueued: no other host thread's call on this stream comes between them.
  scratch_lease lease(device, policy.stream(), atomic ? 0 : plan.tiles * sizeof(cell_t), handoff != nullptr);
  const call_scratch& scratch = lease.scratch();
  const fold_sync sync{scratch.control, scratch.epoch, fold_poll_limit()};

  // The two-pass and atomic kernels are compiled only for a policy that may force them.
  if constexpr (MayForceStrategy && fits_atomic_word_v<Acc>) {
    if (atomic) {
      const atomic_control control{scratch.control};
      if (chosen == tally::strategy::block_atomic) {
        launch_on_plan_grid<atomic_reduce_kernel<Acc, VW, false, Loader, Op, Out>>(plan, policy, device, load, plan,
                                                                                   init, op, control, out, handoff);
      } else {
        // Fewer blocks than the resident grid: each warp combines into the same words, and the
        // more warps wait on each other, the slower a large input (tuning::warp_atomic_blocks_per_sm).
        constexpr auto kernel = atomic_reduce_kernel<Acc, VW, true, Loader, Op, Out>;
        const std::uint64_t resident = resident_grid<kernel>(policy, device);
        const std::uint64_t spread =
            std::uint64_t(properties(device).multiprocessors) * tuning::warp_atomic_blocks_per_sm;
        std::uint64_t grid = policy.forced_grid_size() != 0 || resident < spread ? resident : spread;
        if (grid > plan.tiles) grid = plan.tiles;
        launch_kernel<kernel>(unsigned(grid), block_threads, policy.stream(), device, load, plan, init, op, control,
                              out, handoff);
      }
      lease.launched();
      return;
    }
  }

  const codec_t codec = codec_for::make(load);
  auto* cells = static_cast<cell_t*>(scratch.partials);
  if constexpr (MayForceStrategy) {
    if (chosen == tally::strategy::two_pass) {
      launch_on_plan_grid<tile_partials_kernel<Acc, VW, Loader, Op, codec_t>>(plan, policy, device, load, plan, op, codec,
                                                                              cells, sync);
      launch_kernel<fold_partials_kernel<Acc, Op, Out, codec_t>>(1, block_threads, policy.stream(), device, plan.tiles,
                                                                 plan.tile_items, init, op, codec, cells, scratch.epoch,
                                                                 out, handoff);
      lease.launched();
      return;
    }
  }
  constexpr auto one_kernel = &single_pass_reduce_kernel<Acc, VW, Loader, Op, Out, codec_t>;
  if constexpr (has_two_block_variant<Loader>::value) {
    if (plan.tiles > resident_grid<one_kernel>(policy, device)) {
      launch_single_pass<single_pass_reduce_kernel<Acc, VW, Loader, Op, Out, codec_t, 2>>(
          plan, policy, device, load, plan, init, op, codec, cells, sync, out, handoff);
      lease.launched();
      return;
    }
  }
  launch_single_pass<one_kernel>(plan, policy, device, load, plan, init, op, codec, cells, sync, out, handoff);
  lease.launched();
}

// The order-preserving plan (kernels/ordered_kernels.cuh): the single pass or the two pass.
template <class Acc, int VW, class Loader, class Op, class Out, bool MayForceStrategy>
void launch_ordered_reduce(const Loader& load, std::uint64_t n, Acc init, Op op, Out* out, host_handoff* handoff,
                           const basic_device_policy<MayForceStrategy>& policy, int device, tally::strategy chosen) {
  const reduction_plan plan = make_plan(n, VW, plan_max_tiles_for<Op>);
  // One or two tiles: one block, no partials, no scratch (ordered_small_reduce_kernel). A
  // forced two pass or grid size keeps the general kernels for two tiles, which the
  // determinism tests compare against it.
  if (tuning::ordered_small_kernels && (plan.tiles == 1 || (plan.tiles == 2 && chosen != tally::strategy::two_pass &&
                                                       policy.forced_grid_size() == 0))) {
    check_stream_of_device(policy.stream(), device);
    const std::uint64_t pieces = (n + ordered_piece_items<VW> - 1) / ordered_piece_items<VW>;
    const std::uint64_t warps = pieces < block_threads / warp_threads ? pieces : block_threads / warp_threads;
    launch_kernel<ordered_small_reduce_kernel<Acc, VW, Loader, Op, Out>>(1, unsigned(warps * warp_threads),
                                                                         policy.stream(), device, load, n, init, op,
                                                                         out, handoff);
    return;
  }
  scratch_lease lease(device, policy.stream(), plan.tiles * sizeof(partial_cell<Acc>), handoff != nullptr);
  const call_scratch& scratch = lease.scratch();
  const fold_sync sync{scratch.control, scratch.epoch, fold_poll_limit()};
  auto* cells = static_cast<partial_cell<Acc>*>(scratch.partials);
  if constexpr (MayForceStrategy) {
    if (chosen == tally::strategy::two_pass && plan.tiles > 1) {
      launch_on_plan_grid<ordered_tile_partials_kernel<Acc, VW, Loader, Op>>(plan, policy, device, load, plan, op, cells,
                                                                             sync);
      launch_kernel<ordered_fold_partials_kernel<Acc, Op, Out>>(1, block_threads, policy.stream(), device, plan.tiles, init,
                                                                op, cells, scratch.epoch, out, handoff);
      lease.launched();
      return;
    }
  }
  launch_on_plan_grid<ordered_single_pass_kernel<Acc, VW, Loader, Op, Out>>(plan, policy, device, load, plan, init, op,
                                                                            cells, sync, out, handoff);
  lease.launched();
}

// Loaders with 16-byte reads carry the evict-first hint for large inputs (streams_reads).
template <class Loader, class = void>
struct takes_read_hint : std::false_type {};
template <class Loader>
struct takes_read_hint<Loader, std::void_t<decltype(Loader::bytes_per_element)>> : std::true_type {};

// Fallback: the loader is the element-wise one that a misaligned input falls back to, where an
// aligned input of the same call has a loader of its own. The fallback compiles the fewest
// kernels (the one-tile kernel of a whole step and the single pass): a call site pays for the
// small plans' special kernels once, for the aligned loader (docs/decisions/0006-one-tile-kernels.md).
template <class Acc, int VW, bool Fallback = false, class Loader, class Op, class Out, class Policy>
void launch_reduce(const Loader& given, std::uint64_t n, Acc init, Op op, Out* out, host_handoff* handoff,
                   const Policy& policy, int device, const char* algorithm) {
  static_assert(sizeof(Acc) <= max_accumulator_bytes, "tally: the accumulator type is too large (256 bytes at most)");
  Loader load = given;
  if constexpr (takes_read_hint<Loader>::value) {
    load.streaming = streams_reads(n * Loader::bytes_per_element, std::uint64_t(properties(device).l2_bytes));
  }
  const tally::strategy chosen = choose_strategy<Acc, Op>(policy, algorithm);
  if constexpr (is_commutative_v<Op>) {
    launch_commutative_reduce<Acc, VW, Fallback>(load, n, init, op, out, handoff, policy, device, chosen);
  } else {
    launch_ordered_reduce<Acc, VW>(load, n, init, op, out, handoff, policy, device, chosen);
  }
}

// Reduces [first, first + n) on the device into *out (device-writable memory), or when
// handoff is not null into its words for the host instead (runtime.cuh). n > 0. The kernels
// are instantiated here, in the caller's translation unit; device_reduce below runs the
// library's copy instead where it holds one (prebuilt_sums.cuh).
template <class Acc, class It, class Op, class Out, class Policy>
void device_reduce_instantiated(It first, std::uint64_t n, Acc init, Op op, Out* out, host_handoff* handoff,
                                const Policy& policy, int device, const char* algorithm) {
  using V = iterator_value_t<It>;
  constexpr int vw = plan_vector_width_v<It>;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if constexpr (is_contiguous_v<It>) {
    const auto* data = raw_pointer(first);
    check_device_accessible(data, properties(device), algorithm, "the input range");
    using elem = std::remove_cv_t<std::remove_pointer_t<decltype(data)>>;
    if constexpr (vw > 1 && sizeof(elem) * vw == 16) {
      if (aligned(data)) {
        launch_reduce<Acc, vw>(vector_loader<elem, vw>{data}, n, init, op, out, handoff, policy, device, algorithm);
        return;
      }
    } else if constexpr (sizeof(elem) * vw == wide_chunk_bytes) {  // float3 and kin
      if (aligned(data)) {
        using loader = wide_chunk_loader<same_value, elem, V, vw>;
        launch_reduce<Acc, vw>(loader{data, {}}, n, init, op, out, handoff, policy, device, algorithm);
        return;
      }
    }
    constexpr bool fallback = (vw > 1 && sizeof(elem) * vw == 16) || sizeof(elem) * vw == wide_chunk_bytes;
    launch_reduce<Acc, vw, fallback>(iterator_loader<const elem*, V, vw>{data}, n, init, op, out, handoff, policy,
                                     device, algorithm);
  } else {
    if constexpr (transform_view<It>::single && vw > 1) {
      const auto* data = raw_pointer(first.base());
      using elem = std::remove_cv_t<std::remove_pointer_t<decltype(data)>>;
      if (aligned(data)) {
        if constexpr (sizeof(elem) * vw == wide_chunk_bytes) {
          using loader = wide_chunk_loader<decltype(first.functor()), elem, V, vw>;
          launch_reduce<Acc, vw>(loader{data, first.functor()}, n, init, op, out, handoff, policy, device, algorithm);
        } else {
          using loader = transform_vector_loader<decltype(first.functor()), elem, V, vw>;
          launch_reduce<Acc, vw>(loader{data, first.functor()}, n, init, op, out, handoff, policy, device, algorithm);
        }
        return;
      }
    } else if constexpr (transform_view<It>::indexed && vw > 1) {
      const auto f = first.functor();
      const auto offset = static_cast<std::int64_t>(*first.base());
      using elem = indexed_base_element_t<decltype(f)>;
      // Candidates with 32-bit positions (tile/commutative_tile.cuh) need tiles of at most 2^32
      // elements: always so in memory that exists today (an order-free plan of 2^40 elements
      // would be needed); beyond that the element-wise path below is correct.
      if (aligned(f.first + offset) && local_positions_fit(make_plan(n, vw, plan_max_tiles_for<Op>))) {
        using loader = indexed_vector_loader<decltype(f), elem, V, vw>;
        launch_reduce<Acc, vw>(loader{f, offset}, n, init, op, out, handoff, policy, device, algorithm);
        return;
      }
    } else if constexpr (transform_view<It>::paired && vw > 1) {
      const auto& bases = first.base().get_iterator_tuple();
      const auto* a = raw_pointer(thrust::get<0>(bases));
      const auto* b = raw_pointer(thrust::get<1>(bases));
      using e1 = std::remove_cv_t<std::remove_pointer_t<decltype(a)>>;
      using e2 = std::remove_cv_t<std::remove_pointer_t<decltype(b)>>;
      if (aligned(a) && aligned(b)) {
        constexpr bool raw = tuning::transforms_at_fold && is_commutative_v<Op>;
        using loader = pair_vector_loader<decltype(first.functor().transform), e1, e2, V, vw, raw>;
        launch_reduce<Acc, vw>(loader{a, b, first.functor().transform}, n, init, op, out, handoff, policy, device,
                               algorithm);
        return;
      }
    } else if constexpr (zip_view<It>::is_zip) {
      // A zip hides its bases from the pointer checks: check each contiguous one here.
      const auto zip = zip_view<It>::zip(first);
      zip_view<It>::for_each_contiguous_base(zip, [&](const void* base) {
        check_device_accessible(base, properties(device), algorithm, "a zipped input range");
      });
      if constexpr (zip_view<It>::vector_width > 1) {
        static_assert(zip_view<It>::vector_width == vw, "the zip loader must follow the plan's vector width");
        const auto load = zip_view<It>::template loader<V, vw>(zip, zip_view<It>::functor(first));
        launch_reduce<Acc, vw>(load, n, init, op, out, handoff, policy, device, algorithm);
        return;
      }
    }
    constexpr bool fallback =
        vw > 1 && (transform_view<It>::single || transform_view<It>::indexed || transform_view<It>::paired);
    launch_reduce<Acc, vw, fallback>(iterator_loader<It, V, vw>{first}, n, init, op, out, handoff, policy, device,
                                     algorithm);
  }
}

// device_reduce_instantiated's contract. A sum the library compiled (prebuilt_sums.cuh) runs
// there, and this call site compiles no kernel for it; an exact sum (tally::exact_plus) runs
// the exact-sum kernels (exact_dispatch.cuh), which need no plan.
template <class Acc, class It, class Op, class Out, class Policy>
void device_reduce(It first, std::uint64_t n, Acc init, Op op, Out* out, host_handoff* handoff,
                   const Policy& policy, int device, const char* algorithm) {
  if constexpr (is_exact_plus_v<Op>) {
    static_assert(std::is_same_v<Op, exact_plus<Acc>>, "tally::exact_plus<T>: init must be a T");
    // Under tally::nccl the call is one rank's shard, whose exact sum alone is not the answer:
    // distributed.cuh sends exact sums to distributed_exact_sum before they could come here.
    static_assert(std::is_same_v<Policy, device_policy> || std::is_same_v<Policy, strategy_forcing_policy>,
                  "tally::exact_plus: a rank's shard reached the one-GPU exact sum; exact sums under tally::nccl "
                  "go through distributed_exact_sum");
    exact_device_reduce(first, n, init, out, handoff, policy, device, algorithm);
  } else if constexpr (declares_exact_fields<Op>::value) {
    static_assert(std::is_same_v<Policy, device_policy> || std::is_same_v<Policy, strategy_forcing_policy>,
                  "tally::fields of tally::exact_plus: exact sums of fields over several GPUs are not built yet "
                  "(issue 37); sum each field with tally::exact_plus");
    static_assert(std::is_same_v<Out, Acc>, "tally::fields of tally::exact_plus: the result is written as init's type");
    if constexpr (check_exact_fields<Op, Acc, iterator_value_t<It>>()) {
      constexpr auto fields = std::make_index_sequence<field_count_v<Acc>>{};
      if (handoff != nullptr) {
        // tally::reduce takes this path (reduce.cuh): one result slot a field.
        throw_invalid_argument(algorithm, "exact sums of fields hand their result to the host only through tally::reduce");
      }
      exact_fields_device_into(first, n, init, out, policy, device, algorithm, fields);
    }
  } else if constexpr (is_contiguous_v<It>) {
    using elem = std::remove_cv_t<std::remove_pointer_t<decltype(raw_pointer(first))>>;
    if constexpr (runs_prebuilt_sum_v<elem, Acc, Op, Out, Policy>) {
      run_prebuilt_sum(raw_pointer(first), n, init, out, handoff, policy, device, algorithm);
    } else {
      device_reduce_instantiated(first, n, init, op, out, handoff, policy, device, algorithm);
    }
  } else {
    device_reduce_instantiated(first, n, init, op, out, handoff, policy, device, algorithm);
  }
}

}  // namespace tally::detail
