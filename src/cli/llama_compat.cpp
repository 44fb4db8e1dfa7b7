#include "llama_compat.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <fmt/format.h>

namespace skainet::cli {
namespace {

// Options whose next word is a value, which may itself begin with a dash ("-p -ngl" is a prompt).
constexpr std::string_view kTakesValue[] = {"-p",
                                            "--prompt",
                                            "--system-prompt",
                                            "-r",
                                            "--reverse-prompt",
                                            "--stop",
                                            "--chat-template",
                                            "-f",
                                            "--file",
                                            "--override-tensor",
                                            "--weight-form",
                                            "--explain",
                                            "--decode"};

bool takes_value(std::string_view word) {
  return std::find(std::begin(kTakesValue), std::end(kTakesValue), word) != std::end(kTakesValue);
}

bool is_multi_letter_short(std::string_view w) {
  if (w.size() < 3 || w[0] != '-' || w[1] == '-') return false;
  return std::all_of(w.begin() + 1, w.end(),
                     [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '-'; });
}

std::string cache_type(const std::string& name, std::string_view flag) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower != "f16" && lower != "f32")
    throw CLI::ValidationError(std::string(flag), fmt::format("'{}': the KV cache can be f16 or f32 here (quantized "
                                                              "caches such as q8_0 are not implemented)",
                                                              name));
  return lower;
}

}  // namespace

std::vector<std::string> rewrite_llama_args(int argc, char** argv) {
  std::vector<std::string> out;
  bool value_next = false;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (value_next) {
      value_next = false;
      out.push_back(std::move(word));
      continue;
    }
    if (word == "--") {  // everything after it is positional
      for (; i < argc; ++i) out.emplace_back(argv[i]);
      break;
    }
    const auto alias = std::find_if(std::begin(kLlamaAliases), std::end(kLlamaAliases),
                                    [&](const LlamaAlias& a) { return a.llama == word; });
    if (alias != std::end(kLlamaAliases)) {
      word = std::string(alias->ours);
    } else if (is_multi_letter_short(word)) {
      throw CLI::ExtrasError(fmt::format("unknown option '{}' (long options take two dashes)", word),
                             static_cast<int>(CLI::ExitCodes::ExtrasError));
    }
    value_next = takes_value(word);
    out.push_back(std::move(word));
  }
  return out;
}

void add_placement_compat(CLI::App* cmd, CompatFlags& f) {
  cmd->add_option("--cache-type-k", f.cache_type_k,
                  "as llama.cpp's -ctk: KV cache type (f16 | f32; same as --kv-type)");
  cmd->add_option("--cache-type-v", f.cache_type_v, "as llama.cpp's -ctv: must equal -ctk (one type for K and V)");
  cmd->add_flag("--no-mmap", f.no_mmap, "read every weight into memory instead of mapping the file (residency heap)");
  cmd->add_flag("--mlock", f.mlock, "accepted for llama.cpp compatibility; ignored");
  cmd->add_option("--n-gpu-layers,--gpu-layers", f.n_gpu_layers, "as llama.cpp's -ngl N; CPU only: ignored");
}

void apply_placement_compat(const CompatFlags& f, PlacementArgs& p) {
  std::string kv = p.kv_type;
  for (const auto& [value, flag] :
       {std::pair{f.cache_type_k, "-ctk/--cache-type-k"}, std::pair{f.cache_type_v, "-ctv/--cache-type-v"}}) {
    if (value.empty()) continue;
    const std::string t = cache_type(value, flag);
    if (!kv.empty() && kv != t)
      throw CLI::ValidationError(flag, fmt::format("'{}' differs from the KV cache type already given ('{}'): this "
                                                   "cache has one type for K and V",
                                                   t, kv));
    kv = t;
  }
  p.kv_type = kv;
  if (f.no_mmap) {
    if (p.weight_form.find("mapped") != std::string::npos)
      throw CLI::ValidationError("--no-mmap", fmt::format("contradicts --weight-form {}", p.weight_form));
    if (p.weight_form.empty())
      p.weight_form = "keep,heap";
    else if (p.weight_form.find("heap") == std::string::npos)
      p.weight_form += ",heap";
  }
  if (f.mlock) fmt::print(stderr, "skainet: --mlock: CPU only: ignored\n");
  if (f.n_gpu_layers) fmt::print(stderr, "skainet: -ngl {}: CPU only: ignored\n", *f.n_gpu_layers);
}

void add_model_option(CLI::App* cmd, std::string& model, std::string_view help) {
  CLI::Option* flag = cmd->add_option("-m,--model", model, std::string(help));
  CLI::Option* positional = cmd->add_option("MODEL", model, std::string(help) + " (the same as -m)");
  flag->excludes(positional);
}

void require_model(const std::string& model) {
  if (model.empty()) throw CLI::RequiredError("a model: -m FILE (or FILE as the first positional)");
}

std::string process_escapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '?': out += '?'; break;
      case 'x':
        if (i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
          out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
          i += 2;
          break;
        }
        [[fallthrough]];
      default: out += '\\'; out += c;
    }
  }
  return out;
}

}  // namespace skainet::cli
