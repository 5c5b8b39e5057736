// Names read from a database, a binary or a target (images, procedures,
// commands, paths, cgroups, events) are untrusted: a program may be named
// "evil\n\033[31m". Text reports pass every such name through
// escape_for_terminal so that it can neither break a report's lines nor send
// control sequences to the reader's terminal. JSON output stays exact.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace ecpi {

// Control bytes (C0, DEL, and the UTF-8 encoded C1 range U+0080..U+009F)
// become C-style escapes: \n, \t, \r, \x1b, \xc2\x9b; a backslash becomes
// "\\" so that an escaped name is never ambiguous. Everything else, valid
// UTF-8 included, is kept as it is.
inline std::string escape_for_terminal(std::string_view name) {
    auto hex = [](std::string& out, unsigned char c) {
        char buf[5];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
    };
    std::string out;
    out.reserve(name.size());
    for (std::size_t i = 0; i < name.size(); ++i) {
        const auto c = static_cast<unsigned char>(name[i]);
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7f) {
            hex(out, c);
        } else if (c == 0xc2 && i + 1 < name.size() && static_cast<unsigned char>(name[i + 1]) >= 0x80 &&
                   static_cast<unsigned char>(name[i + 1]) <= 0x9f) {
            hex(out, c);
            hex(out, static_cast<unsigned char>(name[++i]));
        } else if (c >= 0xc2) {
            // A UTF-8 lead byte: keep it and its continuation bytes together.
            out += static_cast<char>(c);
            for (int k = 0; k < 3 && i + 1 < name.size(); ++k) {
                const auto next = static_cast<unsigned char>(name[i + 1]);
                if (next < 0x80 || next > 0xbf) break;
                out += static_cast<char>(next);
                ++i;
            }
        } else if (c >= 0x80 && c <= 0x9f) {
            hex(out, c);  // a stray 8-bit C1 control (not UTF-8): some terminals act on it
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

}  // namespace ecpi
