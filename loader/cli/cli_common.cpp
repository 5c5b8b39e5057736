#include "cli_common.h"

namespace ecpi::cli {

void add_format_option(CLI::App& app, Format& format) {
    std::map<std::string, Format> names{{"text", Format::kText}, {"json", Format::kJson}};
    app.add_option("--format", format, "Output format: text or json")
        ->transform(CLI::CheckedTransformer(names, CLI::ignore_case))
        ->default_str("text");
}

}  // namespace ecpi::cli
