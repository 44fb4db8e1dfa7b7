// `plan --svg`: the plan drawn in plain SVG 1.1 (rectangles, polylines, text), no scripts and no
// external references, so any browser or viewer shows it as written.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "skainet/model/plan.hpp"

namespace skainet::plan {
namespace {

using base::format_bytes;

constexpr int kWidth = 1200, kHeight = 900, kLeft = 80, kRight = 1160;

struct Part {
  const char* label;
  const char* colour;
  uint64_t bytes;
};
constexpr const char* kPinned = "#c0392b";
constexpr const char* kEvictable = "#27ae60";
constexpr const char* kSlotColours[] = {"#2c3e50", "#8e44ad", "#d35400", "#16a085", "#7f8c8d", "#2980b9"};

std::string escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 forbids most control characters even escaped.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

std::string text(double x, double y, std::string_view s, std::string_view extra = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\"{}{}>{}</text>\n", x, y, extra.empty() ? "" : " ", extra,
                     escape(s));
}

std::string rect(double x, double y, double w, double h, std::string_view fill, std::string_view title = "") {
  const std::string r =
      fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"", x, y, w, h, fill);
  if (title.empty()) return r + "/>\n";
  return fmt::format("{}><title>{}</title></rect>\n", r, escape(title));
}

// The stacked bar of the resident split, with its legend below.
std::string split_bar(const MemoryPlan& p, double top) {
  const ResidentSplit s = split(p);
  std::vector<Part> parts = {{"pinned weights (copied into memory)", kPinned, s.pinned},
                             {"evictable weights (mapped from the file)", kEvictable, s.evictable},
                             {"KV cache", "#2980b9", s.kv},
                             {"activation slabs", "#f39c12", s.slabs},
                             {"matmul scratch", "#8e44ad", s.scratch}};
  if (s.prompt_cache > 0) parts.push_back({"prompt cache (--cache-ram)", "#16a085", s.prompt_cache});
  const uint64_t scale = std::max<uint64_t>({s.total(), p.budget.value_or(0), 1});
  const double width = kRight - kLeft;
  std::string out = text(kLeft, top - 10, fmt::format("Resident memory: {}", format_bytes(s.total())),
                         "font-size=\"16\" font-weight=\"bold\"");
  double x = kLeft;
  for (const Part& part : parts) {
    const double w = width * static_cast<double>(part.bytes) / static_cast<double>(scale);
    if (w > 0) out += rect(x, top, w, 50, part.colour, fmt::format("{}: {}", part.label, format_bytes(part.bytes)));
    x += w;
  }
  out += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{}\" height=\"50\" fill=\"none\" stroke=\"#333\"/>\n", kLeft,
                     top, kRight - kLeft);
  if (p.budget) {
    const double bx = kLeft + width * static_cast<double>(*p.budget) / static_cast<double>(scale);
    out += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#000\" stroke-width=\"3\" "
        "stroke-dasharray=\"6,4\"/>\n",
        bx, top - 6, top + 56);
    // Right-aligned to the marker near the right edge, so it stays on the canvas.
    const bool near_edge = bx > kRight - 240;
    out += text(near_edge ? bx - 6 : bx + 4, top - 10,
                fmt::format("budget {}: {}", format_bytes(*p.budget), p.fits ? "fits" : "does NOT fit"),
                near_edge ? "font-size=\"13\" text-anchor=\"end\"" : "font-size=\"13\"");
  }
  // Legend: two rows of swatches.
  for (size_t i = 0; i < parts.size(); ++i) {
    const double lx = kLeft + static_cast<double>(i % 3) * 360, ly = top + 70 + static_cast<double>(i / 3) * 22;
    out += rect(lx, ly, 14, 14, parts[i].colour);
    out +=
        text(lx + 20, ly + 12, fmt::format("{} {}", parts[i].label, format_bytes(parts[i].bytes)), "font-size=\"13\"");
  }
  return out;
}

// One column per layer (and one for the tensors outside the layers), pinned below evictable.
std::string layer_strip(const MemoryPlan& p, double top, double height) {
  const std::vector<LayerGroup> groups = group_by_layer(p);
  std::string out =
      text(kLeft, top - 10, "Weights by layer (pinned / evictable)", "font-size=\"16\" font-weight=\"bold\"");
  if (groups.empty()) return out;
  uint64_t largest = 1;
  for (const auto& g : groups) largest = std::max(largest, g.bytes);
  const double slot = (kRight - kLeft) / static_cast<double>(groups.size());
  const double bar = std::max(1.0, slot * 0.8);
  for (size_t i = 0; i < groups.size(); ++i) {
    const LayerGroup& g = groups[i];
    const double x = kLeft + slot * static_cast<double>(i);
    const double hp = height * static_cast<double>(g.pinned) / static_cast<double>(largest);
    const double he = height * static_cast<double>(g.evictable) / static_cast<double>(largest);
    const std::string title = fmt::format("{}: {} (pinned {}, evictable {})", g.name(), format_bytes(g.bytes),
                                          format_bytes(g.pinned), format_bytes(g.evictable));
    if (hp > 0) out += rect(x, top + height - hp, bar, hp, kPinned, title);
    if (he > 0) out += rect(x, top + height - hp - he, bar, he, kEvictable, title);
    const size_t every = std::max<size_t>(1, groups.size() / 24);
    if (i % every == 0 || !g.layer)
      out += text(x + bar / 2, top + height + 16, g.layer ? std::to_string(*g.layer) : "other",
                  "font-size=\"11\" text-anchor=\"middle\"");
  }
  out += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#333\"/>\n", kLeft,
                     top + height, kRight);
  out += text(kLeft - 8, top + 10, format_bytes(largest), "font-size=\"11\" text-anchor=\"end\"");
  return out;
}

