// peer_logits: greedy decoding with llama.cpp (the peer, built by scripts/peer.sh) that records every
// step's full logits, for compare_logits.py. Built against the peer's llama.h and static libraries.
//
//   peer_logits MODEL.gguf OUT.bin IDS [N_STEPS=32] [THREADS=2]      IDS: "1,9038,2501,263,931"
//
// The prompt ids go in as one batch; then one token per llama_decode, each the argmax of the previous
// logits. KV cache in F16 (llama.cpp's default, and skainet's default profile), no flash attention, so
// both engines do the same arithmetic up to summation order. SKAINET_LOGITS_KV=q8_0 (or q4_0, ...):
// K and V caches of that type, with flash attention on, which llama.cpp needs for a quantized V.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "llama.h"
#include "logits_file.hpp"

namespace {

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_WARN) std::fputs(text, stderr);
}

int run(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf OUT.bin IDS [N_STEPS=32] [THREADS=2]\n", argv[0]);
    return 2;
  }
  const std::string model_path = argv[1], out_path = argv[2];
  std::vector<int32_t> prompt = skainet_peer::parse_ids(argv[3]);
  const int n_steps = argc > 4 ? std::atoi(argv[4]) : 32;
  const int threads = argc > 5 ? std::atoi(argv[5]) : 2;

  llama_log_set(quiet_log, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  // llama.cpp's extra buffer types (its load-time repack, and AMX tiles on a CPU with AMX-INT8) are
  // speed paths meant to give the plain kernels' numbers; the AMX one crashes on the small models
  // these checks use (llama.cpp issue #20824, open), so the reference is the plain CPU path.
  mp.use_extra_bufts = false;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) {
    std::fprintf(stderr, "peer_logits: llama.cpp could not load %s\n", model_path.c_str());
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(prompt.size() + n_steps + 16);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(prompt.size());
  cp.n_threads = cp.n_threads_batch = threads;
  cp.type_k = cp.type_v = GGML_TYPE_F16;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  if (const char* kv = std::getenv("SKAINET_LOGITS_KV")) {
    const std::string name = kv;
    const ggml_type types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0,  GGML_TYPE_Q4_0,
                               GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL};
    bool found = false;
    for (ggml_type t : types) {
      std::string tn = ggml_type_name(t);
      for (char& c : tn) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (tn == name) {
        cp.type_k = cp.type_v = t;
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "peer_logits: SKAINET_LOGITS_KV=%s is not a cache type\n", kv);
      return 2;
    }
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
  }
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "peer_logits: could not create a llama_context\n");
    return 1;
  }

  skainet_peer::LogitsWriter out(out_path, static_cast<uint32_t>(n_vocab), prompt);
  llama_batch batch = llama_batch_get_one(prompt.data(), static_cast<int32_t>(prompt.size()));
  int32_t tok = 0;
  for (int i = 0; i < n_steps; ++i) {
    if (llama_decode(ctx, batch) != 0) {
      std::fprintf(stderr, "peer_logits: llama_decode failed at step %d\n", i);
      return 1;
    }
    const float* logits = llama_get_logits_ith(ctx, -1);
    tok = skainet_peer::argmax(logits, static_cast<size_t>(n_vocab));
    out.step(tok, logits);
    batch = llama_batch_get_one(&tok, 1);
  }
  out.finish();
  std::printf("peer_logits: %d steps, vocab %d, last id %d\n", n_steps, n_vocab, tok);

  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peer_logits: %s\n", e.what());
    return 1;
  }
}
