// `skainet quantize IN.gguf OUT.gguf TYPE`: re-encode a model's weights, like llama-quantize.
#include <fmt/format.h>

#include "cli.hpp"

namespace skainet::cli {

Subcommand add_quantize(CLI::App& app) {
  struct Options {
    std::string in, out, type;
    unsigned threads = 0;
    bool verbose = false, quiet = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("quantize", "Re-encode every matmul weight of a GGUF model to TYPE (norms stay F32)");
  sub->add_option("IN", o->in, "Input GGUF file")->required();
  sub->add_option("OUT", o->out, "Output GGUF file (written atomically)")->required();
  sub->add_option("TYPE", o->type, convert::scheme_names())->required();
  sub->add_option("--threads", o->threads, "Worker threads (0: all cores)")->capture_default_str();
  sub->add_flag("--verbose,-v", o->verbose, "List every tensor's type decision");
  sub->add_flag("-q,--quiet", o->quiet, "No progress on stderr (on a terminal a bar, piped a line every 5 s)");
  return {sub, [o] {
            convert::QuantizeOptions q;
            q.scheme = convert::parse_scheme(o->type);
            q.threads = o->threads;
            q.progress = !o->quiet;
            const convert::Report r = convert::quantize(o->in, o->out, q);
            fmt::print("quantized {} -> {} as {} ({}): {} tensors, {} -> {} in {:.2f} s\n", o->in, r.output.string(),
                       q.scheme.name, static_cast<uint32_t>(q.scheme.file_type), r.tensors.size(),
                       base::format_bytes(r.bytes_read_from), base::format_bytes(r.bytes_written), r.seconds);
            print_report(r, o->verbose);
            return 0;
          }};
}

}  // namespace skainet::cli
