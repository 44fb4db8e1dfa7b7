// skainet::serve — an OpenAI-compatible HTTP server over one planned model: N slots share the loaded
// weights, each a generate::Sequence holding its KV cache and sampler; one generate::Batch (the
// Stepper) advances every busy slot per forward pass.
//
//   generate::EngineOptions eo;  eo.plan.slots = 2;  eo.sequence = false;    // weights + tokenizer only
//   auto engine = generate::Engine::open("model.gguf", eo);                  // plan priced for 2 slots
//   serve::ServerOptions so{.host = "127.0.0.1", .port = 8080, .slots = 2};
//   serve::Server server(*engine, so, chat_template_source, end_of_turn);
//   server.listen();                                                        // until stop()
//
//   serve::Request r = serve::parse_request(serve::Endpoint::Completions, R"({"prompt":"Hi","max_tokens":8})");
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "skainet/core/base.hpp"
#include "skainet/model/batch.hpp"
#include "skainet/model/engine.hpp"
#include "skainet/text/grammar.hpp"

namespace skainet::serve {

// ---- requests (request.cpp: pure, no HTTP, fuzzed) ----

enum class Endpoint : uint8_t { ChatCompletions, Completions };

// A tool call as OpenAI writes one: an assistant message's (request) or the answer's (response).
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as the client sent it or as the model wrote it
  friend bool operator==(const ToolCall&, const ToolCall&) = default;
};

struct Message {
  std::string role;
  std::string content;
  std::vector<ToolCall> tool_calls;  // an assistant's calls
  std::string tool_call_id, name;    // a tool's answer: the call it answers, the tool's name ("" if not given)
  friend bool operator==(const Message&, const Message&) = default;
};

// tool_choice. Required and Named hold the reply to calls by a grammar in the template's format
// (generate::forced_tool_call_gbnf).
enum class ToolChoice : uint8_t {
  Auto,      // the template is given the tools; calls in the reply are parsed
  None,      // the template is not given the tools, the reply is not parsed: the model cannot call them
  Required,  // the reply is one or more calls (parallel_tool_calls: false, one)
  Named,     // the reply calls Request::tool_choice_name
};

// One request's fields, validated. Absent sampling fields take the server's defaults (the command line).
struct Request {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;                // as the client named it (echoed back only through the server's name)
  std::vector<Message> messages;    // chat
  std::string prompt;               // completions, as text
  std::vector<int32_t> prompt_ids;  // completions, as token ids (then `prompt` is empty); each >= 0
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the counts
  bool cache_prompt = true;    // llama-server's: reuse the longest prompt prefix a slot's cache holds
  std::optional<float> temperature, top_p, min_p;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
  std::optional<int32_t> max_tokens;  // max_tokens / max_completion_tokens / n_predict (-1: no limit)
  std::vector<std::string> stop;
  std::optional<float> repeat_penalty, frequency_penalty, presence_penalty;
  std::optional<int32_t> repeat_last_n;  // -1: the whole context
  std::optional<bool> ignore_eos;
  // response_format / grammar / json_schema, compiled (nullptr: free text).
  std::shared_ptr<const grammar::Grammar> grammar;
  // Log-probabilities asked for (completions' logprobs: N, chat's logprobs: true with top_logprobs: N,
  // llama.cpp's n_probs: N): N alternatives per token, 0 to 20; absent: none.
  std::optional<int32_t> top_logprobs;
  int32_t n = 1;  // choices to generate (at most the server's slots: the server checks)
  // tools: the request's list as JSON text in the client's key order (templates write the tools with
  // tojson, so the order is the client's); "" when none (or an empty list).
  std::string tools;
  ToolChoice tool_choice = ToolChoice::Auto;
  std::string tool_choice_name;     // Named: the function's name (one of `tools`)
  bool parallel_tool_calls = true;  // false: the first call only
};

// What the server does with each request field a client may send (fields.cpp): the one table that
// parse_request consults and docs/serving.md shows.
enum class FieldStatus : uint8_t {
  Implemented,  // read and honoured
  NoEffect,     // accepted: it does not change the answer (`why` says why)
  Refused,      // not implemented and would change the answer: 400, unless its value asks for nothing
};
struct RequestField {
  std::string_view name;
  FieldStatus status;
  std::string_view off;  // Refused: a JSON list of the values that ask for nothing (accepted); null always is
  std::string_view why;  // what it does, or why it changes nothing, or why it is refused
};
std::span<const RequestField> request_fields() noexcept;  // sorted by name
const RequestField* find_request_field(std::string_view name) noexcept;
// The table as Markdown, for docs/serving.md.
std::string request_fields_markdown();

