// How complete a recording's call stacks are (issue 29): the share of user
// stack walks that reached the thread's root, and why the others were cut,
// from store::EventMeta::stack_ends. A cut stack is never counted whole.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace ecpi::analyze {

// "call stacks: 99.3% reached the thread root (N walks; cut: no_row 3, ...)".
std::string call_stacks_note(const std::map<std::string, std::uint64_t>& stack_ends);

// {"walks", "root", "root_share", "ends": {name: count}}.
nlohmann::json call_stacks_json(const std::map<std::string, std::uint64_t>& stack_ends);

}  // namespace ecpi::analyze
