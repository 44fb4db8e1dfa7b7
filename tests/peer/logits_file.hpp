// The record both logits dumpers write (peer_logits against llama.cpp, skainet_logits against our
// engine), read by compare_logits.py:
//
//   "SKLOGITS" (8 bytes), uint32 version = 1, uint32 n_vocab, uint32 n_prompt, uint32 n_steps,
//   int32 prompt[n_prompt], then per step: int32 chosen id, float32 logits[n_vocab]   (little endian)
//
// Step 0 holds the logits of the prompt batch's last position; step i > 0 those after feeding the
// token chosen at step i-1. The chosen id is the argmax (lowest id on ties), so no sampler is involved.
//
//   LogitsWriter w(path, n_vocab, prompt);  for (...) w.step(argmax(logits, n), logits);  w.finish();
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace skainet_peer {

inline int32_t argmax(const float* p, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (p[i] > p[best]) best = i;
  return static_cast<int32_t>(best);
}

// "1,2,3" → {1, 2, 3}
inline std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t end = s.find(',', i);
    if (end == std::string::npos) end = s.size();
    out.push_back(static_cast<int32_t>(std::stol(s.substr(i, end - i))));
    i = end + 1;
  }
  if (out.empty()) throw std::invalid_argument("no prompt ids in '" + s + "'");
  return out;
}

class LogitsWriter {
 public:
  LogitsWriter(const std::string& path, uint32_t n_vocab, const std::vector<int32_t>& prompt)
      : path_(path), n_vocab_(n_vocab), f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) throw std::runtime_error("cannot write " + path);
    const uint32_t head[4] = {1u, n_vocab, static_cast<uint32_t>(prompt.size()), 0u};
    put("SKLOGITS", 8);
    put(head, sizeof head);
    put(prompt.data(), prompt.size() * sizeof(int32_t));
  }
  LogitsWriter(const LogitsWriter&) = delete;
  LogitsWriter& operator=(const LogitsWriter&) = delete;
  ~LogitsWriter() {
    if (f_) std::fclose(f_);
  }

  void step(int32_t chosen, const float* logits) {
    put(&chosen, sizeof chosen);
    put(logits, size_t{n_vocab_} * sizeof(float));
    ++steps_;
  }

  // Patches the step count into the header and closes the file.
  void finish() {
    if (std::fseek(f_, 8 + 3 * sizeof(uint32_t), SEEK_SET) != 0) throw std::runtime_error("seek failed in " + path_);
    put(&steps_, sizeof steps_);
    if (std::fclose(f_) != 0) throw std::runtime_error("close failed on " + path_);
    f_ = nullptr;
  }

 private:
  void put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) throw std::runtime_error("short write to " + path_);
  }
  std::string path_;
  uint32_t n_vocab_;
  uint32_t steps_ = 0;
  std::FILE* f_;
};

// The chosen ids of a record written by LogitsWriter (to replay another engine's tokens).
inline std::vector<int32_t> read_chosen(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot read " + path);
  char magic[8];
  uint32_t head[4];
  std::vector<int32_t> ids;
  bool ok = std::fread(magic, 1, 8, f) == 8 && std::memcmp(magic, "SKLOGITS", 8) == 0 &&
            std::fread(head, sizeof head, 1, f) == 1 && head[0] == 1;
  if (ok) ok = std::fseek(f, static_cast<long>(head[2]) * 4, SEEK_CUR) == 0;
  for (uint32_t i = 0; ok && i < head[3]; ++i) {
    int32_t id;
    ok = std::fread(&id, sizeof id, 1, f) == 1 && std::fseek(f, static_cast<long>(head[1]) * 4, SEEK_CUR) == 0;
    if (ok) ids.push_back(id);
  }
  std::fclose(f);
  if (!ok) throw std::runtime_error(path + ": not a complete SKLOGITS record");
  return ids;
}

}  // namespace skainet_peer
