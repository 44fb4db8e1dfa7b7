// libFuzzer target for gguf::read_header. Each input becomes a file (an in-memory memfd, reached by
// its /proc path, since the reader works on files) and is read with data bounds checked; the only
// acceptable failure is a skainet::Error. Anything else (a crash, a sanitizer report, another
// exception type) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_target.hpp"
#include "skainet/io/gguf.hpp"

namespace {

void read_and_use(const std::string& path, const skainet::gguf::ReadOptions& options) {
  try {
    const skainet::gguf::Header h = skainet::gguf::read_header(path, options);
    // Touch what a caller would, so a header that passed validation but holds a bad value shows up.
    for (const skainet::gguf::TensorInfo& t : h.tensors) {
      if (t.file_offset < h.data_offset) std::abort();
      if (options.check_data_bounds && t.file_offset + t.bytes > h.file_size) std::abort();
      (void)h.find_tensor(t.name);
    }
    for (const skainet::gguf::KeyValue& kv : h.metadata) {
      if (h.find(kv.key) == nullptr) std::abort();
      if (!kv.value.is_array()) (void)skainet::gguf::to_string(kv.value.scalar);
    }
    (void)h.find_u32("general.alignment");
  } catch (const skainet::Error&) {
    // Malformed input is expected to end here.
  }
}

}  // namespace

namespace skainet::fuzz {

int gguf_reader_one_input(const uint8_t* data, size_t size) {
  static MemFile file;
  file.assign(data, size);
  gguf::ReadOptions strict;
  read_and_use(file.path, strict);
  gguf::ReadOptions lax;  // the path tools take on damaged files
  lax.check_data_bounds = false;
  read_and_use(file.path, lax);
  return 0;
}

// Seeds come from make_seed_corpus.sh (gguf-py writes them); none are built in.
std::vector<Bytes> gguf_reader_seeds() { return {}; }

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::gguf_reader_one_input, skainet::fuzz::gguf_reader_seeds)
