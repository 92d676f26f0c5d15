#pragma once
// The device's exact sums per segment (tally::exact_plus through segmented_reduce, the matrix
// axes and reduce_by_key; docs/exact.md). Each segment's result is the real-number sum of its
// init and its elements, rounded once, so it cannot depend on which route below took it.
//
// Every thread owns a fixed-point integer of exact_format<T>::digits base-2^32 digits in shared
// memory (exact_sum.cuh), contiguous, at an odd stride of 64-bit words so that a warp's threads
// reach 32 different bank pairs whatever digit each touches. A thread adds a term in two pieces
// (exact_add_two_pieces), balances the digits it touched every exact_digit_round additions, and
// leaves its digits zero when it has handed them on. Two launches, since only the device reads
// the segments' sizes:
//   exact_segments_kernel       a warp takes up to 32 segments at a time, one a lane. A lane sums
//                               a segment of at most exact_lane_segment_max elements alone (one
//                               element and init: their IEEE sum, which is the exact one); the
//                               warp sums one of at most exact_warp_segment_max together, one
//                               after another; longer ones are listed for the next launch.
//   exact_long_segments_kernel  the first exact_split_max listed segments are cut into pieces
//                               of exact_piece_elements that the grid shares out; a block adds
//                               its pieces' digits into the segment's slot in the scratch with
//                               integer atomics, and the block that adds its last piece rounds.
//                               Listed segments beyond those take a block each.

#include "tally/detail/exact_sum.cuh"
#include "tally/detail/kernels/exact_kernels.cuh"
#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/scratch_layout.cuh"
#include "tally/detail/segment_bounds.cuh"

#include <cuda/atomic>

#include <cstdint>
#include <iterator>
#include <type_traits>

namespace tally::detail {

// Threads per block of both launches: a float thread's digits take 96 bytes, a double's 552.
template <class T>
inline constexpr unsigned exact_segment_threads = sizeof(T) == 4 ? 128u : 64u;
// 64-bit words between two threads' digits: odd, so that 16 threads (one shared-memory
// transaction of 8-byte words) touch 16 different bank pairs.
template <class T>
inline constexpr unsigned exact_thread_words = unsigned(exact_format<T>::digits) | 1u;

inline constexpr std::uint64_t exact_lane_segment_max = 64;
inline constexpr std::uint64_t exact_warp_segment_max = 4096;
// Elements of a piece of a split segment: 64 a thread of the block, so that a single segment
// of a few million elements still has a piece for every block the device holds.
template <class T>
inline constexpr std::uint64_t exact_piece_elements = std::uint64_t(exact_segment_threads<T>) * 64;
// Listed segments split into pieces, at most: their slots and the pieces' running count (shared
// memory of the second launch) grow with it.
inline constexpr std::uint64_t exact_split_max = 1024;
// A slot: the segment's digits, then a word of its special values' flags (exact_flag), then a
// word counting its pieces done.
template <class T>
inline constexpr std::size_t exact_slot_words = std::size_t(exact_format<T>::digits) + 2;

// Where the first launch lists the long segments and the second finds them.
struct exact_segment_lists {
  unsigned int* ids = nullptr;             // room for id_room ids, in the order they were listed
  unsigned long long* count = nullptr;     // listed so far (a control-block word; the second launch leaves it 0)
  unsigned int* tickets = nullptr;         // blocks of the second launch done (a control-block word; left 0)
  unsigned long long* slots = nullptr;     // exact_split_max slots
  std::uint64_t id_room = 0;
  std::uint64_t segments = 0;  // S, or where the device counts them, at most S
  const unsigned long long* segments_on_device = nullptr;
  // Segments a warp takes at a time (a power of two, at most 32): fewer where the segments are
  // few for the grid, so that every warp has some (exact_segment_group_for).
  unsigned group = 32;
};

// The largest power of two up to 32 that gives each of `warps` warps two groups of segments.
__host__ __device__ inline unsigned exact_segment_group_for(std::uint64_t segments, std::uint64_t warps) {
  unsigned group = 32;
  while (group > 1 && segments < warps * group * 2) group /= 2;
  return group;
}

// The exact sum of two terms is their IEEE sum, rounded once to nearest even, whatever the
// -ftz mode the program is built with (add.rn without .ftz keeps subnormals); a NaN as the
// exact sums give it (exact_sum.cuh).
__device__ __forceinline__ float exact_sum_of_two(float a, float b) {
  float r;
  asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r != r ? __uint_as_float(0x7FC00000u) : r;
}
__device__ __forceinline__ double exact_sum_of_two(double a, double b) {
  double r;
  asm("add.rn.f64 %0, %1, %2;" : "=d"(r) : "d"(a), "d"(b));
  return r != r ? __longlong_as_double(0x7FF8000000000000ll) : r;
}

// A thread's running sum: its special values' flags and the digits it touched, [lowest, highest].
template <class T>
struct exact_thread_sum {
  std::int64_t* digits;
  unsigned flags = 0;
  unsigned lowest = unsigned(exact_format<T>::digits);
  unsigned highest = 0;
  unsigned since_balance = 0;

