// What a called function may do to the caller's registers, read from its
// code (issue 36: a loop measured through a caller-saved register that its
// callees never write).
//
// The System V ABI lets a call change every caller-saved register, and calc
// assumed it did. Compilers know better for calls they can see into (GCC's
// -fipa-ra keeps a value in r9 across a call to a function of the same
// file that never writes r9), and so can calc: the callee's code, and the
// code of the functions it calls or jumps to directly, is in the image.
// A callee whose code has an indirect call or jump, a call out of the
// image (a PLT entry), or more than kMaxCalleeFunctions functions is
// unknown: it may write every register.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"

namespace ecpi::analyze {

// General-purpose registers as a bit set: bit n is hardware number n
// (0 = rax ... 15 = r15, gp_register_number's order).
using GpMask = std::uint16_t;
inline constexpr GpMask kAllGp = 0xffff;
// rax rcx rdx rsi rdi r8 r9 r10 r11: a call may change them.
inline constexpr GpMask kCallerSavedGp = (1u << 0) | (1u << 1) | (1u << 2) | (1u << 6) | (1u << 7) | (1u << 8) |
                                         (1u << 9) | (1u << 10) | (1u << 11);
inline constexpr GpMask kStackPointerGp = 1u << 4;

inline constexpr std::size_t kMaxCalleeFunctions = 32;

struct CalleeCode {
    // Every function reachable from the entry was read and decoded, with no
    // indirect control flow: `writes` and `ranges` are complete.
    bool known = false;
    // Registers any instruction of those functions writes (kAllGp when not
    // known). Callee-saved ones among them are restored before the return
    // (the ABI), but a snapshot taken inside the callee sees them changed.
    GpMask writes = kAllGp;
    // The functions' code, [start, end), sorted: where a snapshot taken
    // during the call can be.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
};

// The extent [start, end) of the function that starts at an address, or
// {0, 0} when no function starts there.
using FunctionExtent = std::function<std::pair<std::uint64_t, std::uint64_t>(std::uint64_t)>;

// The code a call to `entry` may run, following direct calls and jumps
// (tail calls) to other functions of the image.
CalleeCode callee_code(const ImageBytes& image, const FunctionExtent& extent, std::uint64_t entry);

// Whether pc lies in one of the callee's functions.
bool in_callee(const CalleeCode& code, std::uint64_t pc);

}  // namespace ecpi::analyze
