#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>

#include "ecpi/loader/process_table.h"

using ecpi::loader::ProcessTable;

namespace {

// The first executable segment of the shares test program.
ecpi::loader::ImageInfo::Segment text_segment() {
    auto layout = ecpi::loader::read_elf_layout(TESTPROG_SHARES);
    REQUIRE(layout.ok());
    REQUIRE(!layout->segments.empty());
    return layout->segments.front();
}

}  // namespace

TEST_CASE("read_elf_layout finds the build id and executable segments") {
    auto layout = ecpi::loader::read_elf_layout(TESTPROG_SHARES);
    REQUIRE(layout.ok());
    CHECK(layout->build_id.size() == 40);  // GNU sha1 build id
    CHECK(!layout->segments.empty());
    auto bad = ecpi::loader::read_elf_layout("/nonexistent/file");
    REQUIRE(!bad.ok());
    CHECK(bad.error().message().find("/nonexistent/file") != std::string::npos);
}

TEST_CASE("a pc in a file mapping resolves to the ELF virtual address") {
    auto seg = text_segment();
    ProcessTable table;
    const std::uint64_t base = 0x555555554000ull;
    // The text segment mapped at base + (its page-aligned file offset).
    const std::uint64_t map_start = base + (seg.offset & ~0xfffull);
    table.on_mmap(100, map_start, 0x10000, seg.offset & ~0xfffull, TESTPROG_SHARES, "");
    const std::uint64_t vaddr = seg.vaddr + 0x10;
    const std::uint64_t pc = map_start + (seg.offset - (seg.offset & ~0xfffull)) + 0x10;
    auto r = table.resolve(100, pc);
    REQUIRE(r.has_value());
    CHECK(r->offset == vaddr);
    const auto& image = table.images()[r->image];
    CHECK(image.id.path == TESTPROG_SHARES);
    CHECK(image.id.build_id.size() == 40);  // read from the file when the record had none
    CHECK_FALSE(table.resolve(100, map_start - 1).has_value());
    CHECK_FALSE(table.resolve(100, map_start + 0x10000).has_value());
}

TEST_CASE("fork copies the address space, exec starts a new one, exit is reaped after one more drain") {
    ProcessTable table;
    table.on_mmap(1, 0x1000, 0x1000, 0, "[vdso]", "");
    table.on_comm(1, "parent", false);
    table.on_fork(2, 1);
    auto r = table.resolve(2, 0x1800);
    REQUIRE(r.has_value());
    CHECK(r->offset == 0x800);
    CHECK(table.images()[r->image].id.path == "[vdso]");
    CHECK(table.comm(2) == "parent");

    // After exec, a pc only the old image covers still resolves to it (a sample
    // taken before exec, drained after); a pc the new image covers goes there.
    table.on_comm(2, "child", true);
    table.on_mmap(2, 0x1000, 0x800, 0, "//anon", "");
    auto new_hit = table.resolve(2, 0x1100);
    REQUIRE(new_hit.has_value());
    CHECK(table.images()[new_hit->image].id.path == "[anon]");
    auto old_hit = table.resolve(2, 0x1900);
    REQUIRE(old_hit.has_value());
    CHECK(table.images()[old_hit->image].id.path == "[vdso]");

    // A thread (pid == parent) does not replace the process.
    table.on_fork(2, 2);
    CHECK(table.resolve(2, 0x1100).has_value());

    table.on_exit(2);
    table.reap_exited();  // the drain that saw the exit
    CHECK(table.resolve(2, 0x1100).has_value());
    table.reap_exited();  // the next drain: all its samples are in
    CHECK(table.process_count() == 1);
}

TEST_CASE("a command line read from /proc wins; the one read in BPF at exec fills in for a process already gone") {
    ProcessTable table;
    table.on_comm(1, "sh", false);
    table.set_cmdline(1, "sh -c work");
    table.on_fork(2, 1);
    CHECK(table.cmdline(2) == "sh -c work");  // a fork runs its parent's program
    // The child execs and exits before the side band reads /proc: the read is empty.
    table.on_comm(2, "burn", true);
    table.set_cmdline(2, "");
    table.set_exec_args(2, "./burn 4 run1");
    CHECK(table.cmdline(2) == "./burn 4 run1");
    // While a process lives, /proc has the whole list (the BPF record holds 4 KiB).
    table.set_cmdline(2, "./burn 4 run1 and more");
    CHECK(table.cmdline(2) == "./burn 4 run1 and more");
    CHECK(table.cmdline(3).empty());
}

TEST_CASE("a chain of execs within one drain (a launcher's shims) keeps the first program's mappings") {
    ProcessTable table;
    table.on_comm(7, "python3", false);
    table.on_mmap(7, 0x10000, 0x1000, 0, "[vdso]", "");  // the shim: env
    for (std::uint64_t i = 1; i <= 6; ++i) {               // bash, env, bash, ..., the interpreter
        table.on_comm(7, "exec" + std::to_string(i), true);
        table.on_mmap(7, 0x10000 + i * 0x10000, 0x1000, 0, "//anon", "");
    }
    auto first = table.resolve(7, 0x10800);
    REQUIRE(first.has_value());
    CHECK(table.images()[first->image].id.path == "[vdso]");
}