  __device__ void add(T x) {
    exact_add_two_pieces<T>(x, digits, 1, flags, lowest, highest);
    if (++since_balance == exact_digit_round) balance();
  }
  // Each touched digit back to [-2^31, 2^31), so that up to 2^31 threads' digits add without overflow.
  __device__ void balance() {
    if (lowest < highest) balance_touched_digits(digits, exact_format<T>::digits, 1, lowest, highest);
    since_balance = 0;
  }
  // Adds [first + begin + from, first + begin + size) with a step, eight loads ahead. A group of
  // threads (step >= 4) reads a segment of a pointer to T in 16-byte vectors where it can.
  template <class It>
  __device__ void add_range(It first, std::uint64_t begin, std::uint64_t size, std::uint64_t from, std::uint64_t step) {
    using diff = typename std::iterator_traits<It>::difference_type;
    constexpr bool reads_vectors = std::is_pointer_v<It> && std::is_same_v<std::remove_cv_t<std::remove_pointer_t<It>>, T>;
    if constexpr (reads_vectors) {
      constexpr unsigned per_vector = 16 / sizeof(T);
      if (step >= per_vector) {
        using vector_t = std::conditional_t<sizeof(T) == 4, float4, double2>;
        const T* p = first + begin;
        const std::uint64_t misalignment = (reinterpret_cast<std::uintptr_t>(p) % 16) / sizeof(T);
        const std::uint64_t unaligned = misalignment == 0 ? 0 : per_vector - misalignment;
        const std::uint64_t head = unaligned < size ? unaligned : size;
        const std::uint64_t vectors = (size - head) / per_vector;
        const std::uint64_t rest = head + vectors * per_vector;
        if (from < head) add(p[from]);
        if (rest + from < size) add(p[rest + from]);  // fewer than per_vector <= step left
        const vector_t* v = reinterpret_cast<const vector_t*>(p + head);
        constexpr unsigned ahead = 4;
        for (std::uint64_t k = from; k < vectors; k += ahead * step) {
          vector_t loaded[ahead];
#pragma unroll
          for (unsigned u = 0; u < ahead; ++u) {
            const std::uint64_t at = k + u * step;
            if (at < vectors) loaded[u] = v[at];
          }
#pragma unroll
          for (unsigned u = 0; u < ahead; ++u) {
            if (k + u * step < vectors) {
              T elements[per_vector];
              memcpy(elements, &loaded[u], sizeof(vector_t));
#pragma unroll
              for (unsigned e = 0; e < per_vector; ++e) add(elements[e]);
            }
          }
        }
        return;
      }
    }
    constexpr unsigned ahead = 8;
    for (std::uint64_t k = from; k < size; k += ahead * step) {
      T loaded[ahead];
#pragma unroll
      for (unsigned u = 0; u < ahead; ++u) {
        const std::uint64_t at = k + u * step;
        loaded[u] = at < size ? static_cast<T>(first[static_cast<diff>(begin + at)]) : T(0);
      }
#pragma unroll
      for (unsigned u = 0; u < ahead; ++u)
        if (k + u * step < size) add(loaded[u]);
    }
  }
  // Rounds digits (this thread's own, or a total it holds) with init added, and leaves the
  // window it used zero. [lowest, highest] must bound the nonzero digits.
  __device__ T round_with(T init, unsigned all_flags) {
    exact_add_two_pieces<T>(init, digits, 1, all_flags, lowest, highest);
    constexpr int count = exact_format<T>::digits;
    const int from = lowest < highest ? int(lowest) : 0;
    const int end = lowest < highest ? (int(highest) + 3 < count ? int(highest) + 3 : count) : 0;
    exact_specials specials;
    specials.nan = (all_flags & exact_nan) != 0;
    specials.plus_infinity = (all_flags & exact_plus_infinity) != 0;
    specials.minus_infinity = (all_flags & exact_minus_infinity) != 0;
    specials.only_negative_zeros = (all_flags & exact_nonzero_sign) == 0;
    const T result = round_exact_sum<T>(digits, specials, from, end);
    for (int k = from; k < end; ++k) digits[k] = 0;
    reset();
    return result;
  }
  __device__ void reset() {
    flags = 0;
    lowest = unsigned(exact_format<T>::digits);
    highest = 0;
    since_balance = 0;
  }
};

// The warp's values combined (min, max, or), in every lane: a butterfly of shuffles.
template <class Combine>
__device__ __forceinline__ unsigned warp_combined(unsigned v, Combine combine) {
  for (int delta = 16; delta > 0; delta /= 2) v = combine(v, __shfl_xor_sync(0xFFFFFFFFu, v, delta));
  return v;
}

// Sums the warp's digits into lane 0's (every other lane's left zero) and the flags into every
// lane's; lane 0's window then bounds the total.
template <class T>
__device__ __forceinline__ void gather_warp_digits(exact_thread_sum<T>& mine) {
  mine.balance();
  const unsigned lowest = warp_combined(mine.lowest, [](unsigned a, unsigned b) { return a < b ? a : b; });
  const unsigned highest = warp_combined(mine.highest, [](unsigned a, unsigned b) { return a > b ? a : b; });
  mine.flags = warp_combined(mine.flags, [](unsigned a, unsigned b) { return a | b; });
  const unsigned lane = threadIdx.x % 32;
  for (unsigned k = lowest; k <= highest && k < unsigned(exact_format<T>::digits); ++k) {
    std::int64_t digit = mine.digits[k];
    if (lane != 0) mine.digits[k] = 0;
    digit = warp_sum_int64(digit);  // 32 balanced digits: below 2^36
    if (lane == 0) mine.digits[k] = digit;
  }
  if (lane == 0) {
    mine.lowest = lowest;
    mine.highest = highest;
  } else {
    mine.reset();
  }
}

// Sums the block's digits into `total` (zero before, count digits) with shared atomics, leaving
// every thread's zero; the block's flags and window into *flags, *lowest, *highest (shared,
// set to 0, count and 0 before). Every thread of the block calls it.
template <class T>
__device__ __forceinline__ void gather_block_digits(exact_thread_sum<T>& mine, std::int64_t* total, unsigned* flags,
                                                    unsigned* lowest, unsigned* highest) {
  gather_warp_digits(mine);
  if (threadIdx.x % 32 == 0) {
    if (mine.lowest < mine.highest) {
      atomicMin(lowest, mine.lowest);
      atomicMax(highest, mine.highest);
      for (unsigned k = mine.lowest; k <= mine.highest && k < unsigned(exact_format<T>::digits); ++k) {
        if (mine.digits[k] != 0)
          atomicAdd(reinterpret_cast<unsigned long long*>(total + k), static_cast<unsigned long long>(mine.digits[k]));
        mine.digits[k] = 0;
      }
    }
    atomicOr(flags, mine.flags);
    mine.reset();
  }
  __syncthreads();
}

template <class OutIt, class T>
__device__ __forceinline__ void write_segment(OutIt out, std::uint64_t s, T value) {
  out[static_cast<typename std::iterator_traits<OutIt>::difference_type>(s)] = value;
}

template <class T>
struct exact_segment_shared {
  std::int64_t digits[exact_segment_threads<T> * exact_thread_words<T>];
};

template <class T>
__device__ __forceinline__ std::int64_t* zeroed_thread_digits(exact_segment_shared<T>& shared) {
  std::int64_t* mine = shared.digits + threadIdx.x * exact_thread_words<T>;
  for (unsigned k = 0; k < exact_thread_words<T>; ++k) mine[k] = 0;
  return mine;
}

template <class T, class It, class Bounds, class OutIt>
__global__ void __launch_bounds__(exact_segment_threads<T>)
    exact_segments_kernel(It first, Bounds bounds, T init, OutIt out, exact_segment_lists lists) {
  wait_for_prior_grid();
  constexpr unsigned threads = exact_segment_threads<T>;
  constexpr unsigned full = 0xFFFFFFFFu;
  __shared__ exact_segment_shared<T> shared;
  exact_thread_sum<T> mine{zeroed_thread_digits(shared)};
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t warps = std::uint64_t(gridDim.x) * (threads / 32);
  std::uint64_t segments = lists.segments;
  unsigned group = lists.group;
  if constexpr (counted_on_device_v<Bounds>) {
    segments = *lists.segments_on_device;
    group = exact_segment_group_for(segments, warps);
  }
  const std::uint64_t groups = (segments + group - 1) / group;
  for (std::uint64_t g = blockIdx.x * (threads / 32) + threadIdx.x / 32; g < groups; g += warps) {
    const std::uint64_t first_segment = g * group;
    const std::uint64_t s = first_segment + lane;
    const bool has = lane < group && s < segments;
    segment_extent extent{};
    T segment_init = init;
    if (has) {
      extent = bounds(s);
      segment_init = static_cast<T>(init_for(bounds, s, init));
    }
    if (has && extent.size <= 1) {
      using diff = typename std::iterator_traits<It>::difference_type;
      const T x = extent.size == 1 ? static_cast<T>(first[static_cast<diff>(extent.begin)]) : -T(0);
      write_segment(out, s, exact_sum_of_two(segment_init, x));
    } else if (has && extent.size <= exact_lane_segment_max) {
      mine.add_range(first, extent.begin, extent.size, 0, 1);
      write_segment(out, s, mine.round_with(segment_init, mine.flags));
    }
    const bool is_long = has && extent.size > exact_warp_segment_max;
    const unsigned long_lanes = __ballot_sync(full, is_long);
    if (long_lanes != 0) {
      unsigned long long base = 0;
      if (lane == 0) base = atomicAdd(lists.count, static_cast<unsigned long long>(__popc(long_lanes)));
      base = __shfl_sync(full, base, 0);
      if (is_long) {
        const std::uint64_t m = base + __popc(long_lanes & ((1u << lane) - 1u));
        lists.ids[m] = static_cast<unsigned int>(s);
        // The slot starts zero: the second launch adds into it.
        if (m < exact_split_max)
          for (std::size_t w = 0; w < exact_slot_words<T>; ++w) lists.slots[m * exact_slot_words<T> + w] = 0;
      }
    }
    unsigned warp_lanes = __ballot_sync(full, has && extent.size > exact_lane_segment_max && !is_long);
    while (warp_lanes != 0) {
      const int source = __ffs(warp_lanes) - 1;
      warp_lanes &= warp_lanes - 1;
      const std::uint64_t begin = __shfl_sync(full, extent.begin, source);
      const std::uint64_t size = __shfl_sync(full, extent.size, source);
      const T its_init = __shfl_sync(full, segment_init, source);
      mine.add_range(first, begin, size, lane, 32);
      gather_warp_digits(mine);
      if (lane == 0) write_segment(out, first_segment + unsigned(source), mine.round_with(its_init, mine.flags));
      __syncwarp();
    }
  }
}

// The second launch. Units: the pieces of the split segments (numbered segment after segment),
// then the other listed segments, a block each.
template <class T, class It, class Bounds, class OutIt>
__global__ void __launch_bounds__(exact_segment_threads<T>)
    exact_long_segments_kernel(It first, Bounds bounds, T init, OutIt out, exact_segment_lists lists) {
  wait_for_prior_grid();
  constexpr unsigned threads = exact_segment_threads<T>;
  constexpr int count = exact_format<T>::digits;
  constexpr std::uint64_t piece = exact_piece_elements<T>;
  __shared__ exact_segment_shared<T> shared;
  __shared__ std::uint64_t pieces_end[exact_split_max];  // split segment j's pieces end at pieces_end[j]
  __shared__ std::uint64_t thread_pieces[threads];
  __shared__ std::int64_t total[count];
  __shared__ unsigned total_flags, total_lowest, total_highest;
  __shared__ bool rounds_it;
  exact_thread_sum<T> mine{zeroed_thread_digits(shared)};
  for (unsigned k = threadIdx.x; k < unsigned(count); k += threads) total[k] = 0;
  if (threadIdx.x == 0) {
    total_flags = 0;
    total_lowest = unsigned(count);
    total_highest = 0;
  }
  const std::uint64_t listed = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(*lists.count)
                                   .load(cuda::std::memory_order_relaxed);
  const std::uint64_t split = listed < exact_split_max ? listed : exact_split_max;
  // Each thread counts the pieces of a run of the split segments; thread 0 adds the runs up.
  const std::uint64_t per_thread = (split + threads - 1) / threads;
  const std::uint64_t run_from = threadIdx.x * per_thread;
  const std::uint64_t run_to = run_from + per_thread < split ? run_from + per_thread : split;
  std::uint64_t run_pieces = 0;
  for (std::uint64_t j = run_from; j < run_to; ++j) {
    run_pieces += (bounds(lists.ids[j]).size + piece - 1) / piece;
    pieces_end[j] = run_pieces;
  }
  thread_pieces[threadIdx.x] = run_pieces;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint64_t before = 0;
    for (unsigned t = 0; t < threads; ++t) {
      const std::uint64_t own = thread_pieces[t];
      thread_pieces[t] = before;
      before += own;
    }
  }
  __syncthreads();
  for (std::uint64_t j = run_from; j < run_to; ++j) pieces_end[j] += thread_pieces[threadIdx.x];
  __syncthreads();
  const std::uint64_t all_pieces = split == 0 ? 0 : pieces_end[split - 1];
  const std::uint64_t units = all_pieces + (listed - split);

