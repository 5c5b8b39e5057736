// Helpers shared by the store unit tests.
#pragma once

#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ecpi/store/profile.h"

namespace ecpi::store::testing {

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
public:
    TempDir() {
        std::string templ = (std::filesystem::temp_directory_path() / "ecpi-store-test-XXXXXX").string();
        if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = templ;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

inline std::vector<std::uint8_t> read_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& p, const std::vector<std::uint8_t>& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::uint32_t crc_of(const std::vector<std::uint8_t>& bytes, std::size_t n) {
    return static_cast<std::uint32_t>(::crc32(::crc32(0L, Z_NULL, 0), bytes.data(), static_cast<uInt>(n)));
}

// Rewrites the trailing CRC so a forged file passes the checksum and reaches
// the structural checks.
inline void fix_checksum(std::vector<std::uint8_t>& file) {
    if (file.size() < 4) return;
    const std::uint32_t crc = crc_of(file, file.size() - 4);
    for (int i = 0; i < 4; ++i) file[file.size() - 4 + i] = static_cast<std::uint8_t>(crc >> (8 * i));
}

// A raw file: magic, version, body bytes as given, then a correct CRC.
inline std::vector<std::uint8_t> forge(const char (&magic)[5], std::uint8_t major, std::uint8_t minor,
                                       const std::vector<std::uint8_t>& body) {
    std::vector<std::uint8_t> f(magic, magic + 4);
    f.push_back(major);
    f.push_back(minor);
    f.insert(f.end(), body.begin(), body.end());
    f.resize(f.size() + 4);
    fix_checksum(f);
    return f;
}

inline void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<std::uint8_t>(v | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<std::uint8_t>(v));
}

inline void put_string(std::vector<std::uint8_t>& out, const std::string& s) {
    put_varint(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

inline ImageProfile libc_profile() {
    ImageProfile p;
    p.image = {"/usr/lib/x86_64-linux-gnu/libc.so.6", "3f2a9c1e5d7b00112233445566778899aabbccdd"};
    p.event = "cpu-clock";
    p.period = 1'000'000;
    p.processes = {
        {12, {{0x1000, 3}, {0x1004, 1}, {0x2000, 7}}},
        {400, {{0x10, 1}}},
    };
    return p;
}

inline StackProfile sample_stacks() {
    StackProfile s;
    s.event = "cpu-clock";
    s.period = 1'000'000;
    s.images = {{kKernelImage, ""}, {"/usr/bin/burn", "aabbcc"}, {"/usr/lib/libc.so.6", "3f2a"}};
    s.stacks = {
        {7, {{0, 0xffff}, {1, 0x1130}, {2, 0x29d90}}, 5},
        {7, {{1, 0x1130}, {2, 0x29d90}}, 2},
        {9, {}, 1},
        {kAllProcesses, {{1, 0x1200}}, 3},
    };
    return s;
}

// Two threads of one process and one of another; rbx counts down in a loop,
// rsi strides by 8, the rest mostly stays put (FORMAT.md §5a example shape).
inline RegisterProfile sample_registers() {
    RegisterProfile r;
    r.event = "cpu-clock";
    r.period = 200'000;
    r.every = 1;
    r.images = {{"/usr/bin/chase", "aabbcc"}, {"/usr/lib/libc.so.6", "3f2a"}};
    auto snapshot = [](std::uint32_t pid, std::uint32_t tid, std::uint64_t t, std::uint32_t image,
                       std::uint64_t offset, std::uint64_t rbx, std::uint64_t rsi) {
        RegisterSample s;
        s.pid = pid;
        s.tid = tid;
        s.time_ns = t;
        s.image = image;
        s.offset = offset;
        for (std::size_t i = 0; i < kGpRegisters; ++i) s.regs[i] = 0x1000 * (i + 1);
        s.regs[static_cast<std::size_t>(GpRegister::kRbx)] = rbx;
        s.regs[static_cast<std::size_t>(GpRegister::kRsi)] = rsi;
        s.regs[static_cast<std::size_t>(GpRegister::kRsp)] = 0x7ffd'1234'5670;
        return s;
    };
    r.samples = {
        snapshot(7, 7, 1'000'000'000, 0, 0x1130, 20'000'000, 0x5555'0000),
        snapshot(7, 7, 1'000'200'013, 0, 0x1134, 19'950'123, 0x5555'0000 + 8 * 49'877),
        snapshot(7, 7, 1'000'400'020, 1, 0x29d90, 19'900'000, 0x5555'0000 + 8 * 100'000),
        snapshot(7, 8, 1'000'100'000, 0, 0x1130, 5, 0),
        snapshot(9, 12, 999'000'000, 0, 0x1200, ~std::uint64_t{0}, 1),
    };
    return r;
}

}  // namespace ecpi::store::testing
