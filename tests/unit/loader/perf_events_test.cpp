#include <doctest/doctest.h>
#include <atomic>
#include <thread>
#include <sched.h>

#include "ecpi/loader/perf_events.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

TEST_CASE("known events parse; unknown ones list the known names") {
    auto clock = ecpi::loader::parse_event("cpu-clock");
    REQUIRE(clock.ok());
    CHECK(clock->is_clock);
    CHECK(clock->type == PERF_TYPE_SOFTWARE);
    auto cycles = ecpi::loader::parse_event("cycles");
    REQUIRE(cycles.ok());
    CHECK(cycles->type == PERF_TYPE_HARDWARE);
    auto bad = ecpi::loader::parse_event("cpu-clocks");
    REQUIRE(!bad.ok());
    CHECK(bad.error().message().find("unknown event 'cpu-clocks'") != std::string::npos);
    CHECK(bad.error().message().find("task-clock") != std::string::npos);
}

TEST_CASE("mean period: nanoseconds for clocks, events for counters") {
    auto clock = ecpi::loader::parse_event("cpu-clock").value();
    CHECK(ecpi::loader::mean_period(clock, 4999, 0) == 200040);
    CHECK(ecpi::loader::mean_period(clock, 1000, 0) == 1000000);
    auto cycles = ecpi::loader::parse_event("cycles").value();
    CHECK(ecpi::loader::mean_period(cycles, 1000, 3000.0) == 3000000);
}

TEST_CASE("hardware events fail with a message naming the event and the alternative") {
    // This VM has no PMU; on a machine with one the open succeeds.
    auto cycles = ecpi::loader::parse_event("cycles").value();
    auto cpus = ecpi::loader::online_cpus();
    REQUIRE(cpus.ok());
    auto fds = ecpi::loader::open_sampling_events(cycles, {cpus->front()}, {.period = 1000000});
    if (!fds.ok()) {
        const auto& msg = fds.error().message();
        bool explains = msg.find("'cycles'") != std::string::npos &&
                        (msg.find("cpu-clock") != std::string::npos || msg.find("CAP_PERFMON") != std::string::npos);
        CHECK(explains);
    }
}

namespace {

// An independent look at what check_lbr_support asks: can this thread open
// a cycles event sampling user branches? The errno when not, 0 when it can.
int open_cycles_with_branch_stack() {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_CPU_CYCLES;
    attr.sample_period = 100000;
    attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_BRANCH_STACK;
    attr.branch_sample_type = PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_ANY;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.disabled = 1;
    const long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0) return errno;
    close(static_cast<int>(fd));
    return 0;
}

}  // namespace

