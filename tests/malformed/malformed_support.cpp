#include "malformed/malformed_support.hpp"

#include <cctype>
#include <typeinfo>

namespace skainet::test {
namespace {

// "offset <digits>" somewhere in the message.
bool names_offset(const std::string& message) {
  for (size_t at = message.find("offset "); at != std::string::npos; at = message.find("offset ", at + 1))
    if (at + 7 < message.size() && std::isdigit(static_cast<unsigned char>(message[at + 7]))) return true;
  return false;
}

}  // namespace

std::filesystem::path MalformedTest::write(const std::string& name, const std::vector<uint8_t>& bytes, size_t n) {
  const std::filesystem::path p = dir_ / name;
  write_file(p, bytes, n);
  return p;
}

std::optional<MalformedTest::Failure> MalformedTest::read_failure(const std::filesystem::path& path,
                                                                  const gguf::ReadOptions& options) {
  AllocWatch watch;
  try {
    gguf::Header h = gguf::read_header(path, options);
    const AllocStats stats = watch.stop();
    ADD_FAILURE() << path.string() << ": read without error (" << h.metadata.size() << " keys, " << h.tensors.size()
                  << " tensors, peak " << stats.peak_live << " bytes)";
  } catch (const gguf::FormatError& e) {
    return Failure{e.kind(), e.what(), watch.stop()};
  } catch (const Error& e) {
    ADD_FAILURE() << path.string() << ": hostile input must give a gguf::FormatError, got " << typeid(e).name() << ": "
                  << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << path.string() << ": escaped the reader as " << typeid(e).name() << ": " << e.what();
  }
  return std::nullopt;
}

void MalformedTest::expect_kind(const std::string& name, const std::vector<uint8_t>& bytes, gguf::FormatErrorKind kind,
                                std::vector<std::string> mentions) {
  SCOPED_TRACE(name);
  const std::filesystem::path path = write(name + ".gguf", bytes);
  const std::optional<Failure> f = read_failure(path);
  if (!f) return;
  EXPECT_EQ(f->kind, kind) << "expected " << gguf::error_kind_name(kind) << ", got " << gguf::error_kind_name(f->kind)
                           << ": " << f->message;
  EXPECT_NE(f->message.find(path.string()), std::string::npos) << "message lacks the path: " << f->message;
  // Where in the file: every reader message carries "offset <byte>" (docs/gguf.md).
  EXPECT_TRUE(names_offset(f->message)) << "message lacks an offset: " << f->message;
  for (const std::string& m : mentions)
    EXPECT_NE(f->message.find(m), std::string::npos) << "message lacks '" << m << "': " << f->message;
  if (allocation_counter_available()) {
    EXPECT_LE(f->allocations.peak_live, bytes.size() + kAllocationSlack)
        << "peak live allocation while reading a " << bytes.size() << "-byte file";
    EXPECT_LE(f->allocations.largest, bytes.size() + kAllocationSlack)
        << "largest single allocation while reading a " << bytes.size() << "-byte file";
  }
}

}  // namespace skainet::test
