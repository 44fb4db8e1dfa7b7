// llama.cpp's command-line habits, in one place: its multi-letter short flags (-ngl, -cnv, -ctk, ...),
// which CLI11 would split into single letters (`-ngl 99` read as `-n gl`), mapped to our long names
// before CLI11 sees them; its flags that change nothing here (-fa, -b, --mlock, -ngl, ...) accepted
// with a note and those that would change the answer and are not implemented (--mirostat, --typical,
// ...) refused by name, both in kLlamaFlags; --no-mmap mapped onto the plan's options; the
// model given as -m or as a positional in every command that reads one.
//
//   cli::llama_long_name("-ngl") == "--n-gpu-layers"            // read_command_line's rewriting
//   CompatFlags compat;  cli::add_placement_compat(cmd, compat);
//   cli::apply_placement_compat(compat, placement);                         // after parsing: the notes
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "placement_args.hpp"

namespace skainet::cli {

// llama.cpp's multi-letter short spellings and the long options they mean here.
struct LlamaAlias {
  std::string_view llama;
  std::string_view ours;
};
inline constexpr LlamaAlias kLlamaAliases[] = {
    {"-cnv", "--conversation"}, {"-sys", "--system-prompt"},   {"-ctk", "--cache-type-k"},
    {"-ctv", "--cache-type-v"}, {"-ot", "--override-tensor"},  {"-no-cnv", "--no-conversation"},
    {"-np", "--parallel"},      {"-md", "--spec-draft-model"}, {"-jf", "--json-schema-file"},
    {"-cram", "--cache-ram"},
};

// What skainet does with a llama.cpp flag that has no option of its own here.
enum class LlamaAnswer : uint8_t {
  Note,    // changes nothing here: accepted by the commands that plan a model, a line on stderr says why
  Refuse,  // would change the answer and is not implemented: exit code 2 naming it, never ignored
};
// The value llama.cpp's flag takes: how CLI11 reads a Note entry (a Refuse entry is refused before).
enum class LlamaValue : uint8_t {
  None,
  One,
  Switch,  // optional, joined to the flag when it is one of kSwitchValues (`-fa on`, llama-bench's `-fa 1`)
};
inline constexpr std::string_view kSwitchValues[] = {"on", "off", "auto", "0", "1"};

struct LlamaFlag {
  std::string_view names;  // llama.cpp's spellings, comma-separated; the first is the one the note names
  LlamaValue value;
  LlamaAnswer answer;
  std::string_view meaning;  // Note: what the flag means here. Refuse: what is not implemented.
};
namespace llama_table {  // the enumerators spelled short for the table, without leaking into skainet::cli
using enum LlamaValue;
using enum LlamaAnswer;
inline constexpr std::string_view kNoBatch =
    "the prompt is processed --prefill-chunk tokens per step (the plan's: skainet plan shows it); this flag "
    "changes nothing";
inline constexpr std::string_view kNotSampled =
    "a sampler skainet does not have (it has --temp, --top-k, --top-p, --min-p, --repeat-penalty, "
    "--repeat-last-n, --presence-penalty, --frequency-penalty)";
inline constexpr std::string_view kNotInteractive =
    "interactive mode without a chat template (a conversation, -cnv or skainet chat, renders each turn with the "
    "template)";
inline constexpr std::string_view kNoRope = "RoPE settings other than the model's own";
inline constexpr std::string_view kNoDownload =
    "downloading models: a model is a GGUF file, given by its path (-m FILE.gguf)";
inline constexpr LlamaFlag kFlags[] = {
    {"-fa,--flash-attn", Switch, Note,
     "attention is one fused CPU kernel here (scores, softmax and values per KV-head group, no score matrix "
     "kept), whatever this flag says; a quantized V cache (-ctv q8_0) needs no flag"},
    {"-b,--batch-size", One, Note, kNoBatch},
    {"-ub,--ubatch-size", One, Note, kNoBatch},
    {"--mlock", None, Note,
     "no page is locked (mlock(2)): the weights the plan copies live in this process's memory, the others "
     "are served from the file's mapping (--no-mmap or --profile in-memory: all copied)"},
    {"-ngl,--n-gpu-layers,--gpu-layers", One, Note, "CPU only: ignored"},
    {"--log-disable", None, Note, "stderr holds only warnings and the stats lines here (2>/dev/null hides them)"},
    {"--color,-co", Switch, Note, "the output is never coloured here"},
    {"-v,--verbose", None, Note, "nothing more is printed here (skainet plan shows where every tensor lives)"},
    {"--verbose-prompt", None, Note, "the prompt's tokens are not printed here (skainet tokenize -p TEXT shows them)"},
    {"--mirostat", One, Refuse, kNotSampled},
    {"--mirostat-lr", One, Refuse, kNotSampled},
    {"--mirostat-ent", One, Refuse, kNotSampled},
    {"--typical", One, Refuse, kNotSampled},
    {"--top-nsigma", One, Refuse, kNotSampled},
    {"--xtc-probability", One, Refuse, kNotSampled},
    {"--xtc-threshold", One, Refuse, kNotSampled},
    {"--dry-multiplier", One, Refuse, kNotSampled},
    {"-l,--logit-bias", One, Refuse, "logit biases"},
    {"--in-prefix", One, Refuse, kNotInteractive},
    {"--in-suffix", One, Refuse, kNotInteractive},
    {"-i,--interactive", None, Refuse, kNotInteractive},
    {"-if,--interactive-first", None, Refuse, kNotInteractive},
    {"--rope-freq-base", One, Refuse, kNoRope},
    {"--rope-freq-scale", One, Refuse, kNoRope},
    {"--rope-scaling", One, Refuse, kNoRope},
    {"--lora", One, Refuse, "LoRA adapters"},
    {"--keep", One, Refuse, "keeping prompt tokens when the context fills: generation stops at a full context"},
    {"-to,--timeout", One, Refuse, "server read and write timeouts"},
    {"-hf,--hf-repo", One, Refuse, kNoDownload},
    {"-hff,--hf-file", One, Refuse, kNoDownload},
    {"-mu,--model-url", One, Refuse, kNoDownload},
};
}  // namespace llama_table
inline constexpr auto& kLlamaFlags = llama_table::kFlags;

// The entry one of whose spellings is `word` (exactly as typed), or null.
const LlamaFlag* find_llama_flag(std::string_view word);
// The names of an entry, split at the commas (inline: the tests walk the table too).
inline std::vector<std::string_view> llama_flag_names(const LlamaFlag& flag) {
  std::vector<std::string_view> names;
  for (std::string_view rest = flag.names; !rest.empty();) {
    const size_t comma = std::min(rest.find(','), rest.size());
    names.push_back(rest.substr(0, comma));
    rest.remove_prefix(std::min(comma + 1, rest.size()));
  }
  return names;
}

// The long name CLI11 knows for a llama.cpp spelling it would split into single letters: an alias, or
// a Note entry's multi-letter short name (`-fa`: --flash-attn); empty for any other word. The command
// line is rewritten with it before CLI11 parses (command_line.hpp).
std::string_view llama_long_name(std::string_view word);
// One of kSwitchValues, or a comma-separated list of them (llama-bench's `-fa 0,1`): joined to its switch (`-fa on`:
// `--flash-attn=on`), since CLI11 reads a flag, which never takes the next word, so `-fa model.gguf` leaves the model
// where it was.
bool is_switch_value(std::string_view word);

// --no-mmap and kLlamaFlags' notes for the commands that plan a model (-ctk/-ctv are PlacementArgs').
struct CompatFlags {
  bool no_mmap = false;
  struct Noted {
    const LlamaFlag* flag;
    CLI::Option* option;
  };
  std::vector<Noted> noted;  // the Note entries this command offers (none that it has an option of its own for)
};
void add_placement_compat(CLI::App* cmd, CompatFlags& flags);
// Folds them into the plan's options; CLI::ValidationError (exit code 2) for a combination the plan
// cannot honour (--no-mmap with a mapped form) or a switch value that is not one of kSwitchValues. Prints each given
// Note flag's note ("skainet: -ngl 99: CPU only: ignored").
void apply_placement_compat(const CompatFlags& flags, PlacementArgs& placement);

// -m/--model and a MODEL positional writing the same string; call require_model after parsing.
void add_model_option(CLI::App* cmd, std::string& model, std::string_view help = "GGUF model");
void require_model(const std::string& model);  // CLI::RequiredError when neither was given

// run and chat: -m/--model, and MODEL [PROMPT] as positionals, so Ollama's `run model.gguf "prompt"`
// works too; with -m, the one positional is the prompt.
struct ModelAndPrompt {
  std::string flag_model, first, second;
  CLI::Option* flag = nullptr;
  CLI::Option* first_option = nullptr;
  CLI::Option* second_option = nullptr;

  void add_to(CLI::App* cmd, std::string_view prompt_help);
  // After parsing: the model into `model` (require_model next); a positional prompt into `prompt`,
  // returning true. CLI::ValidationError (exit code 2) for a prompt given twice (`prompt_given`: -p or
  // -f was) or two positionals beside -m.
  bool resolve(std::string& model, std::string& prompt, bool prompt_given) const;
};

// llama.cpp's -e: \n \r \t \a \b \f \v \\ \' \" \? and \xHH become the characters; others stay as written.
std::string process_escapes(std::string_view text);

}  // namespace skainet::cli
