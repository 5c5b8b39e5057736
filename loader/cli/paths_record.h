// ecpi paths record / import / --branch: acyclic branch paths with their
// time per occurrence (variational path profiling), from programs built
// with `ecpi flags paths` or from last-branch records. paths_cmd.cpp parses
// the options; this file runs them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"

namespace ecpi::cli {

struct PathsRecordArgs {
    std::string database = "ecpi.db";
    std::string sample = "1/100";
    std::uint64_t burst = 4096;
    std::optional<std::uint64_t> seed;
    std::uint64_t pc_hz = 500;  // the program's pc samples a second of its CPU time (0: none)
    std::string source = "instrumented";
    std::size_t limit = 10;
    bool no_save = false;
    Format format = Format::kText;
    std::vector<std::string> command;
};
int run_paths_record(const PathsRecordArgs& args);

struct PathsImportArgs {
    std::string database = "ecpi.db";
    std::string perf_script;
    std::string image;
    double cpu_ghz = 0;
    std::uint64_t load_bias = 0;
    std::size_t limit = 10;
    Format format = Format::kText;
};
int run_paths_import(const PathsImportArgs& args);

struct BranchReportArgs {
    std::string database = "ecpi.db";
    std::string file;
    std::string epoch;
    std::string rank = "variation";
    std::string procedure;
    std::string compare;
    std::size_t limit = 20;
    std::size_t compare_top = 10;
    Format format = Format::kText;
};
int run_branch_report(const BranchReportArgs& args);

}  // namespace ecpi::cli
