#include <gtest/gtest.h>

#include "skainet/text/text.hpp"
#include "text_test_support.hpp"

namespace skainet::text {
namespace {

using testing::read_cases;
using testing::shared_models;
using testing::vocab_path;

const Tokenizer& vocab(const std::string& name) { return testing::shared_tokenizer(name); }

// ---- a tiny hand-made SentencePiece vocabulary -------------------------------------------------

gguf::Value strings(const std::vector<std::string>& v) {
  std::vector<gguf::Scalar> items(v.begin(), v.end());
  return gguf::Value::array(gguf::ValueType::String, std::move(items));
}

struct TinyVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  void add(std::string t, float score, TokenType type = TokenType::Normal) {
    tokens.push_back(std::move(t));
    scores.push_back(score);
    types.push_back(static_cast<int32_t>(type));
  }
  gguf::Header header(const std::string& model = "llama") const {
    gguf::Header h;
    auto set = [&](std::string key, gguf::Value v) { h.metadata.push_back({std::move(key), std::move(v)}); };
    set("tokenizer.ggml.model", gguf::Value::string(model));
    set("tokenizer.ggml.tokens", strings(tokens));
    set("tokenizer.ggml.scores", gguf::Value::array(gguf::ValueType::Float32, {scores.begin(), scores.end()}));
    set("tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::Int32, {types.begin(), types.end()}));
    return h;
  }
};

// <unk> <s> </s>, 256 byte tokens, then a few pieces.
TinyVocab tiny_spm() {
  TinyVocab v;
  v.add("<unk>", 0, TokenType::Unknown);
  v.add("<s>", 0, TokenType::Control);
  v.add("</s>", 0, TokenType::Control);
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) v.add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, TokenType::Byte);
  v.add("\xe2\x96\x81", -1);  // 259 "▁"
  v.add("a", -2);             // 260
  v.add("b", -2);             // 261
  v.add("aa", -3);            // 262
  v.add(
      "\xe2\x96\x81"
      "a",
      -4);                                  // 263 "▁a"
  v.add("ab", -1.5f);                       // 264
  v.add("[X]", 0, TokenType::UserDefined);  // 265
  return v;
}

TEST(SpmTiny, MergesTheHighestScoringPairFirst) {
  const Tokenizer tok(Vocab::from_gguf(tiny_spm().header()));
  // "▁ab": ("a","b") scores -1.5, ("▁","a") -4: "ab" merges first, then nothing joins "▁"+"ab".
  EXPECT_EQ(tok.encode("ab", false), (std::vector<int32_t>{259, 264}));
  // "▁aaa": both ("a","a") pairs score -3 and beat ("▁","a"); the leftmost merges, leaving
  // "▁" "aa" "a" (not "▁" "a" "aa"), and no further pair is a token.
  EXPECT_EQ(tok.encode("aaa", false), (std::vector<int32_t>{259, 262, 260}));
}

