#include "skainet/model/speculative.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace skainet::generate {

std::string_view spec_type_name(SpecType t) noexcept {
  switch (t) {
    case SpecType::None: return "none";
    case SpecType::NgramSimple: return "ngram-simple";
    case SpecType::DraftModel: return "draft";
  }
  return "?";
}

std::optional<SpecType> parse_spec_type(std::string_view name) noexcept {
  for (const SpecType t : {SpecType::None, SpecType::NgramSimple, SpecType::DraftModel})
    if (spec_type_name(t) == name) return t;
  return std::nullopt;
}

void ngram_draft(std::span<const int32_t> context, uint32_t n, uint32_t m, uint32_t max, std::vector<int32_t>& out) {
  out.clear();
  const size_t len = context.size();
  if (n == 0 || len < size_t{n} + 1) return;
  const std::span<const int32_t> pattern = context.last(n);
  // Backwards from the latest start that still leaves one token after the match inside the context.
  for (size_t j = len - n; j-- > 0;) {
    if (!std::equal(pattern.begin(), pattern.end(), context.begin() + static_cast<std::ptrdiff_t>(j))) continue;
    const size_t from = j + n;
    const size_t count = std::min({size_t{m}, size_t{max}, len - from});
    out.insert(out.end(), context.begin() + static_cast<std::ptrdiff_t>(from),
               context.begin() + static_cast<std::ptrdiff_t>(from + count));
    return;
  }
}

NgramDrafter::NgramDrafter(uint32_t n, uint32_t m) : n_(n), m_(m) {
  if (n_ == 0 || m_ == 0)
    throw InvalidArgument(
        fmt::format("--spec-ngram-size-n {} / --spec-ngram-size-m {}: both must be at least 1", n_, m_));
}

void NgramDrafter::draft(std::span<const int32_t> context, uint32_t max, std::vector<int32_t>& out) {
  ngram_draft(context, n_, m_, max, out);
}

ModelDrafter::ModelDrafter(Sequence& draft) : seq_(draft) {
  // Greedy: each drafted token is a point mass (see speculative.hpp), and the penalty is the target's business.
  seq_.sample_with({.temperature = 0.0f});
  cached_.reserve(seq_.plan.kv.n_ctx);
}

void ModelDrafter::draft(std::span<const int32_t> context, uint32_t max, std::vector<int32_t>& out) {
  out.clear();
  if (context.empty() || max == 0) return;
  const int64_t n_ctx = seq_.plan.kv.n_ctx;
  // What the draft's cache already holds of the context; the last token is run again for its logits.
  const auto mismatch = std::mismatch(cached_.begin(), cached_.end(), context.begin(), context.end());
  const size_t keep = std::min(static_cast<size_t>(mismatch.first - cached_.begin()), context.size() - 1);
  if (static_cast<int64_t>(context.size()) >= n_ctx) return;
  cached_.resize(keep);
  const std::span<const int32_t> fresh = context.subspan(keep);
  int32_t token = seq_.generator.prefill(fresh, static_cast<int64_t>(keep));
  cached_.insert(cached_.end(), fresh.begin(), fresh.end());
  for (;;) {
    out.push_back(token);
    const auto pos = static_cast<int64_t>(cached_.size());
    if (out.size() >= max || pos >= n_ctx) return;
    const int32_t fed = token;
    token = seq_.generator.decode_step(fed, pos);
    cached_.push_back(fed);
  }
}

namespace {

// The first way the two vocabularies differ, or "" when they are the same.
std::string vocabulary_difference(const text::Vocab& t, const text::Vocab& d) {
  if (t.model != d.model) return "their tokenizer models differ";
  if (t.tokens.size() != d.tokens.size()) return fmt::format("{} tokens against {}", d.tokens.size(), t.tokens.size());
  for (size_t i = 0; i < t.tokens.size(); ++i)
    if (t.tokens[i] != d.tokens[i] || t.types[i] != d.types[i])
      return fmt::format("token {} is '{}' in the draft and '{}' in the model", i, d.tokens[i], t.tokens[i]);
  if (t.bos != d.bos || t.eos != d.eos)
    return fmt::format("BOS/EOS are {}/{} in the draft and {}/{} in the model", d.bos, d.eos, t.bos, t.eos);
  return {};
}

}  // namespace

uint32_t Drafter::draft_within(std::span<const int32_t> context, int64_t max, uint32_t min, std::vector<int32_t>& out) {
  out.clear();
  if (max < std::max<int64_t>(min, 1)) return 0;
  draft(context, static_cast<uint32_t>(max), out);
  if (out.size() > static_cast<size_t>(max)) out.resize(static_cast<size_t>(max));
  if (out.size() < min) out.clear();
  return static_cast<uint32_t>(out.size());
}

void check_same_vocabulary(const text::Vocab& target, const std::filesystem::path& target_file,
                           const text::Vocab& draft, const std::filesystem::path& draft_file) {
  const std::string diff = vocabulary_difference(target, draft);
  if (!diff.empty())
    throw InvalidArgument(
        fmt::format("draft model {} has another vocabulary than the model {}: {} (speculative "
                    "decoding feeds the draft's token ids to the model as they are)",
                    draft_file.string(), target_file.string(), diff));
}

Speculation open_speculation(const SpecOptions& spec, const std::filesystem::path& target_file, const Engine& target,
                             const EngineOptions& target_options, uint32_t sequences) {
  Speculation s;
  if (spec.type == SpecType::None) return s;
  if (spec.draft_max == 0) throw InvalidArgument("--draft-max 0: a draft needs at least one token");
  if (spec.draft_min > spec.draft_max)
    throw InvalidArgument(fmt::format("--draft-min {} is above --draft-max {}", spec.draft_min, spec.draft_max));
  if (sequences == 0) throw InvalidArgument("speculative decoding for no sequence");
  if (spec.type == SpecType::NgramSimple) {
    for (uint32_t i = 0; i < sequences; ++i)
      s.drafters.push_back(std::make_unique<NgramDrafter>(spec.ngram_n, spec.ngram_m));
    return s;
  }
  if (spec.draft_model.empty()) throw InvalidArgument("speculative decoding with a draft model needs -md FILE");
  // The vocabulary first, from the header alone: a mismatch is refused before any weight is read.
  check_same_vocabulary(target.tokenizer->vocab(), target_file,
                        text::Vocab::from_gguf(gguf::read_header(spec.draft_model)), spec.draft_model);
  EngineOptions o = target_options;
  o.plan = plan::PlanOptions{};  // the target's --prefill-chunk, --kv-type and draft length are the target's
  o.plan.n_ctx = target.plan.kv->n_ctx;
  o.plan.slots = sequences;  // each draft sequence runs its own passes (batch_slots false)
  o.plan.available_memory = target_options.plan.available_memory;
  o.overrides = {};  // the target's per-tensor forms name the target's tensors
  o.sequence = true;
  try {
    s.draft_engine = Engine::open(spec.draft_model, o);
  } catch (Error& e) {
    e.add_context(fmt::format("draft model (-md) {}", spec.draft_model.string()));
    throw;
  }
  s.drafters.push_back(std::make_unique<ModelDrafter>(*s.draft_engine->sequence));
  // More draft sequences run one at a time on the thread that drafts (serve's stepper): one thread each.
  for (uint32_t i = 1; i < sequences; ++i) {
    s.draft_sequences.push_back(s.draft_engine->new_sequence(1));
    s.drafters.push_back(std::make_unique<ModelDrafter>(*s.draft_sequences.back()));
  }
  return s;
}

}  // namespace skainet::generate
