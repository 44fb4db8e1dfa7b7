#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "irpa/detail.hpp"

namespace skainet::irpa {
namespace {

using detail::load;

constexpr uint64_t kReserveLimit = 256;  // entries reserved up front, before any is parsed

class Parser {
 public:
  Parser(const base::FileReader& file, const ReadOptions& options) : file_(file), options_(options) {}

  Archive run();

 private:
  [[noreturn]] void fail(FormatErrorKind kind, uint64_t offset, const std::string& detail) const {
    throw FormatError(kind, fmt::format("{}: offset {}: {}: {}", file_.path().string(), offset, context_, detail));
  }

  void read_header(Archive& a);
  void read_entries(Archive& a, uint64_t count);
  Range read_segment(const std::byte* header, size_t field, std::string_view what);
  void read_entry(Archive& a, uint64_t at, uint64_t room);
  // The type-specific part of a splat or data record at `at` (`r`: its first bytes).
  void read_splat(Entry& e, const std::byte* r, uint64_t at, uint64_t entry_size);
  void read_data(const Archive& a, Entry& e, const std::byte* r, uint64_t at, uint64_t entry_size);
  // A (offset, length) reference stored at `field_at` into a segment; returns its absolute offset.
  uint64_t resolve(uint64_t field_at, uint64_t offset, uint64_t length, const Range& segment, std::string_view what);

  const base::FileReader& file_;
  const ReadOptions& options_;
  std::string context_ = "header";
};

Range Parser::read_segment(const std::byte* header, size_t field, std::string_view what) {
  const uint64_t offset = load<uint64_t>(header + field), length = load<uint64_t>(header + field + 8);
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, length, &end))
    fail(FormatErrorKind::OutOfRange, field,
         fmt::format("{} at {} of {} bytes overflows 64 bits", what, offset, length));
  if (end > file_.size())
    fail(FormatErrorKind::Truncated, field,
         fmt::format("truncated: {} spans bytes {}..{} but the file ends at byte {}", what, offset, end, file_.size()));
  if (length > 0 && offset < kHeaderSize)
    fail(FormatErrorKind::BadHeader, field,
         fmt::format("{} starts at {}, inside the {}-byte header", what, offset, kHeaderSize));
  return Range{offset, length};
}

void Parser::read_header(Archive& a) {
  std::byte h[kHeaderSize] = {};
  const uint64_t size = file_.size();
  if (size < 4)
    fail(FormatErrorKind::Truncated, 0, fmt::format("truncated: the file has {} bytes, too few for the magic", size));
  file_.read_at(0, h, static_cast<size_t>(std::min<uint64_t>(size, kHeaderSize)));
  const auto magic = load<uint32_t>(h + detail::kHdrMagic);
  if (magic != kMagic)
    fail(FormatErrorKind::BadMagic, 0, fmt::format("expected magic 'IRPA' (0x{:08x}), found 0x{:08x}", kMagic, magic));
  if (size < detail::kHeaderPrefixSize)
    fail(FormatErrorKind::Truncated, size,
         fmt::format("truncated: the header prefix needs {} bytes, the file has {}", detail::kHeaderPrefixSize, size));
  a.version_major = load<uint16_t>(h + detail::kHdrVersionMajor);
  a.version_minor = load<uint16_t>(h + detail::kHdrVersionMinor);
  if (a.version_major != 0 || a.version_minor != 0)
    fail(FormatErrorKind::UnsupportedVersion, detail::kHdrVersionMajor,
         fmt::format("archive version {}.{} is not supported (expected 0.0)", a.version_major, a.version_minor));
  const auto header_size = load<uint64_t>(h + detail::kHdrHeaderSize);
  if (header_size != kHeaderSize)
    fail(FormatErrorKind::BadHeader, detail::kHdrHeaderSize,
         fmt::format("header_size: expected {} for version 0, found {}", kHeaderSize, header_size));
  if (size < kHeaderSize)
    fail(FormatErrorKind::Truncated, size,
         fmt::format("truncated: the header needs {} bytes, the file has {}", kHeaderSize, size));
  if (const auto next = load<uint64_t>(h + detail::kHdrNextHeader); next != 0)
    fail(FormatErrorKind::LinkedArchive, detail::kHdrNextHeader,
         fmt::format("next_header_offset is {}: linked (concatenated) archives are not supported; "
                     "repack with iree-convert-parameters",
                     next));
  if (const auto flags = load<uint64_t>(h + detail::kHdrFlags); flags != 0)
    fail(FormatErrorKind::BadHeader, detail::kHdrFlags, fmt::format("reserved flags: expected 0, found 0x{:x}", flags));

  a.entry_segment = read_segment(h, detail::kHdrEntrySegment, "entry segment");
  a.metadata_segment = read_segment(h, detail::kHdrMetadataSegment, "metadata segment");
  a.storage_segment = read_segment(h, detail::kHdrStorageSegment, "storage segment");
  if (a.entry_segment.offset % kEntryAlignment != 0)
    fail(FormatErrorKind::BadHeader, detail::kHdrEntrySegment,
         fmt::format("entry segment offset {} is not a multiple of {}", a.entry_segment.offset, kEntryAlignment));

  read_entries(a, load<uint64_t>(h + detail::kHdrEntryCount));
}

