// skainet::iree_plugin — the plugin's entry points: query, load, unload, resolve, and the table of
// import names. A system plugin (not a standalone one): the imports use the C++ runtime, allocate
// and keep per-thread buffers, which IREE allows for a library it loads with dlopen.
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "iree_plugin/imports.hpp"
#include "iree_plugin/plugin_abi.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::iree_plugin {
namespace {

struct Import {
  std::string_view name;
  abi::ImportFn fn;
};

// The names the exporter's modules declare (func.func private @<name> ... {llvm.bareptr = true}).
constexpr Import kImports[] = {
    {kernels::imports::kAttention.name, &attention},          {kernels::imports::kGatherRows.name, &gather_rows},
    {kernels::imports::kMatmulPrepare.name, &matmul_prepare}, {kernels::imports::kMatmulRows.name, &matmul_rows},
    {kernels::imports::kRepackRows.name, &repack_rows},
};

abi::Status load(const abi::Environment*, size_t, const abi::StringPair*, void** out_self) {
  // Pick the kernels now, on the thread that loads the plugin: best_table() asks Linux for the AMX
  // tile state (ARCH_REQ_XCOMP_PERM), a permission of the whole process, so IREE's worker threads
  // may run tile instructions afterwards (and any thread created later inherits it).
  const kernels::KernelTable& t = table();
  if (detail::verbose()) std::fprintf(stderr, "skainet_iree_plugin: kernels '%s'\n", t.name);
  *out_self = nullptr;  // no state: the imports take everything from their arguments
  return abi::status(abi::StatusCode::Ok);
}

void unload(void*) {}

abi::Status resolve(void*, const abi::ResolveParams* params, uint32_t* out_resolution) {
  *out_resolution = 0;
  bool missing_required = false;
  for (size_t i = 0; i < params->count; ++i) {
    if (params->out_fn_ptrs[i]) continue;  // another plugin already provides it
    std::string_view name = params->symbol_names[i];
    const bool optional = !name.empty() && name.front() == '?';
    if (optional) name.remove_prefix(1);
    const Import* found = nullptr;
    for (const Import& im : kImports)
      if (im.name == name) found = &im;
    if (found) {
      params->out_fn_ptrs[i] = reinterpret_cast<void*>(found->fn);
      params->out_fn_contexts[i] = nullptr;
    } else if (optional) {
      *out_resolution |= abi::kResolutionMissingOptional;
    } else {
      missing_required = true;  // perhaps another plugin has it: IREE asks each in turn
    }
  }
  return abi::status(missing_required ? abi::StatusCode::NotFound : abi::StatusCode::Ok);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SKAINET_PLUGIN_SANITIZER abi::kSanitizerAddress
#elif __has_feature(thread_sanitizer)
#define SKAINET_PLUGIN_SANITIZER abi::kSanitizerThread
#endif
#endif
#if !defined(SKAINET_PLUGIN_SANITIZER) && defined(__SANITIZE_ADDRESS__)
#define SKAINET_PLUGIN_SANITIZER abi::kSanitizerAddress
#endif
#if !defined(SKAINET_PLUGIN_SANITIZER) && defined(__SANITIZE_THREAD__)
#define SKAINET_PLUGIN_SANITIZER abi::kSanitizerThread
#endif
#if !defined(SKAINET_PLUGIN_SANITIZER)
#define SKAINET_PLUGIN_SANITIZER abi::kSanitizerNone
#endif

const abi::Header kHeader = {
    .version = abi::kVersion0_1,
    .name = "skainet",
    .description = "SKaiNET-cpp kernels (matmul, attention, gather) for IREE llvm-cpu modules",
    .features = 0,
    .sanitizer = SKAINET_PLUGIN_SANITIZER,
    .reserved = {},
};
const abi::PluginV0 kPlugin = {.header = &kHeader, .load = &load, .unload = &unload, .resolve = &resolve};

}  // namespace

const kernels::KernelTable& table() noexcept { return kernels::best_table(); }

namespace detail {

bool verbose() noexcept {
  static const bool on = [] {
    const char* v = std::getenv("SKAINET_IREE_PLUGIN_VERBOSE");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

Tensor borrowed(std::byte* data, const Shape& shape, GgmlType type, BlockOrder order, bool writable,
                const char* origin) {
  require(data != nullptr, "null binding");
  const uint64_t bytes = contiguous_bytes(shape, type);
  return Tensor(Storage::borrow(data, bytes, writable, origin), shape, type, 0, order);
}

GgmlType type_of(int64_t id) {
  require(id >= 0 && id <= UINT32_MAX, "type id out of range");
  const auto traits = find_type(static_cast<uint32_t>(id));
  require(traits.has_value(), "unknown GGML type id");
  return traits->type;
}

BlockOrder order_of(int64_t id) {
  require(id == static_cast<int64_t>(BlockOrder::RowMajor) || id == static_cast<int64_t>(BlockOrder::Interleaved16),
          "unknown block order");
  return static_cast<BlockOrder>(id);
}

}  // namespace detail
}  // namespace skainet::iree_plugin

extern "C" const skainet::iree_plugin::abi::Header** iree_hal_executable_plugin_query(uint32_t max_version,
                                                                                      void* reserved) {
  using namespace skainet::iree_plugin;
  // The host gets a pointer to the table's first field (the header pointer), as the C ABI has it.
  if (max_version < abi::kVersion0_1) return nullptr;
  return const_cast<const abi::Header**>(&kPlugin.header);
}
