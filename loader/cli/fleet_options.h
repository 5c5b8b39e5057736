// The options every report verb takes for a ClickHouse URL as PROFILE
// (docs/FLEET.md): --host, --since, --until, --image, --password-file.
#pragma once

#include <CLI/CLI.hpp>

#include "ecpi/fleet/fleet_source.h"

namespace ecpi::cli {

void add_fleet_filter_options(CLI::App& app, fleet::FleetFilterArgs& args);
// Malformed ClickHouse URLs, and filters given without any URL among the
// profiles, are usage errors.
void check_fleet_filters_used(const fleet::FleetFilterArgs& args, const std::vector<std::string>& profiles);

}  // namespace ecpi::cli
