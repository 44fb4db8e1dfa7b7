// The reader refuses damaged archives with a FormatError of the right kind that names the file, the
// entry and the offset, and never reads out of bounds.
#include <gtest/gtest.h>

#include <cstring>

#include "gguf_builder.hpp"
#include "irpa/detail.hpp"
#include "irpa_support.hpp"
#include "skainet/io/irpa.hpp"
#include "temp_dir.hpp"

namespace skainet {
namespace {

namespace d = irpa::detail;
using irpa::FormatErrorKind;
using test::pattern_bytes;

class IrpaMalformed : public ::testing::Test {
 protected:
  void SetUp() override {
    // Three data entries (records at 96, 176, 256) and a splat (record at 336).
    irpa::Writer w(dir_ / "valid.irpa");
    w.add_data("aa", 5);
    w.add_data("bb", 70);
    w.add_data("cc", 0);
    const std::byte pattern[2] = {std::byte{1}, std::byte{2}};
    w.add_splat("dd", 8, pattern);
    w.write(pattern_bytes(75, 1));
    w.commit();
    valid_ = test::file_bytes(dir_ / "valid.irpa");
  }

  static constexpr uint64_t record(size_t i) { return 96 + 80 * i; }

  template <class T>
  std::vector<uint8_t> patched(size_t at, T value) const {
    std::vector<uint8_t> b = valid_;
    std::memcpy(b.data() + at, &value, sizeof value);
    return b;
  }

  // Reads `bytes` as an archive; returns the error (failing the test if there is none).
  irpa::FormatError refused(const std::vector<uint8_t>& bytes, FormatErrorKind kind) {
    const auto path = dir_ / "bad.irpa";
    test::write_file(path, bytes);
    try {
      irpa::read_index(path);
    } catch (const irpa::FormatError& e) {
      EXPECT_EQ(e.kind(), kind) << irpa::error_kind_name(e.kind()) << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
      return e;
    }
    ADD_FAILURE() << "accepted; expected " << irpa::error_kind_name(kind);
    return irpa::FormatError(kind, "");
  }

