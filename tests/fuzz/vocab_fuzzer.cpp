// Fuzz target: vocabulary loading. Each input is a GGUF file (a memfd), read by gguf::read_header and
// handed to text::Tokenizer::from_gguf; a tokenizer that builds then encodes and decodes a few texts
// and renders every token. The seeds are the real vocabularies of ../shared/models/vocab cut down to
// a few hundred tokens and merges (small enough for libFuzzer's -max_len), so mutations reach the
// tokenizer's keys rather than the reader's limits. Only a skainet::Error may escape; an encoded id
// outside the vocabulary is a finding.
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/text/text.hpp"

namespace skainet::fuzz {
namespace {

void use(const text::Tokenizer& tok) {
  const std::string_view texts[] = {"Hello world", " <s>x</s><|endoftext|> \xe4\xb8\xad\xff\n\n  12345 'll"};
  for (std::string_view t : texts)
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = tok.encode(t, special, special);
      for (int32_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) fail("vocab_fuzzer", "encode produced an id outside the vocabulary");
      (void)tok.decode(ids);
    }
  const int32_t n = std::min<int32_t>(tok.vocab_size(), 4096);
  for (int32_t id = 0; id < n; ++id) {
    (void)tok.token_to_piece(id, id % 2 == 0);
    (void)tok.is_eog(id);
  }
}

}  // namespace

int vocab_one_input(const uint8_t* data, size_t size) {
  static MemFile file;
  file.assign(data, size);
  try {
    const gguf::Header h = gguf::read_header(file.path);
    use(text::Tokenizer::from_gguf(h));
  } catch (const Error&) {
  }
  return 0;
}

namespace {

// A real vocabulary with its token arrays cut to `tokens` entries and its merges to `merges`.
Bytes small_vocab(std::string_view name, size_t tokens, size_t merges, int index) {
  const auto dir = std::filesystem::path(SKAINET_SHARED_MODELS) / "vocab";
  const gguf::Header h = gguf::read_header(dir / ("ggml-vocab-" + std::string(name) + ".gguf"));
  const auto out = std::filesystem::temp_directory_path() /
                   ("skainet-vocab-seed-" + std::to_string(::getpid()) + "-" + std::to_string(index) + ".gguf");
  {
    gguf::Writer w(out);
    for (const gguf::KeyValue& kv : h.metadata) {
      if (kv.key == "general.alignment") continue;
      gguf::Value v = kv.value;
      if (v.type == gguf::ValueType::String && std::get<std::string>(v.scalar).size() > 512) continue;
      if (v.is_array()) v.items.resize(std::min(v.items.size(), kv.key == "tokenizer.ggml.merges" ? merges : tokens));
      w.set(kv.key, std::move(v));
    }
    w.write([](size_t, std::span<std::byte>) {});
  }
  Bytes b = read_file(out);
  std::filesystem::remove(out);
  return b;
}

}  // namespace

std::vector<Bytes> vocab_seeds() {
  return {small_vocab("llama-spm", 300, 0, 0), small_vocab("phi-3", 300, 0, 1), small_vocab("gpt-2", 600, 300, 2),
          small_vocab("llama-bpe", 600, 300, 3)};
}

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::vocab_one_input, skainet::fuzz::vocab_seeds)