// A request the server refuses: the HTTP status and OpenAI's error type ("invalid_request_error"...).
class RequestError : public Error {
 public:
  RequestError(int status, std::string type, std::string message)
      : Error(std::move(message)), status_(status), type_(std::move(type)) {}
  int status() const noexcept { return status_; }
  const std::string& type() const noexcept { return type_; }

 private:
  int status_;
  std::string type_;
};

struct RequestLimits {
  size_t max_stop_strings = 4;  // OpenAI's limit
  size_t max_stop_bytes = 256;  // each
  size_t max_messages = 1024;
  // What parsing a body may build: each value costs about 16-80 bytes beside its text, so 65536 values
  // stay within a few MiB whatever an 8 MiB body holds (unbounded, nested arrays cost 40x the body).
  size_t max_json_depth = 64;
  size_t max_json_values = 65536;
  // Token ids (a completion's prompt, /detokenize) must be below it; 0: not known, any id from 0.
  int32_t vocab_size = 0;
};

// Parses and validates a JSON body; throws RequestError (status 400) naming the field that is wrong,
// or the field this server does not implement (request_fields: never ignored when it would change the answer).
Request parse_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits = {});

// ---- operations endpoints (ops.cpp), in llama-server's shapes ----

// POST /tokenize: {"content": "...", "add_special": false, "parse_special": true} -> {"tokens": [...]}
struct TokenizeRequest {
  std::string content;
  bool add_special = false;   // BOS/EOS as the vocabulary asks (llama-server's default: no)
  bool parse_special = true;  // "<s>" in the content becomes the control token
};
TokenizeRequest parse_tokenize(std::string_view body, const RequestLimits& limits = {});
// POST /detokenize: {"tokens": [...]} -> {"content": "..."}; each id must be below limits.vocab_size.
std::vector<int32_t> parse_detokenize(std::string_view body, const RequestLimits& limits = {});
std::string tokens_json(std::span<const int32_t> ids);
std::string content_json(std::string_view text);

// GET /props: what the server was started with, under llama-server's names.
struct Props {
  std::string model_path, chat_template, bos_token, eos_token;
  uint32_t n_ctx = 0;  // one slot's context
  size_t total_slots = 0;
  int32_t n_predict = -1;
  text::SamplerConfig sampling;  // the defaults of absent request fields
  bool ignore_eos = false;
  std::vector<std::string> stop;
};
std::string props_json(const Props& props);

// ---- metrics (metrics.cpp): GET /metrics and GET /slots, in llama-server's names and shapes ----

// What /metrics shows, read at one moment. Totals are since the server started.
struct MetricsSnapshot {
  uint64_t prompt_tokens = 0;                             // computed (a slot's cached prefix is not)
  double prompt_seconds = 0;                              // until each request's first token
  uint64_t predicted_tokens = 0;                          // generated
  double predicted_seconds = 0;                           // after each first token
  uint64_t decode_steps = 0;                              // batched forward passes
  size_t requests_processing = 0, requests_deferred = 0;  // busy slots; admitted requests waiting for one
  uint64_t kv_cells_used = 0, kv_cells = 0;               // over all slots
  size_t prompt_cache_entries = 0;                        // prefixes saved beyond the slots (--cache-ram)
  uint64_t prompt_cache_bytes = 0;
};
// Prometheus's text exposition format: # HELP, # TYPE and `name value` for each metric.
std::string metrics_text(const MetricsSnapshot& m);
// The metrics as a Markdown table (name, type, meaning), for docs/serving.md.
std::string metrics_markdown();

// One slot as GET /slots shows it.
struct SlotState {
  size_t id = 0;
  uint32_t n_ctx = 0;
  bool is_processing = false;
  bool speculative = false;
  uint32_t cached_tokens = 0;  // tokens whose keys and values its cache holds
};
std::string slots_json(std::span<const SlotState> slots);

// ---- responses (response.cpp) ----

enum class FinishReason : uint8_t { Stop, Length, ToolCalls };
std::string_view finish_reason_name(FinishReason r) noexcept;

