// skainet::irpa — IREE parameter archives (.irpa): a strict index reader and a streaming, atomic
// writer, byte-compatible with IREE's own builder (iree-convert-parameters). Layout: docs/irpa.md.
//
//   irpa::Writer w("model.irpa");                        // declare every entry first...
//   w.add_data("tok_embd.weight", 131072);
//   w.add_data("output_norm.weight", 256);
//   base::Progress bar("export", w.data_bytes());
//   w.start(&bar);                                       // ...header, entry table and names are laid out
//   w.write(chunk);                                      // then bytes in declaration order, any chunking
//   w.commit();                                          // every byte supplied? fsync + rename
//
//   irpa::ArchiveFile a("model.irpa");                   // reads and validates the index only
//   for (const irpa::Entry& e : a.index().entries) std::cout << e.name << ' ' << e.length << '\n';
//   std::vector<std::byte> bytes = a.read(*a.index().find("output_norm.weight"));
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "skainet/core/base.hpp"

namespace skainet::irpa {

inline constexpr uint32_t kMagic = 0x41505249;    // "IRPA" read as a little-endian uint32
inline constexpr uint64_t kHeaderSize = 88;       // the v0 header, packed
inline constexpr uint64_t kEntryHeaderSize = 60;  // common prefix of every entry record
inline constexpr uint64_t kDataEntrySize = 76;
inline constexpr uint64_t kSplatEntrySize = 85;
inline constexpr uint64_t kEntryAlignment = 16;   // entry records (and the table) start on 16 bytes
inline constexpr uint64_t kDataAlignment = 64;    // what IREE's builder asks for each data entry
inline constexpr uint64_t kFileAlignment = 4096;  // the file is padded to a whole page

// Entry record types as the format numbers them.
enum class EntryType : uint32_t { Skip = 0, Splat = 1, Data = 2, External = 3 };
std::string_view entry_type_name(EntryType t) noexcept;

// One parameter. Data entries live in the file; splat entries are a repeated pattern, no storage.
struct Entry {
  std::string name;
  EntryType type = EntryType::Data;     // Data or Splat (Skip records are dropped, External refused)
  uint64_t length = 0;                  // bytes of the value
  uint64_t file_offset = 0;             // Data: absolute offset of the first byte
  uint64_t minimum_alignment = 0;       // as stored; 0 = unspecified
  std::vector<std::byte> metadata;      // opaque bytes, usually empty
  std::array<std::byte, 16> pattern{};  // Splat: the first pattern_length bytes repeat
  uint8_t pattern_length = 0;
  uint64_t record_offset = 0;  // where the entry record starts in the file (for messages)
};

struct Range {
  uint64_t offset = 0;  // absolute file offset (the file stores it relative to the header, at 0)
  uint64_t length = 0;
};

struct Archive {
  std::filesystem::path path;
  uint64_t file_size = 0;
  uint16_t version_major = 0, version_minor = 0;
  Range entry_segment, metadata_segment, storage_segment;
  uint64_t skipped_entries = 0;         // Skip records: validated, then ignored as IREE does
  std::vector<Entry> entries;           // in table order
  base::StringMap<size_t> entry_index;  // name -> index in entries (looked up without allocating)

  const Entry* find(std::string_view name) const noexcept;
  uint64_t data_bytes() const noexcept;  // sum of the entries' lengths (what iree-dump-parameters totals)
};

// What is wrong with a malformed archive, as data: tests assert on the kind, people read the message.
enum class FormatErrorKind : uint8_t {
  Truncated,  // the file ends inside the header, or a segment/record/value lies past its end
  BadMagic,
  UnsupportedVersion,    // major != 0, or a minor newer than 0
  BadHeader,             // header_size not 88, reserved flags set, a misaligned entry table
  LinkedArchive,         // next_header_offset != 0: concatenated archives are not read
  OutOfRange,            // a reference outside its segment, or an offset/length sum that overflows
  BadEntry,              // an entry record too small for its type, or a count the table cannot hold
  UnsupportedEntryType,  // External (data in another file) or an unknown type
  BadSplat,              // pattern length not 1, 2, 4, 8 or 16, or not dividing the entry's length
  Misaligned,            // minimum_alignment not a power of two, or data not on it
  InvalidName,           // empty, or longer than ReadOptions::max_name_bytes
  DuplicateName,
  TooLarge,  // entry count or metadata blob beyond ReadOptions' limits
};
std::string_view error_kind_name(FormatErrorKind k) noexcept;

class FormatError : public Error {
 public:
  FormatError(FormatErrorKind kind, std::string message) : Error(std::move(message)), kind_(kind) {}
  FormatErrorKind kind() const noexcept { return kind_; }

