// ecpi: one binary, git-style verbs (record, prof, ...).
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "ecpi/terminal_text.h"

namespace {
// A verb's missing positional argument: say what it may be, as its help does
// ("ecpi ctl: request is required: status | flush | epoch"; issue 34).
std::string missing_positional_choices(const CLI::App& verb) {
    for (const CLI::Option* option : verb.get_options()) {
        if (!option->get_positional() || !option->get_required() || option->count() > 0) continue;
        if (!option->get_description().empty()) return ": " + option->get_description();
    }
    return {};
}
}  // namespace

int main(int argc, char** argv) {
    using namespace ecpi::cli;
    CLI::App app{"ecpi: eBPF continuous profiling infrastructure (where have all the cycles gone, and why)", "ecpi"};
    app.set_version_flag("--version", std::string("ecpi ") + ECPI_VERSION);
    app.require_subcommand(1);
    std::vector<Verb> verbs;
    for (auto factory : registered_verbs()) factory(app, verbs);

    std::string verb_name = "ecpi";
    if (argc > 1 && argv[1][0] != '-') {
        std::string known;
        bool found = false;
        for (const auto& v : verbs) {
            known += (known.empty() ? "" : ", ") + v.app->get_name();
            found = found || v.app->get_name() == argv[1];
        }
        if (!found) {
            std::fprintf(stderr, "ecpi: unknown command '%s' (commands: %s; see 'ecpi --help')\n", argv[1], known.c_str());
            return kExitUsageError;
        }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::string detail = e.what();
        for (const auto& v : verbs) {
            if (!v.app->parsed()) continue;
            verb_name = "ecpi " + v.app->get_name();
            if (dynamic_cast<const CLI::RequiredError*>(&e)) detail += missing_positional_choices(*v.app);
        }
        std::fprintf(stderr, "%s: %s (see '%s --help')\n", verb_name.c_str(), detail.c_str(), verb_name.c_str());
        return kExitUsageError;
    }
    for (const auto& v : verbs) {
        if (!v.app->parsed()) continue;
        verb_name = "ecpi " + v.app->get_name();
        try {
            return v.run();
        } catch (const UsageError& e) {
            std::fprintf(stderr, "%s: %s (see '%s --help')\n", verb_name.c_str(), ecpi::escape_for_terminal(e.message).c_str(), verb_name.c_str());
            return kExitUsageError;
        } catch (const RuntimeError& e) {
            std::fprintf(stderr, "%s: %s\n", verb_name.c_str(), ecpi::escape_for_terminal(e.message).c_str());
            return kExitRuntimeError;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s: internal error: %s\n", verb_name.c_str(), ecpi::escape_for_terminal(e.what()).c_str());
            return kExitRuntimeError;
        }
    }
    return kExitUsageError;
}
