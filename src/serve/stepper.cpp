// The stepper: continuous batching for serve's slots. One thread owns the generate::Batch and loops:
// take in the requests handed to it (Batch::add, each with its slot's prefix reuse), end those whose
// reader stopped them, run one step over every generating slot, and hand each sampled token to its
// request. A request's caller blocks in generate() and turns its tokens into text on its own thread,
// so a slow client delays only itself: the batch never waits for a socket.
//
// What the two threads share per request is a Handoff: the tokens sampled so far (reserved for the
// whole context before the request joins, so the stepper's writes never allocate), whether the batch
// is done with the slot and why, and the caller's request to stop.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "skainet/app/serve.hpp"
#include "skainet/model/batch.hpp"

namespace skainet::serve {
namespace {

using Clock = std::chrono::steady_clock;

struct Handoff {
  Slot* slot = nullptr;
  std::span<const int32_t> prompt;
  const generate::Options* options = nullptr;
  generate::PrefixReuse reuse = generate::PrefixReuse::Reuse;
  generate::Drafter* drafter = nullptr;
  std::atomic<uint32_t>* cells = nullptr;  // where the slot's cells in use are published (null: nowhere)

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int32_t> tokens;  // sampled, in order
  int64_t cached = 0;           // prompt tokens taken from the slot's cache
  int64_t drafted = 0, accepted = 0;
  bool done = false;  // the batch no longer touches the slot
  generate::StopReason stop = generate::StopReason::MaxTokens;
  std::string error;  // a pass failed (or the request was refused by the batch): what
  bool stop_asked = false;

  // Each token's log-probabilities, when options->logprobs >= 0 (reserved as `tokens` is).
  std::vector<generate::TokenLogprobs> logprobs;
};

}  // namespace

struct Stepper::Impl {
  Impl(generate::Engine& e, int threads, uint32_t draft_max, uint32_t draft_min)
      : tokenizer(*e.tokenizer),
        batch(e.plan, e.loaded, *e.tokenizer, threads),
        running(batch.plan().sequences, nullptr) {
    if (draft_max > 0) batch.speculate(draft_max, draft_min);
    thread = std::thread([this] { loop(); });  // once everything it reads is built
  }

  void loop();
  void take_in();
  void step();
  void finish(uint32_t i, std::string_view error = {});
  void publish_cells(uint32_t i) const;

  const text::Tokenizer& tokenizer;
  generate::Batch batch;
  std::vector<Handoff*> running;   // by batch slot; touched by the stepper thread only
  std::atomic<uint64_t> steps{0};  // passes run, for /metrics

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Handoff*> incoming;
  bool closing = false;
  std::thread thread;
};

void Stepper::Impl::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex);
      wake.wait(lock, [&] { return closing || !incoming.empty() || batch.active(); });
      if (closing && incoming.empty() && !batch.active()) return;
    }
    take_in();
    step();
  }
}

void Stepper::Impl::take_in() {
  std::deque<Handoff*> arrived;
  {
    std::lock_guard lock(mutex);
    arrived.swap(incoming);
  }
  for (Handoff* h : arrived) {
    try {
      const uint32_t i = batch.add(*h->slot, h->prompt, *h->options, h->reuse, h->drafter);
      running[i] = h;
      publish_cells(i);
      std::lock_guard lock(h->mutex);
      h->cached = batch.slot(i).cached;
    } catch (const std::exception& e) {
      std::lock_guard lock(h->mutex);
      h->error = e.what();
      h->done = true;
      h->changed.notify_all();
    }
  }
}

// The cells of slot i's cache that hold tokens are those before its next row's position.
void Stepper::Impl::publish_cells(uint32_t i) const {
  if (running[i]->cells) running[i]->cells->store(static_cast<uint32_t>(batch.slot(i).pos), std::memory_order_relaxed);
}

// Hands slot i's end to its caller: the batch will not touch its sequence again.
void Stepper::Impl::finish(uint32_t i, std::string_view error) {
  Handoff* h = std::exchange(running[i], nullptr);
  std::lock_guard lock(h->mutex);
  h->stop = batch.slot(i).stop;
  h->drafted = batch.slot(i).drafted;
  h->accepted = batch.slot(i).accepted;
  h->error = error;
  h->done = true;
  h->changed.notify_all();
}

