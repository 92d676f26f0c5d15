#pragma once
// Which value types a device reduction may carry: tally moves accumulators as bytes (through
// warp shuffles, shared memory, the partials' cells and the copy of the result to the host),
// as Thrust's CUDA backend does. Trivially copyable types qualify; so does a type whose copy
// constructor is user-provided but which owns nothing: copy-constructible and trivially
// destructible, its copy being its bytes (a value type with constructors of its own, which
// Thrust reduces on the device). A type that owns memory (a destructor of its own) does not.

#include <type_traits>

namespace tally::detail {

template <class T>
inline constexpr bool moves_as_bytes_v =
    std::is_trivially_copyable_v<T> || (std::is_copy_constructible_v<T> && std::is_trivially_destructible_v<T>);

}  // namespace tally::detail
