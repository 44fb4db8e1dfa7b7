#include <cstdlib>

#include <fmt/format.h>

#include "skainet/io/irpa.hpp"
#include "skainet/model/record.hpp"
#include "skainet/io/stablehlo.hpp"

namespace skainet::record {
namespace {

std::string fallback_reason(const placement::Decision& d) {
  switch (d.form_reason) {
    case placement::FormReason::NoKernelDequantized:
      return fmt::format("no StableHLO dequantization for {}: carried as {}", type_name(d.file_type),
                         type_name(d.held_type));
    case placement::FormReason::UserForm:
      return fmt::format(
          "the plan's form '{}' ({}) asked for {}", d.form.to_string(),
          d.decided_by == placement::DecidedBy::PerTensorOverride ? "--override-tensor" : "--weight-form",
          type_name(d.held_type));
    default: return fmt::format("the plan holds it as {}", type_name(d.held_type));
  }
}

void write_text_atomically(const std::filesystem::path& path, const std::string& text) {
  base::AtomicFile f(path);
  f.require_space(text.size());
  f.write(text.data(), text.size());
  f.commit();
}

void write_irpa(const std::filesystem::path& gguf, const plan::MemoryPlan& plan, const std::filesystem::path& out,
                bool progress) {
  irpa::Writer w(out);
  for (const placement::Decision& d : plan.tensors) w.add_data(d.tensor, d.spec.bytes);
  std::optional<base::Progress> bar;
  if (progress) bar.emplace("export", w.data_bytes());
  w.start(bar ? &*bar : nullptr);
  const base::FileReader file(gguf);
  for (const placement::Decision& d : plan.tensors) {
    if (bar) bar->item(d.tensor);
    load::stream_held_bytes(file, d, [&](std::span<const std::byte> bytes) { w.write(bytes); });
  }
  w.commit();
  if (bar) bar->finish();
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

// The engine-kernel module's imports are resolved by the plugin the build puts beside `skainet`:
// SKAINET_IREE_PLUGIN names another; a test binary one folder below finds it one folder up.
std::filesystem::path plugin_path() {
  if (const char* env = std::getenv("SKAINET_IREE_PLUGIN"); env && *env) return std::filesystem::absolute(env);
  constexpr const char* kName = "libskainet_iree_plugin.so";
  const std::filesystem::path exe_dir = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  for (const std::filesystem::path& dir : {exe_dir, exe_dir.parent_path()})
    if (std::filesystem::exists(dir / kName)) return dir / kName;
  return exe_dir / kName;
}

}  // namespace

std::vector<std::string> compile_flags(KernelForm form) {
  // Without const-expr hoisting IREE keeps every weight as the parameter it is: hoisting would run
  // the unpacking once at load and hold the unpacked copy (6x the archive, measured).
  std::vector<std::string> flags{"--iree-opt-const-expr-hoisting=false"};
  // The engine-kernel dispatches call this CPU's kernels: the module is for the local CPU only.
  if (form == KernelForm::Engine)
    flags.insert(flags.begin(), {"--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                                 "--iree-llvmcpu-target-cpu=host"});
  return flags;
}

std::vector<std::string> llvm_cpu_compile_flags(KernelForm form) {
  if (form == KernelForm::Engine) return {};
  // On llvm-cpu these fuse each blocked dequantization into the one-row product that reads it
  // (docs/export.md); the SPIR-V backend fails on what aggressive fusion makes of the softmax, so
  // they are for the CPU only.
  return {"--iree-dispatch-creation-enable-aggressive-fusion=true", "--iree-llvmcpu-reassociate-fp-reductions=true"};
}

std::vector<std::string> run_flags(KernelForm form) {
  if (form != KernelForm::Engine) return {};
  return {fmt::format("--executable_plugin={}", plugin_path().string())};
}

std::string_view kernel_form_name(KernelForm f) noexcept {
  switch (f) {
    case KernelForm::Engine: return "engine";
    case KernelForm::StableHlo: return "stablehlo";
    case KernelForm::StableHloFlat: return "stablehlo-flat";
  }
  return "?";
}

std::optional<KernelForm> parse_kernel_form(std::string_view name) noexcept {
  if (name == "engine") return KernelForm::Engine;
  if (name == "stablehlo") return KernelForm::StableHlo;
  if (name == "stablehlo-flat") return KernelForm::StableHloFlat;
  return std::nullopt;
}

placement::Platform export_platform(KernelForm form) {
  placement::Platform p = placement::Platform::detect();
  if (form == KernelForm::Engine) return p;
  // IREE reads parameters itself: nothing is mapped by us, nothing repacked; the "kernels" are the
  // encodings the emitter can dequantize, so the resolver keeps exactly those packed.
  p.repack.clear();
  p.matmul.clear();
  for (uint32_t id = 0; id < 64; ++id)
    if (const auto t = find_type(id); t && stablehlo::can_dequantize(t->type))
      p.matmul.push_back({t->type, BlockOrder::RowMajor});
  return p;
}

// What to run next, with the paths of this export: compile with the flags it wrote (a StableHLO form
// for this CPU; the engine form's flags name it already), then call a function (its arguments are the
// signatures above).
std::string ExportReport::next_steps() const {
  const std::filesystem::path dir = mlir.parent_path(), vmfb = dir / "model.vmfb";
  const std::string llvm_cpu =
      kernels == KernelForm::Engine
          ? ""
          : fmt::format(" --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu $(cat {})",
                        (dir / "compile.llvm-cpu.flags").string());
  return fmt::format(
      "\nnext:\n  iree-compile {} $(cat {}){} -o {}\n  iree-run-module --module={} --parameters=model={} $(cat {}) "
      "--device=local-task --function=prefill --input=...\n  (other targets, and scripts/iree_generate.py that "
      "exports, compiles and generates in one: docs/export.md)\n",
      mlir.string(), (dir / "compile.flags").string(), llvm_cpu, vmfb.string(), vmfb.string(), params.string(),
      (dir / "run.flags").string());
}

std::string ExportReport::text() const {
  std::string s = fmt::format("skainet export (--kernels {})\n\nfunctions:\n", kernel_form_name(kernels));
  for (const std::string& sig : signatures) s += "  " + sig + "\n";
  s += fmt::format(
      "\nparameters: {} ({}), {} carried as stored{}; source GGUF {}\n", parameters,
      base::format_bytes(parameter_bytes), as_stored,
      reordered ? fmt::format(" ({} in the kernels' feed order, as the eager plan repacks them)", reordered) : "",
      base::format_bytes(gguf_bytes));
  s += fmt::format("mlir: {}\nparameters file: {}\n", mlir.string(), params.string());
  s += "\n" + memory.text();
  s += next_steps();
  if (fallbacks.empty()) {
    s += "\nfallbacks: none (every weight carried as stored)\n";
  } else {
    s += fmt::format("\nfallbacks ({}):\n", fallbacks.size());
    for (const ExportFallback& f : fallbacks)
      s += fmt::format("  {}: {} -> {}: {}\n", f.tensor, type_name(f.file_type), type_name(f.carried_type), f.reason);
  }
  return s;
}

namespace {

// What the export carries of each weight: counts, bytes, and every weight not carried as stored.
void count_parameters(const plan::MemoryPlan& plan, ExportReport& report) {
  for (const placement::Decision& d : plan.tensors) {
    ++report.parameters;
    report.parameter_bytes += d.spec.bytes;
    if (d.held_type == d.file_type) ++report.as_stored;
    if (d.held_order != BlockOrder::RowMajor) ++report.reordered;
    if (d.held_type != d.file_type)
      report.fallbacks.push_back({d.tensor, d.file_type, d.held_type, fallback_reason(d)});
  }
}

// IREE reads the GGUF in place (--params gguf), so every weight must be carried exactly as the file
// stores it, and in a type IREE's GGUF reader knows: it has no BF16.
void require_carried_as_stored(const plan::MemoryPlan& plan) {
  std::string problems;
  for (const placement::Decision& d : plan.tensors)
    if (d.held_type != d.file_type || d.held_order != BlockOrder::RowMajor || d.file_type == GgmlType::BF16)
      problems += fmt::format("\n  {}: {} held as {}{}", d.tensor, type_name(d.file_type), type_name(d.held_type),
                              d.held_order != BlockOrder::RowMajor
                                  ? fmt::format(" in the {} order", block_order_name(d.held_order))
                                  : std::string());
  if (!problems.empty())
    throw InvalidArgument(
        fmt::format("export --params gguf: these weights are not carried as the file stores them "
                    "(IREE would read the wrong bytes); use --params irpa, or --profile "
                    "low-memory (no repacks) or --kernels stablehlo:{}",
                    problems));
}

// Records the entry functions on shapes only (the same model code, under a recording context), then
// emits them; the module's signatures and run-time memory go into the report.
EmittedModule record_module(const plan::MemoryPlan& plan, const arch::ModelShape& shape, const ExportOptions& o,
                            ExportReport& report) {
  SymbolicScope scope;
  const load::LoadedModel weights = symbolic_weights(plan);
  load::KvCacheStore kv = load::KvCacheStore::recorded(scope, *plan.kv);
  model::Transformer llama(shape, model::TransformerWeights::bind(weights, shape), kv, 0);
  const int64_t seq = o.seq_len > 0 ? o.seq_len : std::min<int64_t>(plan.kv->n_ctx, 64);
  if (seq > static_cast<int64_t>(plan.kv->n_ctx))
    throw InvalidArgument(fmt::format("export: --seq-len {} exceeds the context of {} (--ctx)", seq, plan.kv->n_ctx));
  std::vector<Tape> tapes;
  if (o.prefill)
    tapes.push_back(
        record_entry(llama, weights, kv, scope, {.name = "prefill", .tokens = seq, .logits = model::Logits::All}));
  if (o.decode)
    tapes.push_back(record_entry(llama, weights, kv, scope,
                                 {.name = "decode", .tokens = 1, .dynamic_position = true, .cache_in = true}));
  std::vector<ComputeGraph> graphs;
  for (const Tape& t : tapes) graphs.push_back(ComputeGraph::from_tape(t));
  std::vector<const ComputeGraph*> functions;
  for (ComputeGraph& g : graphs) {
    LayoutAssignmentPass{.form = o.kernels}.run(g);
    functions.push_back(&g);
  }
  EmittedModule module = emit_module(functions, o.kernels);
  report.signatures = module.signatures;
  report.kernels = o.kernels;
  report.memory = module_memory(functions, report.parameter_bytes, o.kernels);
  return module;
}

// Writes the parameters (unless IREE reads the GGUF in place), the module, its flags and the report.
void write_outputs(const std::filesystem::path& gguf, const plan::MemoryPlan& plan, const ExportOptions& o,
                   const EmittedModule& module, ExportReport& report) {
  std::filesystem::create_directories(o.out_dir);
  report.mlir = o.out_dir / "model.mlir";
  if (o.params == ParamsMode::Irpa) {
    report.params = o.out_dir / "model.irpa";
    if (std::filesystem::exists(report.params) && std::filesystem::equivalent(report.params, gguf))
      throw InvalidArgument(fmt::format("export: {} is the input model; choose another -o", report.params.string()));
    write_irpa(gguf, plan, report.params, o.progress);
  } else {
    report.params = std::filesystem::absolute(gguf);
  }
  write_text_atomically(report.mlir, module.text);
  write_text_atomically(o.out_dir / "compile.flags", join_lines(compile_flags(o.kernels)));
  write_text_atomically(o.out_dir / "compile.llvm-cpu.flags", join_lines(llvm_cpu_compile_flags(o.kernels)));
  write_text_atomically(o.out_dir / "run.flags", join_lines(run_flags(o.kernels)));
  write_text_atomically(o.out_dir / "report.txt", report.text());
}

}  // namespace

ExportReport export_model(const std::filesystem::path& gguf, const ExportOptions& o) {
  if (!o.prefill && !o.decode) throw InvalidArgument("export: no entry function asked for (--entry prefill,decode)");
  const gguf::Header header = gguf::read_header(gguf);
  const arch::ModelShape shape = arch::ModelShape::from_header(header);
  if (!shape.family)
    throw Error(fmt::format("export {}: architecture '{}' is not supported (supported: {})", gguf.string(),
                            shape.architecture, arch::supported_architectures()));
  const plan::MemoryPlan plan = plan::make_plan(header, placement::MemoryProfile::preset(o.profile),
                                                export_platform(o.kernels), o.overrides, o.plan);
  if (!plan.kv) throw Error(fmt::format("export {}: the plan has no KV cache", gguf.string()));
  // The module's two cache arguments share one dense element type (and the plugin's attention one kv_type).
  const auto exported = [](GgmlType t) { return t == GgmlType::F16 || t == GgmlType::F32; };
  if (plan.kv->k_type != plan.kv->v_type || !exported(plan.kv->k_type))
    throw InvalidArgument(
        fmt::format("export: a KV cache of K {} and V {} is not exported (one type for both, f16 or f32)",
                    type_name(plan.kv->k_type), type_name(plan.kv->v_type)));

  ExportReport report;
  report.gguf_bytes = header.file_size;
  for (const plan::PlanWarning& w : plan.warnings) report.warnings.push_back(plan::describe(w));
  count_parameters(plan, report);
  if (o.params == ParamsMode::Gguf) require_carried_as_stored(plan);
  const EmittedModule module = record_module(plan, shape, o, report);
  // Everything decided and emitted: only now is anything written.
  write_outputs(gguf, plan, o, module, report);
  return report;
}

}  // namespace skainet::record