void Stepper::Impl::step() {
  for (uint32_t i = 0; i < running.size(); ++i) {
    if (!running[i]) continue;
    bool stop_asked = false;
    {
      std::lock_guard lock(running[i]->mutex);
      stop_asked = running[i]->stop_asked;
    }
    if (stop_asked) batch.cancel(i);
  }
  std::span<const generate::Batch::Sampled> sampled;
  try {
    if (batch.active()) steps.fetch_add(1, std::memory_order_relaxed);
    sampled = batch.step();
  } catch (const std::exception& e) {
    // The pass failed for every sequence in it: each caller hears why, and the slots are free again.
    for (uint32_t i = 0; i < running.size(); ++i)
      if (running[i]) {
        batch.cancel(i);
        finish(i, e.what());
      }
    return;
  }
  for (const generate::Batch::Sampled& t : sampled) {
    Handoff* h = running[t.slot];
    std::lock_guard lock(h->mutex);
    h->tokens.push_back(t.token);
    if (t.has_logprobs) h->logprobs.push_back(t.logprobs);
    h->changed.notify_all();
  }
  for (uint32_t i = 0; i < running.size(); ++i) {
    if (!running[i]) continue;
    publish_cells(i);
    if (!batch.slot(i).active) finish(i, batch.slot(i).error);
  }
}

Stepper::Stepper(generate::Engine& engine, int threads, uint32_t draft_max, uint32_t draft_min) {
  if (!engine.tokenizer || !engine.plan.batched())
    throw InvalidArgument("the stepper needs an engine with a tokenizer and a plan with a batch");
  impl_ = std::make_unique<Impl>(engine, threads, draft_max, draft_min);
}

Stepper::~Stepper() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->closing = true;
  }
  impl_->wake.notify_all();
  impl_->thread.join();
}

uint64_t Stepper::steps() const noexcept { return impl_->steps.load(std::memory_order_relaxed); }

generate::Stats Stepper::generate(Slot& slot, std::span<const int32_t> prompt, const generate::Options& options,
                                  const generate::TokenCallback& on_token, generate::PrefixReuse reuse,
                                  generate::Drafter* drafter, std::atomic<uint32_t>* cells,
                                  std::vector<generate::TokenLogprobs>* logprobs) {
  const auto start = Clock::now();
  Handoff h;
  h.slot = &slot;
  h.prompt = prompt;
  h.options = &options;
  h.reuse = reuse;
  h.drafter = drafter;
  h.cells = cells;
  h.tokens.reserve(size_t{slot.kv.n_ctx()} + 1);
  // Sized for the whole context too, and only when asked: ~170 bytes a token.
  if (options.logprobs >= 0) h.logprobs.reserve(size_t{slot.kv.n_ctx()} + 1);
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->closing) throw InvalidArgument("the server is shutting down");
    impl_->incoming.push_back(&h);
  }
  impl_->wake.notify_one();

  // The text is this thread's work: the batch only samples.
  generate::TextStream text(impl_->tokenizer, prompt, options.stop_strings, on_token, options.shown_control_tokens);
  generate::Stats s;
  bool reading = true;  // false once the text ended (a stop string) or the callback said stop
  std::unique_lock lock(h.mutex);
  for (size_t read = 0;;) {
    h.changed.wait(lock, [&] { return h.done || read < h.tokens.size(); });
    if (read == h.tokens.size()) break;  // done, and every token read
    const int32_t token = h.tokens[read++];
    if (!reading) continue;
    const bool has_logprobs = read <= h.logprobs.size();
    const generate::TokenLogprobs token_logprobs = has_logprobs ? h.logprobs[read - 1] : generate::TokenLogprobs{};
    lock.unlock();
    if (++s.generated_tokens == 1)
      s.first_token_seconds = s.prompt_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const bool end_of_text = options.stop_at_eos && impl_->tokenizer.is_eog(token);
    // Before the callback hears the token's text: a token whose text is never shown (the end of
    // generation) has none here either.
    if (logprobs && has_logprobs && !end_of_text) logprobs->push_back(token_logprobs);
    const bool keep = end_of_text || text.push(token);
    lock.lock();
    if (!keep) {
      reading = false;
      s.stop = text.stopped_by_string() ? generate::StopReason::StopString : generate::StopReason::Callback;
      h.stop_asked = true;
    }
  }
  if (!h.error.empty()) throw Error(h.error);
  s.cached_tokens = static_cast<int32_t>(h.cached);
  s.drafted_tokens = h.drafted;
  s.accepted_tokens = h.accepted;
  s.prompt_tokens = static_cast<int32_t>(prompt.size() - static_cast<size_t>(h.cached));
  if (reading) s.stop = h.stop;
  lock.unlock();
  text.finish();
  if (text.stopped_by_string()) s.stop = generate::StopReason::StopString;
  s.decode_seconds = std::chrono::duration<double>(Clock::now() - start).count() - s.first_token_seconds;
  return s;
}

}  // namespace skainet::serve
