#include "tool_reply.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "json_body.hpp"

namespace skainet::serve {

nlohmann::ordered_json template_messages(std::span<const Message> messages) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Message& m : messages) {
    nlohmann::ordered_json message{{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      nlohmann::ordered_json calls = nlohmann::ordered_json::array();
      for (const ToolCall& c : m.tool_calls) calls.push_back(generate::template_tool_call(c.id, c.name, c.arguments));
      message["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) message["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) message["name"] = m.name;
    out.push_back(std::move(message));
  }
  return out;
}

namespace {

std::string known_formats() {
  std::string out;
  for (const generate::ToolCallFormat& f : generate::tool_call_formats())
    out += fmt::format("{}{}", out.empty() ? "" : ", ", f.name);
  return out;
}

}  // namespace

const generate::ToolCallFormat* reply_format(const Request& r, const generate::ToolCallFormat* detected,
                                             bool reads_tools) {
  if (r.tools.empty() || r.tool_choice == ToolChoice::None) return nullptr;
  if (detected) return detected;
  if (!reads_tools)
    bad_request(
        "'tools' cannot be used with this model: its chat template has no tool-call format (it never reads "
        "`tools`); serve it with a template that does (--chat-template FILE)");
  bad_request(fmt::format(
      "'tools' cannot be used with this model: its chat template shows tools but writes calls in a format this "
      "server does not parse (known: {})",
      known_formats()));
}

ToolReply tool_reply(const generate::ToolCallFormat& format, std::string_view text, bool parallel) {
  generate::ParsedReply parsed = generate::parse_tool_calls(format, text);
  ToolReply out{std::move(parsed.content), {}};
  for (generate::ToolCall& c : parsed.calls) {
    out.calls.push_back({generate::new_tool_call_id(), std::move(c.name), std::move(c.arguments)});
    if (!parallel) break;
  }
  return out;
}

std::string_view unsent_content(std::string_view content, std::string_view sent) {
  if (content.starts_with(sent)) return content.substr(sent.size());
  const size_t space = sent.find_first_not_of(" \t\r\n");
  sent = space == std::string_view::npos ? std::string_view() : sent.substr(space);
  return content.starts_with(sent) ? content.substr(sent.size()) : std::string_view();
}

std::string_view HeldReply::next(std::string_view piece) {
  if (!format_) return piece;
  text_.append(piece);
  const size_t sendable = std::max(sent_, generate::streamable_prefix(*format_, text_));
  const std::string_view out = std::string_view(text_).substr(sent_, sendable - sent_);
  sent_ = sendable;
  return out;
}

ToolReply HeldReply::finish(bool parallel) const {
  if (!format_) return {};
  ToolReply reply = tool_reply(*format_, text_, parallel);
  const std::string_view sent = std::string_view(text_).substr(0, sent_);
  reply.content = reply.calls.empty() ? text_.substr(sent_) : std::string(unsent_content(reply.content, sent));
  return reply;
}

}  // namespace skainet::serve
