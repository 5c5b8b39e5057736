// Internal to store/: an epoch's journal (FORMAT.md §13). A daemon's merge
// appends one record (the profiles, stacks and metadata of one flush) to the
// newest journal segment instead of rewriting whole files; a compaction folds
// the segments into one compacted file when that at least halves them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::store::detail {

// Names inside an epoch directory: journal.<n>.ecj (n >= 1) and
// compact.<n>.ecj (everything of journal segments <= n).
inline constexpr std::uint64_t kJournalSegmentBytes = 4u << 20;

enum class JournalFileKind { kSegment, kCompact };
struct JournalFile {
    JournalFileKind kind = JournalFileKind::kSegment;
    std::uint64_t number = 0;
    std::string name;
};
// The journal files of an epoch directory that a reader uses, in order (the
// newest compacted file first, then the segments after it), and the ones a
// compaction already folded in (left by a crash before their removal).
struct JournalListing {
    std::vector<JournalFile> live;
    std::vector<JournalFile> superseded;
    std::uint64_t newest_number = 0;  // the highest n of any journal or compacted file
};
JournalListing list_journal(const std::vector<std::string>& names);
std::string journal_segment_name(std::uint64_t number);
std::string journal_compact_name(std::uint64_t number);

// One record: a frame around the encodings of one flush (FORMAT.md §13).
std::vector<std::uint8_t> encode_journal_record(const EpochBatch& batch, const std::string& meta_json);

// What a journal file holds, accumulated over its records. `valid_bytes` is
// where the last whole record ends; a torn record after it (a write cut by a
// crash) is dropped and counted, never parsed.
struct JournalScan {
    std::vector<EpochBatch> batches;
    std::uint64_t valid_bytes = 0;
    std::uint64_t torn_bytes = 0;
    std::vector<std::string> errors;  // a whole record that does not decode: "<reason>"
};
// parse_meta turns a record's metadata bytes into an EpochMeta; with
// meta_only the profiles and stacks are skipped undecoded.
using MetaParser = Result<EpochMeta> (*)(const std::vector<std::uint8_t>&);
JournalScan scan_journal(std::span<const std::uint8_t> bytes, MetaParser parse_meta, bool meta_only);
// Only where the last whole record ends (for a writer checking a segment's tail).
std::uint64_t journal_valid_bytes(std::span<const std::uint8_t> bytes);

// Batches folded into one: profiles by (image, event), stacks by event, the
// metadata merged in order; canonical. Period conflicts are errors listed in
// `errors` (the conflicting batch's part is left out).
EpochBatch fold_batches(std::vector<EpochBatch> batches, std::vector<std::string>& errors);

// Appends `record` to `path` (created when missing), syncs it; on a failed
// write the file is cut back to `valid_bytes`, so no partial record stays.
Result<void> append_record(const std::filesystem::path& path, std::uint64_t valid_bytes,
                           std::span<const std::uint8_t> record);

}  // namespace ecpi::store::detail
