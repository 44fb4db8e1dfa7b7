// The HTTP transport under `skainet serve`, on GNU libmicrohttpd (docs/dependencies.md says why not
// cpp-httplib): a few event-loop threads carry every connection, so an idle, trickling or silent
// socket costs a connection slot and its buffer, never a thread. What one client may take is bounded
// here, for every client alike (HttpLimits): connections, header bytes, body bytes whatever the
// transfer encoding, the time to send the headers and the body, and the answer bytes waiting for a
// client that does not read. The application sees one complete request at a time (an Exchange) and
// answers it from any thread, whole or as a stream.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

struct MHD_Connection;

namespace skainet::serve {

struct HttpLimits {
  unsigned max_connections = 512;         // beyond this the kernel's backlog holds new ones until one closes
  size_t max_body_bytes = 8u << 20;       // 413 above it, Content-Length or chunked alike
  size_t all_bodies_bytes = 64u << 20;    // bodies held at once, all connections together (503 above it)
  size_t connection_memory = 64u << 10;   // request line + headers + I/O buffers of one connection (431 above)
  unsigned idle_seconds = 10;             // no byte in or out on a connection that is not waiting for us
  unsigned header_seconds = 10;           // connect (or the previous answer) to the end of the headers
  unsigned body_seconds = 60;             // the end of the headers to the end of the body
  size_t stream_buffer_bytes = 1u << 20;  // a streamed answer's unsent bytes before send() waits
  unsigned io_threads = 2;
};

// One request with its whole body, and its answer. The transport hands it to the application once the
// body is complete; the application answers exactly once (respond, or start_stream ... finish), from
// whatever thread, and the transport delivers it. An exchange the application never answers holds its
// connection until the server stops.
class Exchange {
 public:
  const std::string& method() const noexcept { return method_; }
  const std::string& path() const noexcept { return path_; }
  const std::string& body() const noexcept { return body_; }
  const std::string& authorization() const noexcept { return authorization_; }  // the header; "" if none

  // For the request's log line: the tokens it read and generated.
  void set_tokens(int64_t prompt, int64_t generated);

  void respond(int status, std::string body, std::string_view content_type = "application/json");
  // A 200 whose body follows in pieces (chunked transfer encoding).
  void start_stream(std::string_view content_type);
  // Queues a piece of a started stream. Waits while stream_buffer_bytes are unsent; false when the
  // client has gone (its connection closed or timed out), and nothing more should be produced.
  bool send(std::string_view data);
  void finish();
  bool gone() const;

 private:
  friend struct Transport;  // http.cpp: libmicrohttpd's callbacks
  enum class Answer : uint8_t { None, Whole, Stream };

  // Hands the connection back to the event loop if it waits for this answer (under mutex_).
  void wake_locked();

  std::string method_, path_, body_, authorization_;
  std::chrono::steady_clock::time_point started_;       // the headers were read
  int64_t prompt_tokens_ = -1, generated_tokens_ = -1;  // -1: not a generation
  size_t stream_buffer_bytes_ = 0;
  enum class Refusal : uint8_t { None, TooLarge, NoRoom };  // for the body: read and dropped, then 413 / 503
  Refusal body_refusal_ = Refusal::None;
  size_t body_charged_ = 0;        // bytes of HttpLimits::all_bodies_bytes this body holds
  bool dispatched_ = false;        // answered by the transport (a refusal) or handed to the application
  bool with_application_ = false;  // handed to the application
  bool queued_ = false;            // the answer went to libmicrohttpd

  mutable std::mutex mutex_;
  std::condition_variable drained_;
  MHD_Connection* connection_ = nullptr;  // null once libmicrohttpd is done with the request
  bool suspended_ = false;
  bool gone_ = false;
  Answer answer_ = Answer::None;
  int status_ = 200;
  std::string content_type_;
  std::string whole_;
  std::string unsent_;  // streamed bytes not yet handed to libmicrohttpd
  size_t unsent_from_ = 0;
  bool finished_ = false;
};

// One request done with, for the server's log: its answer has gone out, or its client has gone.
struct Finished {
  std::string_view method, path;
  int status = 0;                                     // 0: no answer was given
  int64_t prompt_tokens = -1, generated_tokens = -1;  // Exchange::set_tokens; -1: none
  double milliseconds = 0;                            // from the end of the headers to the end of the answer
  bool client_gone = false;                           // the answer was not sent to its end
};

class HttpServer {
 public:
  using Handler = std::function<void(const std::shared_ptr<Exchange>&)>;
  using OnFinished = std::function<void(const Finished&)>;
  // `handler` runs on an event-loop thread: it must answer at once or hand the exchange on, never block.
  // `on_finished` too, once per request (transport refusals included).
  HttpServer(HttpLimits limits, Handler handler, OnFinished on_finished = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving; answers the port (the chosen one for port 0). Throws IoError naming
  // host:port and the OS's reason ("Address already in use").
  int start(const std::string& host, int port);
  // Stops accepting connections; those open go on.
  void stop_accepting();
  // Waits until every request handed to the application has had its answer sent, at most `limit`.
  void wait_idle(std::chrono::milliseconds limit);
  // Closes every connection. Every dispatched exchange must have been answered before.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace skainet::serve
