#pragma once

#include "skainet/io/gguf.hpp"

namespace skainet::gguf::detail {

// Fills each tensor's file_offset and checks the data section: no two tensors overlap, and (when
// check_bounds) every tensor lies inside the file. Needs data_offset, alignment and file_size set.
void check_layout(Header& h, bool check_bounds);

}  // namespace skainet::gguf::detail
