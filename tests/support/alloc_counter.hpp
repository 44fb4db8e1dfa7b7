// A process-wide count of heap allocations (malloc family and operator new), made by interposing
// malloc in this test binary. Not available under AddressSanitizer, which owns malloc itself.
#pragma once

#include <cstdint>

namespace skainet::test {
bool allocation_counter_available() noexcept;
uint64_t allocation_count() noexcept;
}  // namespace skainet::test