TEST(SpmTiny, UnknownCharactersFallBackToByteTokens) {
  const Tokenizer tok(Vocab::from_gguf(tiny_spm().header()));
  // "é" is C3 A9: byte tokens are 3 + byte.
  EXPECT_EQ(tok.encode("\xc3\xa9", false), (std::vector<int32_t>{259, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok.decode(tok.encode("\xc3\xa9", false)), "\xc3\xa9");
}

TEST(SpmTiny, SpecialTokensAndBos) {
  const Tokenizer tok(Vocab::from_gguf(tiny_spm().header()));
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.encode("a", true), (std::vector<int32_t>{1, 263}));
  EXPECT_EQ(tok.encode("", true), (std::vector<int32_t>{1}));
  EXPECT_TRUE(tok.encode("", false).empty());
  // Control text is only a token when parse_special; then the text after it gets a space prefix.
  EXPECT_EQ(tok.encode("</s>a", false, true), (std::vector<int32_t>{2, 263}));
  const std::vector<int32_t> plain = tok.encode("</s>", false, false);
  EXPECT_NE(plain, (std::vector<int32_t>{2}));
  EXPECT_EQ(tok.decode(plain), "</s>");
  // User-defined tokens are matched whole even without parse_special, as in llama.cpp.
  EXPECT_EQ(tok.encode("a[X]a", false, false), (std::vector<int32_t>{263, 265, 263}));
  EXPECT_TRUE(tok.is_eog(2));
  EXPECT_FALSE(tok.is_eog(1));
}

TEST(SpmTiny, DecodeRendersSpecialOnlyWhenAsked) {
  const Tokenizer tok(Vocab::from_gguf(tiny_spm().header()));
  const std::vector<int32_t> ids{1, 263, 262, 2};
  EXPECT_EQ(tok.decode(ids), "aaa");
  EXPECT_EQ(tok.decode(ids, {.render_special = true}), "<s>aaa</s>");
  EXPECT_EQ(tok.decode(ids, {.strip_leading_space = false}), " aaa");
  EXPECT_EQ(tok.token_to_piece(263), " a");
  EXPECT_THROW(tok.token_to_piece(266), InvalidArgument);
  EXPECT_THROW(tok.token_to_piece(-1), InvalidArgument);
}

// ---- construction errors -----------------------------------------------------------------------

VocabErrorKind error_of(const gguf::Header& h, std::string* key = nullptr) {
  try {
    Vocab::from_gguf(h);
  } catch (const VocabError& e) {
    if (key) *key = e.key();
    return e.kind();
  }
  ADD_FAILURE() << "no VocabError";
  return VocabErrorKind::Empty;
}

gguf::Header without(gguf::Header h, std::string_view key) {
  std::erase_if(h.metadata, [&](const gguf::KeyValue& kv) { return kv.key == key; });
  return h;
}

gguf::Value* find_mut(gguf::Header& h, std::string_view key) {
  for (auto& kv : h.metadata)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

TEST(VocabErrors, NameTheKeyAndTheLengths) {
  const gguf::Header good = tiny_spm().header();
  std::string key;
  EXPECT_EQ(error_of(without(good, "tokenizer.ggml.model"), &key), VocabErrorKind::MissingKey);
  EXPECT_EQ(key, "tokenizer.ggml.model");
  EXPECT_EQ(error_of(without(good, "tokenizer.ggml.tokens"), &key), VocabErrorKind::MissingKey);
  EXPECT_EQ(key, "tokenizer.ggml.tokens");

  gguf::Header short_scores = good;
  find_mut(short_scores, "tokenizer.ggml.scores")->items.pop_back();
  try {
    Vocab::from_gguf(short_scores);
    ADD_FAILURE();
  } catch (const VocabError& e) {
    EXPECT_EQ(e.kind(), VocabErrorKind::LengthMismatch);
    EXPECT_EQ(e.key(), "tokenizer.ggml.scores");
    EXPECT_NE(std::string(e.what()).find("265"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("266"), std::string::npos) << e.what();
  }
  gguf::Header short_types = good;
  find_mut(short_types, "tokenizer.ggml.token_type")->items.push_back(int32_t{1});
  EXPECT_EQ(error_of(short_types, &key), VocabErrorKind::LengthMismatch);
  EXPECT_EQ(key, "tokenizer.ggml.token_type");

  gguf::Header wrong = good;
  *find_mut(wrong, "tokenizer.ggml.tokens") = gguf::Value::u32(3);
  EXPECT_EQ(error_of(wrong, &key), VocabErrorKind::WrongType);
  EXPECT_EQ(key, "tokenizer.ggml.tokens");

  gguf::Header empty = good;
  find_mut(empty, "tokenizer.ggml.tokens")->items.clear();
  EXPECT_EQ(error_of(empty), VocabErrorKind::Empty);

  EXPECT_EQ(error_of(tiny_spm().header("bert")), VocabErrorKind::UnknownModel);
  // BPE needs merges; a pre-tokenizer we have no regexes for is refused, as llama.cpp does.
  EXPECT_EQ(error_of(tiny_spm().header("gpt2"), &key), VocabErrorKind::MissingKey);
  EXPECT_EQ(key, "tokenizer.ggml.merges");
  gguf::Header pre = tiny_spm().header("gpt2");
  pre.metadata.push_back({"tokenizer.ggml.merges", strings({"a b"})});
  pre.metadata.push_back({"tokenizer.ggml.pre", gguf::Value::string("no-such-pre")});
  EXPECT_EQ(error_of(pre, &key), VocabErrorKind::UnknownPreTokenizer);
  EXPECT_EQ(key, "tokenizer.ggml.pre");
}

TEST(VocabErrors, OutOfRangeSpecialIdsKeepTheDefault) {
  gguf::Header h = tiny_spm().header();
  h.metadata.push_back({"tokenizer.ggml.eos_token_id", gguf::Value::u32(0xFFFFFFFFu)});
  h.metadata.push_back({"tokenizer.ggml.padding_token_id", gguf::Value::u32(0xFFFFFFFFu)});
  const Vocab v = Vocab::from_gguf(h);
  EXPECT_EQ(v.eos, 2);
  EXPECT_EQ(v.pad, -1);
}

// ---- real vocabularies -------------------------------------------------------------------------

TEST(Stories260K, OnceUponATime) {
  const Tokenizer tok = Tokenizer::from_file(shared_models() / "stories260K.gguf");
  EXPECT_EQ(tok.vocab_size(), 512);
  // llama.cpp (llama-tokenize, pinned in docs/peer.md) gives exactly these ids.
  const std::vector<int32_t> ids = tok.encode("Once upon a time", true);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok.encode("Once upon a time", false), (std::vector<int32_t>{403, 407, 261, 378}));
  EXPECT_EQ(tok.token_to_piece(403), " Once");
  EXPECT_EQ(tok.decode(ids), "Once upon a time");
  EXPECT_EQ(tok.decode(ids, {.render_special = true}), "<s>Once upon a time");
  EXPECT_TRUE(tok.is_eog(2));
}

TEST(Stories260K, GreedyReferenceTextRetokenizes) {
  // docs/peer.md: the 128 ids llama.cpp generated re-tokenize the text they decode to.
  const std::filesystem::path path = testing::text_data() / "../../peer/data/stories260K-greedy-128.ids";
  const std::string ids_text = testing::read_bytes(path);
  if (ids_text.empty()) GTEST_SKIP() << "no " << path;
  std::vector<int32_t> ids;
  std::istringstream in(ids_text);
  for (int32_t id; in >> id;) ids.push_back(id);
  ASSERT_EQ(ids.size(), 128u);
  const Tokenizer tok = Tokenizer::from_file(shared_models() / "stories260K.gguf");
  std::vector<int32_t> all{1, 403, 407, 261, 378};
  all.insert(all.end(), ids.begin(), ids.end());
  const std::string text = tok.decode(all);
  EXPECT_EQ(text.substr(0, 29), "Once upon a time, there was a");
  EXPECT_EQ(tok.encode(text, true), all);
}

TEST(RoundTrip, LlamaSpmCasesDecodeToTheirInput) {
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "deepseek-coder", "falcon", "llama-bpe", "qwen2"}) {
    const Tokenizer& tok = vocab(name);
    size_t i = 0;
    for (const testing::VocabCase& c : read_cases(name)) {
      EXPECT_EQ(tok.decode(tok.encode(c.input, false)), c.input) << name << " case " << i;
      EXPECT_EQ(tok.decode(tok.encode(c.input, true)), c.input) << name << " case " << i << " with BOS";
      ++i;
    }
  }
}

