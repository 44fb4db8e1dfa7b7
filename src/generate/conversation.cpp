#include <functional>
#include <optional>

#include <fmt/format.h>

#include "skainet/model/conversation.hpp"

namespace skainet::generate {

namespace {

using Json = nlohmann::ordered_json;

// What one message's content means for the tokenizing.
enum class ContentRisk : uint8_t {
  None,      // no control-token text, nor the start or end of one: tokenizes the same either way
  Edge,      // begins or ends with part of a control token's text, which the template beside it could complete
  Contains,  // holds control-token text
};

struct Message {
  const Json* content = nullptr;  // nullptr: the message has none
  ContentRisk risk = ContentRisk::None;
  int32_t token = -1;  // Contains: the token whose text it holds
};

// Every string inside a content that is not one (a list of parts), depth first.
void for_each_string(const Json& j, const std::function<void(const std::string&)>& f) {
  if (j.is_string())
    f(j.get_ref<const std::string&>());
  else if (j.is_structured())
    for (const Json& v : j) for_each_string(v, f);
}

Message assess(const Json& message, const text::Tokenizer& tok) {
  Message m;
  if (!message.is_object()) return m;
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) return m;
  m.content = &*it;
  for_each_string(*it, [&](const std::string& s) {
    if (m.risk == ContentRisk::Contains) return;
    if (auto found = tok.find_special_text(s)) {
      m.risk = ContentRisk::Contains;
      m.token = found->id;
    } else if (m.risk == ContentRisk::None && tok.may_join_special_text(s)) {
      m.risk = ContentRisk::Edge;
    }
  });
  return m;
}

// Templates commonly trim contents (Llama 3, Gemma: `message['content'] | trim`); these are the forms
// a located content may take. Each candidate is checked byte for byte, so the list only decides how
// often locating succeeds, never whether it is right.
std::vector<std::string_view> content_forms(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {s, std::string_view()};
  const size_t last = s.find_last_not_of(kSpace) + 1;
  return {s, s.substr(first, last - first), s.substr(first), s.substr(0, last)};
}

// A marker that does not occur in the rendered text: every occurrence in the marked render is then one
// we put there. Seeded by the text's hash, so a client cannot know it before choosing its content.
std::string marker_base(const std::string& text) {
  for (size_t seed = std::hash<std::string>{}(text);; ++seed) {
    std::string base = fmt::format("<<skainet-content-{:016x}-", seed);
    if (text.find(base) == std::string::npos) return base;
  }
}

// Where each string content went in `text`: the template is rendered again with a marker in place of
// each string content, and `text` must be that render with each marker replaced by its content (or a
// trimmed form of it), byte for byte. nullopt when it is not (the template transforms a content,
// branches on it, or refuses the markers).
std::optional<std::vector<text::TextRange>> locate_contents(const chat::Template& tmpl, const Json& context,
                                                            const std::string& text) {
  const std::string base = marker_base(text);
  Json marked = context;
  Json& messages = marked["messages"];
  std::vector<const std::string*> contents(messages.size(), nullptr);
  const Json& original = context.at("messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    Json& m = messages[i];
    if (!m.is_object() || !m.contains("content") || !m["content"].is_string()) continue;
    contents[i] = &original[i]["content"].get_ref<const std::string&>();
    m["content"] = fmt::format("{}{}>>", base, i);
  }
  std::string render;
  try {
    render = tmpl.render(marked);
  } catch (const chat::TemplateError&) {
    return std::nullopt;
  }

  // render = T0 M_a T1 M_b T2 ... ; text must be T0 C_a T1 C_b T2 ...
  std::vector<text::TextRange> ranges;
  std::vector<bool> seen(messages.size(), false);
  size_t in_render = 0, in_text = 0;
  const std::string* pending = nullptr;  // the content whose marker preceded the current piece
  for (;;) {
    const size_t marker = render.find(base, in_render);
    const std::string_view piece = std::string_view(render).substr(
        in_render, marker == std::string::npos ? std::string::npos : marker - in_render);
    if (pending) {
      bool placed = false;
      for (std::string_view form : content_forms(*pending)) {
        if (text.compare(in_text, form.size(), form) == 0 &&
            text.compare(in_text + form.size(), piece.size(), piece) == 0) {
          ranges.push_back({in_text, form.size()});
          in_text += form.size();
          placed = true;
          break;
        }
      }
      if (!placed) return std::nullopt;
    }
    if (text.compare(in_text, piece.size(), piece) != 0) return std::nullopt;
    in_text += piece.size();
    if (marker == std::string::npos) break;

    size_t at = marker + base.size(), index = 0, digits = 0;
    while (at < render.size() && render[at] >= '0' && render[at] <= '9' && digits < 9) {
      index = index * 10 + static_cast<size_t>(render[at++] - '0');
      ++digits;
    }
    if (digits == 0 || render.compare(at, 2, ">>") != 0 || index >= contents.size() || !contents[index] || seen[index])
      return std::nullopt;
    seen[index] = true;
    pending = contents[index];
    in_render = at + 2;
  }
  if (in_text != text.size()) return std::nullopt;
  return ranges;
}

// A special token's text as a template writes it; "" for a vocabulary without the token (id < 0).
std::string special_text(const text::Tokenizer& tokenizer, int32_t id) {
  return id >= 0 ? tokenizer.token_to_piece(id, /*render_special=*/true) : "";
}

}  // namespace

