#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ecpi/loader/unwinder.h"

using namespace ecpi::loader;

namespace {

struct FakeProc {
    std::filesystem::path root;
    FakeProc() {
        char tmpl[] = "/tmp/ecpi-unwind-capacity.XXXXXX";
        root = mkdtemp(tmpl);
    }
    ~FakeProc() { std::filesystem::remove_all(root); }
    void process(const std::string& pid, const std::string& maps) {
        std::filesystem::create_directories(root / pid);
        std::ofstream(root / pid / "maps") << maps;
    }
};

}  // namespace

TEST_CASE("unwind rows for the whole system: sized from the text mapped, counted once per file") {
    FakeProc proc;
    // 64 MiB of libfoo's text (mapped by two processes), 32 MiB of bar's;
    // data, anonymous and [vdso] mappings do not count.
    const std::string foo = "7f0000000000-7f0004000000 r-xp 00001000 08:01 1234 /usr/lib/libfoo.so\n";
    proc.process("1", foo + "7f0004000000-7f0005000000 rw-p 00000000 08:01 1234 /usr/lib/libfoo.so\n"
                            "7f0010000000-7f0020000000 rwxp 00000000 00:00 0 \n"
                            "7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0 [vdso]\n");
    proc.process("22", foo + "560000000000-560002000000 r-xp 00000000 08:01 99 /usr/bin/bar\n");
    proc.process("self", "560000000000-560080000000 r-xp 00000000 08:01 7 /usr/bin/not-a-pid\n");
    const std::uint64_t text = (64u << 20) + (32u << 20);
    CHECK(unwind_rows_for_system(proc.root, 1u << 20) == 2 * text / kUnwindTextBytesPerRow);
    // At least the floor; at most kUnwindMaxRows.
    CHECK(unwind_rows_for_system(proc.root, 1u << 23) == kUnwindMaxRows);
    proc.process("23", "500000000000-508000000000 r-xp 00000000 08:01 5 /usr/lib/huge.so\n");
    CHECK(unwind_rows_for_system(proc.root, 1u << 20) == kUnwindMaxRows);
    FakeProc empty;
    CHECK(unwind_rows_for_system(empty.root, 1u << 21) == 1u << 21);
}
