#include "generation_args.hpp"

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "skainet/core/base.hpp"
#include "skainet/text/grammar.hpp"

namespace skainet::cli {

namespace {

// Sampling values that have no meaning are command-line mistakes (exit code 2), named with the value:
// a NaN or infinite temperature (NaN made every logit NaN, inf drew uniformly), top-p or min-p outside
// [0, 1], a negative top-k. The ranges are the server's (src/serve/request.cpp) except that, as in
// llama.cpp, a negative temperature is accepted and is greedy like 0; a tiny positive one is greedy in
// the sampler itself (text::Sampler).
void check_sampling(const CLI::App* cmd, const text::SamplerConfig& s) {
  auto refuse = [cmd](const char* option, const char* what) {
    // The value as given (1e40, not the float it became).
    const auto& given = cmd->get_option(option)->results();
    throw CLI::ValidationError(option, fmt::format("'{}' {}", given.empty() ? "" : given.back(), what));
  };
  if (!std::isfinite(s.temperature)) refuse("--temp", "is not a finite number (0 or below: greedy)");
  if (s.top_k < 0) refuse("--top-k", "is negative (0 turns top-k off)");
  if (!(s.top_p >= 0.0f && s.top_p <= 1.0f)) refuse("--top-p", "is not from 0 to 1 (1 turns top-p off)");
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) refuse("--min-p", "is not from 0 to 1 (0 turns min-p off)");
  if (!(std::isfinite(s.repeat_penalty) && s.repeat_penalty > 0.0f))
    refuse("--repeat-penalty", "is not a finite number above 0 (1 turns the penalty off)");
  if (!std::isfinite(s.presence_penalty)) refuse("--presence-penalty", "is not a finite number (0 turns it off)");
  if (!std::isfinite(s.frequency_penalty)) refuse("--frequency-penalty", "is not a finite number (0 turns it off)");
}

void add_speculation(CLI::App* cmd, GenerationArgs& a) {
  cmd->add_option("--spec-type", a.spec_type,
                  "speculative decoding: none, or ngram-simple (draft the continuation of the last n-gram seen "
                  "earlier in the context); -md gives a draft model")
      ->check(CLI::IsMember({"none", "ngram-simple"}));
  cmd->add_option("--spec-draft-model,--model-draft", a.spec.draft_model,
                  "as llama.cpp's -md: draft model for speculative decoding (its vocabulary must be the model's)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--draft-max,--draft,--draft-n,--spec-draft-n-max", a.spec.draft_max,
                  "tokens drafted per step at most (default 16)")
      ->check(CLI::Range(1u, 1024u));
  cmd->add_option("--draft-min,--draft-n-min,--spec-draft-n-min", a.spec.draft_min,
                  "shorter drafts are not verified (default 0)");
  cmd->add_option("--spec-ngram-size-n", a.spec.ngram_n, "ngram-simple: the n-gram looked up (default 12)")
      ->check(CLI::Range(1u, 1024u));
  cmd->add_option("--spec-ngram-size-m", a.spec.ngram_m, "ngram-simple: tokens copied after it at most (default 48)")
      ->check(CLI::Range(1u, 1024u));
}

// --spec-type and -md into one SpecType; both at once is a mistake (one drafter per generation).
void resolve_speculation(GenerationArgs& a) {
  const generate::SpecType named = *generate::parse_spec_type(a.spec_type);
  if (!a.spec.draft_model.empty() && named != generate::SpecType::None)
    throw CLI::ValidationError("--spec-type " + a.spec_type, "and -md/--spec-draft-model: choose one drafter");
  a.spec.type = a.spec.draft_model.empty() ? named : generate::SpecType::DraftModel;
  if (a.spec.draft_min > a.spec.draft_max)
    throw CLI::ValidationError("--draft-min",
                               fmt::format("{} is above --draft-max {}", a.spec.draft_min, a.spec.draft_max));
}

// The sampler's options (their values checked after parsing: check_sampling).
void add_output_grammar(CLI::App* cmd, GenerationArgs& a) {
  auto* g = cmd->add_option("--grammar", a.grammar_text, "GBNF grammar the output must follow (llama.cpp's dialect)");
  auto* gf = cmd->add_option("--grammar-file", a.grammar_file, "read the GBNF grammar from this file")
                 ->check(CLI::ExistingFile);
  auto* j = cmd->add_option("-j,--json-schema", a.json_schema,
                            "JSON Schema the output must be valid against (e.g. '{}' for any JSON value)");
  auto* jf = cmd->add_option("--json-schema-file", a.json_schema_file,
                             "as llama.cpp's -jf: read the JSON Schema from this file")
                 ->check(CLI::ExistingFile);
  const std::vector<CLI::Option*> all{g, gf, j, jf};
  for (CLI::Option* o : all)
    for (CLI::Option* other : all)
      if (o != other) o->excludes(other);
}

void add_sampling(CLI::App* cmd, text::SamplerConfig& sampling) {
  cmd->add_option("--temp", sampling.temperature, "temperature, finite (0 or below: greedy)");
  cmd->add_option("--top-k", sampling.top_k, "top-k, 0 or more (0: off)");
  cmd->add_option("--top-p", sampling.top_p, "top-p, from 0 to 1 (1: off)");
  cmd->add_option("--min-p", sampling.min_p, "min-p, from 0 to 1 (0: off)");
  cmd->add_option("--repeat-penalty", sampling.repeat_penalty, "repetition penalty, finite and above 0 (1: off)");
  cmd->add_option("--repeat-last-n", sampling.repeat_last_n,
                  "tokens the penalties look back over (0: off, -1: the whole context, as llama.cpp)");
  cmd->add_option("--presence-penalty", sampling.presence_penalty,
                  "subtracted from each token among the last --repeat-last-n (0: off)");
  cmd->add_option("--frequency-penalty", sampling.frequency_penalty,
                  "subtracted per occurrence of each token among the last --repeat-last-n (0: off)");
}

}  // namespace

