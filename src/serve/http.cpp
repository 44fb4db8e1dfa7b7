// libmicrohttpd in its epoll mode with a small pool of event-loop threads. An exchange waiting for the
// application is *suspended* (taken out of the loop) and resumed when its answer, or the next piece of
// a stream, is ready: libmicrohttpd allows suspending only from its own callbacks and resuming from any
// thread, which is exactly the split here. What libmicrohttpd does not bound by itself — the total time
// a client may take to send its headers and its body, and a chunked body's size — is bounded here: a
// reaper thread shuts down the socket of a connection past its deadline (libmicrohttpd then closes it
// as a client error), and body bytes past the limit are dropped and answered with 413.
#include "http.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>

#include "skainet/app/serve.hpp"

namespace skainet::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Where a connection is in its current request, for the deadlines.
enum class Phase : uint8_t {
  Headers,   // connected, or answered its previous request: the next request's headers are due
  Body,      // headers read: the body is due
  Answering  // the request is with the application or its answer is being sent: no deadline here
};

struct ConnectionClock {
  int fd = -1;
  Phase phase = Phase::Headers;
  Clock::time_point since = Clock::now();
  bool cut = false;
};

// Every answer may be read by a page of any origin (CORS), as llama-server allows: what protects the
// server is --api-key, which a browser cannot send without the page knowing the key.
void allow_any_origin(MHD_Response* r) {
  MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
  MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
}

MHD_Result queue_whole(MHD_Connection* c, int status, const std::string& body, const std::string& content_type) {
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  allow_any_origin(r);
  if (!content_type.empty()) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type.c_str());
  const MHD_Result ok = MHD_queue_response(c, static_cast<unsigned>(status), r);
  MHD_destroy_response(r);
  return ok;
}

// The transport's own refusals, in the shape of the application's (response.cpp).
MHD_Result refuse(MHD_Connection* c, int status, std::string_view message,
                  std::string_view type = "invalid_request_error") {
  return queue_whole(c, status, error_json(message, type), "application/json");
}

MHD_Result refuse_too_large(MHD_Connection* c, size_t limit) {
  return refuse(c, 413, fmt::format("the request body is larger than {} bytes", limit));
}

}  // namespace

// ---- Exchange: the application's side ----

void Exchange::wake_locked() {
  if (suspended_ && connection_) {
    suspended_ = false;
    MHD_resume_connection(connection_);
  }
}

void Exchange::respond(int status, std::string body, std::string_view content_type) {
  std::lock_guard lock(mutex_);
  if (answer_ != Answer::None) return;
  answer_ = Answer::Whole;
  status_ = status;
  whole_ = std::move(body);
  content_type_ = content_type;
  wake_locked();
}

void Exchange::start_stream(std::string_view content_type) {
  std::lock_guard lock(mutex_);
  if (answer_ != Answer::None) return;
  answer_ = Answer::Stream;
  content_type_ = content_type;
  wake_locked();
}

bool Exchange::send(std::string_view data) {
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [&] { return gone_ || unsent_.size() - unsent_from_ < stream_buffer_bytes_; });
  if (gone_) return false;
  unsent_.append(data);
  wake_locked();
  return true;
}

void Exchange::finish() {
  std::lock_guard lock(mutex_);
  finished_ = true;
  wake_locked();
}

void Exchange::set_tokens(int64_t prompt, int64_t generated) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ = prompt;
  generated_tokens_ = generated;
}

bool Exchange::gone() const {
  std::lock_guard lock(mutex_);
  return gone_;
}

// ---- the transport ----

struct HttpServer::Impl {
  HttpLimits limits;
  Handler handler;
  OnFinished on_finished;
  MHD_Daemon* daemon = nullptr;
  int listen_fd = -1;

  std::mutex clocks_mutex;  // guards every ConnectionClock and the set
  std::unordered_set<ConnectionClock*> clocks;
  bool reaping = false;
  std::condition_variable reaper_wake;
  std::thread reaper;

  std::mutex open_mutex;
  std::condition_variable open_changed;
  size_t answering = 0;  // exchanges handed to the application whose answer has not gone out

  std::mutex bodies_mutex;
  size_t bodies_bytes = 0;  // HttpLimits::all_bodies_bytes in use

