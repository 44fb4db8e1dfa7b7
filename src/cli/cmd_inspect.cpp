// `skainet inspect FILE [--json]`: the header only (metadata, tensor table, totals) and, for a
// known architecture, its hyper-parameters. Never touches tensor data.
#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "llama_compat.hpp"
#include "skainet/io/arch.hpp"
#include "skainet/io/gguf.hpp"

namespace skainet::cli {
namespace {

constexpr size_t kArrayHead = 5;     // array items shown
constexpr size_t kStringWidth = 60;  // characters of a long string shown in text

// What the header says, each value optional: inspect shows a file whose keys are missing or broken
// (arch::ModelShape, which the plan reads, refuses such a file).
struct Hparams {
  std::string architecture;
  std::optional<uint64_t> layers, dim, heads, kv_heads, ffn, vocab, n_ctx;
  std::optional<double> rope_base, rms_eps;
  bool rope_base_default = false;
};

std::optional<uint64_t> find_int(const gguf::Header& h, const std::string& key) {
  const gguf::Value* v = h.find(key);
  if (v == nullptr || v->is_array()) return std::nullopt;
  auto i = gguf::as_int(v->scalar);
  if (!i || *i < 0) return std::nullopt;
  return static_cast<uint64_t>(*i);
}

std::optional<double> find_real(const gguf::Header& h, const std::string& key) {
  const gguf::Value* v = h.find(key);
  if (v == nullptr || v->is_array()) return std::nullopt;
  return gguf::as_double(v->scalar);
}

std::optional<Hparams> hparams_of(const gguf::Header& h) {
  const gguf::Value* arch = h.find("general.architecture");
  if (arch == nullptr || arch->type != gguf::ValueType::String) return std::nullopt;
  Hparams p;
  p.architecture = std::get<std::string>(arch->scalar);
  const std::string& a = p.architecture;
  p.layers = find_int(h, arch::key(a, arch::Key::BlockCount));
  p.dim = find_int(h, arch::key(a, arch::Key::EmbeddingLength));
  p.heads = find_int(h, arch::key(a, arch::Key::HeadCount));
  p.kv_heads = find_int(h, arch::key(a, arch::Key::HeadCountKv));
  if (!p.kv_heads) p.kv_heads = p.heads;  // llama.cpp's default: no grouping
  p.ffn = find_int(h, arch::key(a, arch::Key::FeedForwardLength));
  p.vocab = find_int(h, arch::key(a, arch::Key::VocabSize));
  if (const gguf::Value* tokens = h.find("tokenizer.ggml.tokens"); !p.vocab && tokens && tokens->is_array())
    p.vocab = tokens->items.size();
  p.n_ctx = find_int(h, arch::key(a, arch::Key::ContextLength));
  p.rope_base = find_real(h, arch::key(a, arch::Key::RopeFreqBase));
  if (!p.rope_base) {
    p.rope_base = 10000.0;  // llama.cpp's default when the key is absent
    p.rope_base_default = true;
  }
  p.rms_eps = find_real(h, arch::key(a, arch::Key::RmsEpsilon));
  return p;
}

// Floats print in their shortest round-trip form (1e-05, not 9.99999974737875e-06).
std::string scalar_text(const gguf::Scalar& s, bool quote) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!quote) return v;
          std::string shown = v.size() > kStringWidth ? v.substr(0, kStringWidth) + "..." : v;
          for (char& c : shown)
            if (c == '\n' || c == '\r' || c == '\t') c = ' ';
          return fmt::format("\"{}\"", shown);
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>) {
          return fmt::format("{}", static_cast<int>(v));
        } else {
          return fmt::format("{}", v);
        }
      },
      s);
}

nlohmann::json scalar_json(const gguf::Scalar& s) {
  return std::visit(
      [](const auto& v) -> nlohmann::json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, float>)
          return std::isfinite(v) ? nlohmann::json(std::stod(fmt::format("{}", v)))
                                  : nlohmann::json(fmt::format("{}", v));
        else if constexpr (std::is_same_v<T, double>)
          return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(fmt::format("{}", v));
        else
          return nlohmann::json(v);
      },
      s);
}

