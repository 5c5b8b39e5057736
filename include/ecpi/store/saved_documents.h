// JSON reports saved into a database's epochs beside its profiles
// (probe-<unix>.json from `ecpi probe -o`, branch-paths-<unix>.json from
// `ecpi paths record`): named by prefix and time, written atomically under
// the writer lock, listed oldest first, read with the store's size bounds.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::store {

// Writes `document` into the current epoch as <prefix><unix time>[.<n>].json;
// returns the file written.
[[nodiscard]] Result<std::filesystem::path> save_document(Database& db, std::string_view prefix,
                                                          const nlohmann::json& document);

struct SavedDocument {
    std::string epoch;
    std::filesystem::path file;
};
// Every document with this prefix, oldest first (by epoch, then time and number).
[[nodiscard]] Result<std::vector<SavedDocument>> list_documents(const Database& db, std::string_view prefix);
// Reads and parses one (bounded: the store's file size limit).
[[nodiscard]] Result<nlohmann::json> read_document(const std::filesystem::path& file);

}  // namespace ecpi::store
