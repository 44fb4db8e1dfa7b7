// Writer -> reader round trips, streaming in chunks, and refusal of wrong use of the writer.
#include <gtest/gtest.h>

#include <algorithm>

#include "irpa/detail.hpp"
#include "irpa_support.hpp"
#include "skainet/io/irpa.hpp"
#include "temp_dir.hpp"

namespace skainet {
namespace {

using test::pattern_bytes;
using test::TestEntry;

class IrpaRoundTrip : public ::testing::Test {
 protected:
  // Writes `entries`, reads the archive back, and checks names, lengths, alignment and bytes.
  irpa::Archive round_trip(const std::vector<TestEntry>& entries) {
    const uint64_t size = test::write_archive(path_, entries);
    EXPECT_EQ(size, std::filesystem::file_size(path_));
    EXPECT_EQ(size % irpa::kFileAlignment, 0u);
    irpa::ArchiveFile a(path_);
    const irpa::Archive& idx = a.index();
    EXPECT_EQ(idx.entries.size(), entries.size());
    for (size_t i = 0; i < std::min(idx.entries.size(), entries.size()); ++i) {
      const irpa::Entry& e = idx.entries[i];
      EXPECT_EQ(e.name, entries[i].name) << "entry " << i;
      EXPECT_EQ(e.type, irpa::EntryType::Data);
      EXPECT_EQ(e.length, entries[i].bytes.size()) << e.name;
      EXPECT_EQ(e.file_offset % irpa::kDataAlignment, 0u) << e.name;
      EXPECT_EQ(e.minimum_alignment, irpa::kDataAlignment);
      EXPECT_TRUE(e.metadata.empty());
      EXPECT_TRUE(a.read(e) == entries[i].bytes) << e.name;
      EXPECT_EQ(idx.find(e.name), &e);
    }
    return idx;
  }

  test::TempDir dir_{"irpa"};
  std::filesystem::path path_ = dir_ / "a.irpa";
};

TEST_F(IrpaRoundTrip, EmptyArchiveIsOnePageAndMatchesIreeLayout) {
  const irpa::Archive idx = round_trip({});
  EXPECT_EQ(idx.file_size, irpa::kFileAlignment);
  EXPECT_EQ(idx.entry_segment.offset, 96u);
  EXPECT_EQ(idx.storage_segment.offset, 96u);  // no data entry: storage alignment 1, as IREE's builder
  EXPECT_EQ(idx.data_bytes(), 0u);
  EXPECT_EQ(idx.skipped_entries, 0u);
}

TEST_F(IrpaRoundTrip, ZeroLengthAndOddLengths) {
  const irpa::Archive idx = round_trip({{"zero", {}},
                                        {"one", pattern_bytes(1, 1)},
                                        {"zero.again", {}},
                                        {"sixty-three", pattern_bytes(63, 2)},
                                        {"sixty-five", pattern_bytes(65, 3)},
                                        {"trailing.zero", {}}});
  // A zero-length entry after an odd one still takes the next 64-byte slot, so the storage segment
  // ends on it (IREE's builder sums the same way).
  EXPECT_EQ(idx.storage_segment.length, 64u * 4);
}

TEST_F(IrpaRoundTrip, ManyEntries) {
  std::vector<TestEntry> entries;
  for (uint32_t i = 0; i < 1000; ++i) entries.push_back({"blk." + std::to_string(i) + ".w", pattern_bytes(i % 131, i)});
  round_trip(entries);
}

TEST_F(IrpaRoundTrip, LongAndUnicodeNames) {
  round_trip({{std::string(5000, 'n'), pattern_bytes(10, 1)},
              {"héllo.wörld.权重.🙂", pattern_bytes(7, 2)},
              {"a", pattern_bytes(3, 3)}});
}

TEST_F(IrpaRoundTrip, LargeEntryCrossesTheWriteBuffer) {
  round_trip({{"big", pattern_bytes((5u << 20) + 17, 9)}, {"small", pattern_bytes(5, 1)}});
}

TEST_F(IrpaRoundTrip, ChunkedStreamingEqualsOneShot) {
  std::vector<TestEntry> entries;
  for (uint32_t i = 0; i < 12; ++i)
    entries.push_back({std::to_string(i) + ".t", pattern_bytes(i * 37 + (i % 3 == 0 ? 0 : 5), i)});
  test::write_archive(path_, entries);
  const auto one_shot = test::file_bytes(path_);

  std::vector<std::byte> all;
  for (const TestEntry& e : entries) all.insert(all.end(), e.bytes.begin(), e.bytes.end());
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{64}, size_t{1000}, all.size()}) {
    auto path = dir_ / std::to_string(chunk);
    path += ".irpa";
    irpa::Writer w(path);
    for (const TestEntry& e : entries) w.add_data(e.name, e.bytes.size());
    for (size_t at = 0; at < all.size(); at += chunk)
      w.write(std::span(all).subspan(at, std::min(chunk, all.size() - at)));
    EXPECT_EQ(w.remaining(), 0u);
    EXPECT_EQ(w.current_entry(), entries.size());
    w.commit();
    EXPECT_EQ(test::file_bytes(path), one_shot) << "chunk " << chunk;
  }
}

