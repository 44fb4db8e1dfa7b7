// A file cut short anywhere must read as Truncated: at each named section of a small valid file, and
// as a sweep over every prefix of it.
#include <map>
#include <sstream>

#include "malformed/malformed_support.hpp"

namespace skainet::test {
namespace {

using gguf::FormatErrorKind;

class Truncation : public MalformedTest {};

TEST_F(Truncation, TheWholeReferenceFileReads) {
  const ValidFile f = make_valid_file();
  const gguf::Header h = gguf::read_header(write("whole.gguf", f.bytes));
  EXPECT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.data_offset, f.data_offset);
}

TEST_F(Truncation, AtEverySection) {
  const ValidFile f = make_valid_file();
  ASSERT_GT(f.marks.size(), 30u);
  for (const ValidFile::Mark& m : f.marks) {
    SCOPED_TRACE(std::string("cut at ") + m.what + " (byte " + std::to_string(m.at) + ")");
    ASSERT_LT(m.at, f.bytes.size());
    const auto path = write("cut.gguf", f.bytes, m.at);
    const auto failure = read_failure(path);
    if (!failure) continue;
    EXPECT_EQ(failure->kind, FormatErrorKind::Truncated) << failure->message;
    EXPECT_NE(failure->message.find(path.string()), std::string::npos) << failure->message;
    // The message says where the file ends, so a reader of the log can compare with the real size.
    EXPECT_NE(failure->message.find(std::to_string(m.at)), std::string::npos) << failure->message;
  }
}

TEST_F(Truncation, EveryPrefixOfAValidFile) {
  const ValidFile f = make_valid_file();
  // Outcome other than Truncated -> how many prefixes, and the first one's message.
  std::map<std::string, std::pair<size_t, std::string>> wrong;
  uint64_t worst_peak = 0;
  const auto path = file("prefix.gguf");
  for (size_t n = 0; n < f.bytes.size(); ++n) {
    write_file(path, f.bytes, n);
    std::string outcome, message;
    AllocWatch watch;
    try {
      gguf::read_header(path);
      outcome = "no error";
    } catch (const gguf::FormatError& e) {
      if (e.kind() != FormatErrorKind::Truncated)
        outcome = std::string(gguf::error_kind_name(e.kind())), message = e.what();
    } catch (const std::exception& e) {
      outcome = "not a FormatError", message = e.what();
    }
    worst_peak = std::max(worst_peak, watch.stop().peak_live);
    if (outcome.empty()) continue;
    auto& [count, first] = wrong[outcome];
    if (count++ == 0) first = std::to_string(n) + " bytes: " + message;
  }
  std::ostringstream report;
  for (const auto& [outcome, seen] : wrong)
    report << "  " << outcome << " x" << seen.first << ", first at " << seen.second << "\n";
  EXPECT_TRUE(wrong.empty()) << "prefixes of a " << f.bytes.size() << "-byte file that did not read as Truncated:\n"
                             << report.str();
  if (allocation_counter_available()) {
    EXPECT_LE(worst_peak, f.bytes.size() + kAllocationSlack);
  }
}

// Tools that inspect damaged files can still read a complete header whose data was cut off.
TEST_F(Truncation, CutDataIsAcceptedWhenBoundsAreNotChecked) {
  const ValidFile f = make_valid_file();
  gguf::ReadOptions lax;
  lax.check_data_bounds = false;
  const gguf::Header h = gguf::read_header(write("cut_data.gguf", f.bytes, f.data_offset + 10), lax);
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[1].file_offset, f.data_offset + 64);
}

}  // namespace
}  // namespace skainet::test
