#pragma once
// The kernels of a reduction over shards on several GPUs (<tally/distributed.cuh>,
// dispatch/distributed_dispatch.cuh). Each rank writes what it contributes into a buffer of
// 32-bit words laid out the same on every rank and zero wherever the rank contributes
// nothing; NCCL sums the buffers (an integer sum of words of which at most one is nonzero is
// a copy, exact and in any order), and every rank then folds the same slots with the plan's
// fold. So no rank's answer depends on how NCCL combined the buffers.
//
//   the buffer   slots[slot_count] of shard_slot<Acc>, then the header: signature[ranks]
//                and fault[ranks], one word each per rank
//   a slot       one tile partial of the global plan (shards on the plan's tile
//                boundaries), or one rank's whole shard (without .shard()); `filled` counts
//                the ranks that wrote it, so a slot written twice or never is seen

#include "tally/block/reduce.cuh"
#include "tally/detail/kernels/grid_dependency.cuh"
#include "tally/detail/kernels/publish_result.cuh"
#include "tally/detail/plan.cuh"
#include "tally/detail/tile/commutative_fold.cuh"
#include "tally/detail/tile/commutative_tile.cuh"
#include "tally/detail/tile/ordered_tile.cuh"
#include "tally/detail/tuning.cuh"
#include "tally/warp/reduce.cuh"

#include <cstdint>

namespace tally::detail {

template <class Acc>
struct alignas(alignof(Acc) < 4 ? 4 : alignof(Acc)) shard_slot {
  Acc value;
  unsigned int filled;  // ranks that wrote this slot: 1, or 0 where none did
};

// Why a rank contributed nothing (its fault word; 0: none). Every rank reads every rank's
// word after the sum, so all of them report the same fault.
enum class shard_fault : unsigned int {
  none = 0,
  off_tile_boundary = 1,  // the shard does not begin (or end) on a tile boundary of the global plan
  past_global_end = 2,    // offset + n exceeds the global size the rank was given
};

// What the final fold found wrong, packed in one word: the kind in the high byte; below it the
// first rank concerned (low 20 bits, and for rank_fault that rank's shard_fault in bits 20-23),
// or for slot_not_once the first such tile (low 24 bits). 0: nothing.
namespace shard_status {
inline constexpr unsigned int signature_mismatch = 1u << 24;  // ranks called with different types, operators or sizes
inline constexpr unsigned int slot_not_once = 2u << 24;       // a tile covered by no rank or by two
inline constexpr unsigned int rank_fault = 3u << 24;          // a rank's own fault word
}  // namespace shard_status

struct shard_header_view {
  const unsigned int* signature = nullptr;  // [ranks]
  const unsigned int* fault = nullptr;      // [ranks]
  int ranks = 0;
  unsigned int my_signature = 0;
  bool every_slot_once = false;  // shards on the plan's tile boundaries: each slot exactly once
};

// What the first kernel that writes into the rank's shared buffer does before anything else
// there: zero every slot word outside the rank's own [keep_begin, keep_end) (which that
// kernel then writes), and write the header: the rank's signature and fault word, zero in the
// other ranks' words. The ranges are disjoint, so no block's zeroing lands on a word another
// block writes. The tile kernel does it where the rank writes tile slots of the shared buffer,
// the local fold where it writes one slot per rank, stamp_shard_buffer_kernel alone where the
// rank reduces nothing.
struct shard_stamp {
  unsigned int* words = nullptr;  // the slots, as words
  std::uint64_t word_count = 0;
  std::uint64_t keep_begin = 0;
  std::uint64_t keep_end = 0;
  unsigned int* signature = nullptr;
  unsigned int* fault = nullptr;
  int ranks = 0;
  int rank = 0;
  unsigned int my_signature = 0;
  unsigned int my_fault = 0;

