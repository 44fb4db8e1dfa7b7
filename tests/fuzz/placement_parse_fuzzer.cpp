// Fuzz target: the placement parsers the command line feeds: WeightForm::parse (--weight-form),
// TensorOverride::parse (--override-tensor, an RE2 pattern) and placement::parse_bytes (--budget),
// each on the whole input as text. InvalidArgument is their documented answer to bad text. What
// parses must hold up: a form written with to_string() parses back to the same form, an override's
// pattern can be searched in tensor names (and in the input itself), and a size is what its number
// times its unit says.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "skainet/model/placement.hpp"

namespace skainet::fuzz {
namespace {

bool same_form(const placement::WeightForm& a, const placement::WeightForm& b) {
  // requantize_to means something only for Requantize.
  return a.encoding == b.encoding && a.order == b.order && a.residency == b.residency &&
         (a.encoding != placement::EncodingRequest::Requantize || a.requantize_to == b.requantize_to);
}

// The value parse_bytes should give, from strtod and the unit, or a negative number when unsure.
double expected_bytes(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  std::string unit(end);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const double k = unit.starts_with("K")   ? 1024.0
                   : unit.starts_with("M") ? 1048576.0
                   : unit.starts_with("G") ? 1073741824.0
                   : unit.starts_with("T") ? 1099511627776.0
                                           : 1.0;
  return v * k;
}

}  // namespace

int placement_parse_one_input(const uint8_t* data, size_t size) {
  const std::string_view text = as_text(data, size);
  try {
    const placement::WeightForm f = placement::WeightForm::parse(text);
    if (!same_form(placement::WeightForm::parse(f.to_string()), f))
      fail("placement_parse_fuzzer", "WeightForm::parse(to_string()) is another form");
  } catch (const InvalidArgument&) {
  }
  try {
    const placement::TensorOverride o = placement::TensorOverride::parse(text);
    for (std::string_view name : {"blk.0.ffn_down.weight", "token_embd.weight", "output_norm.weight", ""})
      (void)o.matches(name);
    (void)o.matches(text);
  } catch (const InvalidArgument&) {
  }
  try {
    const uint64_t bytes = placement::parse_bytes(text);
    const double want = expected_bytes(std::string(text));
    // The double the number parses to is exact only to 53 bits.
    if (want >= 0 && std::fabs(static_cast<double>(bytes) - want) > 1.0 + want * 1e-15)
      fail("placement_parse_fuzzer", "parse_bytes gave another number than the text says");
  } catch (const InvalidArgument&) {
  }
  return 0;
}

std::vector<Bytes> placement_parse_seeds() {
  const std::string_view texts[] = {
      "f32,heap",
      "keep",
      "q8_0,heap,kernel-feed",
      "as-stored, mapped ,Q4_K",
      "dequantize,memory,,",
      "ffn_down=f32,heap",
      "blk\\.[0-9]+\\.attn_(q|k|v)\\.weight=q8_0,mapped",
      "(a|b)*x=keep",
      "^token_embd=f32",
      "2G",
      "512M",
      "1.5GiB",
      "4096",
      "0.5kb",
      "1e3T",
      "16E",
      "nan",
      "-1",
      "18446744073709551615",
      "1e19",
  };
  std::vector<Bytes> seeds;
  for (std::string_view t : texts) seeds.push_back(bytes_of(t));
  return seeds;
}

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::placement_parse_one_input, skainet::fuzz::placement_parse_seeds)
