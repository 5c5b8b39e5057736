// Every JSON document ecpi writes starts with "schema" and "version"
// (docs/json-schema.md; STYLE.md rule 8), so a reader can tell what it holds
// from its first lines. nlohmann::json keeps an object's keys sorted, so a
// plain dump() puts them wherever the alphabet does; dump_document() writes
// the top level with those two first and everything else as dump() would.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ecpi {

// indent < 0: compact, as dump(); otherwise as dump(indent).
inline std::string dump_document(const nlohmann::json& doc, int indent = 2) {
    if (!doc.is_object() || doc.empty()) return doc.dump(indent);
    const std::string pad = indent < 0 ? "" : std::string(static_cast<std::size_t>(indent), ' ');
    const std::string between = indent < 0 ? "," : ",\n";
    std::string out = indent < 0 ? "{" : "{\n";
    bool first = true;
    auto member = [&](const std::string& key, const nlohmann::json& value) {
        if (!first) out += between;
        first = false;
        out += pad + nlohmann::json(key).dump() + (indent < 0 ? ":" : ": ");
        std::string text = value.dump(indent);
        if (indent >= 0) {  // the value's own lines sit one level deeper
            for (std::size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 1 + pad.size()))
                text.insert(at + 1, pad);
        }
        out += text;
    };
    for (const char* key : {"schema", "version"})
        if (auto it = doc.find(key); it != doc.end()) member(key, *it);
    for (auto it = doc.begin(); it != doc.end(); ++it)
        if (it.key() != "schema" && it.key() != "version") member(it.key(), it.value());
    out += indent < 0 ? "}" : "\n}";
    return out;
}

}  // namespace ecpi