// One token as a response's logprobs show it: its id (llama-server adds it), its text and log-probability.
struct TokenProb {
  int32_t id = -1;
  std::string text;
  float logprob = 0;
};
// One generated token's log-probabilities: its own and its position's most likely tokens', best first;
// `text_offset`: where its text starts in its choice's text (as the tokens' texts join).
struct TokenLogprobs {
  TokenProb sampled;
  std::vector<TokenProb> top;
  int64_t text_offset = 0;
};
// The logprobs object of a choice (or of a chunk's tokens): chat's {"content": [...]}, or the
// completions API's {tokens, token_logprobs, top_logprobs, text_offset}; nullopt: not asked for (null).
using Logprobs = std::optional<std::vector<TokenLogprobs>>;

// One of a response's choices.
struct Choice {
  size_t index = 0;
  std::string text;
  FinishReason finish = FinishReason::Stop;
  Logprobs logprobs;
  std::vector<ToolCall> tool_calls = {};  // chat: the calls parsed from the reply; with any, an empty text is null
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0;  // of prompt_tokens, those whose keys and values a slot's cache held (not computed)
  int64_t total() const noexcept { return prompt_tokens + completion_tokens; }
};

// What a request cost, in llama-server's `timings` object: prompt tokens computed and their time,
// tokens generated and their time, and with speculative decoding the tokens drafted and accepted.
struct Timings {
  int64_t prompt_n = 0, predicted_n = 0;
  double prompt_ms = 0, predicted_ms = 0;
  std::optional<int64_t> draft_n, draft_n_accepted;  // only while speculating
};

// What every response of one request carries: "chatcmpl-..."/"cmpl-...", the creation time, our model id.
struct ResponseHead {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;
  int64_t created = 0;
  std::string model;
};

std::string completion_json(const ResponseHead& head, std::span<const Choice> choices, const Usage& usage,
                            const Timings& timings = {});
// One choice (index 0) without logprobs.
std::string completion_json(const ResponseHead& head, std::string_view text, FinishReason finish, const Usage& usage,
                            const Timings& timings = {}, std::span<const ToolCall> tool_calls = {});
// One server-sent chunk's JSON (without "data: "): the first chat chunk carries the role; a chunk with
// a finish reason ends the choice; with `usage` it is the usage-only chunk (empty choices).
// The chunk with the finish reason carries the timings too, as llama-server's does. `index`: the
// choice it belongs to; `logprobs`: those of the tokens whose text it carries.
std::string chunk_json(const ResponseHead& head, std::string_view delta, bool first, std::optional<FinishReason> finish,
                       const Timings& timings = {}, size_t index = 0, const Logprobs& logprobs = std::nullopt);
std::string usage_chunk_json(const ResponseHead& head, const Usage& usage);
// A chat chunk whose delta carries every tool call whole (OpenAI's shape: index, id, type, function).
std::string tool_calls_chunk_json(const ResponseHead& head, std::span<const ToolCall> calls, bool first,
                                  size_t index = 0);
// `code`: OpenAI's machine-readable code ("invalid_api_key"); empty: null.
std::string error_json(std::string_view message, std::string_view type, std::string_view code = {});
std::string models_json(std::string_view model, int64_t created);

// ---- slots (slots.cpp) ----

// A slot is one sequence over the shared weights: its KV cache and sampler (generate::SequenceParts::
// KvCache); the Stepper's batch runs the passes over it.
using Slot = generate::Sequence;

struct SlotCounts {
  size_t slots = 0, busy = 0, waiting = 0;
  size_t prompt_cache_entries = 0;  // the PromptCache's (0 without one)
  uint64_t prompt_cache_bytes = 0;
};

// One slot's load, for /slots and /metrics.
struct SlotLoad {
  bool busy = false;
  uint32_t cells = 0;  // cells of its KV cache holding tokens
};

// Which free slot a request gets (llama-server's cache_prompt): the one whose KV cache holds the longest
// reusable prefix of its prompt (Sequence::reusable), when that prefix is a match, at least
// kSlotMatchShare of the prompt (below it, most often a shared BOS alone, taking the slot would throw
// away its cache for nearly nothing); otherwise, and among equal prefixes, the least recently used.
constexpr double kSlotMatchShare = 0.1;
// PromptCache: the slot's own cache held less of the prompt than a prefix saved in the prompt cache,
// which was copied into it.
enum class SlotReason : uint8_t { LongestPrefix, LeastRecentlyUsed, PromptCache };
struct SlotCandidate {
  size_t index = 0;
  size_t reusable = 0;     // prompt tokens this slot's cache would save
  uint64_t last_used = 0;  // when it was last handed back (0: never used)
};
struct SlotChoice {
  size_t index = 0;
  size_t reusable = 0;  // the chosen slot's; reused even when the choice was by age
  SlotReason reason = SlotReason::LeastRecentlyUsed;
  friend bool operator==(const SlotChoice&, const SlotChoice&) = default;
};
// `free_slots` must not be empty; `prompt_tokens` is the request's prompt length (0: no reuse asked).
SlotChoice choose_slot(std::span<const SlotCandidate> free_slots, size_t prompt_tokens);

