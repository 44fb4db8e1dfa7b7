#include <algorithm>

#include <fmt/format.h>

#include "irpa/detail.hpp"

namespace skainet::irpa {

std::string_view entry_type_name(EntryType t) noexcept {
  switch (t) {
    case EntryType::Skip: return "skip";
    case EntryType::Splat: return "splat";
    case EntryType::Data: return "data";
    case EntryType::External: return "external";
  }
  return "unknown";
}

std::string_view error_kind_name(FormatErrorKind k) noexcept {
  switch (k) {
    case FormatErrorKind::Truncated: return "truncated";
    case FormatErrorKind::BadMagic: return "bad magic";
    case FormatErrorKind::UnsupportedVersion: return "unsupported version";
    case FormatErrorKind::BadHeader: return "bad header";
    case FormatErrorKind::LinkedArchive: return "linked archive";
    case FormatErrorKind::OutOfRange: return "out of range";
    case FormatErrorKind::BadEntry: return "bad entry";
    case FormatErrorKind::UnsupportedEntryType: return "unsupported entry type";
    case FormatErrorKind::BadSplat: return "bad splat";
    case FormatErrorKind::Misaligned: return "misaligned";
    case FormatErrorKind::InvalidName: return "invalid name";
    case FormatErrorKind::DuplicateName: return "duplicate name";
    case FormatErrorKind::TooLarge: return "too large";
  }
  return "unknown";
}

const Entry* Archive::find(std::string_view name) const noexcept {
  const auto it = entry_index.find(name);
  return it == entry_index.end() ? nullptr : &entries[it->second];
}

uint64_t Archive::data_bytes() const noexcept {
  uint64_t total = 0;
  for (const Entry& e : entries) total += e.length;  // each length lies inside the file or is a splat's claim
  return total;
}

ArchiveFile::ArchiveFile(const std::filesystem::path& path, const ReadOptions& options)
    : file_(path), index_(read_index(file_, options)) {}

void ArchiveFile::read(const Entry& entry, uint64_t offset, std::span<std::byte> out) const {
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, uint64_t{out.size()}, &end) || end > entry.length)
    throw InvalidArgument(fmt::format("{}: entry '{}': reading {} bytes at {} runs past its length {}",
                                      file_.path().string(), entry.name, out.size(), offset, entry.length));
  if (out.empty()) return;
  if (entry.type == EntryType::Data) {
    file_.read_at(entry.file_offset + offset, out.data(), out.size());
    return;
  }
  if (entry.type != EntryType::Splat || !detail::valid_pattern_length(entry.pattern_length))
    throw InvalidArgument(fmt::format("{}: entry '{}' of type {} has no readable value", file_.path().string(),
                                      entry.name, entry_type_name(entry.type)));
  const size_t n = entry.pattern_length;
  size_t phase = static_cast<size_t>(offset % n);
  for (std::byte& b : out) {
    b = entry.pattern[phase];
    phase = phase + 1 == n ? 0 : phase + 1;
  }
}

std::vector<std::byte> ArchiveFile::read(const Entry& entry) const {
  if (entry.length > std::numeric_limits<size_t>::max())
    throw OverflowError(fmt::format("{}: entry '{}' of {} bytes cannot be held in memory", file_.path().string(),
                                    entry.name, entry.length));
  std::vector<std::byte> bytes(static_cast<size_t>(entry.length));
  read(entry, 0, bytes);
  return bytes;
}

std::unique_ptr<base::FileMapping> ArchiveFile::map(const Entry& entry) const {
  if (entry.type != EntryType::Data)
    throw InvalidArgument(fmt::format("{}: entry '{}' is a {} entry: nothing to map", file_.path().string(), entry.name,
                                      entry_type_name(entry.type)));
  return std::make_unique<base::FileMapping>(file_.path(), entry.file_offset, entry.length);
}

}  // namespace skainet::irpa
