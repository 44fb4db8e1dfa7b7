// Request bodies of /v1/chat/completions and /v1/completions: parsed and validated here, away from
// HTTP, so the fuzz target drives exactly what the server runs. Every refusal is a RequestError
// naming the field and what was wrong with it. Which fields are implemented, accepted without effect
// or refused is the field table's to say (fields.cpp), not this file's.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fields.hpp"
#include "json_body.hpp"
#include "output_format.hpp"

namespace skainet::serve {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(std::string message) { bad_request(std::move(message)); }

// JSON type names as a client would write them.
std::string_view type_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number with a fraction";
    default: return "a number";
  }
}

const json* field(const json& body, std::string_view key) { return field_of(body, key); }

std::optional<float> number_in(const json& body, std::string_view key, double lo, double hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(fmt::format("'{}' must be a number, not {}", key, type_of(*v)));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(fmt::format("'{}' must be from {} to {}, not {}", key, lo, hi, v->dump()));
  return static_cast<float>(x);
}

std::optional<int64_t> integer_in(const json& body, std::string_view key, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  // 5.0 is an integer as JSON numbers go; 5.5 is not.
  if (v->is_number_float()) {
    const double x = v->get<double>();
    if (!std::isfinite(x) || x != std::floor(x) || x < static_cast<double>(lo) || x > static_cast<double>(hi))
      bad(fmt::format("'{}' must be an integer from {} to {}, not {}", key, lo, hi, v->dump()));
    return static_cast<int64_t>(x);
  }
  if (!v->is_number_integer()) bad(fmt::format("'{}' must be an integer, not {}", key, type_of(*v)));
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || static_cast<int64_t>(u) < lo)  // JSON's 0 is unsigned, below n's 1
      bad(fmt::format("'{}' must be an integer from {} to {}, not {}", key, lo, hi, u));
    return static_cast<int64_t>(u);
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) bad(fmt::format("'{}' must be an integer from {} to {}, not {}", key, lo, hi, x));
  return x;
}

bool boolean(const json& body, std::string_view key, bool absent = false) { return boolean_field(body, key, absent); }

// A message's content: a string, or OpenAI's list of parts of which only text parts are understood.
std::string content_of(const json& v, size_t index) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array())
    bad(fmt::format("messages[{}].content must be a string or a list of text parts, not {}", index, type_of(v)));
  std::string text;
  for (size_t p = 0; p < v.size(); ++p) {
    const json& part = v[p];
    if (!part.is_object())
      bad(fmt::format("messages[{}].content[{}] must be an object, not {}", index, p, type_of(part)));
    const json* type = field(part, "type");
    if (!type || !type->is_string() || type->get<std::string>() != "text")
      bad(fmt::format("messages[{}].content[{}]: only parts of type \"text\" are supported", index, p));
    const json* t = field(part, "text");
    if (!t || !t->is_string()) bad(fmt::format("messages[{}].content[{}].text must be a string", index, p));
    text += t->get<std::string>();
  }
  return text;
}

std::string string_in(const json& object, std::string_view key, const std::string& where, bool required) {
  const json* v = field(object, key);
  if (!v) {
    if (required) bad(fmt::format("{}.{} is required", where, key));
    return {};
  }
  if (!v->is_string()) bad(fmt::format("{}.{} must be a string, not {}", where, key, type_of(*v)));
  return v->get<std::string>();
}

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments (JSON text)}}].
std::vector<ToolCall> tool_calls_of(const json& message, size_t index) {
  const json* v = field(message, "tool_calls");
  if (!v) return {};
  if (!v->is_array()) bad(fmt::format("messages[{}].tool_calls must be a list, not {}", index, type_of(*v)));
  std::vector<ToolCall> out;
  for (size_t c = 0; c < v->size(); ++c) {
    const std::string where = fmt::format("messages[{}].tool_calls[{}]", index, c);
    const json& call = (*v)[c];
    if (!call.is_object()) bad(fmt::format("{} must be an object, not {}", where, type_of(call)));
    if (const json* type = field(call, "type"); type && *type != "function")
      bad(fmt::format("{}.type must be \"function\"", where));
    const json* function = field(call, "function");
    if (!function || !function->is_object()) bad(fmt::format("{}.function must be an object", where));
    ToolCall t{string_in(call, "id", where, false), string_in(*function, "name", where + ".function", true),
               string_in(*function, "arguments", where + ".function", false)};
    if (t.arguments.empty()) t.arguments = "{}";
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<Message> messages_of(const json& body, const RequestLimits& limits) {
  const json* v = field(body, "messages");
  if (!v) bad("'messages' is required");
  if (!v->is_array()) bad(fmt::format("'messages' must be a list, not {}", type_of(*v)));
  if (v->empty()) bad("'messages' must hold at least one message");
  if (v->size() > limits.max_messages)
    bad(fmt::format("'messages' holds {} messages; at most {}", v->size(), limits.max_messages));
  std::vector<Message> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    if (!m.is_object()) bad(fmt::format("messages[{}] must be an object, not {}", i, type_of(m)));
    const json* role = field(m, "role");
    if (!role || !role->is_string()) bad(fmt::format("messages[{}].role must be a string", i));
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "developer" && r != "tool")
      bad(fmt::format("messages[{}].role '{}' is not one of system, developer, user, assistant, tool", i, r));
    const json* content = field(m, "content");
    // An assistant message may carry no content (a tool call); as text that is the empty string.
    Message message;
    message.role = r;
    message.content = content ? content_of(*content, i) : std::string();
    const std::string where = fmt::format("messages[{}]", i);
    if (r == "assistant") message.tool_calls = tool_calls_of(m, i);
    if (r == "tool") {
      message.tool_call_id = string_in(m, "tool_call_id", where, false);
      message.name = string_in(m, "name", where, false);
    }
    out.push_back(std::move(message));
  }
  return out;
}

