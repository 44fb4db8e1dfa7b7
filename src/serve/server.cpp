// The HTTP wiring: cpp-httplib's server, its handler threads, and the four endpoints. A request is
// parsed and tokenized on its handler thread (400 before it waits for anything), then waits in the
// slot queue (503 when the queue is full), then generates on that same thread with the slot it was
// lent — so each busy slot has a worker of its own. A streamed answer generates inside httplib's
// chunked content provider, where a failed write (the client went away) stops generation and the
// slot is handed back at once.
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <utility>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "skainet/chat.hpp"
#include "skainet/serve.hpp"

namespace skainet::serve {
namespace {

constexpr const char* kJson = "application/json";
constexpr size_t kMaxBodyBytes = 8u << 20;

// One request, ready to generate: everything that could be refused has been checked.
struct Job {
  ResponseHead head;
  std::vector<int32_t> ids;
  generate::Options generation;
  text::SamplerConfig sampling;
  bool stream = false;
  bool include_usage = false;
};

FinishReason finish_of(generate::StopReason r) {
  switch (r) {
    case generate::StopReason::MaxTokens:
    case generate::StopReason::ContextFull: return FinishReason::Length;
    default: return FinishReason::Stop;
  }
}

int64_t now_seconds() { return static_cast<int64_t>(std::time(nullptr)); }

void send_error(httplib::Response& res, int status, std::string_view type, std::string_view message) {
  res.status = status;
  res.set_content(error_json(message, type), kJson);
}

}  // namespace

struct Server::Impl {
  Impl(generate::Engine& e, ServerOptions o, std::string chat_template, std::string eot)
      : engine(e),
        options(std::move(o)),
        tmpl(chat_template),
        end_of_turn(std::move(eot)),
        pool(e, options.slots, std::max(1, options.threads / static_cast<int>(options.slots)), options.queue_limit),
        started(now_seconds()) {
    const text::Tokenizer& tok = *engine.tokenizer;
    bos_text = tok.bos() >= 0 ? tok.token_to_piece(tok.bos(), true) : "";
    eos_text = tok.eos() >= 0 ? tok.token_to_piece(tok.eos(), true) : "";
  }