  test::TempDir dir_{"irpa-bad"};
  std::vector<uint8_t> valid_;
};

TEST_F(IrpaMalformed, TheValidArchiveReads) {
  test::write_file(dir_ / "ok.irpa", valid_);
  const irpa::Archive a = irpa::read_index(dir_ / "ok.irpa");
  ASSERT_EQ(a.entries.size(), 4u);
  EXPECT_EQ(a.entries[3].record_offset, record(3));
  EXPECT_EQ(a.entries[1].record_offset, record(1));
}

TEST_F(IrpaMalformed, EveryTruncationInsideTheContentIsRefused) {
  const irpa::Archive a = irpa::read_index(dir_ / "valid.irpa");
  const uint64_t content_end = a.storage_segment.offset + a.storage_segment.length;
  ASSERT_LT(content_end, valid_.size());
  for (uint64_t n = 0; n < content_end; ++n) {
    test::write_file(dir_ / "cut.irpa", valid_, n);
    try {
      irpa::read_index(dir_ / "cut.irpa");
      ADD_FAILURE() << "a prefix of " << n << " bytes was accepted";
    } catch (const irpa::FormatError& e) {
      EXPECT_EQ(e.kind(), FormatErrorKind::Truncated) << n << ": " << e.what();
    }
  }
  // The page padding after the last data byte holds nothing: IREE reads such a file, and so do we.
  for (uint64_t n : {content_end, content_end + 1, uint64_t{valid_.size()} - 1}) {
    test::write_file(dir_ / "cut.irpa", valid_, n);
    EXPECT_EQ(irpa::read_index(dir_ / "cut.irpa").entries.size(), 4u) << n;
  }
}

TEST_F(IrpaMalformed, Header) {
  const std::string m = refused(patched<uint32_t>(0, 0x46554747), FormatErrorKind::BadMagic).what();
  EXPECT_NE(m.find("0x46554747"), std::string::npos) << m;
  refused(patched<uint16_t>(d::kHdrVersionMajor, 1), FormatErrorKind::UnsupportedVersion);
  refused(patched<uint16_t>(d::kHdrVersionMinor, 1), FormatErrorKind::UnsupportedVersion);
  refused(patched<uint64_t>(d::kHdrHeaderSize, 96), FormatErrorKind::BadHeader);
  refused(patched<uint64_t>(d::kHdrNextHeader, 4096), FormatErrorKind::LinkedArchive);
  refused(patched<uint64_t>(d::kHdrFlags, 1), FormatErrorKind::BadHeader);
}

TEST_F(IrpaMalformed, Segments) {
  refused(patched<uint64_t>(d::kHdrEntrySegment, 4096), FormatErrorKind::Truncated);
  refused(patched<uint64_t>(d::kHdrEntrySegment, 88), FormatErrorKind::BadHeader);  // not on 16
  refused(patched<uint64_t>(d::kHdrEntrySegment, 0), FormatErrorKind::BadHeader);   // over the header
  refused(patched<uint64_t>(d::kHdrMetadataSegment + 8, UINT64_MAX),
          FormatErrorKind::OutOfRange);  // offset + length overflows
  refused(patched<uint64_t>(d::kHdrStorageSegment, UINT64_MAX - 8), FormatErrorKind::OutOfRange);
  refused(patched<uint64_t>(d::kHdrStorageSegment + 8, 1u << 20), FormatErrorKind::Truncated);
  // The storage segment made too short for entry bb's data.
  refused(patched<uint64_t>(d::kHdrStorageSegment + 8, 100), FormatErrorKind::OutOfRange);
}

TEST_F(IrpaMalformed, EntryCount) {
  refused(patched<uint64_t>(d::kHdrEntryCount, UINT64_MAX), FormatErrorKind::TooLarge);
  refused(patched<uint64_t>(d::kHdrEntryCount, 5), FormatErrorKind::BadEntry);
  refused(patched<uint64_t>(d::kHdrEntryCount, 1u << 19), FormatErrorKind::BadEntry);
  test::write_file(dir_ / "fewer.irpa", patched<uint64_t>(d::kHdrEntryCount, 2));  // a longer table is allowed
  EXPECT_EQ(irpa::read_index(dir_ / "fewer.irpa").entries.size(), 2u);
}

TEST_F(IrpaMalformed, EntryRecords) {
  refused(patched<uint64_t>(record(1) + d::kEntSize, 10), FormatErrorKind::BadEntry);
  refused(patched<uint64_t>(record(1) + d::kEntSize, 60), FormatErrorKind::BadEntry);  // too small for data
  refused(patched<uint64_t>(record(3) + d::kEntSize, 84), FormatErrorKind::BadEntry);  // too small for a splat
  refused(patched<uint64_t>(record(3) + d::kEntSize, 86), FormatErrorKind::BadEntry);  // past the table
  const std::string m =
      refused(patched<uint32_t>(record(2) + d::kEntType, 3), FormatErrorKind::UnsupportedEntryType).what();
  EXPECT_NE(m.find("entry 2 'cc'"), std::string::npos) << m;
  EXPECT_NE(m.find("offset " + std::to_string(record(2) + d::kEntType)), std::string::npos) << m;
  refused(patched<uint32_t>(record(2) + d::kEntType, 7), FormatErrorKind::UnsupportedEntryType);
}

TEST_F(IrpaMalformed, Names) {
  refused(patched<uint64_t>(record(1) + d::kEntName + 8, 0), FormatErrorKind::InvalidName);
  refused(patched<uint64_t>(record(1) + d::kEntName + 8, 1u << 20), FormatErrorKind::InvalidName);
  refused(patched<uint64_t>(record(1) + d::kEntName, 7), FormatErrorKind::OutOfRange);  // 7 + 2 > 8 bytes of names
  refused(patched<uint64_t>(record(1) + d::kEntName, UINT64_MAX), FormatErrorKind::OutOfRange);
  const std::string m = refused(patched<uint64_t>(record(1) + d::kEntName, 0), FormatErrorKind::DuplicateName).what();
  EXPECT_NE(m.find("entry 0"), std::string::npos) << m;
}

TEST_F(IrpaMalformed, Metadata) {
  auto b = patched<uint64_t>(record(0) + d::kEntMetadata, 8);  // one byte past the names
  std::memcpy(b.data() + record(0) + d::kEntMetadata + 8, "\x01\0\0\0\0\0\0\0", 8);
  refused(b, FormatErrorKind::OutOfRange);
  refused(patched<uint64_t>(record(0) + d::kEntMetadata + 8, 1u << 30), FormatErrorKind::TooLarge);
}

TEST_F(IrpaMalformed, DataRanges) {
  refused(patched<uint64_t>(record(1) + d::kDataStorage, 4096), FormatErrorKind::OutOfRange);
  refused(patched<uint64_t>(record(1) + d::kDataStorage + 8, UINT64_MAX), FormatErrorKind::OutOfRange);
  refused(patched<uint64_t>(record(1) + d::kDataStorage, 1), FormatErrorKind::Misaligned);
  refused(patched<uint64_t>(record(1) + d::kEntMinimumAlignment, 48), FormatErrorKind::Misaligned);
  // No alignment asked: an unaligned offset is fine.
  auto b = patched<uint64_t>(record(1) + d::kEntMinimumAlignment, 0);
  std::memcpy(b.data() + record(1) + d::kDataStorage, "\x01\0\0\0\0\0\0\0", 8);
  test::write_file(dir_ / "unaligned.irpa", b);
  EXPECT_EQ(irpa::read_index(dir_ / "unaligned.irpa").entries[1].file_offset % 64, 1u);
}

TEST_F(IrpaMalformed, Splats) {
  refused(patched<uint8_t>(record(3) + d::kSplatPatternLength, 3), FormatErrorKind::BadSplat);
  refused(patched<uint8_t>(record(3) + d::kSplatPatternLength, 0), FormatErrorKind::BadSplat);
  refused(patched<uint8_t>(record(3) + d::kSplatPatternLength, 32), FormatErrorKind::BadSplat);
  refused(patched<uint64_t>(record(3) + d::kSplatLength, 9), FormatErrorKind::BadSplat);  // 2 does not divide 9
}

TEST_F(IrpaMalformed, SkipEntriesAreValidatedThenIgnored) {
  test::write_file(dir_ / "skip.irpa", patched<uint32_t>(record(1) + d::kEntType, 0));
  const irpa::Archive a = irpa::read_index(dir_ / "skip.irpa");
  EXPECT_EQ(a.skipped_entries, 1u);
  ASSERT_EQ(a.entries.size(), 3u);
  EXPECT_EQ(a.find("bb"), nullptr);
  auto b = patched<uint32_t>(record(1) + d::kEntType, 0);
  std::memcpy(b.data() + record(1) + d::kEntName, "\xff\0\0\0\0\0\0\0", 8);
  refused(b, FormatErrorKind::OutOfRange);
}

TEST_F(IrpaMalformed, ReaderLimits) {
  test::write_file(dir_ / "ok.irpa", valid_);
  irpa::ReadOptions o;
  o.max_entries = 3;
  EXPECT_THROW(irpa::read_index(dir_ / "ok.irpa", o), irpa::FormatError);
  o = {};
  o.max_name_bytes = 1;
  EXPECT_THROW(irpa::read_index(dir_ / "ok.irpa", o), irpa::FormatError);
  EXPECT_THROW(irpa::read_index(dir_ / "missing.irpa"), IoError);
}

}  // namespace
}  // namespace skainet
