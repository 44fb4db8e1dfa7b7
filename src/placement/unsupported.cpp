// Which tensors of a file no form can hold here, and the refusal that names them all at once (a
// file with one unknown type usually has a hundred such tensors; naming only the first hides that).
#include <fmt/format.h>

#include "skainet/model/placement.hpp"

namespace skainet::placement {
namespace {

std::string describe(const std::vector<UnsupportedTensor>& tensors, const std::vector<GgmlType>& supported) {
  std::string list, types;
  for (const auto& t : tensors) list += fmt::format("{}'{}' ({})", list.empty() ? "" : ", ", t.name, type_name(t.type));
  for (GgmlType t : supported) types += fmt::format("{}{}", types.empty() ? "" : ", ", type_name(t));
  return fmt::format("{} tensor{} of a type no kernel reads and no dequantizer decodes here: {}; supported types: {}",
                     tensors.size(), tensors.size() == 1 ? "" : "s", list, types);
}

}  // namespace

std::vector<UnsupportedTensor> unsupported_tensors(std::span<const gguf::TensorInfo> tensors,
                                                   const Platform& platform) {
  std::vector<UnsupportedTensor> out;
  for (const auto& info : tensors)
    if (!platform.can_dequantize(info.type) && !platform.matmul_reads(info.type, BlockOrder::RowMajor))
      out.push_back({info.name, info.type});
  return out;
}

UnsupportedTypesError::UnsupportedTypesError(std::vector<UnsupportedTensor> tensors, std::vector<GgmlType> supported)
    : PlacementError(describe(tensors, supported)), tensors_(std::move(tensors)), supported_(std::move(supported)) {}

}  // namespace skainet::placement
