// Response bodies in OpenAI's shapes: chat.completion / text_completion objects, their streamed
// chunks (chat.completion.chunk, and text_completion for /v1/completions as OpenAI streams it), the
// model list and the error object.
#include <nlohmann/json.hpp>

#include "skainet/app/serve.hpp"

namespace skainet::serve {
namespace {

using json = nlohmann::ordered_json;

bool is_chat(const ResponseHead& h) { return h.endpoint == Endpoint::ChatCompletions; }

json head_json(const ResponseHead& h, bool chunk) {
  const char* object = is_chat(h) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return json{{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

// prompt_tokens counts the whole prompt, cached or not; prompt_tokens_details.cached_tokens those
// reused (OpenAI's and llama-server's shape).
json usage_json(const Usage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.total()},
              {"prompt_tokens_details", json{{"cached_tokens", u.cached_tokens}}}};
}

json timings_json(const Timings& t) {
  auto per_second = [](int64_t n, double ms) { return ms > 0 ? 1e3 * static_cast<double>(n) / ms : 0.0; };
  json j{{"prompt_n", t.prompt_n},
         {"prompt_ms", t.prompt_ms},
         {"prompt_per_second", per_second(t.prompt_n, t.prompt_ms)},
         {"predicted_n", t.predicted_n},
         {"predicted_ms", t.predicted_ms},
         {"predicted_per_second", per_second(t.predicted_n, t.predicted_ms)}};
  if (t.draft_n) j["draft_n"] = *t.draft_n;
  if (t.draft_n_accepted) j["draft_n_accepted"] = *t.draft_n_accepted;
  return j;
}

json bytes_json(std::string_view text) {
  json out = json::array();
  for (const char c : text) out.push_back(static_cast<unsigned char>(c));
  return out;
}

// Chat's shape: {"content": [{id, token, logprob, bytes, top_logprobs: [{id, token, logprob, bytes}]}]}
// (the id is llama-server's addition).
json chat_logprobs_json(std::span<const TokenLogprobs> tokens) {
  auto entry = [](const TokenProb& t) {
    return json{{"id", t.id}, {"token", t.text}, {"logprob", t.logprob}, {"bytes", bytes_json(t.text)}};
  };
  json content = json::array();
  for (const TokenLogprobs& t : tokens) {
    json e = entry(t.sampled);
    e["top_logprobs"] = json::array();
    for (const TokenProb& alt : t.top) e["top_logprobs"].push_back(entry(alt));
    content.push_back(std::move(e));
  }
  return json{{"content", std::move(content)}, {"refusal", nullptr}};
}

// The completions API's legacy shape: parallel lists, the alternatives as {text: logprob} objects.
json completion_logprobs_json(std::span<const TokenLogprobs> tokens) {
  json texts = json::array(), logprobs = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprobs& t : tokens) {
    texts.push_back(t.sampled.text);
    logprobs.push_back(t.sampled.logprob);
    json top = json::object();
    // Two tokens may have the same text (a byte and its piece): the more likely one's is shown.
    for (const TokenProb& alt : t.top)
      if (!top.contains(alt.text)) top[alt.text] = alt.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(t.text_offset);
  }
  return json{{"tokens", std::move(texts)},
              {"token_logprobs", std::move(logprobs)},
              {"top_logprobs", std::move(tops)},
              {"text_offset", std::move(offsets)}};
}

json logprobs_json(const ResponseHead& h, const Logprobs& logprobs) {
  if (!logprobs) return nullptr;
  return is_chat(h) ? chat_logprobs_json(*logprobs) : completion_logprobs_json(*logprobs);
}

// OpenAI's tool_calls list; in a stream each entry carries its index.
json tool_calls_json(std::span<const ToolCall> calls, bool indexed) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = indexed ? json{{"index", i}} : json::object();
    call["id"] = calls[i].id;
    call["type"] = "function";
    call["function"] = json{{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(call));
  }
  return out;
}

// Generated text need not be valid UTF-8 (a model may stop inside a character): replace bad bytes
// rather than fail the response.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string_view finish_reason_name(FinishReason r) noexcept {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::ToolCalls: return "tool_calls";
  }
  return "stop";
}

std::string completion_json(const ResponseHead& head, std::span<const Choice> choices, const Usage& usage,
                            const Timings& timings) {
  json j = head_json(head, false);
  j["choices"] = json::array();
  for (const Choice& c : choices) {
    json choice{{"index", c.index}};
    if (is_chat(head)) {
      const bool no_content = !c.tool_calls.empty() && c.text.empty();
      choice["message"] = json{{"role", "assistant"}, {"content", no_content ? json(nullptr) : json(c.text)}};
      if (!c.tool_calls.empty()) choice["message"]["tool_calls"] = tool_calls_json(c.tool_calls, false);
    } else {
      choice["text"] = c.text;
    }
    // Chat leaves it out unless asked for, as OpenAI does; completions always has it (null).
    if (!is_chat(head) || c.logprobs) choice["logprobs"] = logprobs_json(head, c.logprobs);
    choice["finish_reason"] = finish_reason_name(c.finish);
    j["choices"].push_back(std::move(choice));
  }
  j["usage"] = usage_json(usage);
  j["timings"] = timings_json(timings);
  return dump(j);
}

std::string completion_json(const ResponseHead& head, std::string_view text, FinishReason finish, const Usage& usage,
                            const Timings& timings, std::span<const ToolCall> tool_calls) {
  const Choice one{.text = std::string(text),
                   .finish = finish,
                   .logprobs = std::nullopt,
                   .tool_calls = std::vector<ToolCall>(tool_calls.begin(), tool_calls.end())};
  return completion_json(head, std::span(&one, 1), usage, timings);
}

std::string chunk_json(const ResponseHead& head, std::string_view delta, bool first, std::optional<FinishReason> finish,
                       const Timings& timings, size_t index, const Logprobs& logprobs) {
  json j = head_json(head, true);
  json choice{{"index", index}};
  if (is_chat(head)) {
    json d = json::object();
    if (first) d["role"] = "assistant";
    if (!delta.empty() || !finish) d["content"] = std::string(delta);
    choice["delta"] = d;
    if (logprobs) choice["logprobs"] = logprobs_json(head, logprobs);
  } else {
    choice["text"] = std::string(delta);
    choice["logprobs"] = logprobs_json(head, logprobs);
  }
  choice["finish_reason"] = finish ? json(finish_reason_name(*finish)) : json(nullptr);
  j["choices"] = json::array({choice});
  if (finish) j["timings"] = timings_json(timings);
  return dump(j);
}

std::string tool_calls_chunk_json(const ResponseHead& head, std::span<const ToolCall> calls, bool first, size_t index) {
  json j = head_json(head, true);
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  delta["tool_calls"] = tool_calls_json(calls, true);
  j["choices"] = json::array({json{{"index", index}, {"delta", delta}, {"finish_reason", nullptr}}});
  return dump(j);
}

std::string usage_chunk_json(const ResponseHead& head, const Usage& usage) {
  json j = head_json(head, true);
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string error_json(std::string_view message, std::string_view type, std::string_view code) {
  return dump(json{{"error", json{{"message", std::string(message)},
                                  {"type", std::string(type)},
                                  {"param", nullptr},
                                  {"code", code.empty() ? json(nullptr) : json(std::string(code))}}}});
}

std::string models_json(std::string_view model, int64_t created) {
  return dump(json{
      {"object", "list"},
      {"data", json::array({json{
                   {"id", std::string(model)}, {"object", "model"}, {"created", created}, {"owned_by", "skainet"}}})}});
}

}  // namespace skainet::serve
