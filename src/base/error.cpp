#include "skainet/core/base.hpp"

namespace skainet {

void Error::add_context(std::string_view context) { message_ = std::string(context) + ": " + message_; }

uint64_t checked_align_up(uint64_t value, uint64_t align, std::string_view what) {
  if (align == 0) throw InvalidArgument(std::string(what) + ": alignment must be positive");
  const uint64_t rem = value % align;
  return rem == 0 ? value : checked_add<uint64_t>(value, align - rem, what);
}

}  // namespace skainet
