#include <fmt/format.h>
#include <re2/re2.h>

#include "skainet/io/arch.hpp"
#include "skainet/model/placement.hpp"

namespace skainet::placement {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

WeightForm WeightForm::parse(std::string_view text) {
  WeightForm form;
  bool any = false;
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view word = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (word.empty()) continue;
    any = true;
    if (word == "keep" || word == "as-stored-encoding") {
      form.encoding = EncodingRequest::KeepAsStored;
    } else if (word == "f32" || word == "F32" || word == "dequantize") {
      form.encoding = EncodingRequest::DequantizeToF32;
      form.requantize_to = GgmlType::F32;
    } else if (word == "as-stored") {
      form.order = WeightOrder::AsStored;
    } else if (word == "kernel-feed") {
      form.order = WeightOrder::KernelFeed;
    } else if (word == "mapped") {
      form.residency = WeightResidency::Mapped;
    } else if (word == "heap" || word == "memory") {
      form.residency = WeightResidency::Heap;
    } else if (auto t = parse_type_name(word)) {
      form.encoding = EncodingRequest::Requantize;
      form.requantize_to = *t;
    } else {
      throw InvalidArgument(fmt::format(
          "weight form '{}': unknown word '{}' (expected keep | f32 | a type such as q8_0, as-stored | kernel-feed, "
          "mapped | heap)",
          text, word));
    }
  }
  if (!any) throw InvalidArgument(fmt::format("weight form '{}' is empty", text));
  return form;
}

std::string WeightForm::to_string() const {
  std::string enc = encoding == EncodingRequest::KeepAsStored      ? "keep"
                    : encoding == EncodingRequest::DequantizeToF32 ? "f32"
                                                                   : std::string(type_name(requantize_to));
  for (auto& c : enc) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return fmt::format("{},{},{}", enc, order_name(order), residency_name(residency));
}

TensorRole role_of(const gguf::TensorInfo& info) noexcept {
  const std::string_view name = info.name;
  if (info.shape.size() <= 1 || ends_with(name, ".bias") || ends_with(name, "_norm.weight")) return TensorRole::Vector;
  if (const auto parsed = arch::parse_tensor_name(name); parsed && parsed->role == arch::Role::TokenEmbedding)
    return TensorRole::Embedding;
  return TensorRole::MatmulWeight;
}

TensorOverride TensorOverride::parse(std::string_view text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    throw InvalidArgument(fmt::format("--override-tensor '{}': expected REGEX=FORM, e.g. '{}=f32,heap'", text,
                                      arch::role_name(arch::Role::FfnDown)));
  TensorOverride o;
  o.pattern = std::string(text.substr(0, eq));
  o.form = WeightForm::parse(text.substr(eq + 1));
  RE2::Options options;
  options.set_log_errors(false);
  auto regex = std::make_shared<const RE2>(o.pattern, options);
  if (!regex->ok())
    throw InvalidArgument(fmt::format("--override-tensor '{}': bad regular expression '{}': {}", text.substr(0, 200),
                                      o.pattern.substr(0, 200), regex->error().substr(0, 200)));
  o.regex = std::move(regex);
  return o;
}

bool TensorOverride::matches(std::string_view name) const {
  return regex && RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), *regex);
}

std::string_view role_name(TensorRole r) noexcept {
  switch (r) {
    case TensorRole::MatmulWeight: return "matmul";
    case TensorRole::Embedding: return "embedding";
    case TensorRole::Vector: return "vector";
  }
  return "?";
}

std::string_view encoding_request_name(EncodingRequest e) noexcept {
  switch (e) {
    case EncodingRequest::KeepAsStored: return "keep";
    case EncodingRequest::DequantizeToF32: return "dequantize-f32";
    case EncodingRequest::Requantize: return "requantize";
  }
  return "?";
}

std::string_view order_name(WeightOrder o) noexcept { return o == WeightOrder::AsStored ? "as-stored" : "kernel-feed"; }
std::string_view residency_name(WeightResidency r) noexcept { return r == WeightResidency::Mapped ? "mapped" : "heap"; }

}  // namespace skainet::placement
