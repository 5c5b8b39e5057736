#include "ecpi/store/saved_documents.h"

#include <sys/stat.h>

#include <algorithm>
#include <ctime>

#include "file_io.h"

namespace ecpi::store {
namespace fs = std::filesystem;

namespace {
constexpr std::string_view kSuffix = ".json";
}  // namespace

Result<fs::path> save_document(Database& db, std::string_view prefix, const nlohmann::json& document) {
    ECPI_ASSIGN_OR_RETURN(std::string epoch, db.current_epoch());
    const fs::path dir = db.path() / "epochs" / epoch;
    const std::string text = document.dump(1) + "\n";
    const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
    // Under the writer lock, so two runs finishing in the same second pick different names.
    ECPI_ASSIGN_OR_RETURN(detail::WriterLock lock, detail::WriterLock::acquire(db.path() / "lock"));
    const std::string stem = std::string(prefix) + std::to_string(static_cast<long long>(std::time(nullptr)));
    for (int n = 0; n < 1000; ++n) {
        const fs::path target = dir / (stem + (n ? "." + std::to_string(n) : "") + std::string(kSuffix));
        struct stat st {};
        if (::stat(target.c_str(), &st) == 0) continue;
        ECPI_RETURN_IF_ERROR(detail::write_file_atomically(target, bytes));
        return target;
    }
    return Error("too many " + std::string(prefix) + "*.json reports saved in one second in " + dir.string());
}

Result<std::vector<SavedDocument>> list_documents(const Database& db, std::string_view prefix) {
    ECPI_ASSIGN_OR_RETURN(auto epochs, db.epochs());
    std::vector<SavedDocument> out;
    for (const auto& epoch : epochs) {
        auto names = detail::list_directory(db.path() / "epochs" / epoch);
        if (!names.ok()) continue;
        std::vector<std::pair<std::pair<long long, int>, std::string>> found;
        for (const auto& name : *names) {
            if (name.size() <= prefix.size() + kSuffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
                name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
                continue;
            // <prefix><unix>[.<n>].json, ordered by number (not by string).
            std::string mid = name.substr(prefix.size(), name.size() - prefix.size() - kSuffix.size());
            auto dot = mid.find('.');
            try {
                long long t = std::stoll(mid.substr(0, dot));
                int n = dot == std::string::npos ? 0 : std::stoi(mid.substr(dot + 1));
                found.push_back({{t, n}, name});
            } catch (const std::exception&) {
            }
        }
        std::sort(found.begin(), found.end());
        for (const auto& f : found) out.push_back({epoch, db.path() / "epochs" / epoch / f.second});
    }
    return out;
}

Result<nlohmann::json> read_document(const fs::path& file) {
    ECPI_ASSIGN_OR_RETURN(auto bytes, detail::read_file(file));
    nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
    if (j.is_discarded()) return Error(file.string() + ": not valid JSON");
    return j;
}

}  // namespace ecpi::store
