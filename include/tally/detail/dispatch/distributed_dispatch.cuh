#pragma once
// Dispatch of a reduction whose input is split across ranks of an NCCL communicator
// (<tally/distributed.cuh>). Each rank reduces its shard with tally's own tile code, writes
// what it contributes into a buffer that is zero everywhere else, NCCL sums the buffers
// (kernels/shard_kernels.cuh says why that is exact), and every rank folds the same slots:
//
//   shards on the global plan's tile boundaries   a slot per tile of the global plan; the
//       ranks' tile partials are those tally::reduce computes over the whole range, and the
//       fold is its fold, so every rank gets tally::reduce's bits for the whole range
//   no .shard() given (any split)                a slot per rank: rank r's shard reduced by
//       its own plan without init; the slots folded in rank order by the plan's fold
//
// Operators whose answer does not depend on the order (the extrema) take a slot per rank
// whatever the split: their answer is the single-GPU one anyway.

#include "tally/detail/dispatch/device_dispatch.cuh"
#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/kernels/shard_kernels.cuh"
#include "tally/detail/plan.cuh"
#include "tally/error.cuh"
#include "tally/operator_traits.cuh"

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tally {

// An NCCL call made by tally failed. what() names the algorithm, the rank, the NCCL call and
// NCCL's error; code() is NCCL's result. The communicator may be unusable afterwards (NCCL's
// own rule): abort it with ncclCommAbort and make a new one.
class nccl_error : public std::runtime_error {
 public:
  nccl_error(ncclResult_t code, int rank, const std::string& what) : std::runtime_error(what), code_(code), rank_(rank) {}
  ncclResult_t code() const noexcept { return code_; }
  int rank() const noexcept { return rank_; }

 private:
  ncclResult_t code_;
  int rank_;
};

namespace detail {

// A policy for a reduction over the ranks of an NCCL communicator (tally::nccl(comm)).
// Defined in namespace detail so that the family's generic code, which calls
// normalize_policy, check_base and reduce_impl unqualified, finds the overloads below.
class nccl_policy {
 public:
  explicit nccl_policy(ncclComm_t comm) : comm_(comm) {
    if (comm == nullptr) throw std::invalid_argument("tally::nccl: the communicator is null; create it with ncclCommInitRank or ncclCommInitAll first");
    check_nccl(ncclCommUserRank(comm, &rank_), "ncclCommUserRank", "nccl", -1);
    check_nccl(ncclCommCount(comm, &ranks_), "ncclCommCount", "nccl", rank_);
    check_nccl(ncclCommCuDevice(comm, &device_), "ncclCommCuDevice", "nccl", rank_);
  }

  // The stream every launch and the NCCL collective of a call go to (0: the default stream
  // of the calling translation unit, as for tally::device).
  nccl_policy on(cudaStream_t stream) const {
    nccl_policy p = *this;
    p.stream_ = stream;
    return p;
  }
  // Where this rank's shard lies in the global range: it holds elements
  // [offset, offset + n) of global_size. With shards on the global plan's tile boundaries
  // (tally::shard_bounds) the result has the bits of tally::reduce over the whole range;
  // the extrema return global positions from it.
  nccl_policy shard(std::uint64_t offset, std::uint64_t global_size) const {
    nccl_policy p = *this;
    p.has_shard_ = true;
    p.offset_ = offset;
    p.global_size_ = global_size;
    return p;
  }

  ncclComm_t communicator() const noexcept { return comm_; }
  int rank() const noexcept { return rank_; }
  int ranks() const noexcept { return ranks_; }
  int device() const noexcept { return device_; }
  cudaStream_t stream() const noexcept { return stream_; }
  bool has_shard() const noexcept { return has_shard_; }
  std::uint64_t offset() const noexcept { return offset_; }
  std::uint64_t global_size() const noexcept { return global_size_; }

  static void check_nccl(ncclResult_t result, const char* call, const char* algorithm, int rank) {
    if (result == ncclSuccess || result == ncclInProgress) return;
    std::string text = std::string("tally::") + algorithm;
    if (rank >= 0) text += " (rank " + std::to_string(rank) + ")";
    text += ": " + std::string(call) + " failed: " + ncclGetErrorString(result) +
            "; the communicator may be unusable now: abort it (ncclCommAbort) and create a new one";
    throw nccl_error(result, rank, text);
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0;
  int ranks_ = 1;
  int device_ = 0;
  bool has_shard_ = false;
  std::uint64_t offset_ = 0;
  std::uint64_t global_size_ = 0;
};

inline nccl_policy normalize_policy(const nccl_policy& p) {
  return p.stream() == nullptr ? p.on(default_stream()) : p;
}

template <class It>
void check_base(const nccl_policy&, It first, std::uint64_t n, const char* algorithm,
                const char* what = "the input range") {
  if constexpr (is_contiguous_v<It>) {
    if (n > 0) check_device_accessible(raw_pointer(first), properties(current_device()), algorithm, what);
  }
}

// Test hook: the next `count` collectives tally would enqueue in this process (on any rank or
// thread) fail with ncclInternalError instead, without calling NCCL. Counts add up, so that each
// rank's thread may add its own before its call. Not for use outside tests: it is process-wide.
inline std::atomic<int>& injected_nccl_failures() {
  static std::atomic<int> count{0};
  return count;
}
inline void inject_nccl_failures(int count) { injected_nccl_failures().fetch_add(count); }
inline bool take_injected_nccl_failure() {
  int left = injected_nccl_failures().load();
  while (left > 0 && !injected_nccl_failures().compare_exchange_weak(left, left - 1)) {
  }
  return left > 0;
}

// What the launch below needs from the call: device_reduce passes it where a device policy
// goes, and launch_reduce's overload for it (found by argument-dependent lookup) launches the
// shard's tile kernel instead of a whole reduction.
struct shard_call {
  cudaStream_t stream_ = nullptr;
  reduction_plan shard_plan;  // the tiles this rank reduces
  void* tile_slots = nullptr;  // shard_slot<Acc>[shard_plan.tiles]
  void* rank_slot = nullptr;   // a slot per rank: where this rank's fold of tile_slots goes
  shard_stamp stamp;           // applied by the tile kernel, or by the local fold if there is one
  cudaStream_t stream() const noexcept { return stream_; }
  unsigned forced_grid_size() const noexcept { return 0; }
};

template <class Acc, int VW, bool Fallback = false, class Loader, class Op, class Out>
void launch_reduce(const Loader& given, std::uint64_t n, Acc, Op op, Out*, host_handoff*, const shard_call& call,
                   int device, const char*) {
  Loader load = given;
  if constexpr (takes_read_hint<Loader>::value) {
    load.streaming = streams_reads(n * Loader::bytes_per_element, std::uint64_t(properties(device).l2_bytes));
  }
  constexpr bool ordered = !is_commutative_v<Op>;
  constexpr auto kernel = &shard_tile_partials_kernel<Acc, VW, Loader, Op, ordered>;
  const reduction_plan& plan = call.shard_plan;
  if (plan.tiles == 0) return;
  const std::uint64_t resident = resident_grid<kernel>(call, device);
  const std::uint64_t grid = resident < plan.tiles ? resident : plan.tiles;
  auto* slots = static_cast<shard_slot<Acc>*>(call.tile_slots);
  const bool local_fold = call.rank_slot != nullptr;
  launch_kernel<kernel>(unsigned(grid), block_threads, call.stream(), device, load, plan, op, slots,
                        local_fold ? shard_stamp{} : call.stamp);
  if (local_fold)
    launch_kernel<fold_local_shard_kernel<Acc, Op, ordered>>(1, block_threads, call.stream(), device, slots, plan.tiles,
                                                             op, static_cast<shard_slot<Acc>*>(call.rank_slot),
                                                             call.stamp);
}

// A hash of the call's types, operator and shape: ranks that disagree (different element or
// accumulator types, operators, global sizes) are caught by comparing it after the sum.
inline unsigned int fnv1a(const char* text, unsigned int hash = 2166136261u) {
  for (; *text != '\0'; ++text) hash = (hash ^ static_cast<unsigned char>(*text)) * 16777619u;
  return hash;
}
template <class Acc, class Op, class V>
unsigned int call_signature(std::uint64_t slot_count, bool on_plan_tiles) {
  unsigned int hash = fnv1a(__PRETTY_FUNCTION__);
  const std::uint64_t words[2] = {slot_count, on_plan_tiles ? 1u : 0u};
  for (std::uint64_t w : words)
    for (int b = 0; b < 8; ++b) hash = (hash ^ unsigned((w >> (8 * b)) & 0xff)) * 16777619u;
  return hash == 0 ? 1u : hash;
}

// Where this rank's contribution goes: computed alike on every rank from its own arguments.
struct shard_layout {
  bool on_plan_tiles = false;
  std::uint64_t slot_count = 0;
  std::uint64_t first_slot = 0;  // of this rank's tile partials (on plan tiles)
  reduction_plan shard_plan;
  shard_fault fault = shard_fault::none;
};

template <class Op>
shard_layout layout_shard_of(int rank, int ranks, bool has_shard, std::uint64_t offset, std::uint64_t global_size,
                             std::uint64_t n, int vector_width) {
  constexpr std::uint64_t max_tiles = plan_max_tiles_for<Op>;
  shard_layout layout;
  if (has_shard && !is_order_free<Op>::value) {
    const reduction_plan global = make_plan(global_size, vector_width, max_tiles);
    layout.on_plan_tiles = true;
    layout.slot_count = global.tiles;
    if (offset > global_size || n > global_size - offset) {
      layout.fault = shard_fault::past_global_end;
    } else if (n > 0 && (offset % global.tile_items != 0 || (offset + n != global_size && n % global.tile_items != 0))) {
      layout.fault = shard_fault::off_tile_boundary;
    } else {
      layout.shard_plan = global;
      layout.shard_plan.n = n;
      layout.shard_plan.tiles = n / global.tile_items + (n % global.tile_items != 0);
      layout.first_slot = n > 0 ? offset / global.tile_items : 0;
    }
  } else {
    layout.slot_count = std::uint64_t(ranks);
    layout.shard_plan = make_plan(n, vector_width, max_tiles);
    layout.first_slot = std::uint64_t(rank);
  }
  return layout;
}

template <class Op>
shard_layout layout_shard(const nccl_policy& policy, std::uint64_t n, int vector_width) {
  return layout_shard_of<Op>(policy.rank(), policy.ranks(), policy.has_shard(), policy.offset(), policy.global_size(),
                             n, vector_width);
}

inline std::size_t round_up_16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

// The whole call on the policy's stream: stamp the buffer, reduce the shard, sum the
// buffers, fold. Out is the output's element type (reduce_into), or checked_shard_result<Acc>
// with a handoff (reduce). n may be 0: the rank still takes part in the collective. device is
// the current device, which the caller has asked already.
template <class Acc, class It, class Op, class Out>
void distributed_reduce(const nccl_policy& policy, It first, std::uint64_t n, Acc init, Op op, Out* out,
                        host_handoff* handoff, int device, const char* algorithm) {
  static_assert(moves_as_bytes_v<Acc>, "tally: a distributed reduction moves init's type as bytes");
  if (policy.device() != device)
    throw_invalid_argument(algorithm, "rank " + std::to_string(policy.rank()) + "'s communicator belongs to device " +
                                          std::to_string(policy.device()) + " but the current device is " +
                                          std::to_string(device) + "; call cudaSetDevice(" +
                                          std::to_string(policy.device()) + ") before the call");
  check_stream_of_device(policy.stream(), device);
  constexpr int vw = plan_vector_width_v<It>;
  constexpr bool ordered = !is_commutative_v<Op>;
  const shard_layout layout = layout_shard<Op>(policy, n, vw);
  using slot_t = shard_slot<Acc>;
  const int ranks = policy.ranks();
  const std::size_t slot_bytes = std::size_t(layout.slot_count) * sizeof(slot_t);
  const std::size_t header_bytes = 2 * std::size_t(ranks) * sizeof(unsigned int);
  const std::size_t shared_bytes = round_up_16(slot_bytes + header_bytes);
  const bool local_fold = !layout.on_plan_tiles;
  const std::size_t local_bytes = local_fold ? std::size_t(layout.shard_plan.tiles) * sizeof(slot_t) : 0;
  scratch_lease lease(device, policy.stream(), shared_bytes + local_bytes, handoff != nullptr);
  auto* base = static_cast<unsigned char*>(lease.scratch().partials);
  auto* slots = reinterpret_cast<slot_t*>(base);
  auto* signature = reinterpret_cast<unsigned int*>(base + slot_bytes);
  auto* fault = signature + ranks;
  const unsigned int my_signature = call_signature<Acc, Op, iterator_value_t<It>>(layout.slot_count, layout.on_plan_tiles);
  const std::uint64_t words = (slot_bytes + header_bytes) / sizeof(unsigned int);
  constexpr std::uint64_t words_per_slot = sizeof(slot_t) / sizeof(unsigned int);
  const bool reduces = n > 0 && layout.fault == shard_fault::none;
  // The slots this rank writes into the shared buffer, which the stamp leaves alone.
  const std::uint64_t kept_slots = !reduces ? 0 : (local_fold ? 1 : layout.shard_plan.tiles);
  shard_stamp stamp;
  stamp.words = reinterpret_cast<unsigned int*>(base);
  stamp.word_count = slot_bytes / sizeof(unsigned int);
  stamp.keep_begin = layout.first_slot * words_per_slot;
  stamp.keep_end = (layout.first_slot + kept_slots) * words_per_slot;
  stamp.signature = signature;
  stamp.fault = fault;
  stamp.ranks = ranks;
  stamp.rank = policy.rank();
  stamp.my_signature = my_signature;
  stamp.my_fault = unsigned(layout.fault);
  if (reduces) {
    shard_call call;
    call.stream_ = policy.stream();
    call.shard_plan = layout.shard_plan;
    call.stamp = stamp;
    if (local_fold) {
      call.tile_slots = base + shared_bytes;
      call.rank_slot = slots + layout.first_slot;
    } else {
      call.tile_slots = slots + layout.first_slot;
    }
    device_reduce(first, n, init, op, out, handoff, call, device, algorithm);
  } else {
    const std::uint64_t blocks = (stamp.word_count + block_threads - 1) / block_threads;
    launch_kernel<stamp_shard_buffer_kernel<>>(unsigned(blocks < 64 ? (blocks > 0 ? blocks : 1) : 64), block_threads,
                                              policy.stream(), device, stamp);
  }
  const ncclResult_t summed = take_injected_nccl_failure()
                                 ? ncclInternalError
                                 : ncclAllReduce(base, base, std::size_t(words), ncclUint32, ncclSum,
                                                 policy.communicator(), policy.stream());
  nccl_policy::check_nccl(summed, "ncclAllReduce", algorithm, policy.rank());
  const shard_header_view header{signature, fault, ranks, my_signature, layout.on_plan_tiles};
  launch_kernel_in_order<fold_shard_slots_kernel<Acc, Op, Out, ordered>>(1, block_threads, policy.stream(), slots,
                                                                         layout.slot_count, header, init, op, out,
                                                                         handoff);
  lease.launched();
}

// The sentence for a fault the fold found (shard_status), the same on every rank.
inline std::string shard_fault_text(unsigned int status) {
  const unsigned int kind = status & 0xff000000u;
  const unsigned int rank = status & 0xfffffu;
  if (kind == shard_status::signature_mismatch)
    return "rank " + std::to_string(rank) +
           " called with other types, another operator or another global size than this rank; every rank must make "
           "the same call";
  if (kind == shard_status::rank_fault) {
    const unsigned int code = (status >> 20) & 0xfu;
    if (code == unsigned(shard_fault::past_global_end))
      return "rank " + std::to_string(rank) +
             "'s shard (offset + size) reaches past the global size it gave in .shard(); give each rank its offset "
             "and the size of the whole range";
    return "rank " + std::to_string(rank) +
           "'s shard does not begin and end on a tile boundary of the global plan; split the range with "
           "tally::shard_bounds, or leave out .shard() to combine the shards in rank order";
  }
  return "a tile of the global range is held by no rank or by two (tile " + std::to_string(status & 0xffffffu) +
         "); the shards given in .shard() must cover the range exactly once";
}

}  // namespace detail
}  // namespace tally
