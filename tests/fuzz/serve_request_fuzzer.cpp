// Fuzz target: the server's request parsing (skainet::serve::parse_request) on arbitrary bodies, for
// both completion endpoints, and the operations endpoints' (parse_tokenize, parse_detokenize). RequestError with a 4xx
// status is its one answer to a body it refuses; any other exception, a crash, or an accepted request that breaks the
// validated ranges is a finding. Seeds: request bodies as OpenAI's clients and llama.cpp's server send them.
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "skainet/app/serve.hpp"

namespace skainet::fuzz {

int serve_request_one_input(const uint8_t* data, size_t size) {
  const serve::RequestLimits limits{.vocab_size = 512};
  for (const serve::Endpoint e : {serve::Endpoint::ChatCompletions, serve::Endpoint::Completions}) {
    try {
      const serve::Request r = serve::parse_request(e, as_text(data, size), limits);
      if (r.endpoint != e) fail("serve_request_fuzzer", "endpoint changed");
      if (e == serve::Endpoint::ChatCompletions && (r.messages.empty() || r.messages.size() > limits.max_messages))
        fail("serve_request_fuzzer", "message count outside its limits");
      if (r.stop.size() > limits.max_stop_strings) fail("serve_request_fuzzer", "too many stop strings accepted");
      for (const auto& s : r.stop)
        if (s.empty() || s.size() > limits.max_stop_bytes)
          fail("serve_request_fuzzer", "stop string outside its limits");
      if (r.max_tokens && *r.max_tokens < -1) fail("serve_request_fuzzer", "max_tokens below -1 accepted");
      if (r.top_k && *r.top_k < 0) fail("serve_request_fuzzer", "negative top_k accepted");
      if (r.top_p && !(*r.top_p >= 0 && *r.top_p <= 1)) fail("serve_request_fuzzer", "top_p outside [0, 1] accepted");
      if (r.temperature && !(*r.temperature >= 0)) fail("serve_request_fuzzer", "negative or NaN temperature accepted");
      if (r.repeat_penalty && !(*r.repeat_penalty > 0)) fail("serve_request_fuzzer", "repeat_penalty <= 0 accepted");
      for (const int32_t id : r.prompt_ids)
        if (id < 0 || id >= limits.vocab_size) fail("serve_request_fuzzer", "a prompt token outside the vocabulary");
    } catch (const serve::RequestError& err) {
      if (err.status() < 400 || err.status() > 499 || err.message().empty())
        fail("serve_request_fuzzer", "a refusal without a 4xx status and a message");
    }
  }
  const auto refusal_is_400 = [](const serve::RequestError& err) {
    if (err.status() != 400 || err.message().empty())
      fail("serve_request_fuzzer", "an ops refusal not a 400 with a message");
  };
  try {
    serve::parse_tokenize(as_text(data, size), limits);
  } catch (const serve::RequestError& err) {
    refusal_is_400(err);
  }
  try {
    for (const int32_t id : serve::parse_detokenize(as_text(data, size), limits))
      if (id < 0 || id >= limits.vocab_size)
        fail("serve_request_fuzzer", "a token to detokenize outside the vocabulary");
  } catch (const serve::RequestError& err) {
    refusal_is_400(err);
  }
  return 0;
}

std::vector<Bytes> serve_request_seeds() {
  const char* bodies[] = {
      R"({"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]})",
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"stream":true,)"
      R"("stream_options":{"include_usage":true},"temperature":0.7,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":7,)"
      R"("max_tokens":16,"stop":["\n","END"],"n":1})",
      R"({"model":"m","prompt":"Once upon a time","max_tokens":8,"temperature":0,"stop":"."})",
      R"({"prompt":["one"],"n_predict":-1,"seed":-5,"max_completion_tokens":3,"user":null,"logprobs":false,)"
      R"("cache_prompt":false})",
      R"({"messages":[{"role":"assistant","content":null},{"role":"tool","content":"x"}],"top_k":5.0})",
      R"({"prompt":[1,403,511],"repeat_penalty":1.1,"repeat_last_n":-1,"presence_penalty":0.5,"ignore_eos":true,)"
      R"("response_format":{"type":"text"},"tools":[],"logprobs":true})",
      R"({"content":"Once <s>","add_special":true,"parse_special":false,"tokens":[1,2,3]})",
  };
  std::vector<Bytes> seeds;
  for (const char* b : bodies) seeds.push_back(bytes_of(b));
  return seeds;
}

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::serve_request_one_input, skainet::fuzz::serve_request_seeds)