  ConnectionClock* clock_of(MHD_Connection* c) const {
    const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? static_cast<ConnectionClock*>(info->socket_context) : nullptr;
  }
  void enter(MHD_Connection* c, Phase phase) {
    std::lock_guard lock(clocks_mutex);
    if (ConnectionClock* k = clock_of(c)) {
      k->phase = phase;
      k->since = Clock::now();
    }
  }

  void reap() {
    std::unique_lock lock(clocks_mutex);
    while (reaping) {
      reaper_wake.wait_for(lock, std::chrono::milliseconds(250));
      const Clock::time_point now = Clock::now();
      for (ConnectionClock* k : clocks) {
        const unsigned limit = k->phase == Phase::Headers ? limits.header_seconds
                               : k->phase == Phase::Body  ? limits.body_seconds
                                                          : 0;
        if (limit == 0 || k->cut || now - k->since < std::chrono::seconds(limit)) continue;
        // Only shut down, not closed: libmicrohttpd closes the socket after the CLOSED notice that
        // removes this clock under this mutex, so the descriptor is still this connection's.
        ::shutdown(k->fd, SHUT_RDWR);
        k->cut = true;
      }
    }
  }
};

// libmicrohttpd's callbacks; `cls` is the HttpServer::Impl, a request's context a heap shared_ptr to
// its Exchange (the stream's reader holds another).
struct Transport {
  using Impl = HttpServer::Impl;
  using Holder = std::shared_ptr<Exchange>;

  static bool charge_body(Impl& s, Exchange& ex, size_t n) {
    std::lock_guard lock(s.bodies_mutex);
    if (s.bodies_bytes + n > s.limits.all_bodies_bytes) return false;
    s.bodies_bytes += n;
    ex.body_charged_ += n;
    return true;
  }
  static void release_body(Impl& s, Exchange& ex) {
    std::lock_guard lock(s.bodies_mutex);
    s.bodies_bytes -= ex.body_charged_;
    ex.body_charged_ = 0;
  }