  Job prepare(const Request& r) const;
  void complete(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  generate::Stats generate(Slot& slot, const Job& job, const generate::TokenCallback& on_token) const;
  void routes();

  generate::Engine& engine;
  ServerOptions options;
  chat::Template tmpl;
  std::string end_of_turn, bos_text, eos_text;
  SlotPool pool;
  httplib::Server http;
  std::atomic<int> port{0};
  mutable std::atomic<uint64_t> next_id{1};  // response ids; prepare() is const otherwise
  // Set by stop(): generations in flight end at their next token, so shutting down never waits for
  // a long answer (httplib's stop joins its handler threads).
  std::atomic<bool> stopping{false};
  int64_t started;
};

Job Server::Impl::prepare(const Request& r) const {
  const text::Tokenizer& tok = *engine.tokenizer;
  Job job;
  job.head = {r.endpoint,
              fmt::format("{}-{:x}{:06x}", r.endpoint == Endpoint::ChatCompletions ? "chatcmpl" : "cmpl", started,
                          next_id.fetch_add(1) & 0xffffff),
              now_seconds(), options.model_id};
  std::string text;
  if (r.endpoint == Endpoint::ChatCompletions) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    for (const auto& m : r.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    try {
      text = tmpl.render(nlohmann::ordered_json{{"messages", messages}, {"add_generation_prompt", true},
                                                {"bos_token", bos_text}, {"eos_token", eos_text}});
    } catch (const chat::TemplateError& e) {
      // Templates refuse conversations they do not accept (raise_exception: roles must alternate, ...).
      throw RequestError(400, "invalid_request_error", fmt::format("the chat template refused the messages: {}", e.what()));
    }
  } else {
    text = r.prompt;
  }
  // As the generator tokenizes for `skainet run`; a template that writes the BOS text itself must not
  // get a second BOS from the tokenizer.
  const bool add_special = r.endpoint == Endpoint::Completions || bos_text.empty() || !text.starts_with(bos_text);
  job.ids = tok.encode(text, add_special, /*parse_special=*/true);
  const uint32_t ctx = engine.plan.kv->ctx;
  if (job.ids.empty()) throw RequestError(400, "invalid_request_error", "the prompt has no tokens");
  if (job.ids.size() >= ctx)
    throw RequestError(400, "invalid_request_error",
                       fmt::format("the prompt is {} tokens but a slot's context holds {} (--ctx), and at least one must "
                                   "be left to generate: shorten the prompt",
                                   job.ids.size(), ctx));

  job.generation.max_tokens = r.max_tokens.value_or(options.max_tokens);
  job.generation.stop_at_eos = !options.ignore_eos;
  job.generation.stop_strings = options.stop;
  job.generation.stop_strings.insert(job.generation.stop_strings.end(), r.stop.begin(), r.stop.end());
  if (r.endpoint == Endpoint::ChatCompletions && !end_of_turn.empty()) job.generation.stop_strings.push_back(end_of_turn);
  job.sampling = options.sampling;
  if (r.temperature) job.sampling.temperature = *r.temperature;
  if (r.top_p) job.sampling.top_p = *r.top_p;
  if (r.min_p) job.sampling.min_p = *r.min_p;
  if (r.top_k) job.sampling.top_k = *r.top_k;
  job.sampling.seed = r.seed ? *r.seed : std::random_device{}();
  job.stream = r.stream;
  job.include_usage = r.include_usage;
  return job;
}

generate::Stats Server::Impl::generate(Slot& slot, const Job& job, const generate::TokenCallback& on_token) const {
  // A sampler's settings are fixed when it is made: a new one per request (its buffers are sized
  // here, not per token).
  slot.sampler = text::Sampler(engine.tokenizer->vocab_size(), job.sampling, engine.plan.kv->ctx);
  return slot.generator.generate_ids(job.ids, job.generation, on_token);
}

void Server::Impl::complete(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  Job job;
  try {
    job = prepare(parse_request(endpoint, req.body));
  } catch (const RequestError& e) {
    return send_error(res, e.status(), e.type(), e.message());
  }
  std::optional<SlotPool::Lease> lease = pool.acquire();
  if (!lease) {
    const SlotCounts c = pool.counts();
    return send_error(res, 503, "server_busy",
                      fmt::format("all {} slots are busy and {} requests are already waiting (the queue's limit, --queue); "
                                  "try again later",
                                  c.slots, c.waiting));
  }
  const Usage usage_base{static_cast<int64_t>(job.ids.size()), 0};

  if (!job.stream) {
    std::string text;
    const generate::Stats s = generate(lease->slot(), job, [&](std::string_view piece, int32_t) {
      text.append(piece);
      return !stopping.load(std::memory_order_relaxed);
    });
    lease.reset();
    Usage usage = usage_base;
    usage.completion_tokens = s.generated_tokens;
    res.set_content(completion_json(job.head, text, finish_of(s.stop), usage), kJson);
    return;
  }

  struct Stream {
    Job job;
    std::optional<SlotPool::Lease> lease;
    Usage usage;
  };
  auto state = std::make_shared<Stream>();
  state->job = std::move(job);
  state->lease.emplace(std::move(*lease));
  state->usage = usage_base;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [this, state](size_t, httplib::DataSink& sink) {
    const ResponseHead& head = state->job.head;
    auto send = [&](std::string_view data) {
      const std::string event = fmt::format("data: {}\n\n", data);
      return sink.write(event.data(), event.size());
    };
    bool alive = true;
    bool first = true;
    // The chat API opens with the role; the completions API has none.
    if (head.endpoint == Endpoint::ChatCompletions) {
      alive = send(chunk_json(head, "", true, std::nullopt));
      first = false;
    }
    try {
      const generate::Stats s =
          alive ? generate(state->lease->slot(), state->job,
                           [&](std::string_view piece, int32_t) {
                             // Text held back by a stop-string match arrives later as one piece.
                             if (piece.empty()) return true;
                             alive = send(chunk_json(head, piece, std::exchange(first, false), std::nullopt));
                             // false: the client is gone (or the server stops), so stop and free the slot
                             return alive && !stopping.load(std::memory_order_relaxed);
                           })
                : generate::Stats{};
      const size_t slot_index = state->lease->index();
      state->lease.reset();
      if (!alive)
        fmt::print(stderr, "skainet: {}: the client went away after {} tokens; slot {} is free again\n", head.id,
                   s.generated_tokens, slot_index);
      if (alive) {
        state->usage.completion_tokens = s.generated_tokens;
        alive = send(chunk_json(head, "", first, finish_of(s.stop)));
        if (alive && state->job.include_usage) alive = send(usage_chunk_json(head, state->usage));
        if (alive) alive = send("[DONE]");
      }
    } catch (const std::exception& e) {
      // The status line went out with the first chunk: the error travels as an event instead.
      state->lease.reset();
      if (alive) send(error_json(fmt::format("generation failed: {}", e.what()), "server_error"));
    }
    if (alive) sink.done();
    return alive;
  });
}

void Server::Impl::routes() {
  http.Post("/v1/chat/completions",
            [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, Endpoint::ChatCompletions); });
  http.Post("/v1/completions",
            [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, Endpoint::Completions); });
  // llama.cpp's server answers the same paths without /v1 too; clients configured for it work here.
  http.Post("/chat/completions",
            [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, Endpoint::ChatCompletions); });
  http.Post("/completions",
            [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, Endpoint::Completions); });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(models_json(options.model_id, started), kJson);
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const SlotCounts c = pool.counts();
    res.set_content(nlohmann::json{{"status", "ok"},
                                   {"slots_idle", c.slots - c.busy},
                                   {"slots_processing", c.busy},
                                   {"requests_waiting", c.waiting}}
                        .dump(),
                    kJson);
  });
  // Routing failures (unknown path or method, a body over the limit) in OpenAI's error shape.
  http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // a handler already answered
    std::string message;
    std::string_view type = "invalid_request_error";
    if (res.status == 404) {
      message = fmt::format("unknown endpoint {} {} (served: POST /v1/chat/completions, POST /v1/completions, "
                            "GET /v1/models, GET /health)",
                            req.method, req.path);
      type = "not_found_error";
    } else if (res.status == 413) {
      message = fmt::format("the request body is larger than {} bytes", kMaxBodyBytes);
    } else {
      message = fmt::format("HTTP {} for {} {}", res.status, req.method, req.path);
    }
    res.set_content(error_json(message, type), kJson);
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    send_error(res, 500, "server_error", message);
  });
  http.set_payload_max_length(kMaxBodyBytes);
  // Every slot's worker, every waiting request, and a few more so /health and refusals (503) are
  // answered while all of those are taken.
  const size_t threads = options.slots + options.queue_limit + 4;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
}

