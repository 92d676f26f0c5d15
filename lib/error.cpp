#include "tally/error.cuh"

#include "tally/detail/dispatch/runtime.cuh"

#include <string>

namespace tally {

cuda_error::cuda_error(cudaError_t code, const std::string& what_failed)
    : std::runtime_error(what_failed), code_(code) {}

bad_alloc::bad_alloc(cudaError_t code, const std::string& what_failed) : message_(what_failed), code_(code) {}

namespace detail {

void throw_allocation_error(cudaError_t code, const char* what, std::size_t bytes) {
  const std::string message = message_subject() + ": could not allocate " + what + " (" + std::to_string(bytes) + " bytes): " +
                              cudaGetErrorName(code) + " (" + cudaGetErrorString(code) +
                              "); nothing was launched, so free memory (tally::release_scratch() hands back what "
                              "tally holds) and call again.";
  if (code == cudaErrorMemoryAllocation) throw bad_alloc(code, message);
  throw cuda_error(code, message);
}

void throw_invalid_argument(const char* algorithm, const std::string& message) {
  throw std::invalid_argument(std::string("tally::") + algorithm + ": " + message);
}

}  // namespace detail
}  // namespace tally