TEST_CASE("LBR support: one line naming last-branch records and the instrumented source, or a branch stack that opens") {
    const int independent = open_cycles_with_branch_stack();
    auto lbr = ecpi::loader::check_lbr_support();
    if (lbr.ok()) {
        // Not this VM (no hardware PMU): a machine with LBR.
        MESSAGE("check_lbr_support succeeded: this machine samples cycles with a branch stack");
        CHECK(independent == 0);
        return;
    }
    const auto& msg = lbr.error().message();
    INFO(msg);
    CHECK(independent != 0);
    CHECK(lbr.error().errno_value() == independent);
    CHECK(msg.find("last-branch records") != std::string::npos);
    CHECK(msg.find("--source instrumented") != std::string::npos);
    CHECK(msg.find("ecpi flags paths") != std::string::npos);
    CHECK(msg.find(std::strerror(independent)) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
    if (independent == ENOENT || independent == EOPNOTSUPP || independent == ENODEV || independent == EINVAL)
        CHECK(msg.rfind("this machine has no last-branch records (LBR): no hardware PMU: ", 0) == 0);
}

TEST_CASE("the measured clock rate is a plausible core clock, near the nominal one") {
#if defined(__x86_64__)
    const double measured = ecpi::loader::measure_cpu_mhz(3);
    INFO("measured " << measured << " MHz, /proc/cpuinfo " << ecpi::loader::cpu_mhz() << " MHz");
    CHECK(measured > 300);     // one add per cycle: no x86-64 core is slower
    CHECK(measured < 10000);   // nor faster
    if (const double nominal = ecpi::loader::cpu_mhz(); nominal > 0) {
        // Turbo can add, throttling and a busy host can take, but not 4x.
        CHECK(measured > nominal / 4);
        CHECK(measured < nominal * 4);
    }
#else
    CHECK(ecpi::loader::measure_cpu_mhz(1) == 0);
#endif
}

TEST_CASE("sampling costs the sampled thread time: its clock under sampling is lower, not higher") {
#if defined(__x86_64__)
    const double unsampled = ecpi::loader::measure_cpu_mhz(3);
    auto sampled = ecpi::loader::measure_sampled_cpu_mhz(100'000);  // 10 kHz
    if (!sampled.ok()) {
        // Without permission to sample (perf_event_paranoid, no CAP_PERFMON)
        // the error says so; the recorder then records no sampled rate.
        INFO(sampled.error().message());
        CHECK(sampled.error().message().find("cpu-clock") != std::string::npos);
        return;
    }
    if (*sampled == 0) {
        // Every round was preempted for most of its time (a loaded machine):
        // the function says "not measured", as the recorder then stores none.
        MESSAGE("the thread held its CPU for under a quarter of every round: no sampled clock rate measured");
        return;
    }
    INFO("unsampled " << unsampled << " MHz, sampled at 10 kHz " << *sampled << " MHz");
    CHECK(*sampled > unsampled / 4);
    CHECK(*sampled < unsampled * 1.1);  // turbo may move a little between the two
#endif
}

TEST_CASE("the clock under sampling counts only the time the thread held its CPU") {
#if defined(__x86_64__)
    // A busy thread on the same CPU takes about half of it; the rate the
    // recorder stores must still be the sampled program's cycles per second
    // of CPU (the demo on a loaded machine stored 2,241 MHz for ~2,900).
    cpu_set_t saved;
    REQUIRE(sched_getaffinity(0, sizeof(saved), &saved) == 0);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
    const double unsampled = ecpi::loader::measure_cpu_mhz(3);
    // The same sampling without the rival: what a sample costs the thread
    // (under 10% on an Intel VM, about half its time at 10 kHz on an AMD VM
    // whose samples cost ~50 us each) is the same per second it holds its CPU.
    auto alone = ecpi::loader::measure_sampled_cpu_mhz(100'000, 5);
    std::atomic<bool> stop{false};
    std::thread rival([&] {
        sched_setaffinity(0, sizeof(one), &one);
        while (!stop.load(std::memory_order_relaxed)) {
        }
    });
    auto sampled = ecpi::loader::measure_sampled_cpu_mhz(100'000, 5);
    stop = true;
    rival.join();
    sched_setaffinity(0, sizeof(saved), &saved);
    if (!sampled.ok()) {
        INFO(sampled.error().message());
        CHECK(sampled.error().message().find("cpu-clock") != std::string::npos);
        return;
    }
    if (*sampled == 0) {
        // on_cpu_mhz's "not measurable": the thread held its CPU for less
        // than a quarter of each round (a machine loaded beyond the rival
        // thread); a value is what the rest checks.
        MESSAGE("the thread held its CPU for under a quarter of the rounds: no clock rate measured");
        return;
    }
    if (!alone.ok() || *alone == 0) {
        MESSAGE("the sampled clock without the rival was not measured: nothing to compare with");
        return;
    }
    INFO("unsampled " << unsampled << " MHz, sampled at 10 kHz alone " << *alone << " MHz, beside a busy thread "
                      << *sampled << " MHz");
    // Counting the rival's half of the CPU would read about half the rate alone.
    CHECK(*sampled > *alone * 0.7);
    CHECK(*sampled < unsampled * 1.1);
#endif
}

TEST_CASE("the chase as recorded: the CPUs the command ran on by its time there, every measurement's rounds in its range") {
    using ecpi::store::ChaseLatency;
    constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
    // Before the command, on the recorder's CPU: 16 and 64 MiB. After it,
    // on its two CPUs (this 2-CPU VM's vCPUs: about 300 and 440 ns a step
    // at 16 MiB under sampling), three ticks in four on the slower one.
    const std::vector<ChaseLatency> before = {{16 * kMiB, 255, 250, 276}, {64 * kMiB, 400, 380, 420}};
    std::vector<ecpi::loader::CpuChase> after(2);
    after[0] = {1, 3, {{4 * kMiB, 60, 55, 70}, {16 * kMiB, 440, 430, 460}}};
    after[1] = {0, 1, {{16 * kMiB, 300, 290, 320}}};
    const auto chase = ecpi::loader::chase_where_command_ran(before, after);
    REQUIRE(chase.size() == 3);
    // Sizes in order; 4 MiB measured on one CPU only: its own figures.
    CHECK(chase[0] == ChaseLatency{4 * kMiB, 60, 55, 70});
    // 16 MiB: (3 x 440 + 300) / 4, from the fastest round of all (before's) to the slowest.
    CHECK(chase[1].bytes == 16 * kMiB);
    CHECK(chase[1].ns == doctest::Approx(405));
    CHECK(chase[1].ns_low == doctest::Approx(250));
    CHECK(chase[1].ns_high == doctest::Approx(460));
    // 64 MiB, measured only before: kept.
    CHECK(chase[2] == ChaseLatency{64 * kMiB, 400, 380, 420});
    // No CPU measured after (a command too short for a tick): before, as it was.
    CHECK(ecpi::loader::chase_where_command_ran(before, {}) == before);
    std::vector<ecpi::loader::CpuChase> unweighted = {{0, 0, {{16 * kMiB, 300, 290, 320}}}};
    CHECK(ecpi::loader::chase_where_command_ran(before, unweighted) == before);
}