void GenerationArgs::add_to(CLI::App* cmd, Command command) {
  const bool chat_command = command == Command::Chat;
  const bool serve = command == Command::Serve;
  if (chat_command || serve) n_predict = -1;
  if (serve)
    add_model_option(cmd, model);
  else
    model_and_prompt.add_to(cmd, chat_command ? "first user message" : "prompt text");
  if (!serve) {
    prompt_option = cmd->add_option("-p,--prompt", prompt, chat_command ? "first user message" : "prompt text");
    cmd->add_option("-f,--file", prompt_file, "read the prompt from this file")
        ->check(CLI::ExistingFile)
        ->excludes(prompt_option);
    cmd->add_flag("-e,--escape", escape, "process escapes (\\n, \\t, \\\", \\xHH, ...) in the prompts");
  }
  n_predict_option =
      cmd->add_option("-n,--n-predict", n_predict,
                      serve          ? "tokens per answer when a request gives no max_tokens (-1: until end of text "
                                       "or a full context)"
                      : chat_command ? "tokens per reply at most (-1: until end of turn or a full context)"
                                     : "tokens to generate (-1: until end of text or a full context)");
  cmd->add_option("-t,--threads", threads,
                  serve ? "threads in all, divided between the slots (default: the physical cores this process may use)"
                        : "threads (default: the physical cores this process may use)")
      ->check(CLI::Range(1, 256));
  if (!serve) cmd->add_option("-s,--seed", seed, "sampling seed (-1: random)");
  add_sampling(cmd, sampling);
  // One option for the three spellings: two options bound to one vector would each assign it, and the
  // later would drop the other's strings (`-r a --stop b`).
  cmd->add_option("-r,--reverse-prompt,--stop", stops,
                  "stop string (repeatable): generation stops when the text contains it; not printed");
  if (command == Command::Run) {
    cmd->add_flag(
        "--conversation,!--no-conversation", conversation,
        "as llama.cpp's -cnv: an interactive conversation, the same as skainet chat (-no-cnv: plain completion)");
    cmd->add_flag("--no-display-prompt", no_display_prompt, "do not echo the prompt");
  }
  if (!serve)
    cmd->add_option("--system-prompt", system_prompt, "as llama.cpp's -sys: the conversation's system message");
  cmd->add_option("--chat-template", chat_template,
                  "chat template: a .jinja file, or a built-in name (chatml, llama3); default: the model's");
  cmd->add_flag("--special-in-content", special_in_content,
                "control-token text in a message (\"<|im_end|>\") becomes the token, as in the template's own text; "
                "default: it stays text, so a message cannot forge turn boundaries");
  if (!serve)
    cmd->add_flag("--show-stats", show_stats,
                  "in a conversation, a stats line on stderr after every reply (default: only on /stats)");
  cmd->add_flag("--ignore-eos", ignore_eos, "keep generating past end of text");
  cmd->add_flag("--check-tensors", check_tensors, "decode every tensor first and refuse NaN or infinity");
  cmd->add_flag("--force", force, "load even when the plan exceeds the memory available now (MemAvailable)");
  placement.add_to(cmd);
  add_placement_compat(cmd, compat);
  add_speculation(cmd, *this);
  if (!serve) add_output_grammar(cmd, *this);
  cmd->parse_complete_callback([this, command, cmd] {
    bool prompt_given = false;  // serve: requests bring the prompts
    if (command != Command::Serve) {
      prompt_given = prompt_option->count() > 0 || !prompt_file.empty();
      prompt_given |= model_and_prompt.resolve(model, prompt, prompt_given);  // `run MODEL PROMPT`
    }
    require_model(model);
    const bool chat_command = command != Command::Run;  // serve renders chat requests with the template
    if (!chat_command && !conversation && !prompt_given) throw CLI::RequiredError("-p,--prompt (or -f FILE)");
    if (!chat_command && !conversation &&
        (!system_prompt.empty() || !chat_template.empty() || special_in_content || show_stats))
      throw CLI::ValidationError("-sys/--system-prompt, --chat-template, --special-in-content and --show-stats",
                                 "only in a conversation (-cnv, or skainet chat)");
    apply_placement_compat(compat, placement);
    check_sampling(cmd, sampling);
    resolve_speculation(*this);
  });
}

