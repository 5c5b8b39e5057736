// Helpers for the stats/diff/annotate/export unit tests: profiles placed on
// data/annotest.c's functions, and the binutils view of annotest (objdump,
// addr2line, run at test time) as the independent answer.
#pragma once

#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/store/profile.h"
#include "test_util.h"

namespace ecpi::analyze::testing {

inline std::string run_command(const std::string& command) {
    FILE* p = ::popen(command.c_str(), "r");
    if (p == nullptr) throw std::runtime_error("cannot run " + command);
    std::string out;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    if (::pclose(p) != 0) throw std::runtime_error("failed: " + command);
    return out;
}

// Function addresses of a binary, by name (through the library: these tests
// are about the reports, the symbolizer has its own tests against nm).
inline std::map<std::string, std::uint64_t> function_addresses(const std::string& binary) {
    auto table = SymbolTable::from_elf(binary);
    if (!table.ok()) throw std::runtime_error(table.error().message());
    std::map<std::string, std::uint64_t> out;
    for (const auto& sym : table->symbols()) out[sym.name] = sym.start;
    return out;
}

// `objdump -d` of one function: instruction addresses in order, within the
// symbol's size (objdump also lists the padding up to the next symbol).
inline std::vector<std::uint64_t> objdump_instructions(const std::string& binary, const std::string& function) {
    auto table = SymbolTable::from_elf(binary);
    if (!table.ok()) throw std::runtime_error(table.error().message());
    std::uint64_t start = 0, end = 0;
    for (const auto& sym : table->symbols()) {
        if (sym.name == function) {
            start = sym.start;
            end = sym.start + sym.size;
        }
    }
    std::istringstream in(run_command(std::string(ECPI_OBJDUMP) + " -d --no-show-raw-insn '" + binary + "'"));
    std::vector<std::uint64_t> out;
    std::string line;
    bool inside = false;
    while (std::getline(in, line)) {
        if (line.ends_with("<" + function + ">:")) {
            inside = true;
            continue;
        }
        if (!inside) continue;
        if (line.empty()) break;
        std::size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::uint64_t address = std::stoull(line.substr(0, colon), nullptr, 16);
        if (address >= start && address < end) out.push_back(address);
    }
    return out;
}

// `addr2line -f -i`: (function, line) pairs, innermost first.
inline std::vector<std::pair<std::string, int>> addr2line(const std::string& binary, std::uint64_t address) {
    char addr[32];
    std::snprintf(addr, sizeof addr, "0x%llx", static_cast<unsigned long long>(address));
    std::istringstream in(run_command(std::string(ECPI_ADDR2LINE) + " -f -i -e '" + binary + "' " + addr));
    std::vector<std::pair<std::string, int>> out;
    std::string function, location;
    while (std::getline(in, function) && std::getline(in, location)) {
        std::size_t colon = location.rfind(':');
        int line = 0;
        if (colon != std::string::npos) line = std::atoi(location.c_str() + colon + 1);
        out.emplace_back(function, line);
    }
    return out;
}

// Line number of the line of data/annotest.c holding `marker`.
inline int marker_line(const std::string& marker) {
    std::istringstream in(read_text(ECPI_ANNOTEST_SRC));
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        ++n;
        if (line.find(marker) != std::string::npos) return n;
    }
    throw std::runtime_error("no " + marker + " in annotest.c");
}

inline store::ImageProfile image_profile(const store::ImageId& image, const std::string& event, std::uint64_t period,
                                         std::map<std::uint32_t, std::map<std::uint64_t, std::uint64_t>> sections) {
    store::ImageProfile p;
    p.image = image;
    p.event = event;
    p.period = period;
    for (const auto& [pid, counts] : sections) {
        store::ProcessCounts pc;
        pc.pid = pid;
        for (const auto& [offset, count] : counts) pc.counts.push_back({offset, count});
        p.processes.push_back(std::move(pc));
    }
    return p;
}

// A Symbolizer that reads no real kallsyms and no system debug files.
inline Symbolizer test_symbolizer(const std::filesystem::path& tmp,
                                  std::optional<std::filesystem::path> database = std::nullopt) {
    write_text(tmp / "kallsyms", "ffffffff81000000 T _text\nffffffff81000100 t kernel_fn\n");
    Symbolizer::Options options;
    options.kallsyms = tmp / "kallsyms";
    options.debug_roots = {};
    options.database = std::move(database);
    return Symbolizer(options);
}

}  // namespace ecpi::analyze::testing
