// libFuzzer target for irpa::read_index and ArchiveFile. Each input becomes a file (an in-memory
// memfd, reached by its /proc path, since the reader works on files); the only acceptable failure is
// a skainet::Error. Anything else (a crash, a sanitizer report, another exception type, an accepted
// index that breaks its own invariants) is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "skainet/io/irpa.hpp"

namespace {

void read_and_use(const std::string& path) {
  try {
    const skainet::irpa::ArchiveFile archive(path);
    const skainet::irpa::Archive& a = archive.index();
    // Touch what a caller would, so an index that passed validation but holds a bad value shows up.
    std::vector<std::byte> head(64);
    for (const skainet::irpa::Entry& e : a.entries) {
      if (e.name.empty() || a.find(e.name) != &e) std::abort();
      if (e.type == skainet::irpa::EntryType::Data) {
        if (e.file_offset < a.storage_segment.offset || e.length > a.file_size ||
            e.file_offset > a.file_size - e.length)
          std::abort();
      } else if (e.type != skainet::irpa::EntryType::Splat || e.pattern_length == 0 ||
                 e.length % e.pattern_length != 0) {
        std::abort();
      }
      const size_t n = static_cast<size_t>(std::min<uint64_t>(e.length, head.size()));
      archive.read(e, e.length - n, std::span(head).first(n));
    }
  } catch (const skainet::Error&) {
    // Malformed input is expected to end here.
  }
}

}  // namespace

namespace skainet::fuzz {

int irpa_reader_one_input(const uint8_t* data, size_t size) {
  static MemFile file;
  file.assign(data, size);
  read_and_use(file.path);
  return 0;
}

// Seeds come from make_irpa_seed_corpus.sh (IREE's own tools write them); none are built in.
std::vector<Bytes> irpa_reader_seeds() { return {}; }

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::irpa_reader_one_input, skainet::fuzz::irpa_reader_seeds)
