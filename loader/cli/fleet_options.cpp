#include "fleet_options.h"

#include <algorithm>

#include "cli_common.h"

namespace ecpi::cli {

void add_fleet_filter_options(CLI::App& app, fleet::FleetFilterArgs& args) {
    const char* group = "Fleet (PROFILE is a ClickHouse URL, docs/FLEET.md)";
    app.add_option("--host", args.hosts, "Only these hosts (repeatable)")->group(group)->delimiter(',');
    app.add_option("--since", args.since, "From this time: YYYY-MM-DD[ HH:MM[:SS]] (UTC), @UNIX, or an age (6h, 7d)")
        ->group(group);
    app.add_option("--until", args.until, "Before this time (same forms as --since)")->group(group);
    app.add_option("--image", args.images, "Only samples in this image: a path or a file name (repeatable); with --format afdo, "
                   "the one image to profile (a file given by path must be the recorded build)")->group(group);
    app.add_option("--password-file", args.password_file,
                   "ClickHouse password: first line of this file (else $ECPI_CLICKHOUSE_PASSWORD_FILE or "
                   "$ECPI_CLICKHOUSE_PASSWORD; user: $ECPI_CLICKHOUSE_USER)")
        ->group(group);
}

void check_fleet_filters_used(const fleet::FleetFilterArgs& args, const std::vector<std::string>& profiles) {
    bool any_url = std::any_of(profiles.begin(), profiles.end(), [](const std::string& p) { return fleet::is_clickhouse_url(p); });
    for (const auto& p : profiles) {
        if (!fleet::is_clickhouse_url(p)) continue;
        auto url = fleet::parse_clickhouse_url(p);
        if (!url.ok()) throw UsageError{url.error().message()};
    }
    if (!any_url && (args.given() || !args.password_file.empty()))
        throw UsageError{"--host, --since, --until, --image and --password-file filter a ClickHouse URL; no profile here is one"};
}

}  // namespace ecpi::cli
