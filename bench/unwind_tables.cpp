// bench/unwind.sh: the unwind table builder's time on given images (the
// largest binaries on the machine), best of N builds each, in CPU time (the
// builder is single-threaded; CPU time does not count waiting for a CPU on a
// busy machine) and wall time.
// Usage: ecpi_bench_unwind_tables N FILE...
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>

#include "ecpi/loader/unwind_table.h"

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: ecpi_bench_unwind_tables N FILE...\n");
        return 2;
    }
    const int n = std::atoi(argv[1]);
    for (int f = 2; f < argc; ++f) {
        double best = 1e9, best_cpu = 1e9;
        auto cpu_now = [] {
            timespec ts{};
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
            return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
        };
        ecpi::loader::UnwindTable table;
        for (int i = 0; i < n; ++i) {
            auto start = std::chrono::steady_clock::now();
            const double cpu_start = cpu_now();
            auto t = ecpi::loader::build_unwind_table(argv[f]);
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            best_cpu = std::min(best_cpu, cpu_now() - cpu_start);
            if (!t.ok()) {
                std::fprintf(stderr, "%s: %s\n", argv[f], t.error().message().c_str());
                return 1;
            }
            if (s < best) best = s;
            table = std::move(*t);
        }
        std::printf("%s: %llu FDEs, %zu rows, %llu invalid, best of %d: %.3f s CPU, %.3f s wall\n", argv[f],
                    static_cast<unsigned long long>(table.fdes), table.rows.size(),
                    static_cast<unsigned long long>(table.invalid_rows), n, best_cpu, best);
    }
    return 0;
}