 private:
  FormatErrorKind kind_;
};

// Sanity limits that no real archive comes near, so a huge (sparse) file cannot make the reader
// allocate gigabytes.
struct ReadOptions {
  uint64_t max_entries = 1u << 20;
  uint64_t max_name_bytes = 65536;
  uint64_t max_metadata_bytes = 16u << 20;  // per entry
};

// Reads and validates the header and every entry record, name and metadata blob; never reads
// parameter data. Throws FormatError for malformed input, IoError if the OS refuses.
Archive read_index(const std::filesystem::path& path, const ReadOptions& options = {});
Archive read_index(const base::FileReader& file, const ReadOptions& options = {});

// An archive opened for reading: the validated index plus access to the entries' bytes. Like
// base::FileReader (which counts bytes read), one object is for one thread at a time.
class ArchiveFile {
 public:
  explicit ArchiveFile(const std::filesystem::path& path, const ReadOptions& options = {});

  const Archive& index() const noexcept { return index_; }
  const base::FileReader& file() const noexcept { return file_; }
  // Copies bytes [offset, offset + out.size()) of the entry's value (splats expanded); InvalidArgument
  // if that runs past the entry's length.
  void read(const Entry& entry, uint64_t offset, std::span<std::byte> out) const;
  std::vector<std::byte> read(const Entry& entry) const;
  // Maps a data entry's bytes read-only (InvalidArgument for a splat).
  std::unique_ptr<base::FileMapping> map(const Entry& entry) const;

 private:
  base::FileReader file_;
  Archive index_;
};

// Writes an archive laid out exactly as IREE's builder lays it out (same bytes for the same entries):
// 88-byte header, entry table (records 16-aligned), names and metadata back to back, data entries
// each on 64 bytes, the file padded to 4096. Everything is declared first; then the data is streamed
// in declaration order (splats have none) and never held in memory. Atomic: the bytes go to a
// temporary file renamed over the target by commit(); dropped before that, nothing is left behind.
class Writer {
 public:
  explicit Writer(std::filesystem::path target);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Declarations (before start()); InvalidArgument for an empty or duplicate name. Return the index.
  size_t add_data(std::string name, uint64_t length, std::span<const std::byte> metadata = {});
  // pattern: 1, 2, 4, 8 or 16 bytes dividing length.
  size_t add_splat(std::string name, uint64_t length, std::span<const std::byte> pattern,
                   std::span<const std::byte> metadata = {});

  size_t entry_count() const noexcept { return entries_.size(); }
  uint64_t data_bytes() const noexcept { return data_bytes_; }  // what write() must receive in all
  uint64_t file_size() const;                                   // of the finished archive

  // Creates the temporary file and writes header, entry table and names. The first write() (or
  // commit()) starts implicitly without a progress bar. progress, if given, advances by data bytes.
  void start(base::Progress* progress = nullptr);
  // The next bytes of the data entries, in declaration order; a chunk may span entries.
  // InvalidArgument (nothing written) if it holds more than remain.
  void write(std::span<const std::byte> bytes);
  uint64_t remaining() const noexcept { return data_bytes_ - written_; }
  // Index of the entry the next byte belongs to (entry_count() when all data is in).
  size_t current_entry() const noexcept { return current_; }

  // InvalidArgument if bytes are missing or it was called before; then pads, fsyncs and renames.
  // Returns the file size.
  uint64_t commit();

 private:
  struct Declared {
    std::string name;
    EntryType type = EntryType::Data;
    uint64_t length = 0;
    std::vector<std::byte> metadata;
    std::array<std::byte, 16> pattern{};
    uint8_t pattern_length = 0;
    uint64_t storage_offset = 0;  // Data: relative to the storage segment
  };
  size_t declare(Declared d, std::span<const std::byte> metadata);
  void advance_past_full_entries();
  uint64_t storage_segment_offset() const;
  void pad_to(uint64_t position);

  std::filesystem::path target_;
  std::vector<Declared> entries_;
  std::unordered_map<std::string, size_t> names_;
  uint64_t data_bytes_ = 0;
  uint64_t written_ = 0;
  size_t current_ = 0;
  uint64_t current_done_ = 0;  // bytes of entries_[current_] written
  std::unique_ptr<base::AtomicFile> out_;
  uint64_t entry_segment_size_ = 0;  // the layout, accumulated as IREE's builder does
  uint64_t metadata_segment_size_ = 0;
  uint64_t storage_segment_size_ = 0;
  uint64_t storage_alignment_ = 0;  // set by the first data entry; 0 = none yet
  uint64_t storage_offset_ = 0;     // absolute, fixed by start()
  base::Progress* progress_ = nullptr;
  bool committed_ = false;
};

}  // namespace skainet::irpa
