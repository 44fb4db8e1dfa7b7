// skainet::stablehlo — StableHLO text in MLIR's generic op syntax, and how each packed GGUF encoding
// is dequantized in it. The recorder (skainet::record) prints its graph through this; nothing here
// knows about models.
//
//   stablehlo::FunctionBuilder f("main");
//   Value x = f.argument(TensorType::of({2, 64}, Elem::F32));
//   Value w = f.global_load("blk.0.attn_norm.weight", TensorType::of({64}, Elem::F32));
//   Value y = f.multiply(x, f.broadcast_in_dim(w, {2, 64}, {1}));
//   f.ret({y});
//   std::string text = f.text();      // "func.func @main(%arg0: tensor<2x64xf32>) -> ... { ... }"
//
// The generic syntax ("stablehlo.add"(%a, %b) : (T, T) -> T) is used throughout: one uniform shape
// for every op, no per-op pretty-printer to get wrong, and it is what mlir-opt accepts everywhere.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "skainet/core/format.hpp"

namespace skainet::stablehlo {

enum class Elem : uint8_t { F32, F16, BF16, I32, I64, I8, UI8, UI32, I1, I16 };
std::string_view elem_name(Elem e) noexcept;  // "f32", "ui8", "i1", …
uint32_t elem_bits(Elem e) noexcept;

struct TensorType {
  std::vector<int64_t> dims;
  Elem elem = Elem::F32;
  static TensorType of(std::vector<int64_t> dims, Elem elem) { return {std::move(dims), elem}; }
  int64_t rank() const noexcept { return static_cast<int64_t>(dims.size()); }
  int64_t numel() const noexcept;
  std::string str() const;  // "tensor<2x64xf32>", "tensor<f32>" for rank 0
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

// An SSA value of the function being built.
struct Value {
  std::string name;  // "%v12"
  TensorType type;
};

// Builds one func.func body op by op. Every helper checks the shapes it is given (InvalidArgument
// naming the op and the shapes) so a wrong emission fails here, not inside iree-compile.
class FunctionBuilder {
 public:
  explicit FunctionBuilder(std::string name);

  // `attrs`: the argument's attribute dictionary without braces, e.g. "iree.abi.output = 1 : index".
  Value argument(TensorType type, std::string_view attrs = {});
  // `util.global.load` of a global declared elsewhere in the module (see global_declaration()).
  Value global_load(std::string_view global, TensorType type);

  // The general form: `%r = "stablehlo.<op>"(operands) {attrs} : (operand types) -> result`.
  Value op(std::string_view name, std::initializer_list<Value> operands, TensorType result,
           std::string_view attrs = {});
  Value op(std::string_view name, const std::vector<Value>& operands, TensorType result, std::string_view attrs = {});

  // Scalars and splats.
  Value constant_f32(float v, std::vector<int64_t> dims = {});
  // A 1-D f32 constant of these values (each printed so that it reads back bit for bit).
  Value constant_floats(const std::vector<float>& values);
  // A splat of zero in any element type.
  Value zeros(TensorType type);
  Value constant_i32(int32_t v, std::vector<int64_t> dims = {}, Elem elem = Elem::I32);  // any integer elem
  // A dense constant of integers (e.g. shift amounts); values.size() must equal the numel of dims.
  Value constant_ints(const std::vector<int64_t>& values, std::vector<int64_t> dims, Elem elem);

  // Elementwise (same shapes; use broadcast_in_dim first).
  Value add(const Value& a, const Value& b) { return binary("add", a, b); }
  Value subtract(const Value& a, const Value& b) { return binary("subtract", a, b); }
  Value multiply(const Value& a, const Value& b) { return binary("multiply", a, b); }
  Value divide(const Value& a, const Value& b) { return binary("divide", a, b); }
  Value maximum(const Value& a, const Value& b) { return binary("maximum", a, b); }
  Value and_(const Value& a, const Value& b) { return binary("and", a, b); }
  Value or_(const Value& a, const Value& b) { return binary("or", a, b); }
  Value shift_left(const Value& a, const Value& b) { return binary("shift_left", a, b); }
  Value shift_right_logical(const Value& a, const Value& b) { return binary("shift_right_logical", a, b); }
  Value unary(std::string_view name, const Value& x);  // "exponential", "rsqrt", "logistic", "negate", …
  Value binary(std::string_view name, const Value& a, const Value& b);
  Value convert(const Value& x, Elem to);
  // Reinterprets bits. To a wider element the last dim (= ratio) is consumed; to a narrower one a
  // last dim of the ratio is added (StableHLO's rule).
  Value bitcast_convert(const Value& x, Elem to);

