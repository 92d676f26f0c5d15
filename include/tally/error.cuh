#pragma once
// Errors tally throws: cuda_error for failures reported by the CUDA runtime, bad_alloc
// when the runtime's own scratch or result memory cannot be allocated. Misuse (bad
// pointers, reversed ranges) throws std::invalid_argument before any launch.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>

namespace tally {

// A CUDA call tally made failed. what() is a sentence naming the algorithm, what tally was
// doing, the CUDA error and what to do about it (docs/errors.md).
class cuda_error : public std::runtime_error {
 public:
  cuda_error(cudaError_t code, const std::string& what_failed);
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

// Memory tally needs for a call (a stream's scratch, a pinned result slot) could not be
// allocated. Derives from std::bad_alloc so that code handling out-of-memory catches it;
// what() names what could not be allocated, its size and the CUDA error. The pool is left
// as it was and the CUDA error cleared, so a later call can succeed once memory is free.
class bad_alloc : public std::bad_alloc {
 public:
  bad_alloc(cudaError_t code, const std::string& what_failed);
  const char* what() const noexcept override { return message_.what(); }
  cudaError_t code() const noexcept { return code_; }

 private:
  std::runtime_error message_;  // holds the text; unlike std::string, copies without throwing
  cudaError_t code_;
};

namespace detail {

// Throws tally::bad_alloc for cudaErrorMemoryAllocation and tally::cuda_error for any
// other code; `what` names the memory, e.g. "the scratch of stream 0x... on device 0".
[[noreturn]] void throw_allocation_error(cudaError_t code, const char* what, std::size_t bytes);

// Throws std::invalid_argument with a message prefixed by the algorithm's name.
[[noreturn]] void throw_invalid_argument(const char* algorithm, const std::string& message);

}  // namespace detail
}  // namespace tally