ContentSpecialTokenError::ContentSpecialTokenError(size_t message_index, std::string role, std::string token_text)
    : InvalidArgument(fmt::format(
          "message {} ({}) holds \"{}\", the text of a control token, and the chat template changes the content, so "
          "it cannot be kept as text: remove it from the message, or allow special tokens in content "
          "(--special-in-content)",
          message_index, role.empty() ? "no role" : role, token_text)),
      message_index_(message_index),
      role_(std::move(role)),
      token_text_(std::move(token_text)) {}

ControlTextOutsideContentError::ControlTextOutsideContentError(std::string where, std::string token_text)
    : InvalidArgument(fmt::format("{} holds \"{}\", the text of a control token, outside a message's content, where "
                                  "it cannot be kept as text: remove it, or allow special tokens in content "
                                  "(--special-in-content)",
                                  where, token_text)) {}

namespace {

// Every string of the context the template may write that is not a message's content: the tools,
// and each message's fields beside role and content (tool_calls, tool_call_id, name).
void refuse_control_text_outside_contents(const Json& context, const text::Tokenizer& tokenizer) {
  const auto check = [&](const Json& value, const std::string& where) {
    for_each_string(value, [&](const std::string& s) {
      if (auto found = tokenizer.find_special_text(s))
        throw ControlTextOutsideContentError(where, tokenizer.vocab().tokens[found->id]);
    });
  };
  if (auto tools = context.find("tools"); tools != context.end()) check(*tools, "a tool's definition");
  auto messages = context.find("messages");
  if (messages == context.end() || !messages->is_array()) return;
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    if (!m.is_object()) continue;
    for (auto it = m.begin(); it != m.end(); ++it)
      if (it.key() != "role" && it.key() != "content") check(it.value(), fmt::format("message {}'s {}", i, it.key()));
  }
}

}  // namespace

Json conversation_context(Json messages, const text::Tokenizer& tokenizer, Json tools) {
  Json context{{"messages", std::move(messages)},
               {"add_generation_prompt", true},
               {"bos_token", special_text(tokenizer, tokenizer.bos())},
               {"eos_token", special_text(tokenizer, tokenizer.eos())}};
  if (tools.is_array()) context["tools"] = std::move(tools);
  return context;
}

TokenizedConversation tokenize_conversation(const chat::Template& tmpl, const Json& context,
                                            const text::Tokenizer& tokenizer, const ConversationOptions& options) {
  TokenizedConversation out;
  out.text = tmpl.render(context);
  const std::string bos_text = special_text(tokenizer, tokenizer.bos());
  out.add_special = bos_text.empty() || !out.text.starts_with(bos_text);

  if (!options.special_in_content) refuse_control_text_outside_contents(context, tokenizer);
  auto messages = context.find("messages");
  std::vector<Message> assessed;
  if (!options.special_in_content && messages != context.end() && messages->is_array()) {
    for (const Json& m : *messages) assessed.push_back(assess(m, tokenizer));
  }
  std::optional<size_t> forged;  // the message to name in a refusal: the first that holds control-token text
  bool careful = false, locatable = true;
  for (size_t i = 0; i < assessed.size(); ++i) {
    const Message& m = assessed[i];
    careful = careful || m.risk != ContentRisk::None;
    if (m.risk != ContentRisk::Contains) continue;
    // Only string contents get a marker: a list of parts holding control-token text is refused.
    if (!m.content->is_string() && locatable) {
      forged = i;
      locatable = false;
    }
    if (!forged) forged = i;
  }
  if (!careful) {
    out.ids = tokenizer.encode(out.text, out.add_special, /*parse_special=*/true);
    return out;
  }

  std::optional<std::vector<text::TextRange>> ranges;
  if (locatable) ranges = locate_contents(tmpl, context, out.text);
  if (!ranges) {
    if (forged) {
      const Json& m = (*messages)[*forged];
      const auto role = m.find("role");
      throw ContentSpecialTokenError(*forged, role != m.end() && role->is_string() ? role->get<std::string>() : "",
                                     tokenizer.vocab().tokens[assessed[*forged].token]);
    }
    // Only a content's edge could complete a control token with the template's text beside it, and
    // the template's text cannot be told from the content's: tokenize the whole text, as before.
    out.ids = tokenizer.encode(out.text, out.add_special, /*parse_special=*/true);
    return out;
  }
  out.ids = tokenizer.encode(out.text, out.add_special, std::span<const text::TextRange>(*ranges));
  return out;
}

}  // namespace skainet::generate
