#pragma once
// Dispatch of an exact sum (tally::exact_plus) over the ranks of an NCCL communicator
// (kernels/exact_rank_kernels.cuh). An exact sum does not depend on how the range is split, so
// the shards need no plan: each rank sums its own exactly, one ncclAllReduce of 64-bit integers
// adds the ranks' digits and special-value counts, and every rank adds init and rounds the same
// words once. Every rank gets the bits of the exact sum of the whole range on one GPU or the
// host, whatever the split and the number of ranks.

#include "tally/detail/dispatch/distributed_dispatch.cuh"
#include "tally/detail/dispatch/exact_dispatch.cuh"
#include "tally/detail/dispatch/launch.cuh"
#include "tally/detail/dispatch/runtime.cuh"
#include "tally/detail/kernels/exact_rank_kernels.cuh"

#include <nccl.h>

#include <cstdint>
#include <string>

namespace tally::detail {

// The whole call on the policy's stream; out (reduce_into) or handoff (reduce). n may be 0: the
// rank still takes part in the all-reduce.
template <class T, class It>
void distributed_exact_sum(const nccl_policy& policy, It first, std::uint64_t n, T init, T* out, host_handoff* handoff,
                           int device, const char* algorithm) {
  static_assert(converts_exactly<iterator_value_t<It>, T>(),
                "tally::exact_plus<T>: the values must convert to T exactly (T itself; float, half or bf16 into "
                "double; half or bf16 into float)");
  if (policy.device() != device)
    throw_invalid_argument(algorithm, "rank " + std::to_string(policy.rank()) + "'s communicator belongs to device " +
                                          std::to_string(policy.device()) + " but the current device is " +
                                          std::to_string(device) + "; call cudaSetDevice(" +
                                          std::to_string(policy.device()) + ") before the call");
  const cudaStream_t stream = policy.stream();
  check_stream_of_device(stream, device);
  constexpr std::size_t accumulator_bytes = (sizeof(exact_accumulator<T>) + 15) / 16 * 16;
  constexpr std::size_t word_bytes = std::size_t(exact_rank_words<T>) * sizeof(std::int64_t);
  scratch_lease lease(device, stream, accumulator_bytes + word_bytes, handoff != nullptr);
  auto* base = static_cast<unsigned char*>(lease.scratch().partials);
  auto* accumulator = reinterpret_cast<exact_accumulator<T>*>(base);
  auto* words = reinterpret_cast<std::int64_t*>(base + accumulator_bytes);
  launch_kernel<exact_rank_begin_kernel<T>>(1, 32, stream, device, accumulator);
  if (n > 0)
    launch_exact_sum_in<T>(lease.scratch().control, exact_readable(first, device, algorithm), n, T(0), accumulator,
                           static_cast<host_handoff*>(nullptr), stream, 0, device);
  launch_kernel<exact_rank_pack_kernel<T>>(1, 128, stream, device, accumulator, words);
  const ncclResult_t summed = take_injected_nccl_failure()
                                  ? ncclInternalError
                                  : ncclAllReduce(words, words, std::size_t(exact_rank_words<T>), ncclInt64, ncclSum,
                                                  policy.communicator(), stream);
  nccl_policy::check_nccl(summed, "ncclAllReduce", algorithm, policy.rank());
  launch_kernel_in_order<exact_ranks_finish_kernel<T>>(1, 32, stream, words, init, out, handoff);
  lease.launched();
}

}  // namespace tally::detail