void Parser::read_entries(Archive& a, uint64_t count) {
  if (count > options_.max_entries)
    fail(FormatErrorKind::TooLarge, detail::kHdrEntryCount,
         fmt::format("entry count {} exceeds the reader's limit of {}", count, options_.max_entries));
  // Every record but the last takes at least 64 bytes (60, rounded up to 16), the last at least 60.
  if (count > 0 &&
      ((count - 1) > a.entry_segment.length / 64 || (count - 1) * 64 + kEntryHeaderSize > a.entry_segment.length))
    fail(FormatErrorKind::BadEntry, detail::kHdrEntryCount,
         fmt::format("entry segment of {} bytes cannot hold {} entries", a.entry_segment.length, count));
  a.entries.reserve(static_cast<size_t>(std::min(count, kReserveLimit)));
  uint64_t at = a.entry_segment.offset, room = a.entry_segment.length;
  for (uint64_t i = 0; i < count; ++i) {
    context_ = fmt::format("entry {}", i);
    if (room < kEntryHeaderSize)
      fail(FormatErrorKind::BadEntry, at,
           fmt::format("the entry table ends {} bytes in: {} remain, a record needs at least {}",
                       at - a.entry_segment.offset, room, kEntryHeaderSize));
    std::byte size_field[8];
    file_.read_at(at, size_field, sizeof size_field);
    const auto entry_size = load<uint64_t>(size_field);
    if (entry_size < kEntryHeaderSize || entry_size > room)
      fail(FormatErrorKind::BadEntry, at,
           fmt::format("entry_size: expected {}..{} (the table's remaining bytes), found {}", kEntryHeaderSize, room,
                       entry_size));
    read_entry(a, at, entry_size);
    const uint64_t step = checked_align_up(entry_size, kEntryAlignment, "entry record size");
    at += std::min(step, room);
    room -= std::min(step, room);
  }
}

uint64_t Parser::resolve(uint64_t field_at, uint64_t offset, uint64_t length, const Range& segment,
                         std::string_view what) {
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, length, &end))
    fail(FormatErrorKind::OutOfRange, field_at,
         fmt::format("{} at {} of {} bytes overflows 64 bits", what, offset, length));
  if (end > segment.length)
    fail(FormatErrorKind::OutOfRange, field_at,
         fmt::format("{} spans {}..{} of its segment, which has {} bytes", what, offset, end, segment.length));
  return segment.offset + offset;  // cannot overflow: the segment lies inside the file
}

void Parser::read_splat(Entry& e, const std::byte* r, uint64_t at, uint64_t entry_size) {
  if (entry_size < kSplatEntrySize)
    fail(FormatErrorKind::BadEntry, at,
         fmt::format("a splat record needs {} bytes, entry_size is {}", kSplatEntrySize, entry_size));
  e.type = EntryType::Splat;
  e.length = load<uint64_t>(r + detail::kSplatLength);
  e.pattern_length = static_cast<uint8_t>(r[detail::kSplatPatternLength]);
  if (!detail::valid_pattern_length(e.pattern_length))
    fail(FormatErrorKind::BadSplat, at + detail::kSplatPatternLength,
         fmt::format("pattern length: expected 1, 2, 4, 8 or 16, found {}", e.pattern_length));
  if (e.length % e.pattern_length != 0)
    fail(FormatErrorKind::BadSplat, at + detail::kSplatLength,
         fmt::format("length {} is not a multiple of the pattern length {}", e.length, e.pattern_length));
  std::copy_n(r + detail::kSplatPattern, 16, e.pattern.begin());
}

