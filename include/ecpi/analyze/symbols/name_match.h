// Matching a name a user typed against the procedure names of a profile:
// exactly, loosely (without the parameter list or the qualification) and
// closely (for "close matches" lists). Shared by every verb that takes a
// procedure name, so that they answer a typo the same way.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ecpi/edit_distance.h"

namespace ecpi::analyze {

using ecpi::edit_distance;  // include/ecpi/edit_distance.h

// Whether `query` names `procedure` loosely: the name without its parameter
// list, with or without its namespace/class qualification.
bool loosely_matches(const std::string& query, const std::string& procedure);

// Up to `limit` names from `candidates` that look like `query` (substrings
// and small edit distances), closest first.
std::vector<std::string> close_matches(const std::string& query, const std::vector<std::string>& candidates,
                                       std::size_t limit = 5);

}  // namespace ecpi::analyze