  // Rounds the block's total with init into out[s], leaving the total zero.
  const auto round_total = [&](std::uint64_t s) {
    if (threadIdx.x == 0) {
      exact_thread_sum<T> held{total};
      held.flags = total_flags;
      held.lowest = total_lowest;
      held.highest = total_highest;
      write_segment(out, s, held.round_with(static_cast<T>(init_for(bounds, s, init)), held.flags));
      for (int k = 0; k < count; ++k) total[k] = 0;
      total_flags = 0;
      total_lowest = unsigned(count);
      total_highest = 0;
    }
    __syncthreads();
  };
  // Adds the block's digits for split segment j (`done` pieces of it) to its slot; the block that
  // adds its last piece rounds it.
  const auto hand_on = [&](std::uint64_t j, std::uint64_t done) {
    gather_block_digits(mine, total, &total_flags, &total_lowest, &total_highest);
    unsigned long long* slot = lists.slots + j * exact_slot_words<T>;
    for (unsigned k = total_lowest + threadIdx.x; k <= total_highest && k < unsigned(count); k += threads) {
      if (total[k] != 0) atomicAdd(slot + k, static_cast<unsigned long long>(total[k]));
      total[k] = 0;
    }
    const std::uint64_t pieces = pieces_end[j] - (j == 0 ? 0 : pieces_end[j - 1]);
    __syncthreads();
    if (threadIdx.x == 0) {
      if (total_flags != 0) atomicOr(reinterpret_cast<unsigned*>(slot + count), total_flags);
      // Release: the block's additions (before this thread's by the barrier) are visible to the
      // block that adds the last piece, which acquires.
      const unsigned long long before = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(slot[count + 1])
                                            .fetch_add(done, cuda::std::memory_order_acq_rel);
      rounds_it = before + done == pieces;
      total_flags = 0;
      total_lowest = unsigned(count);
      total_highest = 0;
    }
    __syncthreads();
    if (!rounds_it) return;
    if (threadIdx.x == 0)
      total_flags = cuda::atomic_ref<unsigned, cuda::thread_scope_device>(*reinterpret_cast<unsigned*>(slot + count))
                        .load(cuda::std::memory_order_relaxed);
    __syncthreads();
    for (unsigned k = threadIdx.x; k < unsigned(count); k += threads) {
      total[k] = static_cast<std::int64_t>(
          cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(slot[k]).load(cuda::std::memory_order_relaxed));
      if (total[k] != 0) {
        atomicMin(&total_lowest, k);
        atomicMax(&total_highest, k);
      }
    }
    __syncthreads();
    round_total(lists.ids[j]);
  };

