// The text fuzz targets (tests/fuzz/tokenizer_fuzzer.cpp, pre_tokenizer_fuzzer.cpp, vocab_fuzzer.cpp)
// replayed in the default suite under any compiler: each target's seeds, then seeded mutations of them
// (tests/fuzz/fuzz_replay.hpp). A target aborts on anything but its documented errors, so a crash or a
// broken invariant fails the test; `make fuzz` runs the same targets coverage-guided.
#include <gtest/gtest.h>

#include "fuzz_replay.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/text/text.hpp"

namespace skainet::fuzz {
int tokenizer_one_input(const uint8_t* data, size_t size);
std::vector<Bytes> tokenizer_seeds();
int pre_tokenizer_one_input(const uint8_t* data, size_t size);
std::vector<Bytes> pre_tokenizer_seeds();
int vocab_one_input(const uint8_t* data, size_t size);
std::vector<Bytes> vocab_seeds();
}  // namespace skainet::fuzz

namespace skainet::fuzz {
namespace {

TEST(TextFuzzReplay, TokenizersTakeMutatedTextAndIds) {
  const double s = replay(tokenizer_one_input, tokenizer_seeds(), 6000, 20261203);
  RecordProperty("seconds", std::to_string(s));
}

// Found by tokenizer_fuzzer (phi-3, "<s>[INST] ..." with add_special and parse_special): the parsed
// "<s>" after the added BOS gives two leading BOS, and decode dropped the encoder's space only right
// after the first while StreamDecoder dropped it after both, so `run` and `tokenize` printed
// different text for the same ids.
TEST(TextFuzzReplay, DecodeAndStreamDecoderAgreeAfterTwoLeadingBos) {
  for (const char* name : {"llama-spm", "phi-3"}) {
    const text::Tokenizer tok = text::Tokenizer::from_file(std::filesystem::path(SKAINET_SHARED_MODELS) / "vocab" /
                                                           (std::string("ggml-vocab-") + name + ".gguf"));
    const std::vector<int32_t> ids = tok.encode("<s>[INST] hi", true, true);
    ASSERT_GE(ids.size(), 3u);
    ASSERT_EQ(ids[0], tok.bos());
    ASSERT_EQ(ids[1], tok.bos());
    text::StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    EXPECT_EQ(tok.decode(ids), streamed) << name;
    EXPECT_EQ(tok.decode(ids), "[INST] hi") << name;
  }
}

TEST(TextFuzzReplay, PreTokenizersTileMutatedTextAndPatternsCompileOrAreRefused) {
  const double s = replay(pre_tokenizer_one_input, pre_tokenizer_seeds(), 30000, 20261204);
  RecordProperty("seconds", std::to_string(s));
}

// The mutations only reach the tokenizer if the seeds themselves make one.
TEST(TextFuzzReplay, VocabularySeedsAreWorkingTokenizers) {
  MemFile file;
  for (const Bytes& seed : vocab_seeds()) {
    file.assign(seed.data(), seed.size());
    const text::Tokenizer tok = text::Tokenizer::from_gguf(gguf::read_header(file.path));
    EXPECT_GE(tok.vocab_size(), 300);
    EXPECT_FALSE(tok.encode("Hello world", false).empty());
  }
}

TEST(TextFuzzReplay, MutatedVocabularyHeadersLoadOrFailCleanly) {
  const double s = replay(vocab_one_input, vocab_seeds(), 5000, 20261205);
  RecordProperty("seconds", std::to_string(s));
}

}  // namespace
}  // namespace skainet::fuzz