Server::Server(generate::Engine& engine, ServerOptions options, std::string chat_template, std::string end_of_turn) {
  if (options.slots == 0) throw InvalidArgument("serve: --slots must be at least 1");
  if (!engine.tokenizer || !engine.plan.kv) throw InvalidArgument("serve: the engine has no model to serve");
  impl_ = std::make_unique<Impl>(engine, std::move(options), std::move(chat_template), std::move(end_of_turn));
  impl_->routes();
}

Server::~Server() {
  stop();
}

namespace {

// Why host:port cannot be bound, as the OS says it ("Address already in use"): httplib reports only
// that binding failed, so the bind is tried again here, with the server's socket options.
std::string bind_error(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return fmt::format("cannot resolve the host: {}", ::gai_strerror(rc));
  std::string why = "no address to bind";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    const bool ok = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1) == 0;
    why = ok ? "the bind failed, then succeeded when tried again" : std::strerror(errno);
    ::close(fd);
    if (!ok) break;
  }
  ::freeaddrinfo(found);
  return why;
}

}  // namespace

void Server::listen() {
  // A client that goes away makes the next write fail with EPIPE; without this SIGPIPE would end the
  // whole server instead.
  ::signal(SIGPIPE, SIG_IGN);
  Impl& s = *impl_;
  // httplib's default sets SO_REUSEPORT, with which a second server binds the same port and the kernel
  // shares the connections between the two (issue 24 #13). SO_REUSEADDR alone lets a restart bind a
  // port with connections in TIME_WAIT, yet refuses a port another socket listens on (EADDRINUSE).
  s.http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  int bound = s.options.port;
  if (s.options.port == 0) {
    bound = s.http.bind_to_any_port(s.options.host);
    if (bound < 0)
      throw IoError(fmt::format("serve: cannot listen on {}:0 (any free port): {}", s.options.host,
                                bind_error(s.options.host, 0)));
  } else if (!s.http.bind_to_port(s.options.host, s.options.port)) {
    throw IoError(fmt::format("serve: cannot listen on {}:{}: {}", s.options.host, s.options.port,
                              bind_error(s.options.host, s.options.port)));
  }
  s.port.store(bound);
  if (s.options.on_listening) s.options.on_listening(bound);
  s.http.listen_after_bind();
}

void Server::stop() {
  if (!impl_) return;
  impl_->stopping.store(true);
  impl_->pool.close();
  impl_->http.stop();
}

int Server::port() const noexcept { return impl_->port.load(); }

}  // namespace skainet::serve
