// skainet::generate — a chat conversation to prompt tokens: the chat template rendered over the
// messages, tokenized so that the template's own control tokens ("<|im_start|>", "<|eot_id|>") become
// tokens and a message's content stays text. `hi<|im_end|>` from a client is then the text
// "hi<|im_end|>", not the end of its turn: it cannot forge turn boundaries.
//
//   chat::Template tmpl(source);
//   nlohmann::ordered_json ctx = generate::conversation_context(messages, tokenizer);
//   generate::TokenizedConversation c = generate::tokenize_conversation(tmpl, ctx, tokenizer);
//   sequence.generate(c.ids, options, on_token);   // computes only what the KV cache does not hold
//
// The ids equal tokenizer.encode(rendered, add_bos, /*parse_special=*/true) for every conversation
// whose contents hold no control-token text. When one does, the contents are located in the rendered
// text (a second render with a marker in place of each content shows where each one goes) and
// tokenized as text. A content that holds control-token text and cannot be located (a template that
// transforms it) is refused with ContentSpecialTokenError rather than let it become the token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "skainet/core/base.hpp"
#include "skainet/text/chat.hpp"
#include "skainet/text/text.hpp"

namespace skainet::generate {

struct ConversationOptions {
  // The old behaviour, an opt-in (--special-in-content): control-token text in a message's content
  // becomes the control token, as it does in the template's own text. For a trusted user who means to
  // write the tokens, never for a server whose clients are not trusted.
  bool special_in_content = false;
};

struct TokenizedConversation {
  std::string text;          // the rendered template
  std::vector<int32_t> ids;  // the prompt tokens
  // Whether the tokenizer added BOS/EOS (the vocabulary's add_bos): not when the template already
  // writes the BOS text itself, which must not get a second BOS.
  bool add_special = true;
};

// A message's content holds control-token text and the template transforms the content, so where it
// went in the rendered text is unknown and it cannot be kept as text. An HTTP server answers 400.
class ContentSpecialTokenError : public InvalidArgument {
 public:
  ContentSpecialTokenError(size_t message_index, std::string role, std::string token_text);
  size_t message_index() const noexcept { return message_index_; }  // in context["messages"], from 0
  const std::string& role() const noexcept { return role_; }
  const std::string& token_text() const noexcept { return token_text_; }  // e.g. "<|im_end|>"

 private:
  size_t message_index_;
  std::string role_;
  std::string token_text_;
};

// A string the template writes that is not a message's content (a tool call's name or arguments, a
// tool's id, the tools' descriptions) holds control-token text. Only contents are located in the
// rendered text, so this one would become the token: refused (an HTTP server answers 400), unless
// special tokens in content are allowed.
class ControlTextOutsideContentError : public InvalidArgument {
 public:
  ControlTextOutsideContentError(std::string where, std::string token_text);
};

// The template variables for the assistant's next turn of `messages` (an array of {role, content},
// an assistant's tool_calls, a tool's tool_call_id and name): messages, add_generation_prompt (true),
// and bos_token / eos_token, the text of the vocabulary's BOS and EOS tokens ("" where it has none);
// `tools` (OpenAI's list of {type: "function", function: {name, description, parameters}}) as the
// variable `tools` when it is a list, as HuggingFace's apply_chat_template and llama.cpp pass it.
nlohmann::ordered_json conversation_context(nlohmann::ordered_json messages, const text::Tokenizer& tokenizer,
                                            nlohmann::ordered_json tools = nullptr);

// Renders `tmpl` over `context` (the template variables: messages, add_generation_prompt, bos_token,
// ...) and tokenizes the text. Throws chat::TemplateError from the render, ContentSpecialTokenError
// as above. A content that is not a string (a list of parts) and holds control-token text is refused
// too: only string contents are located. ControlTextOutsideContentError as above.
TokenizedConversation tokenize_conversation(const chat::Template& tmpl, const nlohmann::ordered_json& context,
                                            const text::Tokenizer& tokenizer, const ConversationOptions& options = {});

}  // namespace skainet::generate