TEST_F(IrpaRoundTrip, MetadataAndSplatsRoundTrip) {
  const std::vector<std::byte> meta = pattern_bytes(13, 4),
                               pattern = {std::byte{0x11}, std::byte{0x22}, std::byte{0x33}, std::byte{0x44}};
  const auto data = pattern_bytes(100, 5);
  irpa::Writer w(path_);
  w.add_splat("splat", 4096, pattern, meta);
  w.add_data("data", data.size(), meta);
  w.add_splat("byte", 3, std::span(pattern).first(1));
  EXPECT_EQ(w.data_bytes(), data.size());
  w.write(data);
  w.commit();

  irpa::ArchiveFile a(path_);
  const irpa::Archive& idx = a.index();
  ASSERT_EQ(idx.entries.size(), 3u);
  const irpa::Entry& s = idx.entries[0];
  EXPECT_EQ(s.type, irpa::EntryType::Splat);
  EXPECT_EQ(s.length, 4096u);
  EXPECT_EQ(s.pattern_length, 4);
  EXPECT_EQ(s.metadata, meta);
  std::vector<std::byte> part(6);
  a.read(s, 2, part);  // starts mid-pattern
  EXPECT_EQ(part, (std::vector<std::byte>{std::byte{0x33}, std::byte{0x44}, std::byte{0x11}, std::byte{0x22},
                                          std::byte{0x33}, std::byte{0x44}}));
  EXPECT_EQ(idx.entries[1].metadata, meta);
  EXPECT_EQ(a.read(idx.entries[1]), data);
  EXPECT_EQ(a.read(idx.entries[2]), std::vector<std::byte>(3, std::byte{0x11}));
  EXPECT_THROW(a.map(s), InvalidArgument);
  const auto m = a.map(idx.entries[1]);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), m->data()));
  EXPECT_THROW(a.read(idx.entries[1], 95, part), InvalidArgument);  // 95 + 6 > 100
  EXPECT_THROW(a.read(idx.entries[1], UINT64_MAX, std::span(part).first(2)), InvalidArgument);
}

TEST_F(IrpaRoundTrip, ProgressCountsDataBytes) {
  irpa::Writer w(path_);
  w.add_data("a", 10);
  w.add_data("b", 20);
  base::Progress bar("test", w.data_bytes());  // silent: stderr is not a terminal under ctest
  w.start(&bar);
  w.write(pattern_bytes(30, 1));
  EXPECT_EQ(w.commit(), irpa::kFileAlignment);
}

// --- wrong use ------------------------------------------------------------------------------------

TEST_F(IrpaRoundTrip, RefusesTooFewBytesAndLeavesNoFile) {
  {
    irpa::Writer w(path_);
    w.add_data("a", 10);
    w.add_data("b", 10);
    w.write(pattern_bytes(15, 1));
    try {
      w.commit();
      FAIL() << "commit with missing bytes";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("'b' has 5 of its 10 bytes"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path())) << "a temporary file was left behind";
}

TEST_F(IrpaRoundTrip, RefusesTooManyBytesWithoutWritingAny) {
  irpa::Writer w(path_);
  w.add_data("a", 10);
  w.write(pattern_bytes(4, 1));
  EXPECT_THROW(w.write(pattern_bytes(7, 1)), InvalidArgument);
  EXPECT_EQ(w.remaining(), 6u);
  w.write(pattern_bytes(6, 1));
  EXPECT_THROW(w.write(pattern_bytes(1, 1)), InvalidArgument);
  w.commit();
}

TEST_F(IrpaRoundTrip, RefusesCommitTwiceAndUseAfterCommit) {
  irpa::Writer w(path_);
  w.add_data("a", 1);
  w.write(pattern_bytes(1, 1));
  w.commit();
  EXPECT_THROW(w.commit(), InvalidArgument);
  EXPECT_THROW(w.write(pattern_bytes(1, 1)), InvalidArgument);
  EXPECT_THROW(w.add_data("b", 1), InvalidArgument);
  EXPECT_EQ(irpa::read_index(path_).entries.size(), 1u);
}

TEST_F(IrpaRoundTrip, RefusesBadDeclarations) {
  irpa::Writer w(path_);
  w.add_data("a", 1);
  EXPECT_THROW(w.add_data("a", 2), InvalidArgument);
  EXPECT_THROW(w.add_data("", 2), InvalidArgument);
  const std::vector<std::byte> three(3);
  EXPECT_THROW(w.add_splat("s", 9, three), InvalidArgument);
  EXPECT_THROW(w.add_splat("s", 9, std::span(three).first(2)), InvalidArgument);  // 2 does not divide 9
  EXPECT_THROW(w.add_splat("s", 9, std::span(three).first(0)), InvalidArgument);
  EXPECT_THROW(w.add_data("huge", UINT64_MAX - 10), OverflowError);
  EXPECT_EQ(w.entry_count(), 1u);
  w.start();
  EXPECT_THROW(w.add_data("late", 1), InvalidArgument);
  EXPECT_THROW(w.start(), InvalidArgument);
}

TEST_F(IrpaRoundTrip, DroppedWriterLeavesNothing) {
  {
    irpa::Writer w(path_);
    w.add_data("a", 100);
    w.write(pattern_bytes(50, 1));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path()));
}

}  // namespace
}  // namespace skainet
