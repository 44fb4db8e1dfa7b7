// Every request field a client of /v1/chat/completions or /v1/completions may send (OpenAI's and
// llama-server's names), and what this server does with it. A field that would change the answer and
// that the server does not implement is refused with a 400 rather than ignored: a client asking for
// a sampler it does not have must learn it did not get it. The same values that ask for
// nothing (logprobs: false, mirostat: 0) are accepted, since clients send
// them by default. parse_request consults this table; docs/serving.md carries its rendering
// (request_fields_markdown), which a test keeps equal.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fields.hpp"

namespace skainet::serve {
namespace {

using enum FieldStatus;

// Sorted by name (a test checks it): the docs table reads in this order.
constexpr RequestField kFields[] = {
    {"audio", Refused, "", "audio output: this server writes text only"},
    {"best_of", Refused, "[1]", "several candidates to choose from: one answer per request is generated"},
    {"cache_prompt", Implemented, "",
     "llama-server's: false computes the whole prompt even where a slot's cache holds its start"},
    {"chat_template_kwargs", Refused, "[{}]",
     "variables for the chat template: the template renders with its own defaults"},
    {"dry_allowed_length", NoEffect, "", "only matters with dry_multiplier, which is refused"},
    {"dry_base", NoEffect, "", "only matters with dry_multiplier, which is refused"},
    {"dry_multiplier", Refused, "[0]", "DRY repetition sampling is not implemented"},
    {"dry_penalty_last_n", NoEffect, "", "only matters with dry_multiplier, which is refused"},
    {"dry_sequence_breakers", NoEffect, "", "only matters with dry_multiplier, which is refused"},
    {"dynatemp_exponent", NoEffect, "", "only matters with dynatemp_range, which is refused"},
    {"dynatemp_range", Refused, "[0]", "dynamic temperature is not implemented"},
    {"echo", Refused, "[false]", "the prompt is not echoed before the completion"},
    {"frequency_penalty", Implemented, "",
     "-2 to 2: minus count x penalty for each token among the last repeat_last_n"},
    {"function_call", Refused, R"(["none","auto"])",
     "the deprecated form of tool_choice: send tools and tool_choice instead"},
    {"functions", Refused, "[[]]", "the deprecated form of tools: send tools instead"},
    {"grammar", Implemented, "",
     "llama.cpp's GBNF: every token drawn keeps the output a prefix of the grammar's language"},
    {"id_slot", Refused, "[-1]", "a slot is chosen by the server (the one whose cache holds most of the prompt)"},
    {"ignore_eos", Implemented, "", "true: generation goes on past the end-of-generation token"},
    {"json_schema", Implemented, "",
     "llama.cpp's: the output is JSON valid against the schema (the keywords docs/serving.md lists)"},
    {"logit_bias", Refused, "[{},[]]", "per-token logit bias is not implemented"},
    {"logprobs", Implemented, "",
     "log-probabilities of the raw logits: completions, an integer 0 to 20 (alternatives per token; 0: none); "
     "chat, true or false"},
    {"lora", Refused, "[[]]", "per-request LoRA adapters are not implemented"},
    {"max_completion_tokens", Implemented, "", "the chat API's newer name for max_tokens"},
    {"max_tokens", Implemented, "", "the most tokens to generate (absent: the server's -n)"},
    {"messages", Implemented, "", "chat: the conversation, rendered with the model's chat template; text parts only"},
    {"metadata", NoEffect, "", "tags for stored completions; nothing is stored and the answer does not depend on them"},
    {"min_keep", Refused, "[0]", "a floor on the candidates the filters keep is not implemented"},
    {"min_p", Implemented, "", "min-p filter, 0 to 1"},
    {"mirostat", Refused, "[0]", "mirostat sampling is not implemented"},
    {"mirostat_eta", NoEffect, "", "only matters with mirostat, which is refused"},
    {"mirostat_tau", NoEffect, "", "only matters with mirostat, which is refused"},
    {"modalities", Refused, R"([["text"]])", "only text output is generated"},
    {"model", NoEffect, "", "one model is served; any name is accepted and responses name the served one"},
    {"n", Implemented, "", "choices to generate, each in its own slot: at most the server's --slots"},
    {"n_indent", Refused, "[0]", "a minimum line indentation is not implemented"},
    {"n_keep", NoEffect, "",
     "tokens kept when the context shifts; it never shifts here (a full context ends the answer)"},
    {"n_predict", Implemented, "", "llama.cpp's name for max_tokens; -1: no limit"},
    {"n_probs", Implemented, "", "llama.cpp's: log-probabilities with this many alternatives per token, 0 to 20"},
    {"parallel_tool_calls", Implemented, "",
     "false: only the reply's first tool call is returned (the model is not kept from writing more)"},
    {"post_sampling_probs", Refused, "[false]",
     "log-probabilities are those of the raw logits, before penalties, temperature and filters"},
    {"prediction", NoEffect, "", "a latency hint (predicted output); the answer does not depend on it"},
    {"presence_penalty", Implemented, "", "-2 to 2: minus the penalty for each token among the last repeat_last_n"},
    {"prompt", Implemented, "", "completions: one string, or one list of token ids (each below the vocabulary size)"},
    {"prompt_cache_key", NoEffect, "", "a routing hint for OpenAI's cache; slots are chosen by the prompt itself"},
    {"reasoning_effort", Refused, "", "reasoning models' effort: not a setting of this server"},
    {"repeat_last_n", Implemented, "",
     "how many recent tokens repeat_penalty looks back over; -1: the whole context, 0: none"},
    {"repeat_penalty", Implemented, "", "llama.cpp's repetition penalty, above 0 (1: off)"},
    {"response_format", Implemented, "",
     "OpenAI's: text, json_object (any JSON object) or json_schema (JSON valid against its schema)"},
    {"return_tokens", Refused, "[false]", "the generated token ids are not returned"},
    {"safety_identifier", NoEffect, "", "an end-user id for abuse monitoring; it does not change the answer"},
    {"samplers", Refused, "", "the sampler order is fixed: penalty, top-k, top-p, min-p, temperature"},
    {"seed", Implemented, "", "the random stream's seed (absent: a fresh one per request)"},
    {"service_tier", NoEffect, "", "OpenAI's processing tier; every request here is served alike"},
    {"stop", Implemented, "", "up to 4 stop strings, beside the server's --stop"},
    {"store", NoEffect, "", "nothing is stored; the answer does not depend on it"},
    {"stream", Implemented, "", "server-sent events, one chunk per piece of text"},
    {"stream_options", Implemented, "", "include_usage: a last chunk with the token counts"},
    {"suffix", Refused, R"([""])", "text after the completion (fill-in-the-middle) is not implemented"},
    {"t_max_predict_ms", Refused, "[0]", "a time limit on generation is not implemented"},
    {"temperature", Implemented, "", "0 to 100; 0: greedy"},
    {"tfs_z", Refused, "[1]", "tail-free sampling is not implemented"},
    {"timings_per_token", Refused, "[false]", "timings are sent with the last chunk only"},
    {"tool_choice", Implemented, "",
     "\"auto\" (default); \"none\": the tools are not shown and the reply not parsed; \"required\" or a named "
     "function: the reply is held by a grammar to calls in the template's format"},
    {"tools", Implemented, "",
     "chat: functions shown to the chat template (its `tools`); calls in the reply parsed in the template's format "
     "into message.tool_calls; 400 when the template has none"},
    {"top_k", Implemented, "", "top-k filter; 0: off"},
    {"top_logprobs", Implemented, "", "chat, with logprobs true: alternatives per token, 0 to 20"},
    {"top_p", Implemented, "", "top-p (nucleus) filter, 0 to 1"},
    {"typical_p", Refused, "[1]", "locally typical sampling is not implemented"},
    {"user", NoEffect, "", "an end-user id for abuse monitoring; it does not change the answer"},
    {"verbosity", Refused, "", "a reasoning models' setting: not one of this server"},
    {"web_search_options", Refused, "", "web search is not available"},
    {"xtc_probability", Refused, "[0]", "XTC sampling is not implemented"},
    {"xtc_threshold", NoEffect, "", "only matters with xtc_probability, which is refused"},
};

std::string_view status_name(FieldStatus s) {
  switch (s) {
    case Implemented: return "implemented";
    case NoEffect: return "accepted, no effect";
    case Refused: return "refused (400)";
  }
  return "?";
}

// The values a refused field accepts, as a client would write them: "null, false, 0" (quoted: in backticks).
std::string accepted_values(const RequestField& f, bool quoted) {
  const std::string_view q = quoted ? "`" : "";
  std::string out = fmt::format("{}null{}", q, q);
  if (!f.off.empty())
    for (const nlohmann::json& v : nlohmann::json::parse(f.off)) out += fmt::format(", {}{}{}", q, v.dump(), q);
  return out;
}

}  // namespace

std::span<const RequestField> request_fields() noexcept { return kFields; }

const RequestField* find_request_field(std::string_view name) noexcept {
  const auto it = std::lower_bound(std::begin(kFields), std::end(kFields), name,
                                   [](const RequestField& f, std::string_view n) { return f.name < n; });
  return it != std::end(kFields) && it->name == name ? &*it : nullptr;
}

bool asks_for_nothing(const RequestField& field, const nlohmann::json& value) {
  if (value.is_null()) return true;  // OpenAI's clients send null for "not given"
  if (field.off.empty()) return false;
  const nlohmann::json off = nlohmann::json::parse(field.off);
  return std::find(off.begin(), off.end(), value) != off.end();
}

void refuse_unimplemented(const nlohmann::json& body) {
  for (const RequestField& f : kFields) {
    if (f.status != Refused) continue;
    const auto it = body.find(f.name);
    if (it == body.end() || asks_for_nothing(f, *it)) continue;
    throw RequestError(400, "invalid_request_error",
                       fmt::format("'{}' is not implemented by this server: {} (accepted values: {})", f.name, f.why,
                                   accepted_values(f, false)));
  }
}

std::string request_fields_markdown() {
  std::string out = "| field | status | accepted values when refused | what it does, or why |\n|---|---|---|---|\n";
  for (const RequestField& f : kFields) {
    const std::string off = f.status == Refused ? accepted_values(f, true) : "";
    out += fmt::format("| `{}` | {} | {} | {} |\n", f.name, status_name(f.status), off, f.why);
  }
  return out;
}

}  // namespace skainet::serve