  std::uint64_t held = ~std::uint64_t(0), held_pieces = 0, j = 0;
  for (std::uint64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    if (unit < all_pieces) {
      while (pieces_end[j] <= unit) ++j;
      if (held != j && held_pieces != 0) hand_on(held, held_pieces), held_pieces = 0;
      held = j;
      const std::uint64_t p = unit - (j == 0 ? 0 : pieces_end[j - 1]);
      const segment_extent extent = bounds(lists.ids[j]);
      const std::uint64_t from = p * piece, size = extent.size - from < piece ? extent.size - from : piece;
      mine.add_range(first, extent.begin + from, size, threadIdx.x, threads);
      ++held_pieces;
    } else {
      if (held_pieces != 0) hand_on(held, held_pieces), held_pieces = 0;
      const std::uint64_t s = lists.ids[split + (unit - all_pieces)];
      const segment_extent extent = bounds(s);
      mine.add_range(first, extent.begin, extent.size, threadIdx.x, threads);
      gather_block_digits(mine, total, &total_flags, &total_lowest, &total_highest);
      round_total(s);
    }
  }
  if (held_pieces != 0) hand_on(held, held_pieces);
  // The last block leaves the list's count and its own tickets zero for the next call.
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned done = cuda::atomic_ref<unsigned, cuda::thread_scope_device>(*lists.tickets)
                              .fetch_add(1u, cuda::std::memory_order_acq_rel);
    if (done == gridDim.x - 1) {
      *lists.count = 0;
      *lists.tickets = 0;
    }
  }
}

}  // namespace tally::detail
