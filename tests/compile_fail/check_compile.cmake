# One compile-fail test (CMakeLists.txt here): compiles SOURCE with the CUDA compiler and
#   EXPECT=failure: passes only if the compile fails and the compiler reports the
#                   static_assert whose message the source's first comment quotes on a line
#                   of its own (//   "message");
#   EXPECT=success: passes only if the compile succeeds (the control case).
# Takes COMPILER, HOST_COMPILER (may be empty), INCLUDE_DIR, EXTRA_INCLUDE_DIR (may be empty),
# SOURCE, OUTPUT and EXPECT.
cmake_minimum_required(VERSION 3.25)

# The device front end alone: it instantiates every template the source uses, host code
# included, and stops before code generation (-fdevice-syntax-only). A static_assert fails
# there as in a full build. -ptx leaves the host compilation out.
set(command "${COMPILER}" -std=c++17 --extended-lambda -arch=compute_90 -fdevice-syntax-only -ptx
            "-I${INCLUDE_DIR}" "${SOURCE}" -o "${OUTPUT}")
if(EXTRA_INCLUDE_DIR)
  list(APPEND command "-I${EXTRA_INCLUDE_DIR}")
endif()
if(HOST_COMPILER)
  list(APPEND command -ccbin "${HOST_COMPILER}")
endif()

set(expected "")
if(EXPECT STREQUAL "failure")
  # The message is taken from the first comment only (the lines before the first line that
  # is not a comment), where it is quoted alone on its line. It may hold semicolons, so it
  # is read with string(), never as a list.
  file(READ "${SOURCE}" source_text)
  string(REGEX MATCH "^(//[^\n]*\n)+" first_comment "${source_text}")
  string(REGEX MATCH "\n//   \"([^\n]*)\"\n" quoted "\n${first_comment}")
  if(NOT quoted)
    message(FATAL_ERROR "${SOURCE}: its first comment quotes no static_assert message on a line of its own")
  endif()
  set(expected "static assertion failed with \"${CMAKE_MATCH_1}\"")
elseif(NOT EXPECT STREQUAL "success")
  message(FATAL_ERROR "EXPECT must be failure or success, not '${EXPECT}'")
endif()

file(REMOVE "${OUTPUT}")
execute_process(COMMAND ${command} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)

if(EXPECT STREQUAL "success")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "the control case must compile, but the command failed (${status}):\n${output}")
  endif()
  message(STATUS "compiled, as it must")
  return()
endif()
if(status EQUAL 0)
  message(FATAL_ERROR "compiled, but must fail with: ${expected}\n${output}")
endif()
string(FIND "${output}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the compile failed (${status}), but not with: ${expected}\n${output}")
endif()
message(STATUS "refused, as it must be: ${expected}")
