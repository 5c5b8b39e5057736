// Matching names a user typed against the names in a profile: exact, loose
// (without parameters or qualification) and close (for "did you mean" lists).
// See name_match.h.
#include "ecpi/analyze/symbols/name_match.h"

#include <algorithm>
#include <cctype>

namespace ecpi::analyze {
namespace {

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// "ns::Widget::spin(int) const" -> "ns::Widget::spin"; "puts@plt" stays.
std::string without_parameters(const std::string& name) {
    std::size_t paren = name.find('(');
    return paren == std::string::npos ? name : name.substr(0, paren);
}

}  // namespace

bool loosely_matches(const std::string& query, const std::string& procedure) {
    if (query.empty()) return false;
    if (procedure == query) return true;
    std::string base = without_parameters(procedure);
    if (base == query) return true;
    // Unqualified: "spin" for "ns::Widget::spin(int) const"; "Widget::spin" too.
    if (base.size() > query.size() + 2 && base.ends_with(query) &&
        base.compare(base.size() - query.size() - 2, 2, "::") == 0)
        return true;
    return false;
}

std::vector<std::string> close_matches(const std::string& query, const std::vector<std::string>& candidates,
                                       std::size_t limit) {
    const std::string q = lower(query);
    std::vector<std::pair<std::size_t, std::string>> scored;
    for (const auto& name : candidates) {
        std::string base = lower(without_parameters(name));
        std::size_t score;
        if (base.find(q) != std::string::npos || (q.size() >= 3 && q.find(base) != std::string::npos && base.size() >= 3)) {
            score = 0;  // a substring either way: the best kind of match
        } else {
            // Compare with the unqualified name too ("compte" vs "ns::compute").
            std::size_t colon = base.rfind("::");
            std::string tail = colon == std::string::npos ? base : base.substr(colon + 2);
            score = std::min(edit_distance(q, base), edit_distance(q, tail));
            std::size_t allowed = std::max<std::size_t>(2, q.size() / 3);
            if (score > allowed) continue;
        }
        scored.emplace_back(score, name);
    }
    std::sort(scored.begin(), scored.end());
    std::vector<std::string> out;
    for (auto& [score, name] : scored) {
        if (std::find(out.begin(), out.end(), name) != out.end()) continue;
        out.push_back(std::move(name));
        if (out.size() == limit) break;
    }
    return out;
}

}  // namespace ecpi::analyze