TEST(RoundTrip, StreamDecoderHoldsPartialUtf8) {
  const Tokenizer& tok = vocab("llama-spm");
  // U+1F999 is not a piece: four byte tokens. Nothing may come out until the fourth.
  const std::vector<int32_t> ids = tok.encode("a \xf0\x9f\xa6\x99!", true);
  StreamDecoder dec(tok);
  std::vector<std::string> outs;
  std::string all;
  for (int32_t id : ids) {
    outs.push_back(dec.push(id));
    all += outs.back();
  }
  all += dec.flush();
  EXPECT_EQ(all, "a \xf0\x9f\xa6\x99!");
  EXPECT_EQ(all, tok.decode(ids));
  // BOS, "▁a", "▁", then 4 bytes.
  ASSERT_GE(outs.size(), 7u);
  EXPECT_EQ(outs[0], "");
  EXPECT_EQ(outs[1], "a");
  EXPECT_EQ(outs[3], "");
  EXPECT_EQ(outs[4], "");
  EXPECT_EQ(outs[5], "");
  EXPECT_EQ(outs[6], "\xf0\x9f\xa6\x99");

  dec.reset();
  EXPECT_EQ(dec.push(*tok.find("<0xF0>")), "");
  EXPECT_EQ(dec.flush(), "\xf0");  // an incomplete tail comes out as is at the end
}

TEST(RealVocabs, SpecialTokensAndEog) {
  const Tokenizer& phi = vocab("phi-3");
  EXPECT_EQ(phi.eos(), 32000);
  EXPECT_TRUE(phi.is_eog(32000));  // <|endoftext|>
  EXPECT_TRUE(phi.is_eog(32007));  // <|end|>
  EXPECT_FALSE(phi.is_eog(32001));
  EXPECT_EQ(phi.encode("<|user|>\nHi<|end|>", false, true),
            (std::vector<int32_t>{32010, 6324, 32007}));  // llama-tokenize: RSTRIP eats "\n"

  const Tokenizer& gpt2 = vocab("gpt-2");
  EXPECT_EQ(gpt2.vocab().pre, PreTokenizer::Gpt2);
  EXPECT_FALSE(gpt2.vocab().add_bos);
  EXPECT_EQ(gpt2.encode("Hello world", true), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(gpt2.encode("<|endoftext|>", false, true), (std::vector<int32_t>{50256}));
  EXPECT_TRUE(gpt2.is_eog(50256));

  const Tokenizer& ds = vocab("deepseek-coder");
  EXPECT_EQ(ds.vocab().pre, PreTokenizer::DeepseekCoder);
  EXPECT_EQ(ds.encode("Hi", true).front(), 32013);
  EXPECT_EQ(vocab("falcon").vocab().pre, PreTokenizer::Falcon);
}

}  // namespace
}  // namespace skainet::text