std::string value_text(const gguf::Value& v) {
  if (!v.is_array()) return scalar_text(v.scalar, true);
  std::vector<std::string> head;
  for (size_t i = 0; i < std::min(kArrayHead, v.items.size()); ++i) head.push_back(scalar_text(v.items[i], true));
  return fmt::format("[{}; {}] {}{}", gguf::value_type_name(v.element_type), v.items.size(), fmt::join(head, ", "),
                     v.items.size() > kArrayHead ? ", ..." : "");
}

nlohmann::json value_json(const gguf::Value& v) {
  if (!v.is_array()) return scalar_json(v.scalar);
  nlohmann::json first = nlohmann::json::array();
  for (size_t i = 0; i < std::min(kArrayHead, v.items.size()); ++i) first.push_back(scalar_json(v.items[i]));
  return {{"type", "array"},
          {"element_type", gguf::value_type_name(v.element_type)},
          {"length", v.items.size()},
          {"first", std::move(first)}};
}

struct TypeTotal {
  size_t tensors = 0;
  uint64_t elements = 0, bytes = 0;
};

std::map<std::string_view, TypeTotal> totals_by_type(const gguf::Header& h) {
  std::map<std::string_view, TypeTotal> totals;
  for (const auto& t : h.tensors) {
    TypeTotal& total = totals[type_name(t.type)];
    ++total.tensors;
    total.elements += t.elements();
    total.bytes += t.bytes;
  }
  return totals;
}

template <class T>
std::string opt_text(const std::optional<T>& v) {
  return v ? fmt::format("{}", *v) : std::string("-");
}

void print_text(const gguf::Header& h) {
  fmt::print("{}: GGUF v{}, {}, {} metadata keys, {} tensors, alignment {}, data at offset {}\n", h.path.string(),
             h.version, base::format_bytes(h.file_size), h.metadata.size(), h.tensors.size(), h.alignment,
             h.data_offset);

  if (auto p = hparams_of(h)) {
    fmt::print("\nhyper-parameters\n");
    fmt::print("  {:<14}{}\n", "architecture", p->architecture);
    fmt::print("  {:<14}{}\n", "layers", opt_text(p->layers));
    fmt::print("  {:<14}{}\n", "dim", opt_text(p->dim));
    fmt::print("  {:<14}{}\n", "heads", opt_text(p->heads));
    fmt::print("  {:<14}{}\n", "kv heads", opt_text(p->kv_heads));
    fmt::print("  {:<14}{}\n", "ffn", opt_text(p->ffn));
    fmt::print("  {:<14}{}\n", "vocab", opt_text(p->vocab));
    fmt::print("  {:<14}{}\n", "ctx", opt_text(p->n_ctx));
    fmt::print("  {:<14}{}{}\n", "rope base", opt_text(p->rope_base),
               p->rope_base_default ? " (default, key absent)" : "");
    fmt::print("  {:<14}{}\n", "rms eps", p->rms_eps ? fmt::format("{}", static_cast<float>(*p->rms_eps)) : "-");
  }

  fmt::print("\nmetadata ({})\n", h.metadata.size());
  size_t key_width = 0;
  for (const auto& kv : h.metadata) key_width = std::max(key_width, kv.key.size());
  for (const auto& kv : h.metadata)
    fmt::print("  {:<{}}  {:<8} {}\n", kv.key, key_width, gguf::value_type_name(kv.value.type), value_text(kv.value));

  fmt::print("\ntensors ({})\n", h.tensors.size());
  size_t name_width = 4;
  for (const auto& t : h.tensors) name_width = std::max(name_width, t.name.size());
  fmt::print("  {:>4}  {:<{}}  {:<6} {:<16} {:>12} {:>12}\n", "#", "name", name_width, "type", "shape", "bytes",
             "offset");
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    const auto& t = h.tensors[i];
    fmt::print("  {:>4}  {:<{}}  {:<6} {:<16} {:>12} {:>12}\n", i, t.name, name_width, type_name(t.type),
               shape_text(t.shape), t.bytes, t.file_offset);
  }

  fmt::print("\ntotals\n");
  TypeTotal all;
  for (const auto& [name, total] : totals_by_type(h)) {
    fmt::print("  {:<6} {:>5} tensors {:>10} parameters {:>12}\n", name, total.tensors, human_count(total.elements),
               base::format_bytes(total.bytes));
    all.tensors += total.tensors;
    all.elements += total.elements;
    all.bytes += total.bytes;
  }
  fmt::print("  {:<6} {:>5} tensors {:>10} parameters {:>12}\n", "all", all.tensors, human_count(all.elements),
             base::format_bytes(all.bytes));
}