// Resident memory against the context (log scale), one line per slot count.
std::string context_chart(const MemoryPlan& p, const std::vector<ResidentPoint>& curve, double top, double height) {
  std::string out =
      text(kLeft, top - 10, "Resident memory against --ctx, for each --slots", "font-size=\"16\" font-weight=\"bold\"");
  if (curve.empty()) return out + text(kLeft, top + 20, "no model: no KV cache to price", "font-size=\"13\"");
  uint32_t lo = UINT32_MAX, hi = 0;
  uint64_t top_bytes = p.budget.value_or(0);
  for (const auto& pt : curve) {
    lo = std::min(lo, pt.n_ctx);
    hi = std::max(hi, pt.n_ctx);
    top_bytes = std::max(top_bytes, pt.resident);
  }
  top_bytes = std::max<uint64_t>(top_bytes, 1);
  const double span = hi > lo ? std::log2(static_cast<double>(hi) / lo) : 1.0;
  const double width = kRight - kLeft - 160;  // room on the right for the legend
  auto px = [&](uint32_t n_ctx) {
    return kLeft + width * (hi > lo ? std::log2(static_cast<double>(n_ctx) / lo) / span : 0.5);
  };
  auto py = [&](uint64_t bytes) {
    return top + height - height * static_cast<double>(bytes) / static_cast<double>(top_bytes);
  };
  // Axes, with a tick per context and four on the memory axis.
  out += fmt::format("<polyline points=\"{0},{1:.1f} {0},{2:.1f} {3:.1f},{2:.1f}\" fill=\"none\" stroke=\"#333\"/>\n",
                     kLeft, top, top + height, kLeft + width);
  std::map<uint32_t, bool> ticks;
  for (const auto& pt : curve) ticks[pt.n_ctx] = true;
  for (const auto& [n_ctx, _] : ticks)
    out += text(px(n_ctx), top + height + 16, std::to_string(n_ctx), "font-size=\"11\" text-anchor=\"middle\"");
  out +=
      text(kLeft + width / 2, top + height + 34, "context (tokens, --ctx)", "font-size=\"12\" text-anchor=\"middle\"");
  out += text(kLeft - 6, top + height + 4, "0", "font-size=\"11\" text-anchor=\"end\"");
  for (int i = 1; i <= 4; ++i) {
    const uint64_t b = top_bytes / 4 * static_cast<uint64_t>(i);
    out += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n", kLeft,
                       py(b), kLeft + width);
    out += text(kLeft - 6, py(b) + 4, format_bytes(b), "font-size=\"11\" text-anchor=\"end\"");
  }
  if (p.budget) {
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#000\" stroke-width=\"2\" "
        "stroke-dasharray=\"6,4\"/>\n",
        kLeft, py(*p.budget), kLeft + width);
    out += text(kLeft + width - 4, py(*p.budget) - 6, fmt::format("budget {}", format_bytes(*p.budget)),
                "font-size=\"12\" text-anchor=\"end\"");
  }
  std::map<uint32_t, std::vector<const ResidentPoint*>> by_slots;
  for (const auto& pt : curve) by_slots[pt.slots].push_back(&pt);
  size_t line = 0;
  for (const auto& [slots, points] : by_slots) {
    const char* colour = kSlotColours[line % std::size(kSlotColours)];
    std::string coords;
    for (const ResidentPoint* pt : points) coords += fmt::format("{:.1f},{:.1f} ", px(pt->n_ctx), py(pt->resident));
    out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"3\"/>\n", coords, colour);
    for (const ResidentPoint* pt : points)
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{}</title></circle>\n",
                         px(pt->n_ctx), py(pt->resident), colour,
                         escape(fmt::format("--ctx {} --slots {}: {}", pt->n_ctx, slots, format_bytes(pt->resident))));
    const double ly = top + 10 + 22 * static_cast<double>(line);
    out += rect(kLeft + width + 20, ly, 14, 14, colour);
    out +=
        text(kLeft + width + 40, ly + 12, fmt::format("{} slot{}", slots, slots == 1 ? "" : "s"), "font-size=\"13\"");
    ++line;
  }
  // The plan itself, marked.
  if (p.kv) {
    out += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"8\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\"/>\n",
        px(p.kv->n_ctx), py(p.totals.resident()));
    const double ly = top + 10 + 22 * static_cast<double>(line);
    out += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"7\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\"/>\n",
        kLeft + width + 27, ly + 7);
    out += text(kLeft + width + 40, ly + 12, "this plan", "font-size=\"13\"");
  }
  return out;
}

}  // namespace

std::string render_svg(const MemoryPlan& p, const std::vector<ResidentPoint>& curve) {
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\">\n",
      kWidth, kHeight);
  out += rect(0, 0, kWidth, kHeight, "#ffffff");
  std::string file = p.file;
  if (const size_t slash = file.rfind('/'); slash != std::string::npos) file = file.substr(slash + 1);
  out += text(kLeft, 32, fmt::format("skainet plan: {} (profile {})", file, p.profile),
              "font-size=\"20\" font-weight=\"bold\"");
  const std::vector<std::string> lines = summary_lines(p);
  if (!lines.empty()) {
    std::string verdict = lines.front();
    if (verdict.starts_with("verdict   ")) verdict = verdict.substr(10);
    if (!verdict.empty() && verdict.back() == '\n') verdict.pop_back();
    out += text(kLeft, 56, verdict, p.fits ? "font-size=\"14\"" : "font-size=\"14\" fill=\"#c0392b\"");
  }
  out += split_bar(p, 100);
  out += layer_strip(p, 260, 160);
  out += context_chart(p, curve, 510, 330);
  out += "</svg>\n";
  return out;
}

}  // namespace skainet::plan
