// Tools on /v1/chat/completions, between the request and the generate module's tool-call formats
// (generate/tool_calls.hpp): the messages as a chat template reads them, which format a request's
// reply is parsed in, and the reply's calls in OpenAI's shape.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "skainet/app/serve.hpp"
#include "skainet/model/tool_calls.hpp"

namespace skainet::serve {

// The messages as the template reads them: role and content, an assistant's tool_calls (arguments as
// the object they hold, generate::template_tool_call), a tool's tool_call_id and name.
nlohmann::ordered_json template_messages(std::span<const Message> messages);

// The format the reply to `r` is parsed in: nullptr when the request gives no tools or tool_choice
// "none". Throws RequestError (400) when it gives tools and the template writes no call format this
// server parses (`detected`: detect_tool_call_format's answer for it; `reads_tools`:
// template_uses_tools's, which tells the two refusals apart).
const generate::ToolCallFormat* reply_format(const Request& r, const generate::ToolCallFormat* detected,
                                             bool reads_tools);

struct ToolReply {
  std::string content;          // the text outside the calls
  std::vector<ToolCall> calls;  // each with a fresh id
};
// `parallel` false: the first call only (parallel_tool_calls).
ToolReply tool_reply(const generate::ToolCallFormat& format, std::string_view text, bool parallel);

// What is left of `content` after the start of the reply, `sent`, was streamed (content is trimmed,
// the streamed text may have begun with space).
std::string_view unsent_content(std::string_view content, std::string_view sent);

// A streamed reply that may hold tool calls: its text goes out up to where a call could begin
// (generate::streamable_prefix); the rest waits for the end, when the whole reply is parsed. Without
// a format every piece goes out as it comes.
class HeldReply {
 public:
  explicit HeldReply(const generate::ToolCallFormat* format) : format_(format) {}
  // What of the reply may be sent now that `piece` followed it (a view into `piece` or into the held text).
  std::string_view next(std::string_view piece);
  // At the end: the content not sent yet and the calls.
  ToolReply finish(bool parallel) const;

 private:
  const generate::ToolCallFormat* format_;
  std::string text_;
  size_t sent_ = 0;
};

}  // namespace skainet::serve