  static void on_connection(void* cls, MHD_Connection* c, void** socket_context, MHD_ConnectionNotificationCode code) {
    Impl& s = *static_cast<Impl*>(cls);
    std::lock_guard lock(s.clocks_mutex);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      auto* k = new ConnectionClock;
      if (const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD))
        k->fd = info->connect_fd;
      s.clocks.insert(k);
      *socket_context = k;
    } else if (auto* k = static_cast<ConnectionClock*>(*socket_context)) {
      s.clocks.erase(k);
      delete k;
      *socket_context = nullptr;
    }
  }

  static MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                               const char* upload, size_t* upload_size, void** request_context) {
    Impl& s = *static_cast<Impl*>(cls);
    if (*request_context == nullptr) return on_headers(s, c, url, method, request_context);
    Exchange& ex = **static_cast<Holder*>(*request_context);
    if (*upload_size > 0) {
      // The body arrives in pieces; past a limit the rest is read and dropped (libmicrohttpd cannot
      // answer in the middle of a body), then refused below. The body deadline bounds how long.
      if (ex.body_refusal_ == Exchange::Refusal::None) {
        if (ex.body_.size() + *upload_size > s.limits.max_body_bytes)
          ex.body_refusal_ = Exchange::Refusal::TooLarge;
        else if (!charge_body(s, ex, *upload_size))
          ex.body_refusal_ = Exchange::Refusal::NoRoom;
        else
          ex.body_.append(upload, *upload_size);
      }
      *upload_size = 0;
      return MHD_YES;
    }
    if (ex.body_refusal_ != Exchange::Refusal::None && !ex.queued_) {
      ex.dispatched_ = ex.queued_ = true;
      ex.answer_ = Exchange::Answer::Whole;
      release_body(s, ex);
      ex.status_ = ex.body_refusal_ == Exchange::Refusal::TooLarge ? 413 : 503;
      if (ex.body_refusal_ == Exchange::Refusal::TooLarge) return refuse_too_large(c, s.limits.max_body_bytes);
      return refuse(c, 503,
                    fmt::format("the server holds {} bytes of request bodies, its limit; try again later",
                                s.limits.all_bodies_bytes),
                    "server_busy");
    }
    if (!ex.dispatched_) {
      ex.dispatched_ = ex.with_application_ = true;
      s.enter(c, Phase::Answering);
      {
        std::lock_guard lock(s.open_mutex);
        ++s.answering;
      }
      s.handler(*static_cast<Holder*>(*request_context));
    }
    std::lock_guard lock(ex.mutex_);
    if (ex.answer_ == Exchange::Answer::None) {
      // Back into the loop when the application answers (wake_locked).
      ex.suspended_ = true;
      MHD_suspend_connection(c);
      return MHD_YES;
    }
    if (ex.queued_) return MHD_YES;
    ex.queued_ = true;
    if (ex.answer_ == Exchange::Answer::Whole) return queue_whole(c, ex.status_, ex.whole_, ex.content_type_);
    MHD_Response* r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16u << 10, &read_stream,
                                                        new Holder(*static_cast<Holder*>(*request_context)),
                                                        [](void* h) { delete static_cast<Holder*>(h); });
    if (!r) return MHD_NO;
    allow_any_origin(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ex.content_type_.c_str());
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    const MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
  }

  // The first call for a request: its headers are complete. Refusals that need no body happen here,
  // where libmicrohttpd lets an answer go out before the body is read (it then closes the connection).
  static MHD_Result on_headers(Impl& s, MHD_Connection* c, const char* url, const char* method,
                               void** request_context) {
    auto ex = std::make_shared<Exchange>();
    ex->method_ = method;
    ex->path_ = url;
    ex->connection_ = c;
    ex->started_ = Clock::now();
    if (const char* auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION))
      ex->authorization_ = auth;
    ex->stream_buffer_bytes_ = s.limits.stream_buffer_bytes;
    *request_context = new Holder(ex);
    s.enter(c, Phase::Body);
    const char* length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char* coding = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    // A refusal below is the whole answer: later calls for this request only return.
    ex->dispatched_ = ex->queued_ = true;
    ex->answer_ = Exchange::Answer::Whole;
    // Two framings of one body: behind a proxy that reads the other one, the rest of this body would
    // be taken for a second request (request smuggling). RFC 9112 §6.3 lets a server refuse it.
    if (length && coding) {
      ex->status_ = 400;
      return refuse(c, 400, "the request has both Content-Length and Transfer-Encoding; send one");
    }
    if (length) {
      errno = 0;
      char* end = nullptr;
      const unsigned long long n = std::strtoull(length, &end, 10);
      if (errno == 0 && end != length && n > s.limits.max_body_bytes) {
        ex->status_ = 413;
        return refuse_too_large(c, s.limits.max_body_bytes);
      }
    }
    ex->dispatched_ = ex->queued_ = false;
    ex->answer_ = Exchange::Answer::None;
    return MHD_YES;
  }

  static ssize_t read_stream(void* cls, uint64_t, char* buf, size_t max) {
    Exchange& ex = **static_cast<Holder*>(cls);
    std::lock_guard lock(ex.mutex_);
    const size_t left = ex.unsent_.size() - ex.unsent_from_;
    if (left > 0) {
      const size_t n = std::min(left, max);
      std::memcpy(buf, ex.unsent_.data() + ex.unsent_from_, n);
      ex.unsent_from_ += n;
      if (ex.unsent_from_ == ex.unsent_.size()) {
        ex.unsent_.clear();
        ex.unsent_from_ = 0;
      }
      ex.drained_.notify_all();
      return static_cast<ssize_t>(n);
    }
    if (ex.finished_) return MHD_CONTENT_READER_END_OF_STREAM;
    // Nothing to send yet: out of the loop until send() or finish() wakes it (0 would spin).
    ex.suspended_ = true;
    MHD_suspend_connection(ex.connection_);
    return 0;
  }

  static void on_completed(void* cls, MHD_Connection* c, void** request_context, MHD_RequestTerminationCode code) {
    Impl& s = *static_cast<Impl*>(cls);
    if (*request_context == nullptr) return;
    auto* holder = static_cast<Holder*>(*request_context);
    {
      Exchange& ex = **holder;
      std::lock_guard lock(ex.mutex_);
      ex.connection_ = nullptr;
      ex.suspended_ = false;
      // Not sent to the end: closed by the client, a write error or libmicrohttpd's idle timeout.
      if (code != MHD_REQUEST_TERMINATED_COMPLETED_OK) ex.gone_ = true;
      ex.drained_.notify_all();
      if (s.on_finished) {
        const bool answered = ex.answer_ != Exchange::Answer::None;
        s.on_finished({.method = ex.method_,
                       .path = ex.path_,
                       .status = answered ? ex.status_ : 0,
                       .prompt_tokens = ex.prompt_tokens_,
                       .generated_tokens = ex.generated_tokens_,
                       .milliseconds = std::chrono::duration<double, std::milli>(Clock::now() - ex.started_).count(),
                       .client_gone = ex.gone_});
      }
    }
    release_body(s, **holder);  // a worker may still read it; it is counted until the answer is out
    const bool answered = (*holder)->with_application_;
    delete holder;
    *request_context = nullptr;
    s.enter(c, Phase::Headers);
    if (!answered) return;
    std::lock_guard lock(s.open_mutex);
    --s.answering;
    s.open_changed.notify_all();
  }
};

