// Must not compile: trips the static_assert in tally::detail::reduce_impl for tally::nccl
// (include/tally/distributed.cuh):
//   "tally::exact_plus: exact sums over several GPUs are not built yet (issue 37); pass tally::device for one GPU's range, or tally::host"
// An exact sum under the NCCL policy, which would otherwise have summed one rank's shard alone:
// refused at compile time. Built only where tally::tally_nccl is (NCCL found).
#include <tally/distributed.cuh>
#include <tally/exact.cuh>

#include <cstddef>

float exact_total(ncclComm_t comm, const float* shard, std::size_t n) {
  return tally::reduce(tally::nccl(comm), shard, shard + n, 0.0f, tally::exact_plus<float>{});
}