// ---- the prompt cache (prompt_cache.cpp) ----

// Prefixes saved from slots a new request was about to overwrite (llama-server's --cache-ram), so that
// more conversations than slots keep their work: bounded in bytes (the plan prices the bound,
// PlanOptions::prompt_cache), the least recently saved or used evicted first. A request whose prompt
// shares more with a saved prefix than with any free slot's cache gets it copied back into its slot.
class PromptCache {
 public:
  explicit PromptCache(uint64_t limit_bytes) : limit_(limit_bytes) {}
  // Keeps `saved`, evicting the least recently used entries until it fits. Not kept: an empty prefix,
  // one over the limit, or one an entry already holds (its tokens a prefix of that entry's); entries it
  // holds whole are dropped for it.
  void put(generate::SavedPrefix saved);
  struct Match {
    size_t entry = 0;
    size_t reusable = 0;  // as Sequence::reusable: the common prefix, less the prompt's last token
  };
  // The entry sharing the longest reusable prefix with `prompt`; nullopt when none shares a token.
  std::optional<Match> best(std::span<const int32_t> prompt) const;
  generate::SavedPrefix take(size_t entry);  // removes it (a slot holds it now, or it is evicted)
  size_t entries() const noexcept { return entries_.size(); }
  uint64_t bytes() const noexcept { return bytes_; }
  uint64_t limit() const noexcept { return limit_; }

 private:
  struct Entry {
    generate::SavedPrefix saved;
    uint64_t used = 0;  // the clock when last saved (or found held when saved again)
  };
  std::vector<Entry> entries_;
  uint64_t bytes_ = 0, limit_, clock_ = 0;
};

// N slots and a bounded FIFO of requests waiting for one. acquire() blocks until the caller's turn and
// a free slot, and lends the free slot choose_slot() picks for its prompt; it answers nullopt at once
// when `queue_limit` requests are already waiting.
class SlotPool {
 public:
  // Builds `slots` slots (KV cache and sampler each) from an engine opened with sequence = false.
  // prompt_cache_bytes > 0: a slot's prefix that a request would overwrite is kept in a PromptCache of
  // that bound, and a request takes a saved prefix back when it shares more than the slot's own.
  SlotPool(generate::Engine& engine, size_t slots, size_t queue_limit, uint64_t prompt_cache_bytes = 0);
  // Accounting only, no model (tests of the queue).
  SlotPool(size_t slots, size_t queue_limit);
  ~SlotPool();
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  class Lease {
   public:
    Lease(Lease&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)), choice_(other.choice_) {}
    Lease& operator=(Lease&& other) noexcept;  // hands back the slot held, takes other's
    ~Lease();
    size_t index() const noexcept { return choice_.index; }
    const SlotChoice& choice() const noexcept { return choice_; }
    Slot& slot() const;  // the pool must have been built with an engine
    // Where the slot's count of cells in use is kept: the Stepper writes it while the slot generates.
    std::atomic<uint32_t>& cells() const noexcept;

   private:
    friend class SlotPool;
    Lease(SlotPool* pool, SlotChoice choice) : pool_(pool), choice_(choice) {}
    SlotPool* pool_;
    SlotChoice choice_;
  };

  // `prompt`: the request's tokens, to find the slot whose cache holds most of them (empty: the least
  // recently used slot).
  std::optional<Lease> acquire(std::span<const int32_t> prompt = {});
  // `count` slots at once (a request's n choices), each chosen as acquire() chooses one; waits in the
  // same line until that many are free, so two such requests never hold part of what both need.
  // Empty as acquire() answers nullopt; InvalidArgument when count is 0 or more than the pool holds.
  std::vector<Lease> acquire(std::span<const int32_t> prompt, size_t count);
  // Wakes every waiter with nullopt and refuses new ones (shutdown).
  void close();
  SlotCounts counts() const;
  std::vector<SlotLoad> loads() const;  // by slot index
  size_t size() const noexcept { return size_; }

 private:
  void release(size_t index);

  size_t size_;
  size_t queue_limit_;
  std::vector<std::unique_ptr<Slot>> slots_;
  mutable std::mutex mutex_;
  std::condition_variable turn_;
  SlotChoice choose(std::span<const int32_t> prompt) const;                             // under mutex_
  SlotChoice through_prompt_cache(SlotChoice choice, std::span<const int32_t> prompt);  // under mutex_
  std::optional<PromptCache> prompt_cache_;

  std::vector<size_t> free_;
  std::vector<uint64_t> last_used_;  // per slot: the release count when it was last handed back
  // Per slot: its cells in use, read without the mutex by /metrics while the Stepper writes it.
  std::unique_ptr<std::atomic<uint32_t>[]> cells_;
  uint64_t releases_ = 0;
  std::deque<uint64_t> queue_;  // tickets of waiting callers, first come first served
  uint64_t next_ticket_ = 0;
  bool closed_ = false;
};

