// skainet_logits: the same greedy run as peer_logits, with our engine, writing the same record
// (logits_file.hpp) for compare_logits.py.
//
//   skainet_logits MODEL.gguf OUT.bin IDS [N_STEPS=32] [THREADS=2] [PROFILE=default] [FOLLOW.bin]
//
// With FOLLOW.bin (peer_logits' record) the token fed at step i+1 is the peer's choice at step i, not
// ours; our own argmax is still what gets recorded. A near-tie that flips one choice then costs one
// step's comparison, not every step after it (free-running, the two runs would diverge from there).
//
// The prompt goes in as one forward step (one batch, like the peer); then one token per step, each the
// argmax of the previous step's logits, which are copied out before the step scope is reset.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <vector>

#include "logits_file.hpp"
#include "skainet/model/engine.hpp"

namespace {

int run(int argc, char** argv) {
  using namespace skainet;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf OUT.bin IDS [N_STEPS=32] [THREADS=2] [PROFILE=default]\n", argv[0]);
    return 2;
  }
  const std::string model_path = argv[1], out_path = argv[2];
  const std::vector<int32_t> prompt = skainet_peer::parse_ids(argv[3]);
  const int n_steps = argc > 4 ? std::atoi(argv[4]) : 32;
  generate::EngineOptions o;
  o.threads = argc > 5 ? std::atoi(argv[5]) : 2;
  o.profile = argc > 6 ? argv[6] : "default";
  o.plan.n_ctx = static_cast<uint32_t>(prompt.size() + n_steps + 16);
  o.plan.prefill_chunk = static_cast<uint32_t>(std::max<size_t>(prompt.size(), 1));
  o.progress = false;
  if (const char* kv = std::getenv("SKAINET_LOGITS_KV")) {  // as peer_logits: K and V of that type
    const std::optional<GgmlType> t = parse_type_name(kv);
    if (!t) throw std::runtime_error(std::string("SKAINET_LOGITS_KV: not a type: ") + kv);
    o.plan.k_type = o.plan.v_type = *t;
  }
  std::vector<int32_t> follow;
  if (argc > 7) {
    follow = skainet_peer::read_chosen(argv[7]);
    if (follow.size() < static_cast<size_t>(n_steps)) throw std::runtime_error("FOLLOW has fewer steps than N_STEPS");
  }
  auto e = generate::Engine::open(model_path, o);
  const uint32_t n_vocab = e->plan.model->vocab;

  skainet_peer::LogitsWriter out(out_path, n_vocab, prompt);
  memory::ForwardScope step({.slab_bytes = e->sequence->plan.step_bytes});
  std::span<const int32_t> batch(prompt);
  int64_t pos = 0;
  int32_t tok = 0, fed = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n_steps; ++i) {
    e->sequence->ctx.step(step, [&] {
      const Tensor logits = e->sequence->llama.forward(e->sequence->ctx, batch, pos);
      if (static_cast<uint64_t>(logits.numel()) != n_vocab) throw Error("logits are not [1, vocab]");
      tok = skainet_peer::argmax(logits.data<float>(), n_vocab);
      out.step(tok, logits.data<float>());
    });
    pos += static_cast<int64_t>(batch.size());
    fed = follow.empty() ? tok : follow[static_cast<size_t>(i)];
    batch = std::span<const int32_t>(&fed, 1);
  }
  out.finish();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("skainet_logits: %d steps, vocab %u, last id %d, load %.2f s, run %.2f s\n", n_steps, n_vocab, tok,
              e->load_seconds, secs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "skainet_logits: %s\n", e.what());
    return 1;
  }
}
