// A sum over a range split across GPUs, one process per GPU (docs/distributed.md).
//
//   distributed_sum RANK RANKS ID_FILE [N]
//
// Rank 0 writes NCCL's unique id to ID_FILE; the other ranks wait for it and read it. (With
// MPI, rank 0 would broadcast it with MPI_Bcast instead; across hosts ID_FILE must be on a
// shared file system.) Each rank holds its shard of the global range of N floats, split on the
// plan's tiles by tally::shard_bounds, and every rank gets the sum of the whole range, with the
// bits single-GPU tally::reduce would give over it. On one host with two GPUs:
//
//   rm -f /tmp/id; distributed_sum 0 2 /tmp/id & distributed_sum 1 2 /tmp/id; wait
//
// Run without arguments, it starts every rank itself (one process per visible GPU) and checks
// each one's answer, which is how CI's build and scripts/gpu-check run it.

#include <tally/distributed.cuh>

#include <nccl.h>
#include <thrust/device_vector.h>
#include <thrust/sequence.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

bool check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
  return false;
}

// Rank 0 makes the id and publishes it (written aside, then renamed, so no rank reads half of it).
bool exchange_id(int rank, const std::string& path, ncclUniqueId& id) {
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) return false;
    const std::string partial = path + ".partial";
    std::ofstream(partial, std::ios::binary).write(reinterpret_cast<const char*>(&id), sizeof(id));
    return std::rename(partial.c_str(), path.c_str()) == 0;
  }
  for (int tries = 0; tries < 600; ++tries) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(reinterpret_cast<char*>(&id), sizeof(id))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

int run_rank(int rank, int ranks, const std::string& id_path, std::uint64_t n) {
  int devices = 0;
  if (!check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount")) return 1;
  if (!check(cudaSetDevice(rank % devices), "cudaSetDevice")) return 1;
  ncclUniqueId id;
  if (!exchange_id(rank, id_path, id)) {
    std::fprintf(stderr, "rank %d: no NCCL id in %s\n", rank, id_path.c_str());
    return 1;
  }
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, ranks, id, rank) != ncclSuccess) return 1;

  // The global range is 0, 1, 2, ... (as floats: exact up to 2^24); this rank holds its shard.
  const std::vector<std::uint64_t> bounds = tally::shard_bounds<float>(n, ranks);
  const std::uint64_t offset = bounds[rank], size = bounds[rank + 1] - bounds[rank];
  thrust::device_vector<float> shard(size);
  thrust::sequence(shard.begin(), shard.end(), float(offset));

  const auto policy = tally::nccl(comm).shard(offset, n);
  const float total = tally::reduce(policy, shard.begin(), shard.end());
  const std::int64_t largest = tally::max_element(policy, shard.begin(), shard.end());
  const double expected = double(n) * double(n - 1) / 2;
  std::printf("rank %d of %d holds [%llu, %llu): sum %.1f (expected %.1f), largest at %lld\n", rank, ranks,
              static_cast<unsigned long long>(offset), static_cast<unsigned long long>(offset + size), double(total),
              expected, static_cast<long long>(largest));
  ncclCommDestroy(comm);
  return double(total) == expected && largest == std::int64_t(n) - 1 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4) {
    const std::uint64_t n = argc >= 5 ? std::strtoull(argv[4], nullptr, 10) : 4096;
    return run_rank(std::atoi(argv[1]), std::atoi(argv[2]), argv[3], n);
  }
  // No arguments: one process per visible GPU, each this program with its rank.
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2) {
    std::printf("distributed_sum: needs two GPUs (found %d); start it as RANK RANKS ID_FILE on each rank\n",
                devices);
    return 0;
  }
  const std::string id_path = "/tmp/tally-distributed-sum-" + std::to_string(getpid());
  std::vector<pid_t> ranks;
  for (int r = 0; r < devices; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string rank = std::to_string(r), count = std::to_string(devices);
      execl("/proc/self/exe", argv[0], rank.c_str(), count.c_str(), id_path.c_str(), "4096", nullptr);
      _exit(127);
    }
    ranks.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : ranks) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::remove(id_path.c_str());
  std::printf("distributed_sum: %s\n", failed == 0 ? "every rank got the sum" : "a rank failed");
  return failed == 0 ? 0 : 1;
}