TEST_CASE("a new mapping replaces the part of an old one it overlaps") {
    ProcessTable table;
    table.on_mmap(7, 0x10000, 0x3000, 0, "[vdso]", "");
    table.on_mmap(7, 0x11000, 0x1000, 0, "//anon", "");
    auto lo = table.resolve(7, 0x10800);
    auto mid = table.resolve(7, 0x11800);
    auto hi = table.resolve(7, 0x12800);
    REQUIRE((lo && mid && hi));
    CHECK(table.images()[lo->image].id.path == "[vdso]");
    CHECK(table.images()[mid->image].id.path == "[anon]");
    CHECK(table.images()[hi->image].id.path == "[vdso]");
    CHECK(hi->offset == 0x2800);  // still relative to the original mapping start
}

// Issue 29: a plugin host dlclose()s one plugin and dlopen()s another at the
// same address. The drain reads the samples from the ring buffer first, then
// the side-band records, so the replacing mmap record (and every other one of
// that drain) is applied before samples taken earlier are named. Each sample
// must be named with the mapping of the moment it was taken.
TEST_CASE("a sample taken before its mapping was replaced at the same address is named by the replaced one") {
    ProcessTable table;
    auto path_at = [&](std::uint64_t pc, std::uint64_t time_ns) {
        auto r = table.resolve(7, pc, time_ns);
        return r ? table.images()[r->image].id.path : std::string("(none)");
    };
    // The drain's order: the mmap records of the whole drain first ...
    table.on_mmap(7, 0x7f0000, 0x3000, 0x1000, "/opt/host/plugins/libalpha.so", "", 1'000);
    table.on_mmap(7, 0x7f0000, 0x2000, 0x1000, "/opt/host/plugins/libbeta.so", "", 2'000);   // beta over alpha's start
    table.on_mmap(7, 0x7f1000, 0x1000, 0x2000, "/opt/host/plugins/libgamma.so", "", 3'000);  // gamma over beta's end
    // ... then the samples, taken at various times in between.
    CHECK(path_at(0x7f0010, 1'500) == "/opt/host/plugins/libalpha.so");
    CHECK(path_at(0x7f1010, 1'999) == "/opt/host/plugins/libalpha.so");
    CHECK(path_at(0x7f1010, 2'000) == "/opt/host/plugins/libbeta.so");  // taken as the mapping changed: the new one
    CHECK(path_at(0x7f1010, 2'500) == "/opt/host/plugins/libbeta.so");
    CHECK(path_at(0x7f1010, 3'500) == "/opt/host/plugins/libgamma.so");
    CHECK(path_at(0x7f0010, 2'500) == "/opt/host/plugins/libbeta.so");
    CHECK(path_at(0x7f2010, 2'500) == "/opt/host/plugins/libalpha.so");  // alpha's tail was never replaced
    CHECK(path_at(0x7f1010, ProcessTable::kNow) == "/opt/host/plugins/libgamma.so");
    CHECK(path_at(0x7f1010, 0) == "/opt/host/plugins/libgamma.so");  // no time: as mapped now
    // The offset is the replaced mapping's: alpha's 0x7f1010 is file offset 0x2010.
    auto alpha = table.resolve(7, 0x7f1010, 1'500);
    REQUIRE(alpha.has_value());
    CHECK(alpha->offset == 0x2010);

    // Once every sample taken before a replacement is drained, the replaced mapping goes.
    table.forget_replaced_before(2'000);
    CHECK(path_at(0x7f1010, 1'500) == "/opt/host/plugins/libbeta.so");
    CHECK(path_at(0x7f1010, 2'500) == "/opt/host/plugins/libbeta.so");
    table.forget_replaced_before(3'000);
    CHECK(path_at(0x7f1010, 2'500) == "/opt/host/plugins/libgamma.so");

    // A mapping without a time (a /proc scan) keeps nothing of what it replaced.
    table.on_mmap(7, 0x7f0000, 0x1000, 0, "/opt/host/plugins/libdelta.so", "");
    CHECK(path_at(0x7f0010, 2'500) == "/opt/host/plugins/libdelta.so");
}

TEST_CASE("scan_proc reads this process's own mappings") {
    ProcessTable table;
    auto self = static_cast<std::uint32_t>(getpid());
    table.scan_proc(self);
    auto pc = reinterpret_cast<std::uint64_t>(&text_segment);
    auto r = table.resolve(self, pc);
    REQUIRE(r.has_value());
    auto exe = std::filesystem::read_symlink("/proc/self/exe");
    CHECK(table.images()[r->image].id.path == exe.string());
    CHECK(!table.comm(self).empty());
}

TEST_CASE("an unknown process that does not exist resolves to nothing") {
    ProcessTable table;
    CHECK_FALSE(table.resolve(0x7ffffff0u, 0x401000).has_value());
}

TEST_CASE("kernel_text_address parses kallsyms and refuses hidden addresses") {
    auto dir = std::filesystem::temp_directory_path() / ("ecpi-kallsyms-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    {
        FILE* f = std::fopen((dir / "ok").c_str(), "w");
        std::fputs("ffffffff81000000 T _stext\nffffffff80000000 T _text\n", f);
        std::fclose(f);
        f = std::fopen((dir / "hidden").c_str(), "w");
        std::fputs("0000000000000000 T _text\n", f);
        std::fclose(f);
    }
    auto ok = ecpi::loader::kernel_text_address(dir / "ok");
    REQUIRE(ok.ok());
    CHECK(*ok == 0xffffffff80000000ull);
    auto hidden = ecpi::loader::kernel_text_address(dir / "hidden");
    REQUIRE(!hidden.ok());
    CHECK(hidden.error().message().find("kptr_restrict") != std::string::npos);
    std::filesystem::remove_all(dir);
}