HttpServer::HttpServer(HttpLimits limits, Handler handler, OnFinished on_finished) : impl_(std::make_unique<Impl>()) {
  impl_->limits = limits;
  impl_->handler = std::move(handler);
  impl_->on_finished = std::move(on_finished);
}

HttpServer::~HttpServer() { stop(); }

namespace {

// A listening socket on host:port with SO_REUSEADDR only: a restart binds a port with connections in
// TIME_WAIT, yet a port another socket listens on is refused (no SO_REUSEPORT sharing).
int listen_on(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const std::string where =
      fmt::format("serve: cannot listen on {}:{}{}", host, port, port == 0 ? " (any free port)" : "");
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    throw IoError(fmt::format("{}: cannot resolve the host: {}", where, ::gai_strerror(rc)));
  std::string why = "no address to bind";
  int fd = -1;
  for (const addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) throw IoError(fmt::format("{}: {}", where, why));
  return fd;
}

int port_of(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

}  // namespace

int HttpServer::start(const std::string& host, int port) {
  Impl& s = *impl_;
  s.listen_fd = listen_on(host, port);
  const int bound = port_of(s.listen_fd);
  s.daemon = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, 0, nullptr, nullptr,
                              &Transport::on_request, &s, MHD_OPTION_LISTEN_SOCKET, s.listen_fd,
                              MHD_OPTION_THREAD_POOL_SIZE, s.limits.io_threads, MHD_OPTION_CONNECTION_LIMIT,
                              s.limits.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, s.limits.idle_seconds,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, s.limits.connection_memory,
                              MHD_OPTION_NOTIFY_COMPLETED, &Transport::on_completed, &s, MHD_OPTION_NOTIFY_CONNECTION,
                              &Transport::on_connection, &s, MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, MHD_OPTION_END);
  if (!s.daemon) {
    ::close(s.listen_fd);
    s.listen_fd = -1;
    throw IoError(fmt::format("serve: libmicrohttpd could not start on {}:{}", host, bound));
  }
  s.reaping = true;
  s.reaper = std::thread([&s] { s.reap(); });
  return bound;
}

void HttpServer::stop_accepting() {
  Impl& s = *impl_;
  if (!s.daemon || s.listen_fd < 0) return;
  MHD_quiesce_daemon(s.daemon);
  ::close(s.listen_fd);
  s.listen_fd = -1;
}

void HttpServer::wait_idle(std::chrono::milliseconds limit) {
  Impl& s = *impl_;
  std::unique_lock lock(s.open_mutex);
  s.open_changed.wait_for(lock, limit, [&] { return s.answering == 0; });
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (s.reaper.joinable()) {
    {
      std::lock_guard lock(s.clocks_mutex);
      s.reaping = false;
    }
    s.reaper_wake.notify_all();
    s.reaper.join();
  }
  if (s.daemon) {
    MHD_stop_daemon(s.daemon);
    s.daemon = nullptr;
  }
  if (s.listen_fd >= 0) {
    ::close(s.listen_fd);
    s.listen_fd = -1;
  }
}

}  // namespace skainet::serve
