// AutoFDO profiles from hand-made inline stacks and block counts: counts on
// line offsets and base discriminators, the highest per location, direct
// call targets, inlined frames nested at their call sites, LLVM's text.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ecpi/analyze/pgo/afdo.h"

using namespace ecpi::analyze;

namespace {

// A function `name` whose first line is `decl`, executing `line`.
AfdoFrame frame(const char* name, int decl, int line, std::uint32_t discriminator = 0) {
    return {name, decl, line, discriminator};
}

AfdoInstruction at(std::vector<AfdoFrame> frames, double count, const char* call = "") {
    return {std::move(frames), count, call};
}

// LLVM's prefix encoding of a discriminator component (DILocation's
// encodeComponent): 5 bits as U << 1, 12 bits with the 0x20 continuation.
std::uint32_t encode(std::uint32_t u) { return u > 0x1f ? (((u & 0xfe0) << 1) | (u & 0x1f) | 0x20) << 1 : u << 1; }
std::uint32_t component_bits(std::uint32_t u) { return u > 0x1f ? 14 : 7; }

}  // namespace

TEST_CASE("base discriminators are decoded as clang reads them back") {
    CHECK(afdo_base_discriminator(0) == 0);
    CHECK(afdo_base_discriminator(encode(3)) == 3);
    CHECK(afdo_base_discriminator(encode(40)) == 40);
    CHECK(afdo_base_discriminator(1) == 0);  // low bit set: no base discriminator
    // Base 2 with a duplication factor of 4 (an unrolled copy): the factor is not part of the base.
    CHECK(afdo_base_discriminator(encode(2) | (encode(4) << component_bits(2))) == 2);
    CHECK(afdo_base_discriminator(encode(40) | (encode(8) << component_bits(40))) == 40);
}

TEST_CASE("counts land on line offsets and discriminators, the highest per location") {
    const std::vector<AfdoInstruction> insns = {
        at({frame("f", 10, 12)}, 100),
        at({frame("f", 10, 12)}, 40),             // another block of line 12: the line keeps 100
        at({frame("f", 10, 13, encode(3))}, 7),   // line 13, discriminator 3
        at({frame("f", 10, 13, encode(3) | (encode(2) << 7))}, 9),  // an unrolled copy of 13.3
        at({frame("f", 10, 13)}, 60),
        at({frame("f", 10, 0)}, 500),             // line 0: compiler-made code, no weight
        at({frame("f", 10, 20)}, 0.2),            // rounds to no execution: left out
    };
    const AfdoFunction f = afdo_function("f", 5, insns);
    CHECK(f.name == "f");
    CHECK(f.head == 5);
    REQUIRE(f.body.size() == 3);
    CHECK(f.body.at({2, 0}) == 100);
    CHECK(f.body.at({3, 3}) == 9);
    CHECK(f.body.at({3, 0}) == 60);
    CHECK(f.total == 169);
    CHECK(f.inlined.empty());
}

TEST_CASE("direct calls name their targets at the call's location, copies adding up") {
    const std::vector<AfdoInstruction> insns = {
        at({frame("main", 1, 4)}, 9, "work"),
        at({frame("main", 1, 4)}, 9, "work"),     // the same call, unrolled
        at({frame("main", 1, 4)}, 3, "other"),
        at({frame("main", 1, 5)}, 9),
    };
    const AfdoFunction f = afdo_function("main", 1, insns);
    CHECK(f.body.at({3, 0}) == 9);
    CHECK(f.calls.at({3, 0}).at("work") == 18);
    CHECK(f.calls.at({3, 0}).at("other") == 3);
    CHECK_FALSE(f.calls.contains({4, 0}));
}

TEST_CASE("inlined frames nest at their call sites, with totals bottom-up") {
    // f (line 10) calls g at line 15 (discriminator 2); g (line 50) calls h
    // at line 53; h (line 70) runs line 71.
    const std::vector<AfdoInstruction> insns = {
        at({frame("f", 10, 11)}, 4),
        at({frame("f", 10, 15, encode(2)), frame("g", 50, 52)}, 30),
        at({frame("f", 10, 15, encode(2)), frame("g", 50, 53), frame("h", 70, 71)}, 25),
        at({frame("f", 10, 16), frame("g", 50, 52)}, 6),  // another inlined copy of g
    };
    const AfdoFunction f = afdo_function("f", 4, insns);
    CHECK(f.body.size() == 1);
    const AfdoFunction& g = f.inlined.at({5, 2}).at("g");
    CHECK(g.name == "g");
    CHECK(g.body.at({2, 0}) == 30);
    const AfdoFunction& h = g.inlined.at({3, 0}).at("h");
    CHECK(h.body.at({1, 0}) == 25);
    CHECK(h.total == 25);
    CHECK(g.total == 55);
    CHECK(f.inlined.at({6, 0}).at("g").total == 6);
    CHECK(f.total == 4 + 55 + 6);
}

TEST_CASE("the text is LLVM's sample profile format") {
    AfdoProfile profile;
    profile.functions.push_back(afdo_function(
        "f", 4,
        {at({frame("f", 10, 11)}, 4, "work"), at({frame("f", 10, 13, encode(3))}, 7),
         at({frame("f", 10, 15, encode(2)), frame("_Z1gi", 50, 52)}, 30),
         at({frame("f", 10, 15, encode(2)), frame("_Z1gi", 50, 53), frame("h", 70, 71)}, 25)}));
    profile.functions.push_back(afdo_function("cold", 0, {at({frame("cold", 1, 2)}, 0)}));
    CHECK(render_afdo_text(profile) ==
          "f:66:4\n"
          " 1: 4 work:4\n"
          " 3.3: 7\n"
          " 5.2: _Z1gi:55\n"
          "  2: 30\n"
          "  3: h:25\n"
          "   1: 25\n");
}

TEST_CASE("static functions of different files under one name are told apart from one function's parts") {
    auto in = [](const char* file, int decl, int line) {
        AfdoFrame f = frame("helper", decl, line);
        f.decl_file = file;
        return at({f}, 10);
    };
    // One function: its instructions, inlined frames below it, and its split-off cold part all share a declaration.
    AfdoInstruction inlined = in("a.c", 3, 5);
    inlined.frames.push_back(frame("step", 20, 21));
    CHECK_FALSE(afdo_shares_name({in("a.c", 3, 4), inlined, in("a.c", 3, 9)}));
    CHECK_FALSE(afdo_shares_name({}));
    // `static int helper` in a.c and in b.c: the same name, another file (same first line) or another first line.
    CHECK(afdo_shares_name({in("a.c", 3, 4), in("b.c", 3, 4)}));
    CHECK(afdo_shares_name({in("a.c", 3, 4), in("a.c", 30, 31)}));
}