  // Shapes.
  Value reshape(const Value& x, std::vector<int64_t> dims);
  Value broadcast_in_dim(const Value& x, std::vector<int64_t> dims, std::vector<int64_t> mapping);
  Value transpose(const Value& x, std::vector<int64_t> permutation);
  Value slice(const Value& x, std::vector<int64_t> start, std::vector<int64_t> limit,
              std::vector<int64_t> strides = {});
  Value concatenate(const std::vector<Value>& xs, int64_t dim);
  Value iota(TensorType type, int64_t dim);
  // Starts are rank-0 i32 values.
  Value dynamic_slice(const Value& x, const std::vector<Value>& starts, std::vector<int64_t> sizes);
  Value dynamic_update_slice(const Value& x, const Value& update, const std::vector<Value>& starts);
  // Rows of `table` ([rows, ...]) picked by `ids` (i32 [n]) → [n, ...].
  Value gather_rows(const Value& table, const Value& ids);

  Value compare(const Value& a, const Value& b, std::string_view direction);  // "LE", "LT", "EQ", … → i1
  Value select(const Value& pred, const Value& on_true, const Value& on_false);

  // x [batch…, m, k] · y [batch…, n, k]ᵀ-style contractions with explicit dimension numbers.
  Value dot_general(const Value& lhs, const Value& rhs, std::vector<int64_t> lhs_batch, std::vector<int64_t> rhs_batch,
                    std::vector<int64_t> lhs_contract, std::vector<int64_t> rhs_contract, TensorType result);

  // Reduces `dims` of x with add or max (init 0 or -inf).
  Value reduce_sum(const Value& x, std::vector<int64_t> dims);
  Value reduce_max(const Value& x, std::vector<int64_t> dims);

  // A statement of another dialect that produces one tensor, `%vN = <rhs>` (the recorder's IREE
  // dispatches, record/engine_kernels.cpp): the caller vouches for rhs and its type.
  Value statement(std::string_view rhs, TensorType result);
  // An `index` constant for such statements: its SSA name.
  std::string index_constant(int64_t v);

  void ret(const std::vector<Value>& results);
  // The whole func.func; valid once ret() was called.
  std::string text() const;

 private:
  Value reduce(const Value& x, std::vector<int64_t> dims, std::string_view combiner, std::string_view init);
  std::string fresh();
  std::string name_;
  std::vector<Value> args_;
  std::vector<std::string> arg_attrs_;
  std::vector<TensorType> results_;
  std::string body_;
  int next_ = 0;
  bool returned_ = false;
};

// `util.global private @"name" = #flow.parameter.named<"scope"::"key"> : tensor<…>`.
std::string global_declaration(std::string_view global, std::string_view scope, std::string_view key,
                               const TensorType& type);
// MLIR string literal contents: quotes, backslashes and control bytes escaped.
std::string escape(std::string_view s);

// ---- Packed encodings (src/stablehlo/dequantize.cpp) ----

// How a weight of `type` is declared when carried raw: dense float types as themselves
// (tensor<rows x cols x f16>), packed ones as their blocks' bytes, tensor<rows x blocks x block_bytes x i8>.
TensorType raw_type(GgmlType type, int64_t rows, int64_t cols);
// Whether dequantize() can express `type` (false → the exporter carries it as dense F32 instead).
bool can_dequantize(GgmlType type) noexcept;
// Emits ops turning `raw` (of raw_type(type, rows, cols), rows may be any leading count) into
// tensor<rows x cols x f32> with exactly the reference dequantizer's values (src/kernels/ref): the
// blocked form below, then one reshape (the flat form, for a contraction over many rows: prefill).
Value dequantize(FunctionBuilder& f, GgmlType type, const Value& raw);
// The same values as tensor<rows x blocks x inner... x f32>, the inner dims' row-major order being the
// element order inside a block (Q4_0 [2, 16], Q4_K [4, 2, 32], …: block_inner_dims). Built only from
// slice, broadcast_in_dim, splat constants, iota, elementwise ops (and, or, shifts, add, subtract,
// multiply, compare, select), convert and same-width bitcast_convert on the raw i8 bytes (Q5_K and
// IQ4_XS slice a reshape of the raw tensor itself): no reshape of computed values, no concatenate,
// gather or transpose, and few enough operands, so IREE fuses it into its consumer and keeps the
// weight packed. Packed types only (dense ones have no blocks).
Value dequantize_blocks(FunctionBuilder& f, GgmlType type, const Value& raw);
// The inner dims of dequantize_blocks' result for a packed `type` (InvalidArgument for others).
std::vector<int64_t> block_inner_dims(GgmlType type);
// W · x for one row of activations: W of raw_type(type, rows, cols), x tensor<cols x f32> →
// tensor<rows x f32>. x is reshaped to the blocked form's [blocks, inner...], broadcast over the rows,
// multiplied with the blocked dequantization and reduced over all dims but the rows in one reduce —
// the form IREE fuses into a single dispatch that reads the packed bytes and writes only [rows] f32.
// Dense F32/F16/BF16 weights: convert + dot_general (measured as fast as convert, multiply, reduce;
// both are one matvec dispatch reading the weight once).
Value matvec(FunctionBuilder& f, GgmlType type, const Value& raw, const Value& x);

}  // namespace skainet::stablehlo
