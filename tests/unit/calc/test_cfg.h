// The CFG of a named function in a compiled test binary (data/*.c), for the
// tests that read real compiler output.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/symbols/symbolizer.h"

namespace ecpi::analyze::test {

inline Cfg cfg_of(const std::string& file, const std::string& name) {
    auto table = SymbolTable::from_elf(file);
    REQUIRE_MESSAGE(table.ok(), file);
    auto image = ImageBytes::open(file);
    REQUIRE(image.ok());
    const Symbol* sym = nullptr;
    for (const auto& s : table->symbols())
        if (s.name == name) sym = &s;
    REQUIRE_MESSAGE(sym != nullptr, name << " in " << file);
    std::uint64_t end = table->end_of(*sym);
    auto bytes = image->read(sym->start, end - sym->start);
    REQUIRE(!bytes.empty());
    auto insns = decode_x86_64(sym->start, bytes);
    REQUIRE(insns.ok());
    CfgContext ctx;
    ctx.image = &*image;
    const SymbolTable& t = *table;
    ctx.name_at = [&t](std::uint64_t a) -> std::string {
        const Symbol* s = t.lookup(a);
        return s && s->start == a ? s->name : std::string();
    };
    return build_cfg(sym->start, end, std::move(*insns), ctx);
}

// The compiled test binaries (data/cfgtest.c): GCC PIE and non-PIE, and
// Clang's where the build found it.
inline std::vector<std::string> cfgtest_binaries() {
    std::vector<std::string> v = {ECPI_CFGTEST_GCC, ECPI_CFGTEST_GCC_NOPIE};
#ifdef ECPI_CFGTEST_CLANG
    v.push_back(ECPI_CFGTEST_CLANG);
#endif
    return v;
}

}  // namespace ecpi::analyze::test
