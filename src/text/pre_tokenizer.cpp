#include "text/pre_tokenizer.hpp"

#include "skainet/core/utf8.hpp"
#include "text/unicode.hpp"

namespace skainet::text {

namespace {

// The patterns are llama.cpp's (llama-vocab.cpp, llm_tokenizer_bpe), themselves taken from each
// model's tokenizer.json. Several run in turn: each splits the pieces the previous one left.
constexpr std::string_view kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr std::string_view kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kCjkDeepseek = "[一-龥ࠀ-一가-퟿]+";
constexpr std::string_view kCjkDeepseek3 = "[一-龥぀-ゟ゠-ヿ]+";
constexpr std::string_view kPoro = " ?[^(\\s|.,!?…。，、।۔،)]+";
// kimi-k2: llama.cpp runs a hand-written splitter (unicode.cpp, unicode_regex_split_custom_kimi_k2)
// in place of the model's regex; this is the regex that splitter implements: Han runs (its
// unicode_cpt_is_han ranges), then words of other letters (no marks), contractions, digits by three,
// punctuation and whitespace as in llama3.
constexpr std::string_view kKimiK2 =
    "[\u4e00-\u9fff\u3400-\u4dbf\U00020000-\U0002a6df\U0002a700-\U0002ebef\uf900-\ufaff\U0002f800-\U0002fa1f]+|"
    "[^\\r\\n\\p{L}\\p{N}]?(?:(?![\u4e00-\u9fff\u3400-\u4dbf\U00020000-\U0002a6df\U0002a700-\U0002ebef\uf900-\ufaff\U0002f800-\U0002fa1f])\\p{L})+"
    "(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// deepseek-llm: words of the Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee and other cased scripts.
constexpr std::string_view kDeepseekLlmLetters =
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";
// llama.cpp splits these digits with a hand-written loop (runs of \p{N} in groups of three from the
// right, the first group taking the remainder); this regex gives the same split.
constexpr std::string_view kDigitsByThreeFromRight = "\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))";

}  // namespace

std::vector<std::string_view> pre_tokenizer_patterns(PreTokenizer p) {
  switch (p) {
    case PreTokenizer::Gpt2: return {kGpt2};
    case PreTokenizer::Llama3: return {kLlama3};
    case PreTokenizer::Qwen2: return {kQwen2};
    case PreTokenizer::DeepseekCoder: return {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjkDeepseek, "\\p{N}"};
    case PreTokenizer::Falcon: return {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
    case PreTokenizer::Starcoder: return {"\\p{N}", kGpt2};
    case PreTokenizer::DeepseekLlm:
      return {"[\r\n]", kDeepseekLlmLetters, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", kCjkDeepseek, "\\p{N}+"};
    case PreTokenizer::Deepseek3:
      return {
          "\\p{N}{1,3}", kCjkDeepseek3,
          "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::Spark25:
      return {
          "\\p{N}{1,3}", kCjkDeepseek3,
          "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
          "\\p{N}"};
    case PreTokenizer::Youtu:
      return {
          "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
          "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::Jais2:
      return {
          "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"};
    case PreTokenizer::Qwen35:
      return {
          "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::Poro: return {kPoro};
    case PreTokenizer::Viking: return {kPoro, "\\p{N}"};
    case PreTokenizer::Tekken:
      return {
          "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::Chameleon:
      return {"<sentinel:[0-9]+>",      "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
              "([\\t\\n]|    |  )",     "\\p{N}",
              "[\\p{P}!-/:-@\\[-`{-~]", kGpt2};
    case PreTokenizer::Gpt4o:
      return {
          "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::GraniteEmbMulti:
      return {
          "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::TinyAya:
      return {
          kDigitsByThreeFromRight,
          "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::Superbpe: return {"\\p{N}+", "(?=(\\d{3})+(?!\\d))"};
    case PreTokenizer::Bailingmoe:
      return {
          "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::SeedCoder:
      return {
          "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::Ufakzeka:
      return {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::Afmoe:
      return {
          kDigitsByThreeFromRight,
          "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
          "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::Laguna: return {"[^\\n]+|[\\n]+", kQwen2};
    case PreTokenizer::ExaoneMoe:
      return {
          "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::Minicpm5:
      return {
          "\\p{N}{1,3}",
          "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreTokenizer::KimiK2: return {kKimiK2};
    // Gemma 4's merges run over whole lines (its normalizer already wrote spaces as U+2581); llama.cpp
    // splits only at newlines, since no merged token may hold one.
    case PreTokenizer::Gemma4: return {"[^\\n]+|[\\n]+"};
    case PreTokenizer::Default: break;
  }
  return {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
}

namespace {

constexpr uint8_t kIgnoreMerges = 1, kAddBos = 2, kSpmStyle = 4, kForceBos = 8;

struct Alias {
  std::string_view name;
  PreTokenizer pre;
  uint8_t flags = 0;  // llama.cpp's ignore_merges / add_bos / escape_whitespaces for this name
};
// Every name llama.cpp's llama_vocab::load gives a regex list, grouped by the list it gets. Names that
// share a list can still differ in flags (dbrx has llama3's regexes but neither flag).
constexpr Alias kAliases[] = {
    {"default", PreTokenizer::Default},
    {"gpt-2", PreTokenizer::Gpt2},
    {"phi-2", PreTokenizer::Gpt2},
    {"jina-es", PreTokenizer::Gpt2},
    {"jina-de", PreTokenizer::Gpt2},
    {"jina-v2-es", PreTokenizer::Gpt2},
    {"jina-v2-de", PreTokenizer::Gpt2},
    {"gigachat", PreTokenizer::Gpt2},
    {"mpt", PreTokenizer::Gpt2},
    {"olmo", PreTokenizer::Gpt2},
    {"jais", PreTokenizer::Gpt2},
    {"trillion", PreTokenizer::Gpt2},
    {"a.x-4.0", PreTokenizer::Gpt2},
    {"mellum", PreTokenizer::Gpt2},
    {"modern-bert", PreTokenizer::Gpt2},
    {"exaone4", PreTokenizer::Gpt2},
    {"granite-docling", PreTokenizer::Gpt2},
    // llama.cpp also sets add_sep for these; its BPE tokenize never reads it (only rerank prompt
    // building does), so the ids are gpt-2's.
    {"jina-v1-en", PreTokenizer::Gpt2},
    {"jina-v2-code", PreTokenizer::Gpt2},
    {"roberta-bpe", PreTokenizer::Gpt2},
    {"llama3", PreTokenizer::Llama3, kIgnoreMerges | kAddBos},
    {"llama-v3", PreTokenizer::Llama3, kIgnoreMerges | kAddBos},
    {"llama-bpe", PreTokenizer::Llama3, kIgnoreMerges | kAddBos},
    {"falcon3", PreTokenizer::Llama3, kIgnoreMerges | kAddBos},
    {"falcon-h1", PreTokenizer::Llama3, kIgnoreMerges | kAddBos},
    {"pixtral", PreTokenizer::Llama3, kIgnoreMerges | kAddBos},
    {"midm-2.0", PreTokenizer::Llama3, kIgnoreMerges | kAddBos},
    {"lfm2", PreTokenizer::Llama3, kIgnoreMerges | kAddBos},
    {"jina-v5-nano", PreTokenizer::Llama3, kIgnoreMerges | kAddBos},
    {"dbrx", PreTokenizer::Llama3},
    {"smaug-bpe", PreTokenizer::Llama3},
    {"chatglm-bpe", PreTokenizer::Llama3},
    {"glm4", PreTokenizer::Llama3, kIgnoreMerges},
    {"glm5", PreTokenizer::Llama3, kIgnoreMerges},
    {"qwen2", PreTokenizer::Qwen2},
    {"stablelm2", PreTokenizer::Qwen2},
    {"hunyuan", PreTokenizer::Qwen2},
    {"deepseek-r1-qwen", PreTokenizer::Qwen2},
    {"kormo", PreTokenizer::Qwen2},
    {"f2llmv2", PreTokenizer::Qwen2},
    {"megrez", PreTokenizer::Qwen2},
    {"solar-open", PreTokenizer::Qwen2},
    {"grok-2", PreTokenizer::Qwen2},
    {"deepseek-coder", PreTokenizer::DeepseekCoder},
    {"falcon", PreTokenizer::Falcon},
    {"starcoder", PreTokenizer::Starcoder},
    {"refact", PreTokenizer::Starcoder},
    {"command-r", PreTokenizer::Starcoder},
    {"smollm", PreTokenizer::Starcoder},
    {"codeshell", PreTokenizer::Starcoder},
    {"exaone", PreTokenizer::Starcoder},
    {"minerva-7b", PreTokenizer::Starcoder},
    {"mellum2", PreTokenizer::Starcoder},
    {"deepseek-llm", PreTokenizer::DeepseekLlm},
    {"deepseek-v3", PreTokenizer::Deepseek3},
    {"hunyuan-dense", PreTokenizer::Deepseek3},
    {"joyai-llm", PreTokenizer::Deepseek3},
    {"hy_v4", PreTokenizer::Deepseek3},
    {"spark2_5", PreTokenizer::Spark25},
    {"youtu", PreTokenizer::Youtu, kIgnoreMerges},
    {"jais-2", PreTokenizer::Jais2},
    {"qwen35", PreTokenizer::Qwen35},
    {"poro-chat", PreTokenizer::Poro},
    {"bloom", PreTokenizer::Poro},
    {"gpt3-finnish", PreTokenizer::Poro},
    {"viking", PreTokenizer::Viking},
    {"tekken", PreTokenizer::Tekken, kIgnoreMerges | kAddBos},
    {"chameleon", PreTokenizer::Chameleon, kAddBos},
    {"gpt-4o", PreTokenizer::Gpt4o},
    {"llama4", PreTokenizer::Gpt4o},
    {"kanana2", PreTokenizer::Gpt4o},
    {"talkie", PreTokenizer::Gpt4o},
    {"minimax-m2", PreTokenizer::Gpt4o},
    {"granite-embed-multi-97m", PreTokenizer::GraniteEmbMulti, kIgnoreMerges},
    {"tiny_aya", PreTokenizer::TinyAya},
    {"cohere2moe", PreTokenizer::TinyAya},
    {"superbpe", PreTokenizer::Superbpe},
    {"bailingmoe", PreTokenizer::Bailingmoe},
    {"bailingmoe2", PreTokenizer::Bailingmoe},
    {"llada-moe", PreTokenizer::Bailingmoe},
    {"seed-coder", PreTokenizer::SeedCoder},
    {"ufakzeka", PreTokenizer::Ufakzeka},
    {"afmoe", PreTokenizer::Afmoe},
    {"laguna", PreTokenizer::Laguna},
    {"exaone-moe", PreTokenizer::ExaoneMoe},
    {"minicpm5", PreTokenizer::Minicpm5, kIgnoreMerges},
    {"kimi-k2", PreTokenizer::KimiK2},
    // llama.cpp sets add_bos for these even where the file says false (its Gemma 4 workaround, #21500).
    {"gemma4", PreTokenizer::Gemma4, kSpmStyle | kForceBos},
    {"granite-embed-multi-311m", PreTokenizer::Gemma4, kSpmStyle | kForceBos},
};

struct Refusal {
  std::string_view name, why;
};
// Names llama.cpp knows that need more than a regex list.
constexpr Refusal kRefused[] = {
    // Gemma 4's splitting without its newline-run rule and BOS override, and with llama.cpp's
    // clean_spaces off (which decoding here does not model); not checked against the peer yet.
    {"sarvam-moe", "SPM-style BPE without Gemma 4's newline rule is not implemented"},
    {"whitespace", "BPE over raw UTF-8 words (no byte encoding) is not implemented"},
};

}  // namespace

std::string_view pre_tokenizer_name(PreTokenizer p) noexcept {
  for (const Alias& a : kAliases) {
    if (a.pre == p) return a.name;  // the first name of each group
  }
  return "?";
}

std::optional<PreTokenizerSpec> find_pre_tokenizer(std::string_view name) noexcept {
  if (name.empty()) return PreTokenizerSpec{};
  for (const Alias& a : kAliases) {
    if (a.name == name) {
      return PreTokenizerSpec{a.pre, (a.flags & kIgnoreMerges) != 0, (a.flags & kAddBos) != 0,
                              (a.flags & kSpmStyle) != 0, (a.flags & kForceBos) != 0};
    }
  }
  return std::nullopt;
}

std::optional<PreTokenizer> parse_pre_tokenizer(std::string_view name) noexcept {
  if (std::optional<PreTokenizerSpec> s = find_pre_tokenizer(name)) return s->pre;
  return std::nullopt;
}

std::string_view pre_tokenizer_refusal(std::string_view name) noexcept {
  for (const Refusal& r : kRefused) {
    if (r.name == name) return r.why;
  }
  return {};
}

std::vector<std::string_view> pre_tokenizer_names() {
  std::vector<std::string_view> names;
  for (const Alias& a : kAliases) names.push_back(a.name);
  return names;
}

PreTokenizerSplitter::PreTokenizerSplitter(PreTokenizer p, bool byte_encode) : byte_encode_(byte_encode) {
  for (std::string_view pat : pre_tokenizer_patterns(p)) regexes_.emplace_back(pat);
}

std::vector<size_t> PreTokenizerSplitter::split_lengths(std::span<const uint32_t> cps) const {
  std::vector<size_t> pieces{cps.size()};
  for (const Regex& re : regexes_) pieces = re.split(cps, pieces);
  return pieces;
}

std::vector<std::string> PreTokenizerSplitter::split(std::string_view text) const {
  const std::vector<uint32_t> cps = unicode::decode_lenient(text);
  const std::vector<size_t> pieces = split_lengths(cps);

  std::vector<std::string> words;
  words.reserve(pieces.size());
  size_t at = 0;
  std::string utf8;
  for (size_t len : pieces) {
    utf8.clear();
    for (size_t i = at; i < at + len; ++i) base::append_utf8(utf8, cps[i]);
    if (!byte_encode_) {
      words.push_back(utf8);
    } else {
      std::string word;
      word.reserve(utf8.size() * 2);
      for (unsigned char b : utf8) base::append_utf8(word, unicode::byte_to_codepoint(b));
      words.push_back(std::move(word));
    }
    at += len;
  }
  return words;
}

}  // namespace skainet::text
