// The kernel's idle time per CPU from /proc/stat (loader/collect/kernel_idle.cpp, issue 30).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ecpi/loader/kernel_idle.h"

using ecpi::loader::KernelIdleClock;
using ecpi::loader::read_idle_ns;

namespace {

class StatFile {
public:
    StatFile() {
        std::string pattern = (std::filesystem::temp_directory_path() / "ecpi-stat-XXXXXX").string();
        int fd = ::mkstemp(pattern.data());
        REQUIRE(fd >= 0);
        ::close(fd);
        path_ = pattern;
    }
    ~StatFile() { std::filesystem::remove(path_); }
    void write(const std::string& text) { std::ofstream(path_) << text; }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

// /proc/stat as Linux 6.1 writes it: user nice system idle iowait irq softirq steal guest guest_nice.
std::string stat_text(unsigned long idle0, unsigned long iowait0, unsigned long idle1, unsigned long iowait1) {
    return "cpu  500 0 300 " + std::to_string(idle0 + idle1) + " " + std::to_string(iowait0 + iowait1) +
           " 0 4 0 0 0\n" + "cpu0 400 0 200 " + std::to_string(idle0) + " " + std::to_string(iowait0) +
           " 0 2 0 0 0\n" + "cpu1 100 0 100 " + std::to_string(idle1) + " " + std::to_string(iowait1) +
           " 0 2 0 0 0\n" + "intr 1234 0 0\nctxt 99\nbtime 1700000000\n";
}

std::uint64_t ns_of_ticks(std::uint64_t ticks) {
    return ticks * 1'000'000'000 / static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

TEST_CASE("read_idle_ns: idle + iowait per CPU, in ns at USER_HZ") {
    StatFile stat;
    stat.write(stat_text(1000, 20, 38000, 0));
    auto idle = read_idle_ns(stat.path(), 100);
    REQUIRE(idle.ok());
    CHECK(*idle == std::vector<std::uint64_t>{10'200'000'000, 380'000'000'000});

    stat.write("cpu  1 2 3 4 5\nintr 1\n");
    auto none = read_idle_ns(stat.path(), 100);
    REQUIRE(!none.ok());
    CHECK(none.error().message().find("has no per-CPU lines") != std::string::npos);
    CHECK(!read_idle_ns("/nonexistent/stat", 100).ok());
}

TEST_CASE("KernelIdleClock: what passes between settles, kept until settled") {
    StatFile stat;
    stat.write(stat_text(1000, 0, 1000, 0));
    KernelIdleClock clock(stat.path());
    REQUIRE(clock.start().ok());
    stat.write(stat_text(1001, 0, 1380, 0));
    auto first = clock.pending();
    REQUIRE(first.ok());
    CHECK(*first == std::vector<std::uint64_t>{ns_of_ticks(1), ns_of_ticks(380)});
    // Not settled (the epoch could not be written): the next flush has it too.
    stat.write(stat_text(1002, 0, 1380, 0));
    auto second = clock.pending();
    REQUIRE(second.ok());
    CHECK(*second == std::vector<std::uint64_t>{ns_of_ticks(2), ns_of_ticks(380)});
    clock.settle();
    auto third = clock.pending();
    REQUIRE(third.ok());
    CHECK(*third == std::vector<std::uint64_t>{0, 0});

    KernelIdleClock never_started(stat.path());
    auto empty = never_started.pending();
    REQUIRE(empty.ok());
    CHECK(empty->empty());
}
