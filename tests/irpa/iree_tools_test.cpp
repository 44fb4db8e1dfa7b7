// Conformity with IREE 3.13's own tools: iree-dump-parameters reads what we write, we read what
// iree-convert-parameters and iree-create-parameters write, and for the same entries our writer
// produces the same archive as iree-convert-parameters. The tools come from the test venv; when they
// are missing these tests fail (run scripts/setup.sh), they never skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "irpa_support.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/io/irpa.hpp"
#include "temp_dir.hpp"

namespace skainet {
namespace {

using test::pattern_bytes;

const std::filesystem::path kStories = SKAINET_SHARED_MODELS "/stories260K.gguf";

struct DumpedEntry {
  std::string start;  // absolute offset, or "-" for a splat
  uint64_t length = 0;
  std::string name;
};

// Runs a tool from the venv; the test fails (never skips) if it is missing or exits non-zero.
std::string run_tool(const char* tool, const std::string& args) {
  const auto path = test::iree_tool(tool);
  EXPECT_TRUE(std::filesystem::exists(path))
      << path << " is missing: run scripts/setup.sh (it installs iree-base-runtime)";
  std::string out;
  const int rc = test::run_command(test::quoted(path) + " " + args, out);
  EXPECT_EQ(rc, 0) << tool << " " << args << ":\n" << out;
  return out;
}

std::string trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

// Parses iree-dump-parameters' table: "start | end | length | `name`" per entry.
std::vector<DumpedEntry> dump(const std::filesystem::path& archive) {
  const std::string out = run_tool("iree-dump-parameters", "--parameters=" + test::quoted(archive));
  std::vector<DumpedEntry> rows;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t name_at = line.find("| `");
    if (line.rfind("//", 0) == 0 || name_at == std::string::npos || line.back() != '`') continue;
    const std::string_view cells(line.data(), name_at);
    const size_t bar1 = cells.find('|'), bar2 = cells.find('|', bar1 + 1);
    if (bar1 == std::string_view::npos || bar2 == std::string_view::npos) continue;
    rows.push_back({trimmed(cells.substr(0, bar1)), std::stoull(trimmed(cells.substr(bar2 + 1))),
                    line.substr(name_at + 3, line.size() - name_at - 4)});
  }
  return rows;
}

std::vector<std::byte> gguf_tensor_bytes(const base::FileReader& file, const gguf::TensorInfo& t) {
  std::vector<std::byte> b(static_cast<size_t>(t.bytes));
  file.read_at(t.file_offset, b.data(), b.size());
  return b;
}

class IrpaIreeTools : public ::testing::Test {
 protected:
  test::TempDir dir_{"irpa-iree"};
};

TEST_F(IrpaIreeTools, DumpParametersListsEveryEntryWeWrite) {
  const auto path = dir_ / "ours.irpa";
  const std::byte pattern[4] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  const std::vector<std::byte> meta = pattern_bytes(9, 7);
  struct Declared {
    std::string name;
    uint64_t length;
    bool splat;
  };
  const std::vector<Declared> declared = {{"first", 1, false},
                                          {"zero", 0, false},
                                          {"odd.63", 63, false},
                                          {"splat.f32", 4096, true},
                                          {"odd.65", 65, false},
                                          {"wörter.权重", 200, false},
                                          {std::string(300, 'x'), 3, false},
                                          {"last.zero", 0, false}};
  irpa::Writer w(path);
  for (const Declared& d : declared) {
    if (d.splat)
      w.add_splat(d.name, d.length, pattern, meta);
    else
      w.add_data(d.name, d.length,
                 d.name == "odd.65" ? std::span<const std::byte>(meta) : std::span<const std::byte>());
  }
  w.write(pattern_bytes(w.data_bytes(), 3));
  w.commit();

  const irpa::Archive ours = irpa::read_index(path);
  const std::vector<DumpedEntry> rows = dump(path);
  ASSERT_EQ(rows.size(), declared.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].name, declared[i].name) << i;
    EXPECT_EQ(rows[i].length, declared[i].length) << declared[i].name;
    // IREE reports a zero-length data entry at offset 0 and a splat without an offset.
    const std::string start = declared[i].splat         ? "-"
                              : declared[i].length == 0 ? "0"
                                                        : std::to_string(ours.entries[i].file_offset);
    EXPECT_EQ(rows[i].start, start) << declared[i].name;
  }
}

TEST_F(IrpaIreeTools, DumpParametersReadsOurEmptyArchive) {
  const auto path = dir_ / "empty.irpa";
  test::write_archive(path, {});
  const std::string out = run_tool("iree-dump-parameters", "--parameters=" + test::quoted(path));
  EXPECT_NE(out.find("(0 entries, 0 total bytes)"), std::string::npos) << out;
}

