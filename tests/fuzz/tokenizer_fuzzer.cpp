// Fuzz target: the SPM and BPE tokenizers on arbitrary bytes. The real vocabularies of
// ../shared/models/vocab are read once, at the first input. The first byte picks the vocabulary and
// the encode flags; the rest is the text, encoded, then decoded (whole and through StreamDecoder).
// The same bytes, read as int32 ids, are decoded too: in range (folded into the vocabulary) they
// must decode; out of range, InvalidArgument is the documented answer. Only a skainet::Error may
// escape the tokenizer; an id outside the vocabulary or any other exception is a finding.
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "skainet/text/text.hpp"

namespace skainet::fuzz {
namespace {

constexpr const char* kVocabs[] = {"llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2", "deepseek-coder", "falcon"};

std::filesystem::path vocab_path(std::string_view name) {
  return std::filesystem::path(SKAINET_SHARED_MODELS) / "vocab" / ("ggml-vocab-" + std::string(name) + ".gguf");
}

const std::vector<text::Tokenizer>& tokenizers() {
  static const std::vector<text::Tokenizer> all = [] {
    std::vector<text::Tokenizer> v;
    for (const char* name : kVocabs) v.push_back(text::Tokenizer::from_file(vocab_path(name)));
    return v;
  }();
  return all;
}

void check_ids(const text::Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) fail("tokenizer_fuzzer", "encode produced an id outside the vocabulary");
}

}  // namespace

int tokenizer_one_input(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& all = tokenizers();
  const uint8_t flags = data[0];
  const text::Tokenizer& tok = all[(flags & 0x0f) % std::size(kVocabs)];
  const std::string_view input = as_text(data + 1, size - 1);
  const bool add_special = (flags & 0x10) != 0, parse_special = (flags & 0x20) != 0;
  text::DecodeOptions options;
  options.render_special = (flags & 0x40) != 0;
  options.strip_leading_space = (flags & 0x80) == 0;
  try {
    const std::vector<int32_t> ids = tok.encode(input, add_special, parse_special);
    check_ids(tok, ids);
    const std::string text = tok.decode(ids, options);
    text::StreamDecoder stream(tok, options);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    if (streamed != text) fail("tokenizer_fuzzer", "StreamDecoder and decode disagree");
  } catch (const Error&) {
  }

  // The bytes as ids: as they are (out of range is an InvalidArgument), and folded into range.
  std::vector<int32_t> raw((size - 1) / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data + 1, raw.size() * 4);
  try {
    (void)tok.decode(raw, options);
  } catch (const InvalidArgument&) {
  }
  for (int32_t& id : raw)
    id = static_cast<int32_t>(static_cast<uint32_t>(id) % static_cast<uint32_t>(tok.vocab_size()));
  try {
    (void)tok.decode(raw, options);
    text::StreamDecoder stream(tok, options);
    for (int32_t id : raw) (void)stream.push(id);
    (void)stream.flush();
    for (int32_t id : raw) (void)tok.is_eog(id);
  } catch (const Error&) {
  }
  return 0;
}

std::vector<Bytes> tokenizer_seeds() {
  const std::string_view texts[] = {
      "Hello world",
      " Hello World!\n\n  How are you?\t",
      "<s>[INST] <<SYS>> system <</SYS>> hi [/INST]</s><|endoftext|><|im_start|>user\n",
      "3333333 1.5e10 0x7f $100,000.00",
      "\xe4\xb8\xad\xe6\x96\x87 \xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xf0\x9f\x98\x80 caf\xc3\xa9",
      "\xff\xfe\x80\xc0\xaf invalid \xed\xa0\x80 utf-8 \xf4\x90\x80\x80",
      "   leading spaces and trailing   ",
      "def f(x):\n    return x**2  # comment\n",
  };
  std::vector<Bytes> seeds;
  for (size_t v = 0; v < std::size(kVocabs); ++v)
    for (size_t t = 0; t < std::size(texts); ++t) {
      Bytes s{static_cast<uint8_t>(v + 16 * (t % 16))};
      s.insert(s.end(), texts[t].begin(), texts[t].end());
      seeds.push_back(std::move(s));
    }
  return seeds;
}

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::tokenizer_one_input, skainet::fuzz::tokenizer_seeds)
