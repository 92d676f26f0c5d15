#pragma once
// tally: Thrust-style parallel reductions for CUDA C++. The umbrella header.

#include "tally/block/reduce.cuh"
#include "tally/error.cuh"
#include "tally/execution_policy.cuh"
#include "tally/extrema.cuh"
#include "tally/fields.cuh"
#include "tally/functional.cuh"
#include "tally/logical.cuh"
#include "tally/operator_traits.cuh"
#include "tally/ranges.cuh"
#include "tally/reduce.cuh"
#include "tally/scratch.cuh"
#include "tally/transform_reduce.cuh"
#include "tally/warp/reduce.cuh"
