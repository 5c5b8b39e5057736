#include "ecpi/loader/unwind_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "ecpi/loader/bounded_file.h"
#include "ecpi/terminal_text.h"
#include "ecpi_abi.h"

namespace ecpi::loader {

namespace {

constexpr char kMagic[8] = {'E', 'C', 'P', 'I', 'U', 'N', 'W', '\n'};
constexpr std::size_t kMaxBuildIdBytes = 128;
// magic, version, build id length, rows, fdes, invalid rows, skipped FDEs; then the build id, rows, checksum.
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8 + 8;

std::uint64_t fnv1a(std::string_view bytes) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

template <typename T>
void put(std::string& out, T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
T get(std::string_view bytes, std::size_t at) {
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return v;
}

bool valid_build_id(const std::string& id) {
    if (id.size() < 3 || id.size() > kMaxBuildIdBytes) return false;
    for (char c : id)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

// The rows, checked as the builder makes them: sorted, known kinds.
Result<void> check_rows(const std::vector<UnwindRow>& rows) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].kind > ECPI_UNWIND_SIGNAL) return Error("row " + std::to_string(i) + " has an unknown kind");
        if (i && rows[i].pc <= rows[i - 1].pc) return Error("rows are not sorted at row " + std::to_string(i));
    }
    return ok();
}

// The total size of the regular files under `dir`.
std::uint64_t directory_bytes(const std::filesystem::path& dir) {
    std::uint64_t total = 0;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code sec;
        if (it->is_regular_file(sec)) total += it->file_size(sec);
    }
    return total;
}

}  // namespace

std::string encode_unwind_cache(const std::string& build_id, const UnwindTable& table) {
    std::string out(kMagic, sizeof kMagic);
    put<std::uint32_t>(out, kUnwindCacheVersion);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(build_id.size()));
    put<std::uint64_t>(out, table.rows.size());
    put<std::uint64_t>(out, table.fdes);
    put<std::uint64_t>(out, table.invalid_rows);
    put<std::uint64_t>(out, table.skipped_fdes);
    out += build_id;
    for (const auto& r : table.rows) {
        put<std::uint32_t>(out, r.pc);
        put<std::uint8_t>(out, r.kind);
        put<std::int8_t>(out, r.rbp_offset8);
        put<std::uint16_t>(out, r.cfa_offset8);
    }
    put<std::uint64_t>(out, fnv1a(out));
    return out;
}

Result<UnwindTable> decode_unwind_cache(const std::string& build_id, std::string_view bytes) {
    if (bytes.size() < kHeaderBytes + 8 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
        return Error("not an unwind table file");
    if (get<std::uint32_t>(bytes, 8) != kUnwindCacheVersion) return Error("written by another version");
    const std::uint64_t id_bytes = get<std::uint32_t>(bytes, 12), rows = get<std::uint64_t>(bytes, 16);
    if (id_bytes > kMaxBuildIdBytes || rows > (bytes.size() / 8) ||
        bytes.size() != kHeaderBytes + id_bytes + 8 * rows + 8)
        return Error("its size does not match its header");
    if (fnv1a(bytes.substr(0, bytes.size() - 8)) != get<std::uint64_t>(bytes, bytes.size() - 8))
        return Error("its checksum does not match");
    if (bytes.substr(kHeaderBytes, id_bytes) != build_id) return Error("it holds another build id");
    UnwindTable table;
    table.fdes = get<std::uint64_t>(bytes, 24);
    table.invalid_rows = get<std::uint64_t>(bytes, 32);
    table.skipped_fdes = get<std::uint64_t>(bytes, 40);
    table.rows.resize(rows);
    for (std::size_t i = 0, at = kHeaderBytes + id_bytes; i < rows; ++i, at += 8)
        table.rows[i] = {get<std::uint32_t>(bytes, at), get<std::uint8_t>(bytes, at + 4), get<std::int8_t>(bytes, at + 5),
                         get<std::uint16_t>(bytes, at + 6)};
    ECPI_RETURN_IF_ERROR(check_rows(table.rows));
    return table;
}

UnwindCache::UnwindCache(std::filesystem::path dir, std::uint64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {}

std::filesystem::path UnwindCache::file(const std::string& build_id) const {
    return dir_ / build_id.substr(0, 2) / build_id.substr(2);
}

Result<std::optional<UnwindTable>> UnwindCache::load(const std::string& build_id) const {
    if (!valid_build_id(build_id)) return std::optional<UnwindTable>();
    const auto path = file(build_id);
    ECPI_ASSIGN_OR_RETURN(auto bytes, read_bounded_file(path, kHeaderBytes + kMaxBuildIdBytes + 8 * (std::uint64_t{1} << 24) + 8));
    if (!bytes) return std::optional<UnwindTable>();
    auto table = decode_unwind_cache(build_id, *bytes);
    if (!table.ok())
        return Error("unwind cache file " + escape_for_terminal(path.string()) + " is damaged (" +
                     table.error().message() + "); it is rebuilt");
    return std::optional<UnwindTable>(std::move(*table));
}

Result<bool> UnwindCache::store(const std::string& build_id, const UnwindTable& table) {
    if (!valid_build_id(build_id)) return false;
    const std::string bytes = encode_unwind_cache(build_id, table);
    if (!used_bytes_) used_bytes_ = directory_bytes(dir_);
    if (*used_bytes_ + bytes.size() > max_bytes_) return false;
    const auto path = file(build_id);
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return Error("creating " + escape_for_terminal(path.parent_path().string()) + ": " + ec.message());
    ECPI_RETURN_IF_ERROR(replace_file(path, bytes, 0644));
    *used_bytes_ += bytes.size();
    return true;
}

}  // namespace ecpi::loader
