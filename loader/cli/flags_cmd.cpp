// ecpi flags: the compiler and linker flags that build a program for one of
// ecpi's instrumented sources (the runtime in runtime/, ecpi_rt_abi.h).
//
//   clang $(ecpi flags memtrace) -O2 -o prog prog.c    # then: ecpi cachesim -- ./prog
//   clang $(ecpi flags memtrace --inline) -O2 -o prog prog.c  # callbacks inlined (LTO, ld.lld)
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "ecpi/loader/probe.h"

namespace ecpi::cli {
namespace {

struct FlagsArgs {
    std::string kind;
    bool compile_only = false;
    bool link_only = false;
    bool inline_callbacks = false;
    Format format = Format::kText;
};

// clang 14 (Debian 12) emits the load/store callbacks only beside a coverage
// mode; inline 8-bit counters are the cheapest (an increment, no call).
// -gdwarf-aranges: clang writes no .debug_aranges by default, and the
// elfutils of Debian 12 (0.188) finds a compilation unit by address only
// through them: without, no source line of a clang-built program is found.
constexpr const char* kMemtraceCompile =
    "-g -gdwarf-aranges -fsanitize-coverage=inline-8bit-counters,trace-loads,trace-stores";
// A callback at the start of every basic block: `bb` (not `edge`, which
// would split critical edges and add blocks the machine code does not
// have) and `no-prune` (clang otherwise skips blocks whose coverage another
// implies, and a path needs every block it passes).
constexpr const char* kPathsCompile = "-g -gdwarf-aranges -fsanitize-coverage=bb,no-prune,trace-pc-guard";

// The runtime archive: beside the build tree's binary (build/loader/ecpi ->
// build/runtime/), or installed (bin/ecpi -> lib/ecpi/); ECPI_RUNTIME overrides.
std::filesystem::path runtime_archive() {
    if (const char* env = std::getenv("ECPI_RUNTIME")) return env;
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw RuntimeError{"cannot find the ecpi binary (/proc/self/exe): " + ec.message() + "; set ECPI_RUNTIME to libecpi_rt.a"};
    for (auto rel : {"../runtime/libecpi_rt.a", "../lib/ecpi/libecpi_rt.a"}) {
        auto p = (exe.parent_path() / rel).lexically_normal();
        if (std::filesystem::is_regular_file(p, ec)) return p;
    }
    throw RuntimeError{"ecpi's runtime library (libecpi_rt.a) is not beside " + exe.string() +
                       " (looked in ../runtime and ../lib/ecpi); rebuild ecpi or set ECPI_RUNTIME"};
}

// --inline: the callbacks as LLVM bitcode beside the archive
// (runtime/rt_memtrace_inline.c), which the program's link inlines; that
// takes clang's -flto at compile and link time and a linker that runs
// LLVM's LTO: ld.lld (package lld). Full LTO, not ThinLTO: clang 14 runs
// the coverage pass at the end of the compile step's pipeline, and
// ThinLTO's compile step leaves loop vectorization to the link, so the
// instrumented loads kept a loop scalar that the plain build vectorizes
// (stream: 54 M references of 8 bytes instead of 28 M, mostly of 16;
// transpose 29 M instead of 23 M). Full LTO vectorizes before the pass,
// as a build without LTO does.
constexpr const char* kInlineCompile = "-flto";

// paths --inline: every block logs its entry and spans are timed by their
// ends (runtime/rt_spans.c), the same full LTO.
std::filesystem::path inline_object(const std::filesystem::path& archive, const std::string& kind) {
    auto object = archive.parent_path() / (kind == "paths" ? "ecpi_rt_paths_inline.o" : "ecpi_rt_inline.o");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(object, ec))
        throw RuntimeError{"ecpi's inline callbacks (" + object.string() + ") are missing: rebuild ecpi, or build without --inline"};
    return object;
}

int run_flags(const FlagsArgs& args) {
    if (args.compile_only && args.link_only) throw UsageError{"choose --compile or --link, not both"};
    std::string compile = args.kind == "paths" ? kPathsCompile : kMemtraceCompile;
    if (args.inline_callbacks) compile += std::string(" ") + kInlineCompile;
    std::string link;
    if (!args.compile_only) {
        auto archive = runtime_archive();
        // Whole archive: the allocator interposition is referenced by nobody
        // in the program, yet must be linked in.
        // -fno-sanitize-link-runtime: clang would otherwise link its UBSan
        // runtime for -fsanitize-coverage, with default callbacks of its own.
        link = "-fno-sanitize-link-runtime -Wl,--whole-archive " + archive.string() + " -Wl,--no-whole-archive";
        if (args.inline_callbacks) {
            if (!loader::find_executable("ld.lld")) throw RuntimeError{"--inline links with ld.lld, which is not on PATH: install lld (apt-get install lld), or build without --inline"};
            // The link compiles the program: it writes .debug_aranges only when told (kMemtraceCompile's note).
            link = "-fuse-ld=lld -Wl,-mllvm,-generate-arange-section " + inline_object(archive, args.kind).string() + " " + link;
        }
    }
    // The whole line says -flto once; the link flags alone carry it too.
    std::string line = args.compile_only ? compile : compile + " " + link;
    if (args.inline_callbacks && !args.compile_only) link = std::string(kInlineCompile) + " " + link;
    if (args.link_only) line = link;
    if (args.format == Format::kJson) {
        nlohmann::json doc{{"schema", "ecpi.flags"}, {"version", 1}, {"kind", args.kind},
                           {"compile", compile}, {"link", link}, {"compiler", "clang"}, {"inline", args.inline_callbacks}};
        std::cout << dump_document(doc) << "\n";
    } else {
        std::cout << line << "\n";
    }
    return kExitOk;
}

void add_flags_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<FlagsArgs>();
    auto* app = root.add_subcommand("flags", "Compiler and linker flags for programs ecpi instruments (clang)");
    app->add_option("kind", args->kind,
                    "memtrace: memory references for 'ecpi cachesim'; paths: timed block entries for 'ecpi paths record'")
        ->required()
        ->check(CLI::IsMember({"memtrace", "paths"}));
    app->add_flag("--compile", args->compile_only, "Only the compile flags");
    app->add_flag("--link", args->link_only, "Only the link flags");
    app->add_flag("--inline", args->inline_callbacks,
                  "Inline the callbacks into the program (link-time optimization, ld.lld). memtrace: a reference outside "
                  "a sampled window costs a decrement and a branch instead of a call; paths: every block logs its entry "
                  "and paths are timed by a fit over spans timed at their ends only");
    add_format_option(*app, args->format);
    verbs.push_back({app, [args] { return run_flags(*args); }});
}

const VerbRegistration kRegistration(70, add_flags_verb);
}  // namespace
}  // namespace ecpi::cli
