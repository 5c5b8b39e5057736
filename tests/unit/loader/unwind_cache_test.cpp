// The on-disk unwind table cache (loader/unwind/unwind_cache.cpp): a table
// comes back as it was stored; a damaged, forged or foreign file is refused
// with one line naming it; the directory stays within its bound.
#include "ecpi/loader/unwind_cache.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

using namespace ecpi::loader;

namespace {

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        char tmpl[] = "/tmp/ecpi-unwind-cache-XXXXXX";
        REQUIRE(mkdtemp(tmpl));
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

void spit(const std::filesystem::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

UnwindTable libc_table() {
    auto t = build_unwind_table("/lib/x86_64-linux-gnu/libc.so.6");
    REQUIRE(t.ok());
    REQUIRE(t->rows.size() > 1000);
    return std::move(*t);
}

}  // namespace

TEST_CASE("unwind cache: a stored table loads back equal") {
    TempDir dir;
    UnwindCache cache(dir.path);
    const auto table = libc_table();
    auto missing = cache.load("abcdef0123");
    REQUIRE(missing.ok());
    CHECK(!*missing);
    auto stored = cache.store("abcdef0123", table);
    REQUIRE(stored.ok());
    CHECK(*stored);
    CHECK(std::filesystem::is_regular_file(dir.path / "ab" / "cdef0123"));
    auto loaded = cache.load("abcdef0123");
    REQUIRE(loaded.ok());
    REQUIRE(*loaded);
    CHECK((*loaded)->rows == table.rows);
    CHECK((*loaded)->fdes == table.fdes);
}

TEST_CASE("unwind cache: damaged files are refused with one line") {
    TempDir dir;
    UnwindCache cache(dir.path);
    const auto table = libc_table();
    REQUIRE(cache.store("abcdef0123", table).ok());
    const auto file = cache.file("abcdef0123");
    const std::string good = slurp(file);
    auto refused = [&](const std::string& bytes, const char* why) {
        CAPTURE(why);
        spit(file, bytes);
        auto r = cache.load("abcdef0123");
        REQUIRE(!r.ok());
        CHECK(r.error().message().find(file.string()) != std::string::npos);
        CHECK(r.error().message().find('\n') == std::string::npos);
    };
    std::string flipped = good;
    flipped[good.size() / 2] ^= 0x40;
    refused(flipped, "a flipped bit");
    refused(good.substr(0, good.size() - 9), "truncated");
    refused(good + "x", "trailing bytes");
    refused("", "empty");
    refused(std::string(4096, 'E'), "garbage");
    // A consistent file whose rows are out of order: the checksum is fine, the rows are not.
    UnwindTable unsorted = table;
    std::swap(unsorted.rows[10], unsorted.rows[20]);
    refused(encode_unwind_cache("abcdef0123", unsorted), "unsorted rows");
    // Another build id's table under this name.
    refused(encode_unwind_cache("abcdef9999", table), "another build id");
    // A symbolic link is not followed.
    std::filesystem::remove(file);
    std::filesystem::create_symlink("/etc/passwd", file);
    CHECK(!cache.load("abcdef0123").ok());
    // Rewritten whole, it loads again.
    std::filesystem::remove(file);
    REQUIRE(cache.store("abcdef0123", table).ok());
    auto again = cache.load("abcdef0123");
    REQUIRE(again.ok());
    CHECK(*again);
}

TEST_CASE("unwind cache: bounded; bad build ids are never paths") {
    TempDir dir;
    const auto table = libc_table();
    UnwindCache small(dir.path, encode_unwind_cache("abcdef0123", table).size() + 100);
    auto first = small.store("abcdef0123", table);
    REQUIRE(first.ok());
    CHECK(*first);
    auto second = small.store("abcdef4567", table);
    REQUIRE(second.ok());
    CHECK(!*second);  // over the bound: not cached
    CHECK(!std::filesystem::exists(small.file("abcdef4567")));
    for (const char* bad : {"../../etc", "ab", "ABCDEF", "abc/def"}) {
        auto s = small.store(bad, table);
        REQUIRE(s.ok());
        CHECK(!*s);
        auto l = small.load(bad);
        REQUIRE(l.ok());
        CHECK(!*l);
    }
}