  __device__ __forceinline__ void apply() const {
    const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
    for (std::uint64_t w = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < word_count; w += stride)
      if (w < keep_begin || w >= keep_end) words[w] = 0;
    if (blockIdx.x == 0) {
      for (int r = int(threadIdx.x); r < ranks; r += int(blockDim.x)) {
        signature[r] = r == rank ? my_signature : 0u;
        fault[r] = r == rank ? my_fault : 0u;
      }
    }
  }
};

// The stamp alone, for a rank that reduces nothing (an empty shard, or a fault of its own).
// (A template only so that the header may define it in every translation unit.)
template <int = 0>
__global__ void __launch_bounds__(block_threads) stamp_shard_buffer_kernel(shard_stamp stamp) {
  wait_for_prior_grid();
  stamp.apply();
}

// The tiles of one shard, each by a block as tally::reduce's tile blocks reduce it, so to the
// same bits: plan is the global plan's tile shape over the shard's n (the shard begins on a
// tile boundary), or the shard's own plan; slots[t] gets tile t's partial.
template <class Acc, int VW, class Loader, class Op, bool Ordered>
__global__ void __launch_bounds__(block_threads, (Ordered ? 2 : min_resident_blocks<VW, Loader>))
    shard_tile_partials_kernel(Loader load, reduction_plan plan, Op op, shard_slot<Acc>* slots, shard_stamp stamp) {
  wait_for_prior_grid();
  if (stamp.words != nullptr) stamp.apply();
  const auto take = [&](std::uint64_t tile, const Acc& partial) {
    if (threadIdx.x == 0) {
      slots[tile].value = partial;
      slots[tile].filled = 1;
    }
  };
  if constexpr (Ordered) {
    ordered_reduce_tiles<Acc, VW>(load, plan, op, blockIdx.x, gridDim.x, take);
  } else {
    reduce_tiles<Acc, VW>(load, plan, op, blockIdx.x, gridDim.x, take);
  }
}

// The plan's fold of `count` slots by one block, skipping slots no rank filled; valid says
// (in thread 0) whether any was filled. With every slot filled it is the fold of the tile
// partials that tally::reduce's folding block makes (fold_published_partials,
// ordered_fold_published_partials): the same order, the same trees.
template <class Acc, class Op, bool Ordered>
__device__ __forceinline__ Acc fold_shard_slots(const shard_slot<Acc>* slots, std::uint64_t count, Op& op,
                                                bool every_slot_filled, bool& valid) {
  Acc acc{};
  valid = false;
  if constexpr (Ordered) {
    const std::uint64_t per_thread = ordered_partials_per_thread(count);
    const std::uint64_t from = std::uint64_t(threadIdx.x) * per_thread;
    const std::uint64_t to = from + per_thread < count ? from + per_thread : count;
    for (std::uint64_t k = from; k < to; ++k) {
      if (slots[k].filled != 1) continue;
      acc = valid ? static_cast<Acc>(op(acc, slots[k].value)) : slots[k].value;
      valid = true;
    }
    const bool any = __syncthreads_or(valid) != 0;
    if (tuning::ordered_fold_few_partials_by_warp && count <= warp_threads) {
      if (threadIdx.x < warp_threads) acc = tally::warp::reduce_ordered(acc, valid, op);
    } else {
      acc = tally::block::reduce_ordered<block_threads>(acc, valid, op);
    }
    valid = any;
    return acc;
  } else {
    for (std::uint64_t k = threadIdx.x; k < count; k += block_threads) {
      if (slots[k].filled != 1) continue;
      acc = valid ? static_cast<Acc>(op(acc, slots[k].value)) : slots[k].value;
      valid = true;
    }
    const bool any = __syncthreads_or(valid) != 0;
    if (every_slot_filled) {
      acc = fold_partials_of<Acc>(acc, valid, count, op);
    } else {
      acc = tally::block::reduce<block_threads>(acc, valid, op);
    }
    valid = any;
    return acc;
  }
}

// Rank r's shard of an arbitrary split: its own tile partials folded into its slot r.
template <class Acc, class Op, bool Ordered>
__global__ void __launch_bounds__(block_threads)
    fold_local_shard_kernel(const shard_slot<Acc>* tile_slots, std::uint64_t tiles, Op op, shard_slot<Acc>* mine,
                            shard_stamp stamp) {
  wait_for_prior_grid();
  stamp.apply();
  bool valid = false;
  const Acc total = fold_shard_slots<Acc, Op, Ordered>(tile_slots, tiles, op, true, valid);
  if (threadIdx.x == 0) {  // the stamp left this slot to this kernel: written either way
    mine->value = valid ? total : Acc{};
    mine->filled = valid ? 1u : 0u;
  }
}

// What tally::reduce under an NCCL policy hands the host: the value and what the fold found.
template <class Acc>
struct checked_shard_result {
  Acc value;
  unsigned int status;
};

template <class T>
struct is_checked_shard_result : std::false_type {};
template <class Acc>
struct is_checked_shard_result<checked_shard_result<Acc>> : std::true_type {};

__device__ __forceinline__ unsigned int check_shard_header(const shard_header_view& header) {
  for (int r = 0; r < header.ranks; ++r) {
    if (header.fault[r] != 0) return shard_status::rank_fault | (header.fault[r] << 20) | unsigned(r);
    if (header.signature[r] != header.my_signature) return shard_status::signature_mismatch | unsigned(r);
  }
  return 0;
}

// After the sum: every rank folds the same slots and writes op(init, total), or init where no
// slot was filled. Under tally::reduce (Out = checked_shard_result) the status travels with
// the value; a reduce_into whose fold found a fault leaves *out as it was.
template <class Acc, class Op, class Out, bool Ordered>
__global__ void __launch_bounds__(block_threads)
    fold_shard_slots_kernel(const shard_slot<Acc>* slots, std::uint64_t count, shard_header_view header, Acc init,
                            Op op, Out* out, host_handoff* handoff) {
  wait_for_prior_grid();
  __shared__ unsigned int status;
  if (threadIdx.x == 0) status = check_shard_header(header);
  if (header.every_slot_once) {
    for (std::uint64_t k = threadIdx.x; k < count; k += block_threads)
      if (slots[k].filled != 1) atomicCAS(&status, 0u, shard_status::slot_not_once | unsigned(k & 0xffffffu));
  } else {
    for (std::uint64_t k = threadIdx.x; k < count; k += block_threads)
      if (slots[k].filled > 1) atomicCAS(&status, 0u, shard_status::slot_not_once | unsigned(k & 0xffffffu));
  }
  __syncthreads();
  bool valid = false;
  const Acc total = fold_shard_slots<Acc, Op, Ordered>(slots, count, op, header.every_slot_once, valid);
  if (threadIdx.x != 0) return;
  const Acc result = valid ? static_cast<Acc>(op(init, total)) : init;
  if constexpr (is_checked_shard_result<Out>::value) {
    publish(out, Out{result, status}, handoff);
  } else {
    if (status == 0) publish(out, static_cast<Out>(result), handoff);
  }
}

}  // namespace tally::detail