std::vector<std::string> stops_of(const json& body, const RequestLimits& limits) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > limits.max_stop_strings)
      bad(fmt::format("'stop' holds {} strings; at most {}", v->size(), limits.max_stop_strings));
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) bad(fmt::format("stop[{}] must be a string, not {}", i, type_of((*v)[i])));
      out.push_back((*v)[i].get<std::string>());
    }
  } else {
    bad(fmt::format("'stop' must be a string or a list of strings, not {}", type_of(*v)));
  }
  for (const auto& s : out) {
    if (s.empty()) bad("a stop string is empty");
    if (s.size() > limits.max_stop_bytes)
      bad(fmt::format("a stop string is {} bytes; at most {}", s.size(), limits.max_stop_bytes));
  }
  return out;
}

// An empty prompt has no tokens of its own (only the BOS the server would add): refused, as
// docs/serving.md says ("a prompt with no tokens"), naming the field.
std::string non_empty_prompt(std::string prompt) {
  if (prompt.empty()) bad("'prompt' must not be empty (a prompt with no tokens)");
  return prompt;
}

void prompt_of(const json& body, Request& r, int32_t vocab_size) {
  const json* v = field(body, "prompt");
  if (!v) bad("'prompt' is required");
  if (v->is_string()) {
    r.prompt = non_empty_prompt(v->get<std::string>());
    return;
  }
  if (!v->is_array()) bad(fmt::format("'prompt' must be a string or a list of token ids, not {}", type_of(*v)));
  if (v->empty()) bad("'prompt' must not be empty (a prompt with no tokens)");
  // A list with one string is the same prompt; several prompts at once (a batch) are not served.
  if (v->size() == 1 && (*v)[0].is_string()) {
    r.prompt = non_empty_prompt((*v)[0].get<std::string>());
    return;
  }
  if ((*v)[0].is_string() || (*v)[0].is_array())
    bad("'prompt' must be one string or one list of token ids (several prompts at once are not supported)");
  r.prompt_ids = token_ids_of(*v, "prompt", vocab_size);
}

// How many alternatives per token the request asks log-probabilities for (nullopt: none). The
// completions API says it with an integer `logprobs` (0: none, as llama-server takes it); chat with
// `logprobs: true` and `top_logprobs`; llama.cpp's `n_probs` works on both (0: none).
std::optional<int32_t> top_logprobs_of(const json& body, Endpoint endpoint) {
  constexpr int64_t kMax = generate::kMaxTopLogprobs;
  std::optional<int32_t> asked;
  if (auto n = integer_in(body, "n_probs", 0, kMax); n && *n > 0) asked = static_cast<int32_t>(*n);
  if (endpoint == Endpoint::Completions) {
    const json* v = field(body, "logprobs");
    if (v && v->is_boolean() && !v->get<bool>()) return asked;
    if (auto n = integer_in(body, "logprobs", 0, kMax); n && *n > 0)
      asked = std::max(asked.value_or(0), static_cast<int32_t>(*n));
    return asked;
  }
  const auto top = integer_in(body, "top_logprobs", 0, kMax);
  if (!boolean(body, "logprobs")) {
    if (top && *top > 0) bad("'top_logprobs' needs 'logprobs': true");
    return asked;
  }
  return std::max(asked.value_or(0), static_cast<int32_t>(top.value_or(0)));
}

