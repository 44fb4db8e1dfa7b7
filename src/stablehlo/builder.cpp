#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "skainet/io/stablehlo.hpp"

namespace skainet::stablehlo {
namespace {

std::string i64_array(const std::vector<int64_t>& v) {
  return v.empty() ? std::string("array<i64>") : fmt::format("array<i64: {}>", fmt::join(v, ", "));
}

std::string bracket_list(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

void require(bool ok, std::string_view op, const std::string& detail) {
  if (!ok) throw InvalidArgument(fmt::format("stablehlo.{}: {}", op, detail));
}

bool is_float(Elem e) { return e == Elem::F32 || e == Elem::F16 || e == Elem::BF16; }

}  // namespace

std::string_view elem_name(Elem e) noexcept {
  switch (e) {
    case Elem::F32: return "f32";
    case Elem::F16: return "f16";
    case Elem::BF16: return "bf16";
    case Elem::I32: return "i32";
    case Elem::I64: return "i64";
    case Elem::I8: return "i8";
    case Elem::UI8: return "ui8";
    case Elem::UI32: return "ui32";
    case Elem::I1: return "i1";
    case Elem::I16: return "i16";
  }
  return "?";
}

uint32_t elem_bits(Elem e) noexcept {
  switch (e) {
    case Elem::F32:
    case Elem::I32:
    case Elem::UI32: return 32;
    case Elem::F16:
    case Elem::BF16: return 16;
    case Elem::I64: return 64;
    case Elem::I8:
    case Elem::UI8: return 8;
    case Elem::I1: return 1;
    case Elem::I16: return 16;
  }
  return 0;
}

int64_t TensorType::numel() const noexcept {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string s = "tensor<";
  for (int64_t d : dims) s += fmt::format("{}x", d);
  s += elem_name(elem);
  return s + ">";
}

std::string escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      out += fmt::format("\\{}", static_cast<char>(c));
    else if (c < 0x20 || c >= 0x7f)
      out += fmt::format("\\{:02X}", c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

std::string global_declaration(std::string_view global, std::string_view scope, std::string_view key,
                               const TensorType& type) {
  return fmt::format("util.global private @\"{}\" = #flow.parameter.named<\"{}\"::\"{}\"> : {}", escape(global),
                     escape(scope), escape(key), type.str());
}

FunctionBuilder::FunctionBuilder(std::string name) : name_(std::move(name)) {}

std::string FunctionBuilder::fresh() { return fmt::format("%v{}", next_++); }

Value FunctionBuilder::argument(TensorType type, std::string_view attrs) {
  require(body_.empty(), "argument", "arguments must come before the first op");
  Value v{fmt::format("%arg{}", args_.size()), std::move(type)};
  args_.push_back(v);
  arg_attrs_.push_back(attrs.empty() ? std::string() : fmt::format(" {{{}}}", attrs));
  return v;
}

Value FunctionBuilder::global_load(std::string_view global, TensorType type) {
  Value v{fresh(), std::move(type)};
  body_ += fmt::format("    {} = util.global.load @\"{}\" : {}\n", v.name, escape(global), v.type.str());
  return v;
}

Value FunctionBuilder::op(std::string_view name, const std::vector<Value>& operands, TensorType result,
                          std::string_view attrs) {
  require(!returned_, name, "the function has already returned");
  std::string names, types;
  for (size_t i = 0; i < operands.size(); ++i) {
    names.append(i ? ", " : "").append(operands[i].name);
    types.append(i ? ", " : "").append(operands[i].type.str());
  }
  Value v{fresh(), std::move(result)};
  body_ += fmt::format("    {} = \"stablehlo.{}\"({}){}{} : ({}) -> {}\n", v.name, name, names,
                       attrs.empty() ? "" : " ", attrs, types, v.type.str());
  return v;
}

Value FunctionBuilder::op(std::string_view name, std::initializer_list<Value> operands, TensorType result,
                          std::string_view attrs) {
  return op(name, std::vector<Value>(operands), std::move(result), attrs);
}

Value FunctionBuilder::constant_f32(float v, std::vector<int64_t> dims) {
  std::string lit;
  // Nine significant digits round-trip every f32; non-finite values go in as their bits.
  if (std::isinf(v))
    lit = v < 0 ? "0xFF800000" : "0x7F800000";
  else if (std::isnan(v))
    lit = "0x7FC00000";
  else
    lit = fmt::format("{:.8e}", v);
  TensorType t{std::move(dims), Elem::F32};
  return op("constant", {}, t, fmt::format("{{value = dense<{}> : {}}}", lit, t.str()));
}

Value FunctionBuilder::constant_floats(const std::vector<float>& values) {
  std::string lit;
  for (size_t i = 0; i < values.size(); ++i) {
    require(std::isfinite(values[i]), "constant", "non-finite value in a float array");
    lit += fmt::format("{}{:.8e}", i ? ", " : "", values[i]);
  }
  TensorType t{{static_cast<int64_t>(values.size())}, Elem::F32};
  return op("constant", {}, t, fmt::format("{{value = dense<[{}]> : {}}}", lit, t.str()));
}

Value FunctionBuilder::zeros(TensorType type) {
  const bool fl = is_float(type.elem);
  return op("constant", {}, type, fmt::format("{{value = dense<{}> : {}}}", fl ? "0.0" : "0", type.str()));
}

Value FunctionBuilder::constant_i32(int32_t v, std::vector<int64_t> dims, Elem elem) {
  TensorType t{std::move(dims), elem};
  return op("constant", {}, t, fmt::format("{{value = dense<{}> : {}}}", v, t.str()));
}

Value FunctionBuilder::constant_ints(const std::vector<int64_t>& values, std::vector<int64_t> dims, Elem elem) {
  TensorType t{std::move(dims), elem};
  require(static_cast<int64_t>(values.size()) == t.numel(), "constant",
          fmt::format("{} values for {}", values.size(), t.str()));
  // A flat literal list is accepted for any shape by MLIR's dense attribute parser only when nested;
  // build the nesting from the dims.
  std::string lit;
  size_t at = 0;
  auto emit = [&](auto&& self, size_t dim) -> void {
    if (dim == t.dims.size()) {
      lit += fmt::format("{}", values[at++]);
      return;
    }
    lit += "[";
    for (int64_t i = 0; i < t.dims[dim]; ++i) {
      if (i) lit += ", ";
      self(self, dim + 1);
    }
    lit += "]";
  };
  emit(emit, 0);
  return op("constant", {}, t, fmt::format("{{value = dense<{}> : {}}}", lit, t.str()));
}

Value FunctionBuilder::unary(std::string_view name, const Value& x) { return op(name, {x}, x.type); }

Value FunctionBuilder::binary(std::string_view name, const Value& a, const Value& b) {
  require(a.type == b.type, name, fmt::format("operands differ: {} vs {}", a.type.str(), b.type.str()));
  return op(name, {a, b}, a.type);
}

Value FunctionBuilder::convert(const Value& x, Elem to) {
  if (x.type.elem == to) return x;
  return op("convert", {x}, TensorType{x.type.dims, to});
}

Value FunctionBuilder::bitcast_convert(const Value& x, Elem to) {
  const uint32_t from_bits = elem_bits(x.type.elem), to_bits = elem_bits(to);
  std::vector<int64_t> dims = x.type.dims;
  if (to_bits > from_bits) {
    require(!dims.empty() && dims.back() * from_bits == to_bits, "bitcast_convert",
            fmt::format("{} to {}: the last dim must be {}", x.type.str(), elem_name(to), to_bits / from_bits));
    dims.pop_back();
  } else if (to_bits < from_bits) {
    dims.push_back(from_bits / to_bits);
  }
  return op("bitcast_convert", {x}, TensorType{dims, to});
}

Value FunctionBuilder::reshape(const Value& x, std::vector<int64_t> dims) {
  TensorType t{std::move(dims), x.type.elem};
  require(t.numel() == x.type.numel(), "reshape", fmt::format("{} to {}", x.type.str(), t.str()));
  if (t == x.type) return x;
  return op("reshape", {x}, t);
}

Value FunctionBuilder::broadcast_in_dim(const Value& x, std::vector<int64_t> dims, std::vector<int64_t> mapping) {
  require(static_cast<int64_t>(mapping.size()) == x.type.rank(), "broadcast_in_dim",
          fmt::format("{} mapped by {} dims", x.type.str(), mapping.size()));
  for (size_t i = 0; i < mapping.size(); ++i)
    require(mapping[i] >= 0 && mapping[i] < static_cast<int64_t>(dims.size()) &&
                (x.type.dims[i] == 1 || x.type.dims[i] == dims[mapping[i]]),
            "broadcast_in_dim", fmt::format("{} into {}", x.type.str(), bracket_list(dims)));
  TensorType t{std::move(dims), x.type.elem};
  if (t == x.type) return x;
  return op("broadcast_in_dim", {x}, t, fmt::format("{{broadcast_dimensions = {}}}", i64_array(mapping)));
}

Value FunctionBuilder::transpose(const Value& x, std::vector<int64_t> permutation) {
  require(static_cast<int64_t>(permutation.size()) == x.type.rank(), "transpose", x.type.str());
  std::vector<int64_t> dims;
  for (int64_t p : permutation) dims.push_back(x.type.dims.at(static_cast<size_t>(p)));
  return op("transpose", {x}, TensorType{dims, x.type.elem},
            fmt::format("{{permutation = {}}}", i64_array(permutation)));
}

Value FunctionBuilder::slice(const Value& x, std::vector<int64_t> start, std::vector<int64_t> limit,
                             std::vector<int64_t> strides) {
  if (strides.empty()) strides.assign(start.size(), 1);
  require(static_cast<int64_t>(start.size()) == x.type.rank() && limit.size() == start.size() &&
              strides.size() == start.size(),
          "slice", x.type.str());
  std::vector<int64_t> dims;
  for (size_t i = 0; i < start.size(); ++i) {
    require(0 <= start[i] && start[i] <= limit[i] && limit[i] <= x.type.dims[i] && strides[i] > 0, "slice",
            fmt::format("{} from {} to {}", x.type.str(), bracket_list(start), bracket_list(limit)));
    dims.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  }
  TensorType t{dims, x.type.elem};
  if (t == x.type) return x;
  return op("slice", {x}, t,
            fmt::format("{{start_indices = {}, limit_indices = {}, strides = {}}}", i64_array(start), i64_array(limit),
                        i64_array(strides)));
}

Value FunctionBuilder::concatenate(const std::vector<Value>& xs, int64_t dim) {
  require(!xs.empty(), "concatenate", "no operands");
  if (xs.size() == 1) return xs[0];
  std::vector<int64_t> dims = xs[0].type.dims;
  dims.at(static_cast<size_t>(dim)) = 0;
  for (const Value& x : xs) {
    require(x.type.rank() == xs[0].type.rank() && x.type.elem == xs[0].type.elem, "concatenate", x.type.str());
    dims[static_cast<size_t>(dim)] += x.type.dims[static_cast<size_t>(dim)];
  }
  return op("concatenate", xs, TensorType{dims, xs[0].type.elem}, fmt::format("{{dimension = {} : i64}}", dim));
}

Value FunctionBuilder::iota(TensorType type, int64_t dim) {
  return op("iota", {}, std::move(type), fmt::format("{{iota_dimension = {} : i64}}", dim));
}

Value FunctionBuilder::dynamic_slice(const Value& x, const std::vector<Value>& starts, std::vector<int64_t> sizes) {
  require(static_cast<int64_t>(starts.size()) == x.type.rank() && sizes.size() == starts.size(), "dynamic_slice",
          x.type.str());
  std::vector<Value> operands{x};
  operands.insert(operands.end(), starts.begin(), starts.end());
  TensorType t{sizes, x.type.elem};
  return op("dynamic_slice", operands, t, fmt::format("{{slice_sizes = {}}}", i64_array(sizes)));
}

Value FunctionBuilder::dynamic_update_slice(const Value& x, const Value& update, const std::vector<Value>& starts) {
  require(static_cast<int64_t>(starts.size()) == x.type.rank() && update.type.rank() == x.type.rank() &&
              update.type.elem == x.type.elem,
          "dynamic_update_slice", fmt::format("{} into {}", update.type.str(), x.type.str()));
  std::vector<Value> operands{x, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return op("dynamic_update_slice", operands, x.type);
}

Value FunctionBuilder::gather_rows(const Value& table, const Value& ids) {
  require(table.type.rank() >= 1 && ids.type.rank() == 1, "gather", table.type.str() + " by " + ids.type.str());
  std::vector<int64_t> dims{ids.type.dims[0]};
  std::vector<int64_t> offset_dims, slice_sizes{1};
  for (int64_t i = 1; i < table.type.rank(); ++i) {
    dims.push_back(table.type.dims[static_cast<size_t>(i)]);
    offset_dims.push_back(i);
    slice_sizes.push_back(table.type.dims[static_cast<size_t>(i)]);
  }
  const Value idx = reshape(ids, {ids.type.dims[0], 1});
  return op("gather", {table, idx}, TensorType{dims, table.type.elem},
            fmt::format("{{dimension_numbers = #stablehlo.gather<offset_dims = {}, collapsed_slice_dims = [0], "
                        "start_index_map = [0], index_vector_dim = 1>, slice_sizes = {}, indices_are_sorted = false}}",
                        bracket_list(offset_dims), i64_array(slice_sizes)));
}

Value FunctionBuilder::compare(const Value& a, const Value& b, std::string_view direction) {
  require(a.type == b.type, "compare", a.type.str() + " vs " + b.type.str());
  const std::string_view kind = is_float(a.type.elem)                                     ? "FLOAT"
                                : (a.type.elem == Elem::UI8 || a.type.elem == Elem::UI32) ? "UNSIGNED"
                                                                                          : "SIGNED";
  return op("compare", {a, b}, TensorType{a.type.dims, Elem::I1},
            fmt::format("{{comparison_direction = #stablehlo<comparison_direction {}>, compare_type = "
                        "#stablehlo<comparison_type {}>}}",
                        direction, kind));
}

Value FunctionBuilder::select(const Value& pred, const Value& on_true, const Value& on_false) {
  require(on_true.type == on_false.type && pred.type.dims == on_true.type.dims, "select", on_true.type.str());
  return op("select", {pred, on_true, on_false}, on_true.type);
}

Value FunctionBuilder::dot_general(const Value& lhs, const Value& rhs, std::vector<int64_t> lhs_batch,
                                   std::vector<int64_t> rhs_batch, std::vector<int64_t> lhs_contract,
                                   std::vector<int64_t> rhs_contract, TensorType result) {
  for (size_t i = 0; i < lhs_contract.size(); ++i)
    require(lhs.type.dims.at(static_cast<size_t>(lhs_contract[i])) ==
                rhs.type.dims.at(static_cast<size_t>(rhs_contract[i])),
            "dot_general", fmt::format("contracting {} with {}", lhs.type.str(), rhs.type.str()));
  return op("dot_general", {lhs, rhs}, std::move(result),
            fmt::format("{{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = {}, "
                        "rhs_batching_dimensions = {}, lhs_contracting_dimensions = {}, "
                        "rhs_contracting_dimensions = {}>}}",
                        bracket_list(lhs_batch), bracket_list(rhs_batch), bracket_list(lhs_contract),
                        bracket_list(rhs_contract)));
}

Value FunctionBuilder::reduce(const Value& x, std::vector<int64_t> dims, std::string_view combiner,
                              std::string_view init) {
  require(x.type.elem == Elem::F32, "reduce", x.type.str());
  const Value zero =
      op("constant", {}, TensorType{{}, Elem::F32}, fmt::format("{{value = dense<{}> : tensor<f32>}}", init));
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < x.type.rank(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) kept.push_back(x.type.dims[static_cast<size_t>(i)]);
  const TensorType t{kept, Elem::F32};
  Value v{fresh(), t};
  const std::string a = fresh(), b = fresh(), s = fresh();
  body_ += fmt::format(
      "    {} = \"stablehlo.reduce\"({}, {}) ({{\n"
      "      ^bb0({}: tensor<f32>, {}: tensor<f32>):\n"
      "        {} = \"stablehlo.{}\"({}, {}) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
      "        \"stablehlo.return\"({}) : (tensor<f32>) -> ()\n"
      "    }}) {{dimensions = {}}} : ({}, tensor<f32>) -> {}\n",
      v.name, x.name, zero.name, a, b, s, combiner, a, b, s, i64_array(dims), x.type.str(), t.str());
  return v;
}

Value FunctionBuilder::reduce_sum(const Value& x, std::vector<int64_t> dims) {
  return reduce(x, std::move(dims), "add", "0.000000e+00");
}

Value FunctionBuilder::reduce_max(const Value& x, std::vector<int64_t> dims) {
  return reduce(x, std::move(dims), "maximum", "0xFF800000");
}

Value FunctionBuilder::statement(std::string_view rhs, TensorType result) {
  require(!returned_, "statement", "the function has already returned");
  Value v{fresh(), std::move(result)};
  body_ += fmt::format("    {} = {}\n", v.name, rhs);
  return v;
}

std::string FunctionBuilder::index_constant(int64_t v) {
  require(!returned_, "statement", "the function has already returned");
  const std::string name = fresh();
  body_ += fmt::format("    {} = arith.constant {} : index\n", name, v);
  return name;
}

void FunctionBuilder::ret(const std::vector<Value>& results) {
  require(!returned_, "return", "twice");
  std::string names, types;
  for (size_t i = 0; i < results.size(); ++i) {
    names.append(i ? ", " : "").append(results[i].name);
    types.append(i ? ", " : "").append(results[i].type.str());
    results_.push_back(results[i].type);
  }
  body_ += fmt::format("    func.return {} : {}\n", names, types);
  returned_ = true;
}

std::string FunctionBuilder::text() const {
  require(returned_, "func", fmt::format("@{} has no return", name_));
  std::string args, results;
  for (size_t i = 0; i < args_.size(); ++i)
    args += fmt::format("{}{}: {}{}", i ? ", " : "", args_[i].name, args_[i].type.str(), arg_attrs_[i]);
  for (size_t i = 0; i < results_.size(); ++i) results.append(i ? ", " : "").append(results_[i].str());
  return fmt::format("  func.func @{}({}) -> ({}) {{\n{}  }}\n", name_, args, results, body_);
}

}  // namespace skainet::stablehlo