void Parser::read_data(const Archive& a, Entry& e, const std::byte* r, uint64_t at, uint64_t entry_size) {
  if (entry_size < kDataEntrySize)
    fail(FormatErrorKind::BadEntry, at,
         fmt::format("a data record needs {} bytes, entry_size is {}", kDataEntrySize, entry_size));
  e.type = EntryType::Data;
  const auto offset = load<uint64_t>(r + detail::kDataStorage);
  e.length = load<uint64_t>(r + detail::kDataStorage + 8);
  e.file_offset = resolve(at + detail::kDataStorage, offset, e.length, a.storage_segment, "data");
  if (e.minimum_alignment != 0) {
    if (!std::has_single_bit(e.minimum_alignment))
      fail(FormatErrorKind::Misaligned, at + detail::kEntMinimumAlignment,
           fmt::format("minimum_alignment: expected a power of two, found {}", e.minimum_alignment));
    if (e.length > 0 && e.file_offset % e.minimum_alignment != 0)
      fail(
          FormatErrorKind::Misaligned, at + detail::kDataStorage,
          fmt::format("data at file offset {} is not on its minimum alignment {}", e.file_offset, e.minimum_alignment));
  }
}

void Parser::read_entry(Archive& a, uint64_t at, uint64_t entry_size) {
  std::byte r[kSplatEntrySize] = {};
  file_.read_at(at, r, static_cast<size_t>(std::min<uint64_t>(entry_size, sizeof r)));
  Entry e;
  e.record_offset = at;
  const auto type_id = load<uint32_t>(r + detail::kEntType);

  const auto name_offset = load<uint64_t>(r + detail::kEntName), name_length = load<uint64_t>(r + detail::kEntName + 8);
  if (name_length == 0) fail(FormatErrorKind::InvalidName, at + detail::kEntName, "the name is empty");
  if (name_length > options_.max_name_bytes)
    fail(FormatErrorKind::InvalidName, at + detail::kEntName,
         fmt::format("name length {} exceeds the reader's limit of {}", name_length, options_.max_name_bytes));
  const uint64_t name_at = resolve(at + detail::kEntName, name_offset, name_length, a.metadata_segment, "name");
  e.name.resize(static_cast<size_t>(name_length));
  file_.read_at(name_at, e.name.data(), e.name.size());
  context_ += fmt::format(" '{}'", e.name);

  const auto meta_offset = load<uint64_t>(r + detail::kEntMetadata),
             meta_length = load<uint64_t>(r + detail::kEntMetadata + 8);
  if (meta_length > options_.max_metadata_bytes)
    fail(
        FormatErrorKind::TooLarge, at + detail::kEntMetadata,
        fmt::format("metadata of {} bytes exceeds the reader's limit of {}", meta_length, options_.max_metadata_bytes));
  if (meta_length > 0) {  // IREE ignores the offset of an empty blob (its builder writes 0)
    const uint64_t meta_at =
        resolve(at + detail::kEntMetadata, meta_offset, meta_length, a.metadata_segment, "metadata");
    e.metadata.resize(static_cast<size_t>(meta_length));
    file_.read_at(meta_at, e.metadata.data(), e.metadata.size());
  }

  e.minimum_alignment = load<uint64_t>(r + detail::kEntMinimumAlignment);
  switch (static_cast<EntryType>(type_id)) {
    case EntryType::Skip: ++a.skipped_entries; return;
    case EntryType::Splat: read_splat(e, r, at, entry_size); break;
    case EntryType::Data: read_data(a, e, r, at, entry_size); break;
    case EntryType::External:
      fail(FormatErrorKind::UnsupportedEntryType, at + detail::kEntType,
           "external entries (data in another file) are not supported");
    default:
      fail(FormatErrorKind::UnsupportedEntryType, at + detail::kEntType,
           fmt::format("unknown entry type {} (expected 0 skip, 1 splat or 2 data)", type_id));
  }
  if (const auto it = a.entry_index.find(e.name); it != a.entry_index.end())
    fail(FormatErrorKind::DuplicateName, at + detail::kEntName,
         fmt::format("the name already belongs to entry {}", it->second));
  a.entry_index.emplace(e.name, a.entries.size());
  a.entries.push_back(std::move(e));
}

Archive Parser::run() {
  Archive a;
  a.path = file_.path();
  a.file_size = file_.size();
  read_header(a);
  return a;
}

}  // namespace

Archive read_index(const base::FileReader& file, const ReadOptions& options) { return Parser(file, options).run(); }

Archive read_index(const std::filesystem::path& path, const ReadOptions& options) {
  base::FileReader file(path);
  return read_index(file, options);
}

}  // namespace skainet::irpa