namespace {

// A GrammarError names the line and column, or the schema path; the option is named here.
std::shared_ptr<const grammar::Grammar> compile_output_grammar(const GenerationArgs& a) {
  const auto file = [](const std::string& path, const char* what) {
    return base::read_text_file(path, what, kGrammarFileMaxBytes);
  };
  const char* option = "--grammar";
  try {
    if (!a.grammar_text.empty())
      return std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(a.grammar_text));
    option = "--grammar-file";
    if (!a.grammar_file.empty())
      return std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(file(a.grammar_file, "grammar file")));
    option = "--json-schema";
    std::string schema = a.json_schema;
    if (!a.json_schema_file.empty())
      option = "--json-schema-file", schema = file(a.json_schema_file, "JSON schema file");
    if (schema.empty()) return nullptr;
    const auto parsed = nlohmann::ordered_json::parse(schema);  // key order kept: the output follows it
    return std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(grammar::json_schema_gbnf(parsed)));
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string(option) + ": not JSON: " + e.what());
  } catch (Error& e) {
    e.add_context(option);
    throw;
  }
}

}  // namespace

void GenerationArgs::finish_parse() {
  output_grammar = compile_output_grammar(*this);
  if (!prompt_file.empty()) {
    prompt = base::read_text_file(prompt_file, "prompt file", kPromptFileMaxBytes);
  }
  if (escape) {
    prompt = process_escapes(prompt);
    system_prompt = process_escapes(system_prompt);
    for (auto& stop : stops) stop = process_escapes(stop);
  }
}

generate::EngineOptions GenerationArgs::engine_options() const {
  generate::EngineOptions options;
  options.profile = placement.profile;
  options.plan = placement.plan_options();
  options.overrides = placement.form_overrides();
  options.threads = threads;
  options.force = force;
  if (spec.type != generate::SpecType::None) options.plan.draft_max = spec.draft_max;
  return options;
}

generate::Speculation start_speculation(const GenerationArgs& a, const generate::Engine& engine,
                                        generate::Generator& gen) {
  generate::Speculation s = generate::open_speculation(a.spec, a.model, engine, a.engine_options());
  gen.speculate_with(s.drafter(), a.spec.draft_max, a.spec.draft_min);
  return s;
}

void constrain_output(const GenerationArgs& a, const generate::Engine& engine, generate::Sequence& sequence) {
  if (!a.output_grammar) return;
  sequence.sampler.constrain(std::make_unique<grammar::Matcher>(
      a.output_grammar, std::make_shared<const grammar::Vocabulary>(*engine.tokenizer)));
}

uint64_t GenerationArgs::resolve_seed() {
  const uint64_t used = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  sampling.seed = used;
  return used;
}

}  // namespace skainet::cli