// ---- the stepper (stepper.cpp) ----

// Continuous batching for the slots: one thread advances every generating slot with one forward pass
// per step (generate::Batch over the plan's BatchPlan, all the threads), so the weights are read once
// per step for all of them; a request's prompt joins in the rows the decodes leave. Each caller of
// generate() blocks on its own thread and sees its tokens' text there (the stepper never waits for a
// client); a callback returning false ends that request at the next step boundary.
class Stepper {
 public:
  // draft_max > 0: requests may bring a drafter (speculative decoding in the batch, Batch::speculate;
  // the plan must price drafts, PlanOptions::draft_max).
  Stepper(generate::Engine& engine, int threads, uint32_t draft_max = 0, uint32_t draft_min = 0);
  ~Stepper();  // after stop(): every generate() has returned
  Stepper(const Stepper&) = delete;
  Stepper& operator=(const Stepper&) = delete;

  // Sequence::generate's contract, run in the batch: computes what follows the prefix of `prompt` the
  // slot's cache holds (none with Recompute), keeps the slot's record of its cache, and calls
  // `on_token` on this thread with each token's text (stop strings held back and cut as Generator
  // does). The slot must be lent to the caller, its sampler set (Sequence::sample_with); `drafter`, the
  // slot's own while it generates, drafts for it. What the batch refuses (a drafter where it does not
  // speculate) and errors of its passes are thrown here. `cells`, when given, is set after each step
  // to the number of the slot's cache cells holding tokens (for /metrics: a store, no lock).
  // `logprobs`, when given with options.logprobs >= 0, gets each token's log-probabilities before
  // `on_token` hears its text (the end-of-generation token, never shown, has none).
  generate::Stats generate(Slot& slot, std::span<const int32_t> prompt, const generate::Options& options,
                           const generate::TokenCallback& on_token,
                           generate::PrefixReuse reuse = generate::PrefixReuse::Reuse,
                           generate::Drafter* drafter = nullptr, std::atomic<uint32_t>* cells = nullptr,
                           std::vector<generate::TokenLogprobs>* logprobs = nullptr);
  // Batched forward passes run so far (llamacpp:n_decode_total).
  uint64_t steps() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- the HTTP server (server.cpp) ----

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (port() says which)
  size_t slots = 1;
  size_t queue_limit = 64;  // requests waiting for a slot before 503
  int threads = 2;          // kernel threads of the batch that advances every slot
  std::string model_id;     // what /v1/models and every response name
  std::string model_path;   // what /props names
  // Non-empty: every request but /health and CORS preflights must carry "Authorization: Bearer KEY"
  // with one of these keys, or gets 401 (--api-key, --api-key-file).
  std::vector<std::string> api_keys;
  // Defaults for absent request fields (the command line's -n, --temp, ...).
  int32_t max_tokens = -1;
  text::SamplerConfig sampling;
  std::vector<std::string> stop;  // always applied, beside the request's
  bool ignore_eos = false;
  // A chat message's control-token text ("<|im_end|>") becomes the control token (for clients that
  // write turns by hand); by default it stays text, so no message can forge a turn.
  bool special_in_content = false;
  // Speculative decoding: slot i drafts with drafters[i] (empty: none), up to draft_max tokens a step.
  std::vector<generate::Drafter*> drafters;
  uint32_t draft_max = 0, draft_min = 0;
  // Called once the socket is bound (the port is known), before serving.
  std::function<void(int port)> on_listening;
};

class Server {
 public:
  // `chat_template`: the Jinja source chat requests are rendered with; `end_of_turn`: a stop string
  // for templates whose turn end the vocabulary lacks as a token (empty: none).
  Server(generate::Engine& engine, ServerOptions options, std::string chat_template, std::string end_of_turn);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and serves until stop(); throws IoError when the address cannot be bound.
  void listen();
  void stop();
  int port() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace skainet::serve
