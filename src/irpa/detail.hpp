// Internals shared by the .irpa reader and writer (not installed): the packed field offsets of the
// records, as IREE's parameter_archive.h lays them out (all little-endian, no padding).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "skainet/io/irpa.hpp"

namespace skainet::irpa::detail {

static_assert(std::endian::native == std::endian::little, "archive fields are copied as little-endian integers");

// Header (version 0).
inline constexpr size_t kHdrMagic = 0, kHdrVersionMajor = 4, kHdrVersionMinor = 6, kHdrHeaderSize = 8,
                        kHdrNextHeader = 16, kHdrFlags = 24, kHdrEntryCount = 32, kHdrEntrySegment = 40,
                        kHdrMetadataSegment = 56, kHdrStorageSegment = 72;
inline constexpr size_t kHeaderPrefixSize = 32;  // magic, versions, header_size, next header, flags

// Entry record: common prefix, then the type's fields.
inline constexpr size_t kEntSize = 0, kEntType = 8, kEntFlags = 12, kEntName = 20, kEntMetadata = 36,
                        kEntMinimumAlignment = 52;
inline constexpr size_t kDataStorage = 60;  // offset, length
inline constexpr size_t kSplatLength = 60, kSplatPattern = 68, kSplatPatternLength = 84;

static_assert(kEntMinimumAlignment + 8 == kEntryHeaderSize);
static_assert(kDataStorage + 16 == kDataEntrySize);
static_assert(kSplatPatternLength + 1 == kSplatEntrySize);
static_assert(kHdrStorageSegment + 16 == kHeaderSize);

template <class T>
T load(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void store(std::byte* p, T v) noexcept {
  std::memcpy(p, &v, sizeof v);
}

// Offset of the entry table: the header rounded up to the entry alignment (96).
inline constexpr uint64_t kEntrySegmentOffset = (kHeaderSize + kEntryAlignment - 1) / kEntryAlignment * kEntryAlignment;

constexpr bool valid_pattern_length(uint64_t n) noexcept { return n >= 1 && n <= 16 && std::has_single_bit(n); }

}  // namespace skainet::irpa::detail
