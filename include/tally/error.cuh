#pragma once
// Errors tally throws: cuda_error for failures reported by the CUDA runtime.
// Misuse (bad pointers, reversed ranges) throws std::invalid_argument before any launch.

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace tally {

// A CUDA runtime call failed. what() names the call and the CUDA error.
class cuda_error : public std::runtime_error {
 public:
  cuda_error(cudaError_t code, const std::string& what_failed);
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

namespace detail {

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);

inline void check_cuda(cudaError_t code, const char* call, const char* file, int line) {
  if (code != cudaSuccess) throw_cuda_error(code, call, file, line);
}

// Throws std::invalid_argument with a message prefixed by the algorithm's name.
[[noreturn]] void throw_invalid_argument(const char* algorithm, const std::string& message);

}  // namespace detail
}  // namespace tally

#define TALLY_CUDA_CHECK(call) ::tally::detail::check_cuda((call), #call, __FILE__, __LINE__)
