// Registers a call may change, from the callee's code. See callee_code.h.
#include "ecpi/analyze/calc/callee_code.h"

#include <algorithm>
#include <set>

namespace ecpi::analyze {

namespace {

// No function of real code is this long; a symbol that claims to be is no
// function extent calc trusts (the bytes are untrusted input).
constexpr std::uint64_t kMaxFunctionBytes = 1u << 20;

GpMask written(const DecodedInstruction& d) {
    GpMask m = 0;
    for (auto r : d.writes)
        if (int n = gp_register_number(r); n >= 0) m = static_cast<GpMask>(m | (1u << n));
    return m;
}

// Adds one function's registers and the functions it reaches to `todo`;
// false when its code leaves what can be followed.
bool scan_function(const ImageBytes& image, const FunctionExtent& extent, std::uint64_t start, CalleeCode& out,
                   std::vector<std::uint64_t>& todo) {
    const auto [s, e] = extent(start);
    if (s != start || e <= s || e - s > kMaxFunctionBytes) return false;
    auto bytes = image.read(s, e - s);
    if (bytes.empty()) return false;
    auto code = decode_x86_64(s, bytes);
    if (!code.ok()) return false;
    out.ranges.emplace_back(s, e);
    for (const DecodedInstruction& d : *code) {
        out.writes = static_cast<GpMask>(out.writes | written(d));
        switch (d.flow) {
            case FlowKind::kIndirectCall: case FlowKind::kIndirectJump:
                return false;
            case FlowKind::kCall:
                if (d.target == 0) return false;
                todo.push_back(d.target);
                break;
            case FlowKind::kJump: case FlowKind::kCondJump:
                if (d.target < s || d.target >= e) todo.push_back(d.target);  // a tail call
                break;
            default: break;
        }
    }
    return true;
}

}  // namespace

CalleeCode callee_code(const ImageBytes& image, const FunctionExtent& extent, std::uint64_t entry) {
    CalleeCode out;
    out.writes = 0;
    std::set<std::uint64_t> seen;
    std::vector<std::uint64_t> todo = {entry};
    while (!todo.empty()) {
        const std::uint64_t f = todo.back();
        todo.pop_back();
        if (!seen.insert(f).second) continue;
        if (seen.size() > kMaxCalleeFunctions || !scan_function(image, extent, f, out, todo)) return CalleeCode{};
    }
    std::sort(out.ranges.begin(), out.ranges.end());
    out.known = true;
    return out;
}

bool in_callee(const CalleeCode& code, std::uint64_t pc) {
    auto it = std::upper_bound(code.ranges.begin(), code.ranges.end(), std::make_pair(pc, UINT64_MAX));
    return it != code.ranges.begin() && pc < std::prev(it)->second;
}

}  // namespace ecpi::analyze
