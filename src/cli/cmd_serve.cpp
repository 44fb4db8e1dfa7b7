// `skainet serve`: an OpenAI-compatible HTTP server over one planned model (skainet::serve). The plan
// is priced for --slots sequences, so --budget (and the memory available now) refuse a slot count that
// does not fit before anything loads. Model, sampling, stop and placement flags are run's and chat's
// (GenerationArgs); the sampling flags are the defaults for fields a request leaves out.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "cli.hpp"
#include "generation_args.hpp"
#include "skainet/app/serve.hpp"
#include "skainet/model/tool_calls.hpp"

namespace skainet::cli {
namespace {

struct ServeArgs {
  GenerationArgs gen;
  std::string host = "127.0.0.1";
  int port = 8080;
  size_t queue = 16;
  std::string alias;
  std::vector<std::string> api_keys;
  std::string api_key_file;
};

// --api-key-file: one key per line (blank lines and a line's surrounding whitespace skipped, so a
// file written on Windows or with a last newline reads the same). A file naming no key is an error:
// starting open when the operator asked for keys would be the worst way to fail.
std::vector<std::string> keys_in(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(fmt::format("serve: cannot read the API key file {}", path));
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    const size_t from = line.find_first_not_of(" \t\r");
    if (from == std::string::npos) continue;
    keys.push_back(line.substr(from, line.find_last_not_of(" \t\r") - from + 1));
  }
  if (keys.empty()) throw InvalidArgument(fmt::format("serve: the API key file {} holds no key", path));
  return keys;
}

// --api-key (repeatable) and the keys of --api-key-file, read before the model loads so a missing file
// is refused at once.
std::vector<std::string> api_keys_of(const ServeArgs& a) {
  std::vector<std::string> keys = a.api_keys;
  if (!a.api_key_file.empty()) {
    const std::vector<std::string> more = keys_in(a.api_key_file);
    keys.insert(keys.end(), more.begin(), more.end());
  }
  for (const std::string& key : keys)
    if (key.empty()) throw InvalidArgument("serve: --api-key must not be empty");
  return keys;
}

// What the listening line says of tools: the format the template's calls are parsed in, or why
// requests with tools are refused.
std::string tool_support(const std::string& template_source) {
  if (const generate::ToolCallFormat* f = generate::detect_tool_call_format(template_source))
    return fmt::format("tool calls: {}", f->name);
  return generate::template_uses_tools(template_source) ? "tool calls: a format not parsed (tools refused)"
                                                        : "tool calls: none (tools refused)";
}

// The server's options from the command line, the opened engine and its template.
serve::ServerOptions server_options(const ServeArgs& a, const generate::Engine& engine, const ChosenTemplate& chosen,
                                    std::vector<std::string> api_keys) {
  serve::ServerOptions so;
  so.host = a.host;
  so.port = a.port;
  so.slots = a.gen.placement.slots;
  so.queue_limit = a.queue;
  so.threads = a.gen.threads;
  so.model_id = !a.alias.empty() ? a.alias : std::filesystem::path(a.gen.model).stem().string();
  so.model_path = a.gen.model;
  so.api_keys = std::move(api_keys);
  so.max_tokens = a.gen.n_predict;
  so.sampling = a.gen.sampling;
  so.stop = a.gen.stops;
  so.special_in_content = a.gen.special_in_content;
  so.ignore_eos = a.gen.ignore_eos;
  // Copies of what it prints: the options are returned by value and the engine outlives the server.
  so.on_listening = [id = so.model_id, host = so.host, slots = so.slots, threads = so.threads, p = &engine.plan,
                     description = chosen.description, tools = tool_support(chosen.source)](int port) {
    // The tests read this line for the port (--port 0 picks a free one).
    fmt::print(stderr,
               "skainet: serving {} on http://{}:{} | {} slots x context {}, batched | {} threads | plan "
               "resident {} (kv {}, slab {}) | chat template: {} | {}\n",
               id, host, port, slots, p->kv->n_ctx, threads, base::format_bytes(p->totals.resident()),
               base::format_bytes(p->totals.kv), base::format_bytes(p->totals.slab), description, tools);
    std::fflush(stderr);
  };
  return so;
}

int serve(ServeArgs& a) {
  a.gen.finish_parse();
  std::vector<std::string> api_keys = api_keys_of(a);  // a bad key file is refused before the model loads
  // SIGINT/SIGTERM are taken by a thread of their own (sigwait), blocked everywhere else: stopping
  // the server from a signal handler would not be async-signal-safe. Blocked before any thread starts so
  // every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  a.gen.placement.slots = std::max<uint32_t>(a.gen.placement.slots, 1);
  generate::EngineOptions eo = a.gen.engine_options();
  eo.sequence = false;         // each slot is a sequence of its own
  eo.plan.batch_slots = true;  // run by one batch, whose slabs the plan prices (for one slot too)
  if (a.gen.check_tensors) {   // as run does, before loading
    const convert::ValueCheck check =
        convert::check_values(gguf::read_header(a.gen.model), static_cast<unsigned>(a.gen.threads));
    fmt::print(stderr, "skainet: {}\n", check.summary());
    check.throw_if_bad(a.gen.model);
  }
  auto engine = generate::Engine::open(a.gen.model, eo);
  for (const auto& w : engine->plan.warnings) fmt::print(stderr, "skainet: warning: {}\n", plan::describe(w));
  const ChosenTemplate chosen = choose_template(a.gen, engine->header);

  serve::ServerOptions so = server_options(a, *engine, chosen, std::move(api_keys));
  // A drafter per slot (a draft model: a draft sequence per slot), verified in the batch's passes.
  const generate::Speculation spec =
      generate::open_speculation(a.gen.spec, a.gen.model, *engine, eo, static_cast<uint32_t>(so.slots));
  for (const auto& d : spec.drafters) so.drafters.push_back(d.get());
  so.draft_max = spec.drafters.empty() ? 0 : a.gen.spec.draft_max;
  so.draft_min = a.gen.spec.draft_min;
  serve::Server server(*engine, so, chosen.source, chosen.end_of_turn.value_or(""));
  // The stopper is also woken by this thread (a SIGTERM sent to it alone) when listen() ends another
  // way, a failed bind above all: then it says nothing, since no signal came.
  std::atomic<bool> waking_stopper = false;
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (waking_stopper.load()) return;
    fmt::print(stderr, "skainet: {} received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    server.stop();
  });
  const auto wake_stopper = [&] {
    waking_stopper.store(true);
    pthread_kill(stopper.native_handle(), SIGTERM);
    stopper.join();
  };
  try {
    server.listen();
  } catch (...) {
    wake_stopper();
    throw;
  }
  // listen() returns after stop(); if it returned for another reason the stopper still waits.
  wake_stopper();
  return 0;
}

}  // namespace

Subcommand add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve a model over HTTP with OpenAI's API (/v1/chat/completions, /v1/completions, /v1/models) and "
      "llama-server's (/health, /props, /tokenize, /detokenize)");
  a->gen.add_to(cmd, Command::Serve);
  a->gen.placement.add_slots_to(cmd);
  cmd->add_option("--host", a->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", a->port, "port to listen on (0: any free port, printed on stderr)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--queue", a->queue, "requests that may wait for a slot; more are refused with 503")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd->add_option("-a,--alias", a->alias, "model name in responses and /v1/models (default: the file's stem)");
  cmd->add_option("--api-key", a->api_keys,
                  "require 'Authorization: Bearer KEY' on every request but /health (may be repeated)");
  cmd->add_option("--api-key-file", a->api_key_file, "a file of API keys, one per line (as --api-key)");
  return {cmd, [a] { return serve(*a); }};
}

}  // namespace skainet::cli