void print_json(const gguf::Header& h) {
  nlohmann::json j;
  j["path"] = h.path.string();
  j["version"] = h.version;
  j["file_size"] = h.file_size;
  j["alignment"] = h.alignment;
  j["data_offset"] = h.data_offset;
  j["header_bytes_read"] = h.header_bytes_read;
  if (auto p = hparams_of(h)) {
    nlohmann::json hp;
    hp["architecture"] = p->architecture;
    auto put = [&](const char* key, const auto& v) { hp[key] = v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    put("layers", p->layers);
    put("dim", p->dim);
    put("heads", p->heads);
    put("kv_heads", p->kv_heads);
    put("ffn", p->ffn);
    put("vocab", p->vocab);
    put("ctx", p->n_ctx);
    put("rope_base", p->rope_base);
    hp["rope_base_default"] = p->rope_base_default;
    hp["rms_eps"] = p->rms_eps ? scalar_json(static_cast<float>(*p->rms_eps)) : nlohmann::json(nullptr);
    j["hparams"] = std::move(hp);
  }
  nlohmann::json metadata = nlohmann::json::object(), types = nlohmann::json::object();
  for (const auto& kv : h.metadata) {
    metadata[kv.key] = value_json(kv.value);
    types[kv.key] = gguf::value_type_name(kv.value.type);
  }
  j["metadata"] = std::move(metadata);
  j["metadata_types"] = std::move(types);
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : h.tensors)
    tensors.push_back({{"name", t.name},
                       {"type", type_name(t.type)},
                       {"shape", t.shape},
                       {"elements", t.elements()},
                       {"bytes", t.bytes},
                       {"offset", t.file_offset},
                       {"data_offset", t.offset}});
  j["tensors"] = std::move(tensors);
  nlohmann::json by_type = nlohmann::json::object();
  TypeTotal all;
  for (const auto& [name, total] : totals_by_type(h)) {
    by_type[std::string(name)] = {{"tensors", total.tensors}, {"elements", total.elements}, {"bytes", total.bytes}};
    all.tensors += total.tensors;
    all.elements += total.elements;
    all.bytes += total.bytes;
  }
  j["totals"] = {
      {"tensors", all.tensors}, {"elements", all.elements}, {"bytes", all.bytes}, {"by_type", std::move(by_type)}};
  fmt::print("{}\n", j.dump(2));
}

}  // namespace

Subcommand add_inspect(CLI::App& app) {
  struct Options {
    std::string file;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("inspect", "Print a GGUF file's metadata, tensor table and totals (header only)");
  add_model_option(sub, options->file, "GGUF file");
  sub->parse_complete_callback([options] { require_model(options->file); });
  sub->add_flag("--json", options->json, "Emit one JSON object for tools");
  return {sub, [options] {
            const gguf::Header h = gguf::read_header(options->file);
            if (options->json)
              print_json(h);
            else
              print_text(h);
            return 0;
          }};
}

}  // namespace skainet::cli
