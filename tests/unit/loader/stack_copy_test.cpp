// The user-space walk of stack copies (loader/unwind/stack_copy.cpp): a
// thread copies its own stack the way the sampler does (registers, then the
// bytes from sp up), the copy is walked with tables built from this
// process's own images, and the frames must be those glibc's backtrace()
// finds with libgcc's unwinder at the same point.
#include "ecpi/loader/stack_copy.h"

#include <doctest/doctest.h>
#include <execinfo.h>
#include <link.h>

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "ecpi_abi.h"

using namespace ecpi::loader;

namespace {

// This process's images with their load bias and unwind tables.
struct LoadedImage {
    std::uint64_t lo = 0, hi = 0, bias = 0;
    std::vector<UnwindRow> rows;
};

std::vector<LoadedImage> loaded_images() {
    std::vector<std::pair<std::string, LoadedImage>> found;
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* arg) {
            auto& out = *static_cast<std::vector<std::pair<std::string, LoadedImage>>*>(arg);
            std::string name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
            if (name.find("vdso") != std::string::npos) return 0;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const auto& ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
                LoadedImage img;
                img.bias = info->dlpi_addr;
                img.lo = info->dlpi_addr + ph.p_vaddr;
                img.hi = img.lo + ph.p_memsz;
                out.emplace_back(name, img);
            }
            return 0;
        },
        &found);
    std::vector<LoadedImage> out;
    for (auto& [name, img] : found) {
        auto table = build_unwind_table(name);
        REQUIRE(table.ok());
        img.rows = std::move(table->rows);
        out.push_back(std::move(img));
    }
    return out;
}

// The sampler's row look-up over those images.
std::uint32_t lookup(const std::vector<LoadedImage>& images, std::uint64_t pc, UnwindRow& row) {
    for (const auto& img : images) {
        if (pc < img.lo || pc >= img.hi) continue;
        auto r = find_unwind_row(img.rows, pc - img.bias);
        if (!r || r->kind == ECPI_UNWIND_NONE) return ECPI_COUNTER_CUT_NO_ROW;
        row = *r;
        return row.kind == ECPI_UNWIND_INVALID ? ECPI_COUNTER_CUT_UNSUPPORTED : 0;
    }
    return ECPI_COUNTER_CUT_NO_ROW;
}

// The end of the mapping that holds `address` (/proc/self/maps).
std::uint64_t mapping_end(std::uint64_t address) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        unsigned long long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) == 2 && lo <= address && address < hi) return hi;
    }
    return address;
}

struct Captured {
    UserStackCopy copy;
    void* frames[ECPI_MAX_USER_STACK_DEPTH] = {};
    int nframes = 0;
};

// Copies the stack as the sampler does, and asks glibc for the same frames.
__attribute__((noinline)) void capture(Captured& out) {
    std::uint64_t sp = 0, bp = 0, pc = 0;
    asm volatile("mov %%rsp, %0\n\tmov %%rbp, %1\n\tlea 0(%%rip), %2" : "=r"(sp), "=r"(bp), "=r"(pc));
    const std::uint64_t n = std::min<std::uint64_t>(ECPI_STACK_COPY_BYTES, mapping_end(sp) - sp);
    out.copy.pc = pc;
    out.copy.sp = sp;
    out.copy.bp = bp;
    out.copy.bytes.assign(reinterpret_cast<const std::uint8_t*>(sp), reinterpret_cast<const std::uint8_t*>(sp) + n);
    out.nframes = backtrace(out.frames, ECPI_MAX_USER_STACK_DEPTH);
}

// A recursion deep enough to matter, kept from becoming a loop.
__attribute__((noinline)) int descend(int n, Captured& out) {
    if (n == 0) {
        capture(out);
        return 0;
    }
    int r = descend(n - 1, out);
    asm volatile("" ::: "memory");
    return r + 1;
}

}  // namespace

TEST_CASE("stack copy: a thread's copied stack walks to its root, frame for frame as libgcc's unwinder") {
    Captured captured;
    std::thread([&] { descend(20, captured); }).join();
    const auto images = loaded_images();
    auto walk = walk_stack_copy(captured.copy, [&](std::uint64_t pc, UnwindRow& row) { return lookup(images, pc, row); });
    CHECK(walk.end == ECPI_COUNTER_STACK_ROOT);
    REQUIRE(captured.nframes > 22);
    // frames[0] is capture's call of backtrace(); the callers from frames[1] on are the walk's from ips[1] on.
    REQUIRE(walk.ips.size() == static_cast<std::size_t>(captured.nframes));
    for (int i = 1; i < captured.nframes; ++i)
        CHECK(walk.ips[i] == reinterpret_cast<std::uint64_t>(captured.frames[i]));
}

TEST_CASE("stack copy: reads stay inside the copy") {
    Captured captured;
    std::thread([&] { descend(20, captured); }).join();
    const auto images = loaded_images();
    captured.copy.bytes.resize(64);  // as if the sampler could read only 64 bytes
    auto walk = walk_stack_copy(captured.copy, [&](std::uint64_t pc, UnwindRow& row) { return lookup(images, pc, row); });
    CHECK(walk.end == ECPI_COUNTER_CUT_UNREADABLE);
    CHECK(walk.ips.size() < 5);
}

TEST_CASE("stack copy: without tables the walk falls back to frame pointers and never claims the root") {
    Captured captured;
    std::thread([&] { descend(5, captured); }).join();
    auto walk = walk_stack_copy(captured.copy, [](std::uint64_t, UnwindRow&) { return std::uint32_t{ECPI_COUNTER_CUT_NO_TABLE}; });
    CHECK(walk.end != ECPI_COUNTER_STACK_ROOT);
    CHECK(!walk.ips.empty());
}