// tools: [{type: "function", function: {name, description?, parameters?}}], kept as JSON text in the
// client's key order (the body parsed again, order kept: templates print the tools with tojson).
std::string tools_of(const json& body, std::string_view text) {
  const json* v = field(body, "tools");
  if (!v) return {};
  if (!v->is_array()) bad(fmt::format("'tools' must be a list, not {}", type_of(*v)));
  if (v->empty()) return {};
  for (size_t i = 0; i < v->size(); ++i) {
    const json& tool = (*v)[i];
    const std::string where = fmt::format("tools[{}]", i);
    if (!tool.is_object()) bad(fmt::format("{} must be an object, not {}", where, type_of(tool)));
    if (string_in(tool, "type", where, true) != "function")
      bad(fmt::format("{}.type must be \"function\" (the only kind of tool)", where));
    const json* function = field(tool, "function");
    if (!function || !function->is_object()) bad(fmt::format("{}.function must be an object", where));
    if (string_in(*function, "name", where + ".function", true).empty())
      bad(fmt::format("{}.function.name must not be empty", where));
    if (const json* p = field(*function, "parameters"); p && !p->is_object())
      bad(fmt::format("{}.function.parameters must be an object (a JSON schema), not {}", where, type_of(*p)));
  }
  return nlohmann::ordered_json::parse(text).at("tools").dump();
}

// "auto", "none", "required", or OpenAI's named function {"type": "function", "function": {"name"}}.
void tool_choice_of(const json& body, Request& r) {
  const json* v = field(body, "tool_choice");
  if (!v || *v == "auto") return;
  if (*v == "none")
    r.tool_choice = ToolChoice::None;
  else if (*v == "required")
    r.tool_choice = ToolChoice::Required;
  else if (v->is_object() && v->value("type", json()) == "function" && v->contains("function") &&
           (*v)["function"].is_object() && (*v)["function"].value("name", json()).is_string()) {
    r.tool_choice = ToolChoice::Named;
    r.tool_choice_name = (*v)["function"]["name"].get<std::string>();
  } else {
    bad(
        fmt::format("'tool_choice' must be \"auto\", \"none\", \"required\" or {{\"type\": \"function\", "
                    "\"function\": {{\"name\": ...}}}}, not {}",
                    v->dump()));
  }
  if (r.tool_choice >= ToolChoice::Required && r.tools.empty())
    bad("'tool_choice' asks for a tool call, but 'tools' gives none");
  if (r.tool_choice == ToolChoice::Named) {
    const json& tools = body["tools"];
    const bool known = std::any_of(tools.begin(), tools.end(),
                                   [&](const json& t) { return t["function"]["name"] == r.tool_choice_name; });
    if (!known) bad(fmt::format("'tool_choice' names '{}', which is not among 'tools'", r.tool_choice_name));
  }
}

}  // namespace

void bad_request(std::string message) { throw RequestError(400, "invalid_request_error", std::move(message)); }

const json* field_of(const json& body, std::string_view key) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

bool boolean_field(const json& body, std::string_view key, bool absent) {
  const json* v = field(body, key);
  if (!v) return absent;
  if (!v->is_boolean()) bad(fmt::format("'{}' must be true or false, not {}", key, type_of(*v)));
  return v->get<bool>();
}

