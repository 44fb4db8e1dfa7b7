// The server: the endpoints of kRoutes over the HTTP transport (http.cpp) and the slots (slots.cpp). The
// transport's event-loop threads only route (and check the API key): /health, /v1/models, /props,
// /metrics and /slots are answered there (from counters and a snapshot, never waiting on a generation); a completion,
// /tokenize or /detokenize is *admitted* (503 when --slots + --queue requests are already in) and handed to a worker.
// Workers — one per admitted request at most — parse the body, render the chat template and tokenize (400 before
// waiting for anything), wait for a slot in FIFO order, and generate; so rendering, like generating,
// is bounded by --slots and --queue and never runs on a thread that other clients' bytes need. The
// stepper (stepper.cpp) advances every generating slot in one batch; each worker turns its own tokens
// into text. A streamed answer goes out piece by piece as it is generated; a client gone mid-stream
// stops the generation at its next step and frees the slot.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "http.hpp"
#include "choices.hpp"
#include "tool_reply.hpp"
#include "skainet/text/chat.hpp"
#include "skainet/model/conversation.hpp"
#include "skainet/app/serve.hpp"

namespace skainet::serve {
namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kPrometheusText = "text/plain; version=0.0.4; charset=utf-8";

// One request, ready to generate: everything that could be refused has been checked.
struct Job {
  ResponseHead head;
  std::vector<int32_t> ids;
  generate::Options generation;
  text::SamplerConfig sampling;
  bool stream = false;
  bool include_usage = false;
  generate::PrefixReuse reuse = generate::PrefixReuse::Reuse;
  std::shared_ptr<const grammar::Grammar> grammar;  // nullptr: free text
  size_t choices = 1;                               // n
  const generate::ToolCallFormat* tools = nullptr;  // the reply is parsed for calls in this format
  bool parallel_tool_calls = true;
  bool grammar_writes_markers = false;  // a forced tool call: the grammar writes the format's markers
};

FinishReason finish_of(generate::StopReason r) {
  switch (r) {
    case generate::StopReason::MaxTokens:
    case generate::StopReason::ContextFull: return FinishReason::Length;
    default: return FinishReason::Stop;
  }
}

// prompt_tokens is the whole prompt, whether computed or taken from the slot's cache (as OpenAI counts),
// once however many choices read it; completion_tokens those of every choice.
Usage usage_of(const Job& job, std::span<const generate::Stats> choices) {
  Usage u{static_cast<int64_t>(job.ids.size()), 0, choices.front().cached_tokens};
  for (const generate::Stats& s : choices) u.completion_tokens += s.generated_tokens;
  return u;
}

Timings timings_of(const generate::Stats& s, bool speculating) {
  Timings t{.prompt_n = s.prompt_tokens,
            .predicted_n = s.generated_tokens,
            .prompt_ms = 1e3 * s.prompt_seconds,
            .predicted_ms = 1e3 * s.decode_seconds};
  if (speculating) {
    t.draft_n = s.drafted_tokens;
    t.draft_n_accepted = s.accepted_tokens;
  }
  return t;
}

int64_t now_seconds() { return static_cast<int64_t>(std::time(nullptr)); }

void send_error(Exchange& ex, int status, std::string_view type, std::string_view message) {
  ex.respond(status, error_json(message, type), kJson);
}

void shutting_down(Exchange& ex) {
  send_error(ex, 503, "server_shutting_down", "the server is shutting down; the request was not served");
}

// What a generation cut off by the shutdown says instead of a finish reason: it did not end by itself.
std::string cut_off(int32_t tokens) {
  return error_json(fmt::format("the server is shutting down: the answer was cut off after {} tokens", tokens),
                    "server_shutting_down");
}

struct Route {
  std::string_view method, path;
  enum class Kind : uint8_t { Health, Models, Props, Metrics, Slots, Chat, Completion, Tokenize, Detokenize } kind;
  // Whether it is answered without an API key: a load balancer's probe has none.
  bool open = false;
};

// llama.cpp's server answers the completion paths without /v1 too; clients configured for it work here.
constexpr Route kRoutes[] = {
    {"GET", "/health", Route::Kind::Health, true},
    {"GET", "/v1/models", Route::Kind::Models},
    {"GET", "/props", Route::Kind::Props},
    {"GET", "/metrics", Route::Kind::Metrics},
    {"GET", "/slots", Route::Kind::Slots},
    {"POST", "/v1/chat/completions", Route::Kind::Chat},
    {"POST", "/chat/completions", Route::Kind::Chat},
    {"POST", "/v1/completions", Route::Kind::Completion},
    {"POST", "/completions", Route::Kind::Completion},
    {"POST", "/tokenize", Route::Kind::Tokenize},
    {"POST", "/detokenize", Route::Kind::Detokenize},
};

// "GET /health, GET /v1/models, ...", for the 404's message.
std::string served_routes() {
  std::string out;
  for (const Route& r : kRoutes) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", r.method, r.path);
  return out;
}

// Compares every byte of the key whatever matches, so the time taken does not tell a caller how much
// of a guess was right (the key's length it may still learn).
bool same_secret(std::string_view given, std::string_view key) {
  if (given.size() != key.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

// One line per request on stderr: what was asked, the answer's status, the tokens, the time.
void log_finished(const Finished& f) {
  const auto count = [](int64_t n) { return n < 0 ? std::string("-") : std::to_string(n); };
  fmt::print(stderr, "skainet: {} {} {} prompt={} generated={} {:.1f} ms{}\n", f.method, f.path,
             f.status ? std::to_string(f.status) : std::string("-"), count(f.prompt_tokens), count(f.generated_tokens),
             f.milliseconds, f.client_gone ? " (client gone)" : "");
}

std::string token_text(const text::Tokenizer& tok, int32_t id) {
  return id >= 0 && id < tok.vocab_size() ? tok.token_to_piece(id, /*render_special=*/true) : std::string();
}

}  // namespace

struct Server::Impl {
  Impl(generate::Engine& e, ServerOptions o, std::string chat_template, std::string eot)
      : engine(e),
        options(std::move(o)),
        tmpl(chat_template),
        tool_format(generate::detect_tool_call_format(chat_template)),
        template_reads_tools(generate::template_uses_tools(chat_template)),
        end_of_turn(std::move(eot)),
        // Admission bounds who waits (--queue); the pool's own limit is never the one reached.
        pool(e, options.slots, options.slots + options.queue_limit, e.plan.totals.prompt_cache),
        stepper(e, options.threads, options.draft_max, options.draft_min),
        http(
            HttpLimits{}, [this](const std::shared_ptr<Exchange>& ex) { route(ex); }, log_finished),
        started(now_seconds()),
        limits{.vocab_size = e.tokenizer->vocab_size()},
        props(props_json({.model_path = options.model_path,
                          .chat_template = chat_template,
                          .bos_token = token_text(*e.tokenizer, e.tokenizer->bos()),
                          .eos_token = token_text(*e.tokenizer, e.tokenizer->eos()),
                          .n_ctx = e.plan.kv->n_ctx,
                          .total_slots = options.slots,
                          .n_predict = options.max_tokens,
                          .sampling = options.sampling,
                          .ignore_eos = options.ignore_eos,
                          .stop = options.stop})),
        grammar_vocabulary([&e] { return std::make_shared<const grammar::Vocabulary>(*e.tokenizer); }),
        marker_vocabulary([this, &e]() -> std::shared_ptr<const grammar::Vocabulary> {
          if (!tool_format) return grammar_vocabulary.get();
          return std::make_shared<const grammar::Vocabulary>(
              *e.tokenizer, generate::tool_call_marker_tokens(*tool_format, *e.tokenizer));
        }) {}

  Job prepare(const Request& r) const;
  void force_tool_call(const Request& r, Job& job) const;
  generate::Stats generate(const SlotPool::Lease& lease, const Job& job, size_t choice,
                           const generate::TokenCallback& on_token,
                           std::vector<generate::TokenLogprobs>* logprobs = nullptr);
  std::vector<SlotPool::Lease> lease_for(const Job& job);
  void route(const std::shared_ptr<Exchange>& ex);
  bool authorized(const Exchange& ex) const;
  void admit(const std::shared_ptr<Exchange>& ex, Route::Kind kind);
  void work();
  void serve(Exchange& ex, Route::Kind kind);
  void complete(Exchange& ex, Endpoint endpoint);
  void tokenize(Exchange& ex) const;
  void detokenize(Exchange& ex) const;
  void stream(Exchange& ex, Job job, std::vector<SlotPool::Lease> leases);
  generate::Stats stream_choice(ChunkSender& out, const Job& job, const SlotPool::Lease& lease, size_t choice);
  std::string health() const;
  size_t requests_waiting(const SlotCounts& c) const;
  MetricsSnapshot metrics() const;
  std::string slots() const;
  void count(const generate::Stats& s);

  generate::Engine& engine;
  ServerOptions options;
  chat::Template tmpl;
  const generate::ToolCallFormat* tool_format;  // the template's, or nullptr (tools refused)
  bool template_reads_tools;
  std::string end_of_turn;
  SlotPool pool;
  Stepper stepper;  // advances every busy slot in one batch
  HttpServer http;
  std::atomic<int> port{0};
  mutable std::atomic<uint64_t> next_id{1};  // response ids; prepare() is const otherwise
  // Set by stop(): generations in flight end at their next token, so shutting down never waits for
  // a long answer.
  std::atomic<bool> stopping{false};
  int64_t started;
  RequestLimits limits;  // the defaults, and token ids within the vocabulary
  // What every finished generation adds to, for /metrics: one atomic add each per request.
  struct Totals {
    std::atomic<uint64_t> prompt_tokens{0}, predicted_tokens{0};
    std::atomic<double> prompt_seconds{0}, predicted_seconds{0};
  } totals;
  std::string props;  // GET /props: fixed at the start
  // A vocabulary as grammars read it, built by the first request that needs it: a server that never
  // sees a grammar never pays for it (~0.1 s on a 150k-token vocabulary).
  class LazyVocabulary {
   public:
    using Build = std::function<std::shared_ptr<const grammar::Vocabulary>()>;
    explicit LazyVocabulary(Build build) : build_(std::move(build)) {}
    std::shared_ptr<const grammar::Vocabulary> get() const {
      std::call_once(once_, [this] { value_ = build_(); });
      return value_;
    }

   private:
    Build build_;
    mutable std::once_flag once_;
    mutable std::shared_ptr<const grammar::Vocabulary> value_;
  };
  // For response_format, grammar and json_schema.
  LazyVocabulary grammar_vocabulary;
  // The same with the tool-call format's control-token markers written as text, for forced calls.
  LazyVocabulary marker_vocabulary;

  // Admitted requests, oldest first, and the workers that take them.
  struct Admitted {
    std::shared_ptr<Exchange> exchange;
    Route::Kind kind;
  };
  mutable std::mutex work_mutex;
  std::condition_variable work_ready, stop_asked;
  std::deque<Admitted> waiting;
  size_t admitted = 0;   // waiting + with a worker
  bool closing = false;  // workers leave once `waiting` is empty
  std::vector<std::thread> workers;
};

Job Server::Impl::prepare(const Request& r) const {
  const text::Tokenizer& tok = *engine.tokenizer;
  Job job;
  job.head = {r.endpoint,
              fmt::format("{}-{:x}{:06x}", r.endpoint == Endpoint::ChatCompletions ? "chatcmpl" : "cmpl", started,
                          next_id.fetch_add(1) & 0xffffff),
              now_seconds(), options.model_id};
  if (r.endpoint == Endpoint::ChatCompletions) {
    job.tools = reply_format(r, tool_format, template_reads_tools);
    job.parallel_tool_calls = r.parallel_tool_calls;
    if (job.tools) job.generation.shown_control_tokens = generate::tool_call_marker_tokens(*job.tools, tok);
    nlohmann::ordered_json tools = job.tools ? nlohmann::ordered_json::parse(r.tools) : nlohmann::ordered_json();
    try {
      // A message's content stays text: a client's "<|im_end|>" must not end or forge a turn.
      job.ids = generate::tokenize_conversation(
                    tmpl, generate::conversation_context(template_messages(r.messages), tok, std::move(tools)), tok,
                    {.special_in_content = options.special_in_content})
                    .ids;
    } catch (const chat::TemplateError& e) {
      // Templates refuse conversations they do not accept (raise_exception: roles must alternate, ...),
      // and every render is held to its budget of bytes, steps and time.
      throw RequestError(400, "invalid_request_error",
                         fmt::format("the chat template refused the messages: {}", e.what()));
    } catch (const generate::ControlTextOutsideContentError& e) {
      throw RequestError(400, "invalid_request_error", e.what());
    } catch (const generate::ContentSpecialTokenError& e) {
      throw RequestError(400, "invalid_request_error", e.what());
    }
  } else if (!r.prompt_ids.empty()) {
    // Token ids are taken as they are (no BOS added), as llama-server does; parse_request checked
    // each against the vocabulary.
    job.ids = r.prompt_ids;
  } else {
    // A completion's prompt is the model's raw input, control tokens included (as `skainet run`).
    job.ids = tok.encode(r.prompt, /*add_special=*/true, /*parse_special=*/true);
  }
  const uint32_t n_ctx = engine.plan.kv->n_ctx;
  if (job.ids.empty()) throw RequestError(400, "invalid_request_error", "the prompt has no tokens");
  if (job.ids.size() >= n_ctx)
    throw RequestError(
        400, "invalid_request_error",
        fmt::format("the prompt is {} tokens but a slot's context holds {} (--ctx), and at least one must "
                    "be left to generate: shorten the prompt",
                    job.ids.size(), n_ctx));

  job.generation.max_tokens = r.max_tokens.value_or(options.max_tokens);
  job.generation.stop_at_eos = !r.ignore_eos.value_or(options.ignore_eos);
  job.generation.stop_strings = options.stop;
  job.generation.stop_strings.insert(job.generation.stop_strings.end(), r.stop.begin(), r.stop.end());
  if (r.endpoint == Endpoint::ChatCompletions && !end_of_turn.empty())
    job.generation.stop_strings.push_back(end_of_turn);
  job.sampling = options.sampling;
  if (r.temperature) job.sampling.temperature = *r.temperature;
  if (r.top_p) job.sampling.top_p = *r.top_p;
  if (r.min_p) job.sampling.min_p = *r.min_p;
  if (r.top_k) job.sampling.top_k = *r.top_k;
  if (r.repeat_penalty) job.sampling.repeat_penalty = *r.repeat_penalty;
  if (r.repeat_last_n) job.sampling.repeat_last_n = *r.repeat_last_n;
  if (r.frequency_penalty) job.sampling.frequency_penalty = *r.frequency_penalty;
  if (r.presence_penalty) job.sampling.presence_penalty = *r.presence_penalty;
  job.sampling.seed = r.seed ? *r.seed : std::random_device{}();
  job.stream = r.stream;
  job.include_usage = r.include_usage;
  job.reuse = r.cache_prompt ? generate::PrefixReuse::Reuse : generate::PrefixReuse::Recompute;
  job.grammar = r.grammar;
  if (job.tools && r.tool_choice >= ToolChoice::Required) force_tool_call(r, job);
  if (job.grammar) try {
      // Its start is expanded now, so a grammar too ambiguous to begin is a 400, not a failed generation.
      grammar::Matcher start(job.grammar, grammar_vocabulary.get());
    } catch (const grammar::GrammarError& e) {
      throw RequestError(400, "invalid_request_error", e.what());
    }
  job.generation.logprobs = r.top_logprobs.value_or(-1);
  // Each choice generates in its own slot, all at once.
  if (static_cast<size_t>(r.n) > options.slots)
    throw RequestError(
        400, "invalid_request_error",
        fmt::format("'n' is {}, but this server generates at most {} choices at once (--slots)", r.n, options.slots));
  job.choices = static_cast<size_t>(r.n);
  return job;
}

// tool_choice "required" or a named function: the reply held to calls in the template's format.
void Server::Impl::force_tool_call(const Request& r, Job& job) const {
  const auto refuse = [](const std::string& why) { throw RequestError(400, "invalid_request_error", why); };
  if (job.grammar)
    refuse(
        "'tool_choice' \"required\" or a named function and 'response_format', 'grammar' or 'json_schema' each "
        "constrain the output: send one of them");
  try {
    const std::string gbnf = generate::forced_tool_call_gbnf(*job.tools, nlohmann::ordered_json::parse(r.tools),
                                                             r.tool_choice_name, job.parallel_tool_calls);
    job.grammar = std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(gbnf));
    job.grammar_writes_markers = true;
  } catch (const InvalidArgument& e) {  // a format whose arguments are not JSON, a schema not expressible
    refuse(fmt::format("'tool_choice' {}: {}", r.tool_choice == ToolChoice::Named ? r.tool_choice_name : "required",
                       e.what()));
  }
}

generate::Stats Server::Impl::generate(const SlotPool::Lease& lease, const Job& job, size_t choice,
                                       const generate::TokenCallback& on_token,
                                       std::vector<generate::TokenLogprobs>* logprobs) {
  // A sampler's settings are fixed when it is made: a new one per request (its buffers are sized
  // here, not per token). The slot computes only what its cache does not hold of the prompt.
  text::SamplerConfig sampling = job.sampling;
  sampling.seed = choice_seed(job.sampling.seed, choice);
  lease.slot().sample_with(sampling);
  if (job.grammar)
    lease.slot().sampler.constrain(std::make_unique<grammar::Matcher>(
        job.grammar, (job.grammar_writes_markers ? marker_vocabulary : grammar_vocabulary).get()));
  generate::Drafter* drafter = options.drafters.empty() ? nullptr : options.drafters.at(lease.index());
  const generate::Stats s =
      stepper.generate(lease.slot(), job.ids, job.generation, on_token, job.reuse, drafter, &lease.cells(), logprobs);
  count(s);
  return s;
}

void Server::Impl::count(const generate::Stats& s) {
  constexpr auto relaxed = std::memory_order_relaxed;
  totals.prompt_tokens.fetch_add(static_cast<uint64_t>(s.prompt_tokens), relaxed);
  totals.predicted_tokens.fetch_add(static_cast<uint64_t>(s.generated_tokens), relaxed);
  totals.prompt_seconds.fetch_add(s.prompt_seconds, relaxed);
  totals.predicted_seconds.fetch_add(s.decode_seconds, relaxed);
}

std::vector<SlotPool::Lease> Server::Impl::lease_for(const Job& job) {
  // Without reuse any slot will do: the least recently used one, whose cache is worth least.
  return pool.acquire(
      job.reuse == generate::PrefixReuse::Reuse ? std::span<const int32_t>(job.ids) : std::span<const int32_t>(),
      job.choices);
}

void Server::Impl::route(const std::shared_ptr<Exchange>& ex) {
  // A browser's CORS preflight carries no credentials: it is answered for any path (allow_any_origin
  // in http.cpp adds the headers), and the real request that follows is checked as usual.
  if (ex->method() == "OPTIONS") return ex->respond(204, "", "");
  const Route* found = nullptr;
  bool path_known = false;
  for (const Route& r : kRoutes) {
    if (r.path != ex->path()) continue;
    path_known = true;
    if (r.method == ex->method()) found = &r;
  }
  if (!found) {
    // 405 for a path served with another method, 404 for a path not served at all.
    return send_error(*ex, path_known ? 405 : 404, path_known ? "invalid_request_error" : "not_found_error",
                      fmt::format("{} endpoint {} {} (served: {})", path_known ? "no such method for the" : "unknown",
                                  ex->method(), ex->path(), served_routes()));
  }
  if (!found->open && !authorized(*ex))
    return ex->respond(401,
                       error_json("a valid API key is required: send it as 'Authorization: Bearer KEY' (the "
                                  "server's --api-key or --api-key-file)",
                                  "invalid_request_error", "invalid_api_key"),
                       kJson);
  switch (found->kind) {
    case Route::Kind::Health: return ex->respond(200, health(), kJson);
    case Route::Kind::Models: return ex->respond(200, models_json(options.model_id, started), kJson);
    case Route::Kind::Props: return ex->respond(200, props, kJson);
    case Route::Kind::Metrics: return ex->respond(200, metrics_text(metrics()), kPrometheusText);
    case Route::Kind::Slots: return ex->respond(200, slots(), kJson);
    // Parsing and tokenizing take time in proportion to the body: a worker's, never the event loop's.
    default: return admit(ex, found->kind);
  }
}

bool Server::Impl::authorized(const Exchange& ex) const {
  if (options.api_keys.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  std::string_view given = ex.authorization();
  if (!given.starts_with(kBearer)) return false;
  given.remove_prefix(kBearer.size());
  bool match = false;
  for (const std::string& key : options.api_keys) match |= same_secret(given, key);
  return match;
}

// Admitted requests not generating: waiting for a worker, a render or a slot.
size_t Server::Impl::requests_waiting(const SlotCounts& c) const {
  size_t in = 0;
  {
    std::lock_guard lock(work_mutex);
    in = admitted;
  }
  return in > c.busy ? in - c.busy : 0;
}

std::string Server::Impl::health() const {
  const SlotCounts c = pool.counts();
  return nlohmann::json{{"status", stopping.load() ? "stopping" : "ok"},
                        {"slots_idle", c.slots - c.busy},
                        {"slots_processing", c.busy},
                        {"requests_waiting", requests_waiting(c)}}
      .dump();
}

MetricsSnapshot Server::Impl::metrics() const {
  constexpr auto relaxed = std::memory_order_relaxed;
  const SlotCounts c = pool.counts();
  MetricsSnapshot m{.prompt_tokens = totals.prompt_tokens.load(relaxed),
                    .prompt_seconds = totals.prompt_seconds.load(relaxed),
                    .predicted_tokens = totals.predicted_tokens.load(relaxed),
                    .predicted_seconds = totals.predicted_seconds.load(relaxed),
                    .decode_steps = stepper.steps(),
                    .requests_processing = c.busy,
                    .requests_deferred = requests_waiting(c),
                    .kv_cells = uint64_t{engine.plan.kv->n_ctx} * c.slots,
                    .prompt_cache_entries = c.prompt_cache_entries,
                    .prompt_cache_bytes = c.prompt_cache_bytes};
  for (const SlotLoad& slot : pool.loads()) m.kv_cells_used += slot.cells;
  return m;
}

std::string Server::Impl::slots() const {
  std::vector<SlotState> out;
  const std::vector<SlotLoad> loads = pool.loads();
  for (size_t i = 0; i < loads.size(); ++i)
    out.push_back({.id = i,
                   .n_ctx = engine.plan.kv->n_ctx,
                   .is_processing = loads[i].busy,
                   .speculative = !options.drafters.empty(),
                   .cached_tokens = loads[i].cells});
  return slots_json(out);
}

void Server::Impl::admit(const std::shared_ptr<Exchange>& ex, Route::Kind kind) {
  std::lock_guard lock(work_mutex);
  if (closing || stopping.load()) return shutting_down(*ex);
  if (admitted >= options.slots + options.queue_limit)
    return send_error(
        *ex, 503, "server_busy",
        fmt::format("all {} slots are busy and {} requests are already waiting (the queue's limit, --queue); "
                    "try again later",
                    options.slots, admitted - options.slots));
  ++admitted;
  waiting.push_back({ex, kind});
  work_ready.notify_one();
}

void Server::Impl::work() {
  for (;;) {
    Admitted next;
    {
      std::unique_lock lock(work_mutex);
      work_ready.wait(lock, [&] { return closing || !waiting.empty(); });
      if (waiting.empty()) return;
      next = std::move(waiting.front());
      waiting.pop_front();
    }
    try {
      serve(*next.exchange, next.kind);
    } catch (const std::exception& e) {
      // Any request not yet answered gets its 500; a stream already under way (its status went out)
      // is ended, so its connection never waits for more.
      send_error(*next.exchange, 500, "server_error", e.what());
      next.exchange->finish();
    }
    std::lock_guard lock(work_mutex);
    --admitted;
  }
}

void Server::Impl::serve(Exchange& ex, Route::Kind kind) {
  try {
    switch (kind) {
      case Route::Kind::Chat: return complete(ex, Endpoint::ChatCompletions);
      case Route::Kind::Completion: return complete(ex, Endpoint::Completions);
      case Route::Kind::Tokenize: return tokenize(ex);
      case Route::Kind::Detokenize: return detokenize(ex);
      default: return send_error(ex, 500, "server_error", "this endpoint is not served by a worker");
    }
  } catch (const RequestError& e) {
    send_error(ex, e.status(), e.type(), e.message());
  }
}

void Server::Impl::tokenize(Exchange& ex) const {
  const TokenizeRequest r = parse_tokenize(ex.body(), limits);
  const std::vector<int32_t> ids = engine.tokenizer->encode(r.content, r.add_special, r.parse_special);
  ex.set_tokens(static_cast<int64_t>(ids.size()), 0);
  ex.respond(200, tokens_json(ids), kJson);
}

void Server::Impl::detokenize(Exchange& ex) const {
  const std::vector<int32_t> ids = parse_detokenize(ex.body(), limits);
  ex.respond(200, content_json(engine.tokenizer->decode(ids)), kJson);
}

void Server::Impl::complete(Exchange& ex, Endpoint endpoint) {
  if (stopping.load()) return shutting_down(ex);
  Job job;
  try {
    job = prepare(parse_request(endpoint, ex.body(), limits));
  } catch (const RequestError& e) {
    return send_error(ex, e.status(), e.type(), e.message());
  }
  std::vector<SlotPool::Lease> leases = lease_for(job);
  if (leases.empty()) return shutting_down(ex);  // the pool closes only when the server stops
  if (job.stream) return stream(ex, std::move(job), std::move(leases));

  std::vector<Choice> choices(job.choices);
  std::vector<generate::Stats> stats(job.choices);
  const bool with_logprobs = job.generation.logprobs >= 0;
  for_each_choice(job.choices, [&](size_t i) {
    std::vector<generate::TokenLogprobs> raw;
    size_t shown = 0;  // tokens whose text was shown: those of a stop string, held back and cut, are not
    stats[i] = generate(
        leases[i], job, i,
        [&](std::string_view piece, int32_t) {
          choices[i].text.append(piece);
          if (!piece.empty()) shown = raw.size();
          return !stopping.load(std::memory_order_relaxed);
        },
        with_logprobs ? &raw : nullptr);
    choices[i].index = i;
    choices[i].finish = finish_of(stats[i].stop);
    if (with_logprobs) choices[i].logprobs = LogprobsReader(*engine.tokenizer).take(raw, shown);
    if (!job.tools) return;
    ToolReply reply = tool_reply(*job.tools, choices[i].text, job.parallel_tool_calls);
    if (reply.calls.empty()) return;
    choices[i].text = std::move(reply.content);
    choices[i].tool_calls = std::move(reply.calls);
    choices[i].finish = FinishReason::ToolCalls;
  });
  leases.clear();
  const Usage usage = usage_of(job, stats);
  ex.set_tokens(usage.prompt_tokens, usage.completion_tokens);
  for (const generate::Stats& s : stats)
    if (s.stop == generate::StopReason::Callback) return ex.respond(503, cut_off(usage.completion_tokens), kJson);
  // The timings are the first choice's (each streamed choice carries its own).
  ex.respond(200, completion_json(job.head, choices, usage, timings_of(stats.front(), !options.drafters.empty())),
             kJson);
}

// One choice of a stream, on its own thread: its pieces (each with its tokens' log-probabilities when
// asked for), then its finish. Tokens whose text a stop string held back and cut are not sent.
generate::Stats Server::Impl::stream_choice(ChunkSender& out, const Job& job, const SlotPool::Lease& lease,
                                            size_t choice) {
  if (!out.alive()) return {};
  const ResponseHead& head = job.head;
  const bool with_logprobs = job.generation.logprobs >= 0;
  std::vector<generate::TokenLogprobs> raw;
  LogprobsReader reader(*engine.tokenizer);
  bool first = head.endpoint != Endpoint::ChatCompletions;  // a chat choice opened with its role
  HeldReply held(job.tools);                                // with tools, text that may be a call waits for the end
  const auto send_text = [&](std::string_view text) {
    const Logprobs logprobs = with_logprobs ? Logprobs(reader.take(raw, raw.size())) : std::nullopt;
    return out.send(chunk_json(head, text, std::exchange(first, false), std::nullopt, {}, choice, logprobs));
  };
  const generate::Stats s = generate(
      lease, job, choice,
      [&](std::string_view piece, int32_t) {
        // Text held back by a stop-string match arrives later as one piece.
        const std::string_view text = held.next(piece);
        if (text.empty()) return !stopping.load(std::memory_order_relaxed);
        // false: the client is gone (or the server stops), so stop and free the slot
        return send_text(text) && !stopping.load(std::memory_order_relaxed);
      },
      with_logprobs ? &raw : nullptr);
  if (s.stop == generate::StopReason::Callback) return s;
  FinishReason finish = finish_of(s.stop);
  const ToolReply rest = held.finish(job.parallel_tool_calls);
  if (!rest.content.empty()) send_text(rest.content);
  if (!rest.calls.empty()) {
    out.send(tool_calls_chunk_json(head, rest.calls, std::exchange(first, false), choice));
    finish = FinishReason::ToolCalls;
  }
  out.send(chunk_json(head, "", first, finish, timings_of(s, !options.drafters.empty()), choice));
  return s;
}

void Server::Impl::stream(Exchange& ex, Job job, std::vector<SlotPool::Lease> leases) {
  const ResponseHead& head = job.head;
  ex.start_stream("text/event-stream");
  ChunkSender out(ex);
  // The chat API opens each choice with the role; the completions API has none.
  if (head.endpoint == Endpoint::ChatCompletions)
    for (size_t i = 0; i < job.choices; ++i) out.send(chunk_json(head, "", true, std::nullopt, {}, i));
  try {
    std::vector<generate::Stats> stats(job.choices);
    for_each_choice(job.choices, [&](size_t i) { stats[i] = stream_choice(out, job, leases[i], i); });
    const size_t slot_index = leases.front().index();
    const Usage usage = usage_of(job, stats);
    ex.set_tokens(usage.prompt_tokens, usage.completion_tokens);
    leases.clear();  // the slots are free before the last bytes go out
    const bool cut = std::any_of(stats.begin(), stats.end(),
                                 [](const generate::Stats& s) { return s.stop == generate::StopReason::Callback; });
    if (!out.alive()) {
      fmt::print(stderr, "skainet: {}: the client went away after {} tokens; slot {} is free again\n", head.id,
                 usage.completion_tokens, slot_index);
    } else if (cut) {
      out.send(cut_off(static_cast<int32_t>(usage.completion_tokens)));
    } else {
      if (job.include_usage) out.send(usage_chunk_json(head, usage));
      out.send("[DONE]");
    }
  } catch (const std::exception& e) {
    // The status line went out with the first chunk: the error travels as an event instead.
    leases.clear();
    out.send(error_json(fmt::format("generation failed: {}", e.what()), "server_error"));
  }
  ex.finish();
}

Server::Server(generate::Engine& engine, ServerOptions options, std::string chat_template, std::string end_of_turn) {
  if (options.slots == 0) throw InvalidArgument("serve: --slots must be at least 1");
  if (!engine.tokenizer || !engine.plan.kv) throw InvalidArgument("serve: the engine has no model to serve");
  if (!options.drafters.empty() && options.drafters.size() != options.slots)
    throw InvalidArgument(fmt::format("serve: {} drafters for {} slots", options.drafters.size(), options.slots));
  impl_ = std::make_unique<Impl>(engine, std::move(options), std::move(chat_template), std::move(end_of_turn));
}

Server::~Server() { stop(); }

void Server::listen() {
  // A client that goes away makes the next write fail with EPIPE; without this SIGPIPE would end the
  // whole server instead.
  ::signal(SIGPIPE, SIG_IGN);
  Impl& s = *impl_;
  const size_t workers = s.options.slots + s.options.queue_limit;
  for (size_t i = 0; i < workers; ++i) s.workers.emplace_back([&s] { s.work(); });
  const auto stop_workers = [&s] {
    {
      std::lock_guard lock(s.work_mutex);
      s.closing = true;
    }
    s.work_ready.notify_all();
    for (std::thread& t : s.workers) t.join();
    s.workers.clear();
  };
  int bound = 0;
  try {
    bound = s.http.start(s.options.host, s.options.port);
  } catch (...) {
    stop_workers();
    throw;
  }
  s.port.store(bound);
  if (s.options.on_listening) s.options.on_listening(bound);
  {
    std::unique_lock lock(s.work_mutex);
    s.stop_asked.wait(lock, [&] { return s.stopping.load(); });
  }
  // New connections are refused; requests waiting for a slot get 503 (the pool is closed); those
  // generating end at their next token; then the answers are given a moment to go out.
  s.http.stop_accepting();
  s.pool.close();
  stop_workers();
  s.http.wait_idle(std::chrono::seconds(3));
  s.http.stop();
}

void Server::stop() {
  if (!impl_) return;
  {
    std::lock_guard lock(impl_->work_mutex);
    impl_->stopping.store(true);
  }
  impl_->stop_asked.notify_all();
}

int Server::port() const noexcept { return impl_->port.load(); }

}  // namespace skainet::serve
