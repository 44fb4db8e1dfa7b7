#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "irpa/detail.hpp"

namespace skainet::irpa {

using detail::store;

Writer::Writer(std::filesystem::path target) : target_(std::move(target)) {}

Writer::~Writer() = default;  // an uncommitted AtomicFile removes its temporary file

size_t Writer::declare(Declared d, std::span<const std::byte> metadata) {
  const std::string what = fmt::format("{}: entry {} '{}'", target_.string(), entries_.size(), d.name);
  if (out_ || committed_) throw InvalidArgument(what + ": declared after the data started");
  if (d.name.empty())
    throw InvalidArgument(fmt::format("{}: entry {}: the name is empty", target_.string(), entries_.size()));
  if (const auto it = names_.find(d.name); it != names_.end())
    throw InvalidArgument(fmt::format("{}: the name is already entry {}", what, it->second));
  d.metadata.assign(metadata.begin(), metadata.end());

  // The same running sums as IREE's builder, so the same entries give the same bytes.
  const uint64_t record = d.type == EntryType::Data ? kDataEntrySize : kSplatEntrySize;
  const uint64_t entry_segment =
      checked_add(checked_align_up(entry_segment_size_, kEntryAlignment, what), record, what + " entry table size");
  uint64_t metadata_segment = checked_add<uint64_t>(metadata_segment_size_, d.name.size(), what + " metadata size");
  metadata_segment = checked_add<uint64_t>(metadata_segment, d.metadata.size(), what + " metadata size");
  uint64_t storage_segment = storage_segment_size_, data_bytes = data_bytes_;
  if (d.type == EntryType::Data) {
    d.storage_offset = checked_align_up(storage_segment_size_, kDataAlignment, what + " data offset");
    storage_segment = checked_add(d.storage_offset, d.length, what + " storage size");
    data_bytes = checked_add(data_bytes_, d.length, what + " data size");
  }
  entry_segment_size_ = entry_segment;
  metadata_segment_size_ = metadata_segment;
  storage_segment_size_ = storage_segment;
  data_bytes_ = data_bytes;
  if (d.type == EntryType::Data && storage_alignment_ == 0) storage_alignment_ = kDataAlignment;
  names_.emplace(d.name, entries_.size());
  entries_.push_back(std::move(d));
  (void)file_size();  // refuse now a layout whose total would overflow
  return entries_.size() - 1;
}

size_t Writer::add_data(std::string name, uint64_t length, std::span<const std::byte> metadata) {
  Declared d;
  d.name = std::move(name);
  d.type = EntryType::Data;
  d.length = length;
  return declare(std::move(d), metadata);
}

size_t Writer::add_splat(std::string name, uint64_t length, std::span<const std::byte> pattern,
                         std::span<const std::byte> metadata) {
  if (!detail::valid_pattern_length(pattern.size()) || length % pattern.size() != 0)
    throw InvalidArgument(
        fmt::format("{}: splat '{}': a pattern of {} bytes (expected 1, 2, 4, 8 or 16, dividing the length {})",
                    target_.string(), name, pattern.size(), length));
  Declared d;
  d.name = std::move(name);
  d.type = EntryType::Splat;
  d.length = length;
  std::copy(pattern.begin(), pattern.end(), d.pattern.begin());
  d.pattern_length = static_cast<uint8_t>(pattern.size());
  return declare(std::move(d), metadata);
}

uint64_t Writer::storage_segment_offset() const {
  const uint64_t after_metadata =
      checked_add(checked_add(detail::kEntrySegmentOffset, entry_segment_size_, "irpa entry table end"),
                  metadata_segment_size_, "irpa metadata end");
  return checked_align_up(after_metadata, storage_alignment_ == 0 ? 1 : storage_alignment_, "irpa storage offset");
}

uint64_t Writer::file_size() const {
  return checked_align_up(checked_add(storage_segment_offset(), storage_segment_size_, "irpa storage end"),
                          kFileAlignment, "irpa file size");
}

void Writer::pad_to(uint64_t position) {
  if (out_->position() > position)
    throw InvalidArgument(fmt::format("{}: internal layout error: at byte {} but the next field is at {}",
                                      target_.string(), out_->position(), position));
  out_->write_zeros(position - out_->position());
}

void Writer::start(base::Progress* progress) {
  if (out_ || committed_) throw InvalidArgument(fmt::format("{}: start() called twice", target_.string()));
  storage_offset_ = storage_segment_offset();
  const uint64_t metadata_offset = detail::kEntrySegmentOffset + entry_segment_size_;
  auto out = std::make_unique<base::AtomicFile>(target_);

  std::byte h[kHeaderSize] = {};
  store<uint32_t>(h + detail::kHdrMagic, kMagic);
  store<uint64_t>(h + detail::kHdrHeaderSize, kHeaderSize);  // versions, next header, flags stay 0
  store<uint64_t>(h + detail::kHdrEntryCount, entries_.size());
  store<uint64_t>(h + detail::kHdrEntrySegment, detail::kEntrySegmentOffset);
  store<uint64_t>(h + detail::kHdrEntrySegment + 8, entry_segment_size_);
  store<uint64_t>(h + detail::kHdrMetadataSegment, metadata_offset);
  store<uint64_t>(h + detail::kHdrMetadataSegment + 8, metadata_segment_size_);
  store<uint64_t>(h + detail::kHdrStorageSegment, storage_offset_);
  store<uint64_t>(h + detail::kHdrStorageSegment + 8, storage_segment_size_);
  out->write(h, sizeof h);
  out_ = std::move(out);

  uint64_t name_offset = 0;  // within the metadata segment: each name, then its metadata
  for (const Declared& d : entries_) {
    pad_to(checked_align_up(out_->position(), kEntryAlignment, "irpa entry record"));
    std::byte r[kSplatEntrySize] = {};
    const uint64_t size = d.type == EntryType::Data ? kDataEntrySize : kSplatEntrySize;
    store<uint64_t>(r + detail::kEntSize, size);
    store<uint32_t>(r + detail::kEntType, static_cast<uint32_t>(d.type));
    store<uint64_t>(r + detail::kEntName, name_offset);
    store<uint64_t>(r + detail::kEntName + 8, d.name.size());
    name_offset += d.name.size();
    if (!d.metadata.empty()) {  // an empty blob is stored as (0, 0), as IREE does
      store<uint64_t>(r + detail::kEntMetadata, name_offset);
      store<uint64_t>(r + detail::kEntMetadata + 8, d.metadata.size());
      name_offset += d.metadata.size();
    }
    if (d.type == EntryType::Data) {
      store<uint64_t>(r + detail::kEntMinimumAlignment, kDataAlignment);
      store<uint64_t>(r + detail::kDataStorage, d.storage_offset);
      store<uint64_t>(r + detail::kDataStorage + 8, d.length);
    } else {
      store<uint64_t>(r + detail::kSplatLength, d.length);
      std::copy(d.pattern.begin(), d.pattern.end(), r + detail::kSplatPattern);
      r[detail::kSplatPatternLength] = static_cast<std::byte>(d.pattern_length);
    }
    out_->write(r, static_cast<size_t>(size));
  }
  for (const Declared& d : entries_) {
    out_->write(d.name.data(), d.name.size());
    out_->write(d.metadata.data(), d.metadata.size());
  }
  progress_ = progress;
  advance_past_full_entries();
}

void Writer::advance_past_full_entries() {
  while (current_ < entries_.size() &&
         (entries_[current_].type != EntryType::Data || current_done_ == entries_[current_].length)) {
    ++current_;
    current_done_ = 0;
  }
}

void Writer::write(std::span<const std::byte> bytes) {
  if (committed_) throw InvalidArgument(fmt::format("{}: write after commit", target_.string()));
  if (!out_) start();
  if (bytes.size() > remaining())
    throw InvalidArgument(fmt::format("{}: {} bytes written but only {} of the declared {} data bytes remain",
                                      target_.string(), bytes.size(), remaining(), data_bytes_));
  while (!bytes.empty()) {
    const Declared& d = entries_[current_];  // remaining() > 0, so a data entry with room is next
    const uint64_t take = std::min<uint64_t>(bytes.size(), d.length - current_done_);
    pad_to(storage_offset_ + d.storage_offset + current_done_);
    out_->write(bytes.data(), static_cast<size_t>(take));
    bytes = bytes.subspan(static_cast<size_t>(take));
    current_done_ += take;
    written_ += take;
    if (progress_) progress_->advance(take);
    advance_past_full_entries();
  }
}

uint64_t Writer::commit() {
  if (committed_) throw InvalidArgument(fmt::format("{}: commit() called twice", target_.string()));
  if (!out_) start();
  if (remaining() > 0) {
    const Declared& d = entries_[current_];
    throw InvalidArgument(
        fmt::format("{}: commit() with {} of {} data bytes missing; entry {} '{}' has {} of its {} bytes",
                    target_.string(), remaining(), data_bytes_, current_, d.name, current_done_, d.length));
  }
  const uint64_t size = file_size();
  pad_to(size);
  out_->commit();
  committed_ = true;
  out_.reset();
  return size;
}

}  // namespace skainet::irpa