json parse_json_object(std::string_view body, const RequestLimits& limits) {
  json j;
  try {
    // Parsed JSON costs tens of bytes per body byte when it is all brackets ([[[[...), so the parse
    // itself is bounded: nesting depth and the number of values, refused as soon as either is passed.
    size_t values = 0;
    j = json::parse(body, [&](int depth, json::parse_event_t event, json&) {
      if (depth > static_cast<int>(limits.max_json_depth))
        bad(fmt::format("the body nests JSON deeper than {} levels", limits.max_json_depth));
      if (event == json::parse_event_t::value || event == json::parse_event_t::object_start ||
          event == json::parse_event_t::array_start) {
        if (++values > limits.max_json_values)
          bad(fmt::format("the body holds more than {} JSON values", limits.max_json_values));
      }
      return true;
    });
  } catch (const json::exception& e) {
    bad(fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) bad(fmt::format("the body must be a JSON object, not {}", type_of(j)));
  return j;
}

// Token ids as llama-server takes them: integers (5.0 is one) from 0; whether each is in the
// vocabulary is checked where the vocabulary is known.
std::vector<int32_t> token_ids_of(const json& list, std::string_view name, int32_t vocab_size) {
  if (!list.is_array()) bad(fmt::format("'{}' must be a list of token ids, not {}", name, type_of(list)));
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  const double top = vocab_size > 0 ? vocab_size - 1 : std::numeric_limits<int32_t>::max();
  for (size_t i = 0; i < list.size(); ++i) {
    const json& v = list[i];
    const bool integer =
        v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
    if (!integer) bad(fmt::format("{}[{}] must be a token id (an integer), not {}", name, i, type_of(v)));
    const double x = v.get<double>();
    if (x < 0 || x > top) {
      if (vocab_size > 0)
        bad(fmt::format("{}[{}] is token id {}, but the vocabulary holds {} tokens (0 to {})", name, i, v.dump(),
                        vocab_size, vocab_size - 1));
      bad(fmt::format("{}[{}] is {}, not a token id (0 or more)", name, i, v.dump()));
    }
    ids.push_back(static_cast<int32_t>(x));
  }
  return ids;
}

Request parse_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits) {
  const json j = parse_json_object(body, limits);
  refuse_unimplemented(j);

  Request r;
  r.endpoint = endpoint;
  if (const json* m = field(j, "model")) {
    if (!m->is_string()) bad(fmt::format("'model' must be a string, not {}", type_of(*m)));
    r.model = m->get<std::string>();
  }
  if (endpoint == Endpoint::ChatCompletions) {
    r.messages = messages_of(j, limits);
    r.tools = tools_of(j, body);
    tool_choice_of(j, r);
    r.parallel_tool_calls = boolean(j, "parallel_tool_calls", true);
  } else {
    prompt_of(j, r, limits.vocab_size);
    if (!tools_of(j, body).empty()) bad("'tools' are for /v1/chat/completions: a completion has no chat template");
  }

  r.stream = boolean(j, "stream");
  if (const json* so = field(j, "stream_options")) {
    if (!so->is_object()) bad(fmt::format("'stream_options' must be an object, not {}", type_of(*so)));
    r.include_usage = boolean(*so, "include_usage");
  }
  // llama-server's field: false computes the whole prompt even where a slot's cache holds its start.
  r.cache_prompt = boolean(j, "cache_prompt", true);
  r.temperature = number_in(j, "temperature", 0, 100);
  r.top_p = number_in(j, "top_p", 0, 1);
  r.min_p = number_in(j, "min_p", 0, 1);
  if (auto k = integer_in(j, "top_k", 0, std::numeric_limits<int32_t>::max())) r.top_k = static_cast<int32_t>(*k);
  // OpenAI's seed is any 64-bit integer; it only picks the random stream.
  if (const json* s = field(j, "seed")) {
    if (s->is_number_unsigned())
      r.seed = s->get<uint64_t>();
    else if (s->is_number_integer())
      r.seed = static_cast<uint64_t>(s->get<int64_t>());
    else
      bad(fmt::format("'seed' must be an integer, not {}", type_of(*s)));
  }
  constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  // max_completion_tokens is the chat API's newer name; n_predict is llama.cpp's (-1: no limit).
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (auto n = integer_in(j, key, 0, kMaxTokens)) r.max_tokens = static_cast<int32_t>(*n);
  if (auto n = integer_in(j, "n_predict", -1, kMaxTokens)) r.max_tokens = static_cast<int32_t>(*n);
  if (auto n = integer_in(j, "n", 1, kMaxTokens)) r.n = static_cast<int32_t>(*n);  // the server bounds it by its slots
  r.top_logprobs = top_logprobs_of(j, endpoint);
  r.stop = stops_of(j, limits);
  // llama.cpp's penalty divides positive logits by it: 0 or below has no meaning (the sampler refuses it).
  r.repeat_penalty = number_in(j, "repeat_penalty", 0, 100);
  if (r.repeat_penalty && *r.repeat_penalty <= 0) bad("'repeat_penalty' must be above 0 (1: off), not 0");
  // OpenAI's range for both.
  r.frequency_penalty = number_in(j, "frequency_penalty", -2, 2);
  r.presence_penalty = number_in(j, "presence_penalty", -2, 2);
  if (auto n = integer_in(j, "repeat_last_n", -1, std::numeric_limits<int32_t>::max()))
    r.repeat_last_n = static_cast<int32_t>(*n);
  if (field(j, "ignore_eos")) r.ignore_eos = boolean(j, "ignore_eos");
  r.grammar = output_grammar(j, body);
  return r;
}

}  // namespace skainet::serve
