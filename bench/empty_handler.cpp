// Baseline for bench/overhead.sh: an EMPTY BPF program on a cpu-clock perf
// event on every online CPU, system-wide, at a given frequency.
//
// Usage: ecpi_bench_empty_handler FREQUENCY_HZ SECONDS
//
// Runs for SECONDS or until SIGINT/SIGTERM, then detaches and exits 0. Prints
// "ready" on stdout (flushed) once every CPU's event is attached and enabled,
// so a script can start its workload right after.
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "empty_handler.skel.h"

namespace {

volatile std::sig_atomic_t stop_requested = 0;
void on_signal(int) { stop_requested = 1; }

int libbpf_quiet(libbpf_print_level level, const char* fmt, va_list args) {
    if (level == LIBBPF_DEBUG) return 0;
    return std::vfprintf(stderr, fmt, args);
}

// Online CPUs from /sys/devices/system/cpu/online ("0-3,5,7-8").
std::vector<int> online_cpus() {
    std::vector<int> cpus;
    std::FILE* f = std::fopen("/sys/devices/system/cpu/online", "r");
    if (!f) return cpus;
    char buf[4096] = {};
    if (!std::fgets(buf, sizeof buf, f)) buf[0] = '\0';
    std::fclose(f);
    char* p = buf;
    while (*p && *p != '\n') {
        char* end = nullptr;
        long a = std::strtol(p, &end, 10);
        long b = a;
        if (end == p) break;
        if (*end == '-') {
            p = end + 1;
            b = std::strtol(p, &end, 10);
        }
        for (long c = a; c <= b; ++c) cpus.push_back(static_cast<int>(c));
        p = (*end == ',') ? end + 1 : end;
    }
    return cpus;
}

struct Attached {
    int fd = -1;
    bpf_link* link = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s FREQUENCY_HZ SECONDS\n", argv[0]);
        return 2;
    }
    const double freq = std::strtod(argv[1], nullptr);
    const double seconds = std::strtod(argv[2], nullptr);
    if (!(freq >= 1 && freq <= 1e6) || !(seconds > 0)) {
        std::fprintf(stderr, "%s: bad FREQUENCY_HZ or SECONDS\n", argv[0]);
        return 2;
    }

    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);

    libbpf_set_print(libbpf_quiet);
    empty_handler_bpf* skel = empty_handler_bpf::open_and_load();
    if (!skel) {
        std::fprintf(stderr, "%s: cannot load the BPF program: %s\n", argv[0], std::strerror(errno));
        return 1;
    }

    int status = 0;
    std::vector<Attached> attached;
    for (int cpu : online_cpus()) {
        perf_event_attr attr{};
        attr.size = sizeof attr;
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_CPU_CLOCK;
        attr.sample_period = static_cast<__u64>(1e9 / freq + 0.5);  // cpu-clock counts ns
        attr.disabled = 1;
        long fd = syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            std::fprintf(stderr, "%s: perf_event_open(cpu %d): %s\n", argv[0], cpu, std::strerror(errno));
            status = 1;
            break;
        }
        Attached a;
        a.fd = static_cast<int>(fd);
        // attach_perf_event enables the event once the program is attached.
        a.link = bpf_program__attach_perf_event(skel->progs.ecpi_bench_empty, a.fd);
        if (!a.link) {
            std::fprintf(stderr, "%s: attach to cpu %d: %s\n", argv[0], cpu, std::strerror(errno));
            close(a.fd);
            status = 1;
            break;
        }
        attached.push_back(a);
    }
    if (status == 0 && attached.empty()) {
        std::fprintf(stderr, "%s: no online CPU found\n", argv[0]);
        status = 1;
    }

    if (status == 0) {
        std::printf("ready\n");
        std::fflush(stdout);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (!stop_requested && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }

    for (auto& a : attached) {
        bpf_link__destroy(a.link);
        close(a.fd);
    }
    empty_handler_bpf::destroy(skel);
    return status;
}