TEST_F(IrpaIreeTools, OurReaderReadsIreeConvertedStories) {
  const auto path = dir_ / "iree.irpa";
  run_tool("iree-convert-parameters",
           "--parameters=" + test::quoted(kStories) + " --output=" + test::quoted(path) + " --quiet");
  const gguf::Header h = gguf::read_header(kStories);
  const base::FileReader gguf_file(kStories);
  irpa::ArchiveFile a(path);
  ASSERT_EQ(a.index().entries.size(), h.tensors.size());
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    const irpa::Entry& e = a.index().entries[i];
    const gguf::TensorInfo& t = h.tensors[i];
    EXPECT_EQ(e.name, t.name);
    EXPECT_EQ(e.type, irpa::EntryType::Data);
    EXPECT_EQ(e.length, t.bytes) << t.name;
    EXPECT_TRUE(a.read(e) == gguf_tensor_bytes(gguf_file, t)) << t.name;
  }
}

TEST_F(IrpaIreeTools, OurArchiveOfStoriesEqualsIreeConvertParameters) {
  const auto theirs = dir_ / "iree.irpa", ours = dir_ / "ours.irpa";
  run_tool("iree-convert-parameters",
           "--parameters=" + test::quoted(kStories) + " --output=" + test::quoted(theirs) + " --quiet");

  // Stream the tensors straight from the GGUF in odd-sized chunks that straddle entries.
  const gguf::Header h = gguf::read_header(kStories);
  const base::FileReader gguf_file(kStories);
  irpa::Writer w(ours);
  for (const gguf::TensorInfo& t : h.tensors) w.add_data(t.name, t.bytes);
  w.start();
  std::vector<std::byte> chunk(7777);
  size_t filled = 0;
  for (const gguf::TensorInfo& t : h.tensors) {
    for (uint64_t at = 0; at < t.bytes;) {
      const size_t take = static_cast<size_t>(std::min<uint64_t>(chunk.size() - filled, t.bytes - at));
      gguf_file.read_at(t.file_offset + at, chunk.data() + filled, take);
      at += take;
      filled += take;
      if (filled == chunk.size()) {
        w.write(chunk);
        filled = 0;
      }
    }
  }
  w.write(std::span(chunk).first(filled));
  w.commit();

  irpa::ArchiveFile a(ours), b(theirs);
  ASSERT_EQ(a.index().entries.size(), b.index().entries.size());
  for (size_t i = 0; i < a.index().entries.size(); ++i) {
    const irpa::Entry &x = a.index().entries[i], &y = b.index().entries[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.length, y.length) << x.name;
    EXPECT_EQ(x.file_offset, y.file_offset) << x.name;
    EXPECT_TRUE(a.read(x) == b.read(y)) << x.name;
  }
  // Same entries, same layout: the files are identical byte for byte.
  EXPECT_TRUE(test::file_bytes(ours) == test::file_bytes(theirs));
}

TEST_F(IrpaIreeTools, OurReaderReadsIreeSplatsAndZeroedData) {
  const auto path = dir_ / "created.irpa";
  run_tool("iree-create-parameters",
           "--data=a=4xf32 --data=b=3xi8 --splat=s=2xi32=3 --splat=h=8xi16=258 --data=c=1xi16 --output=" +
               test::quoted(path) + " --quiet");
  irpa::ArchiveFile a(path);
  const irpa::Archive& idx = a.index();
  ASSERT_EQ(idx.entries.size(), 5u);
  const irpa::Entry* s = idx.find("s");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->type, irpa::EntryType::Splat);
  EXPECT_EQ(s->length, 8u);
  EXPECT_EQ(a.read(*s), (std::vector<std::byte>{std::byte{3}, {}, {}, {}, std::byte{3}, {}, {}, {}}));
  const irpa::Entry* h = idx.find("h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->pattern_length, 2);
  EXPECT_EQ(h->length, 16u);
  std::vector<std::byte> tail(3);
  a.read(*h, 13, tail);  // 258 = 0x0102, little-endian: 02 01 02 01 ...
  EXPECT_EQ(tail, (std::vector<std::byte>{std::byte{1}, std::byte{2}, std::byte{1}}));
  for (const char* name : {"a", "b", "c"}) {
    const irpa::Entry* e = idx.find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->type, irpa::EntryType::Data);
    EXPECT_EQ(e->file_offset % irpa::kDataAlignment, 0u);
    const auto bytes = a.read(*e);
    EXPECT_TRUE(std::all_of(bytes.begin(), bytes.end(), [](std::byte x) { return x == std::byte{0}; })) << name;
  }
  EXPECT_EQ(idx.find("a")->length, 16u);
  EXPECT_EQ(idx.find("b")->length, 3u);
  EXPECT_EQ(idx.find("c")->length, 2u);
}

TEST_F(IrpaIreeTools, OurReaderReadsIreeStrippedStories) {
  const auto path = dir_ / "stripped.irpa";
  run_tool("iree-convert-parameters",
           "--parameters=" + test::quoted(kStories) + " --strip --output=" + test::quoted(path) + " --quiet");
  const gguf::Header h = gguf::read_header(kStories);
  const irpa::Archive idx = irpa::read_index(path);
  ASSERT_EQ(idx.entries.size(), h.tensors.size());
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    EXPECT_EQ(idx.entries[i].name, h.tensors[i].name);
    EXPECT_EQ(idx.entries[i].type, irpa::EntryType::Splat);
    EXPECT_EQ(idx.entries[i].length, h.tensors[i].bytes);
  }
}

}  // namespace
}  // namespace skainet
