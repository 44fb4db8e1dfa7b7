// skainet::iree_plugin — our own declarations of IREE's executable plugin ABI, version 0.1
// (runtime/src/iree/hal/local/executable_plugin.h describes it; only the layouts and values are
// shared, so that this library needs no IREE header and links no IREE code).
//
// How IREE uses a plugin: it dlopens the library named by --executable_plugin, calls the one C
// symbol `iree_hal_executable_plugin_query`, receives a table (header, load, unload, resolve), loads
// the plugin once per device, and resolves each import a compiled executable names to a function
// pointer it then calls from its worker threads as fn(params, context, reserved), where params is
// the call's arguments packed into one struct in call order (see imports.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace skainet::iree_plugin::abi {

// The only version there is: 0.1. A host asking with a lower maximum gets nothing.
inline constexpr uint32_t kVersion0_1 = 0x00000001u;

// Status values are plain codes in a pointer-sized word (the "no full status" mode: a plugin that
// is not built against the IREE runtime may not return iree_status_t objects). 0 is OK.
using Status = void*;
enum class StatusCode : uintptr_t { Ok = 0, InvalidArgument = 3, NotFound = 5, ResourceExhausted = 8, Internal = 13 };
inline Status status(StatusCode c) noexcept { return reinterpret_cast<Status>(static_cast<uintptr_t>(c)); }

enum SanitizerKind : int32_t { kSanitizerNone = 0, kSanitizerAddress = 1, kSanitizerMemory = 2, kSanitizerThread = 3 };

// Mirrors iree_hal_executable_plugin_header_t (natural C layout).
struct Header {
  uint32_t version;
  const char* name;
  const char* description;
  uint32_t features;  // 0: a system plugin (may use libc, threads, TLS), no full status objects
  int32_t sanitizer;  // SanitizerKind
  uint64_t reserved[8];
};

// iree_hal_executable_plugin_allocator_t: the host's allocator, handed over at load.
using AllocatorCtl = Status (*)(void* self, int32_t command, const void* params, void** inout_ptr);
struct Allocator {
  void* self;
  AllocatorCtl ctl;
};

struct StringView {
  const char* data;
  size_t size;
};
struct StringPair {
  StringView key;
  StringView value;
};

// iree_hal_executable_plugin_environment_v0_t
struct Environment {
  Allocator host_allocator;
};

// iree_hal_executable_plugin_resolve_params_v0_t: `count` sorted symbol names (a leading '?' marks
// an optional one); entries of out_fn_ptrs already set were resolved by another plugin.
struct ResolveParams {
  size_t count;
  const char* const* symbol_names;
  void** out_fn_ptrs;
  void** out_fn_contexts;
};

// Resolution bit: some optional import was left unresolved.
inline constexpr uint32_t kResolutionMissingOptional = 1u << 0;

// iree_hal_executable_plugin_v0_t; the query returns a pointer to its first field.
struct PluginV0 {
  const Header* header;
  Status (*load)(const Environment* environment, size_t param_count, const StringPair* params, void** out_self);
  void (*unload)(void* self);
  Status (*resolve)(void* self, const ResolveParams* params, uint32_t* out_resolution);
};

// The signature of every import: 0 on success. `params` points at the packed argument struct.
using ImportFn = int (*)(void* params, void* context, void* reserved);

}  // namespace skainet::iree_plugin::abi

// The one exported symbol (C linkage, default visibility; everything else in the library is hidden).
extern "C" __attribute__((visibility("default"))) const skainet::iree_plugin::abi::Header**
iree_hal_executable_plugin_query(uint32_t max_version, void* reserved);
