#pragma once
// Device dispatch of reduce_by_key: the runs of equal keys are found on the device
// (kernels/key_run_kernels.cuh), then reduced as segments whose count only the device knows
// (segmented_dispatch.cuh), each run's first value its init; an exact sum's runs through the
// exact segment kernels (exact_segmented_dispatch.cuh). Five or six launches on the
// policy's stream, with no wait between them; one lease of scratch holds the head bits, the
// tiles' run numbers, the runs' starts and the segmented reduction's lists.

#include "tally/detail/dispatch/segmented_dispatch.cuh"
#include "tally/detail/kernels/key_run_kernels.cuh"

#include <cstdint>
#include <type_traits>
#include <utility>

namespace tally::detail {

// Runs' starts are 32-bit, and the end of the last run is among them.
inline constexpr std::uint64_t max_device_keys = 0xFFFFFFFEull;

// Launches the reduction of `n` (1 <= n <= max_device_keys) keys and values; the number of
// runs goes to *count_out (device memory) where it is not null, else to `handoff`.
template <class Acc, class KeysIt, class ValuesIt, class KeysOut, class ValuesOut, class KeyEqual, class Op,
          class Count, class Policy>
void device_reduce_by_key(KeysIt keys, ValuesIt values, std::uint64_t n, KeysOut keys_out, ValuesOut values_out,
                          KeyEqual key_equal, Op op, Count* count_out, host_handoff* handoff, const Policy& policy,
                          int device) {
  static_assert(sizeof(Acc) <= segmented_max_accumulator_bytes,
                "tally::reduce_by_key: the device backend takes values of at most 64 bytes");
  constexpr int vw = plan_vector_width_v<ValuesIt>;
  const std::uint64_t tiles = (n + run_tile_keys - 1) / run_tile_keys;
  const std::uint64_t words = (n + 31) / 32;
  // At most n runs; of their segments (each run's values after its first), at most
  // n / (warp_segment_max + 1) are longer than a warp reduces.
  const segment_count_source count{n, nullptr, n / (warp_segment_max<vw> + 1) + 1};
  const segmented_scratch_shape shape = commutative_segmented_shape<Acc, vw>(count, 0);
  const std::size_t runs_bytes = 64;
  const std::size_t tile_bytes = round_up_64(std::size_t(tiles) * sizeof(std::uint32_t));
  const std::size_t head_bytes = round_up_64(std::size_t(words) * sizeof(unsigned int));
  const std::size_t start_bytes = round_up_64(std::size_t(n + 1) * sizeof(std::uint32_t));
  // An exact sum's runs longer than its warps sum: at most n / (exact_warp_segment_max + 1).
  // Exact fields take one pass a field in the same scratch, sized for double's slots.
  constexpr bool exact_fields = declares_exact_fields<Op>::value;
  constexpr bool exact = is_exact_plus_v<Op> || exact_fields;
  using exact_t = exact_sum_type_t<Op, std::conditional_t<exact_fields, double, float>>;
  const exact_segmented_shape exact_shape =
      exact ? exact_segmented_shape_for<exact_t>(n / (exact_warp_segment_max + 1) + 1, 0) : exact_segmented_shape{};
  const std::size_t segmented_bytes = exact ? exact_shape.total() : is_commutative_v<Op> ? shape.total() : 0;
  scratch_lease lease(device, policy.stream(), runs_bytes + tile_bytes + head_bytes + start_bytes + segmented_bytes,
                      count_out == nullptr);
  unsigned char* at = static_cast<unsigned char*>(lease.scratch().partials);
  auto* runs = reinterpret_cast<unsigned long long*>(at);
  auto* tile_counts = reinterpret_cast<std::uint32_t*>(at + runs_bytes);
  auto* heads = reinterpret_cast<unsigned int*>(at + runs_bytes + tile_bytes);
  auto* starts = reinterpret_cast<std::uint32_t*>(at + runs_bytes + tile_bytes + head_bytes);
  unsigned char* segmented_at = at + runs_bytes + tile_bytes + head_bytes + start_bytes;

  const cudaStream_t stream = policy.stream();
  check_stream_of_device(stream, device);
  constexpr auto mark = &mark_run_heads_kernel<KeysIt, KeyEqual>;
  constexpr auto count_runs = &count_runs_kernel<Count>;
  constexpr auto write_starts = &write_run_starts_kernel<KeysIt, KeysOut>;
  const std::uint64_t mark_resident = resident_grid<mark>(policy, device);
  launch_kernel<mark>(unsigned(tiles < mark_resident ? tiles : mark_resident), block_threads, stream, device, keys, n,
                      key_equal, heads, tile_counts, tiles);
  launch_kernel<count_runs>(1, block_threads, stream, device, tile_counts, tiles, n, starts, runs, count_out, handoff);
  const std::uint64_t write_resident = resident_grid<write_starts>(policy, device);
  launch_kernel<write_starts>(unsigned(tiles < write_resident ? tiles : write_resident), block_threads, stream, device,
                              keys, n, static_cast<const unsigned int*>(heads),
                              static_cast<const std::uint32_t*>(tile_counts), tiles, starts, keys_out);

  const segment_count_source runs_count{count.segments, runs, count.id_room};
  if constexpr (is_exact_plus_v<Op>) {
    // The run's first value is its init, added exactly like the rest.
    const key_run_bounds<ValuesIt, exact_t> bounds{starts, values};
    launch_exact_segmented_in(lease.scratch(), segmented_at, exact_shape, values, bounds, n, runs, values_out,
                              exact_t(0), policy, device);
  } else if constexpr (exact_fields) {
    static_assert(std::is_pointer_v<ValuesOut> &&
                      std::is_same_v<std::remove_cv_t<std::remove_pointer_t<ValuesOut>>, Acc>,
                  "tally::reduce_by_key: exact sums of fields on the device write values_out as the values' type, "
                  "so it must be contiguous (a pointer, thrust::device_ptr or a device_vector iterator)");
    if constexpr (check_exact_fields<Op, Acc, Acc>() && std::is_pointer_v<ValuesOut>) {
      launch_exact_fields_by_key_in(lease.scratch(), segmented_at, exact_shape, values,
                                    static_cast<const std::uint32_t*>(starts), n, runs, values_out, policy, device,
                                    std::make_index_sequence<field_count_v<Acc>>{});
    }
  } else if constexpr (is_commutative_v<Op>) {
    const key_run_bounds<ValuesIt, Acc> bounds{starts, values};
    launch_commutative_segmented_in(lease.scratch(), segmented_at, shape, values, bounds, runs_count, values_out,
                                    Acc{}, op, policy, device);
  } else {
    const key_run_bounds<ValuesIt, Acc> bounds{starts, values};
    launch_ordered_segmented(values, bounds, runs_count, values_out, Acc{}, op, policy, device);
  }
  lease.launched();
}

}  // namespace tally::detail
