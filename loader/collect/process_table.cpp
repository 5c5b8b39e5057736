#include "ecpi/loader/process_table.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ecpi::loader {
namespace {

// Address spaces kept from before exec, for samples taken before an exec and
// drained after it. Launchers exec in chains within one drain: pyenv's
// `python3` shim runs env, bash, env, bash, ... then the interpreter (5-7
// execs); with 2 kept, its first programs' samples were [unknown].
constexpr std::size_t kMaxOldSpaces = 8;

// Replaced mappings kept per address space for the samples still to be
// drained (a drain's worth of dlclose/dlopen: a plugin host reloading in a
// loop replaces a few per reload); beyond, the oldest go first.
constexpr std::size_t kMaxReplaced = 1024;

std::string to_hex(const unsigned char* data, std::size_t size) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    out.reserve(size * 2);
    for (std::size_t i = 0; i < size; ++i) {
        out.push_back(digits[data[i] >> 4]);
        out.push_back(digits[data[i] & 0xf]);
    }
    return out;
}

// Pseudo images are not files: the kernel names them "[vdso]", "//anon", ...
std::optional<std::string> pseudo_image_name(const std::string& path) {
    if (path.empty() || path == "//anon" || path.starts_with("[anon") || path.starts_with("/anon_hugepage") ||
        path.starts_with("/memfd:") || path.starts_with("/dev/zero"))
        return std::string("[anon]");
    if (path.front() == '[') return path;
    return std::nullopt;
}

bool read_line_file(const std::filesystem::path& file, std::string& out) {
    std::ifstream in(file);
    if (!in) return false;
    std::getline(in, out);
    return true;
}

}  // namespace

Result<ElfLayout> read_elf_layout(const std::filesystem::path& file) {
    if (elf_version(EV_CURRENT) == EV_NONE) return Error("libelf initialization failed");
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error::from_errno(errno, "opening " + file.string());
    Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        if (elf) elf_end(elf);
        ::close(fd);
        return Error(file.string() + ": not an ELF file");
    }
    ElfLayout layout;
    std::size_t phnum = 0;
    if (elf_getphdrnum(elf, &phnum) != 0) phnum = 0;
    for (std::size_t i = 0; i < phnum; ++i) {
        GElf_Phdr phdr;
        if (!gelf_getphdr(elf, static_cast<int>(i), &phdr)) continue;
        if (phdr.p_type == PT_LOAD && (phdr.p_flags & PF_X))
            layout.segments.push_back({phdr.p_offset, phdr.p_filesz, phdr.p_vaddr});
        if (phdr.p_type == PT_NOTE && layout.build_id.empty()) {
            Elf_Data* data = elf_getdata_rawchunk(elf, static_cast<int64_t>(phdr.p_offset), phdr.p_filesz,
                                                  ELF_T_NHDR);
            if (!data) continue;
            GElf_Nhdr nhdr;
            std::size_t off = 0, name_off = 0, desc_off = 0;
            while ((off = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
                const char* base = static_cast<const char*>(data->d_buf);
                if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
                    std::string_view(base + name_off, 3) == "GNU") {
                    layout.build_id =
                        to_hex(reinterpret_cast<const unsigned char*>(base + desc_off), nhdr.n_descsz);
                    break;
                }
            }
        }
    }
    elf_end(elf);
    ::close(fd);
    return layout;
}

Result<std::string> save_vdso(const std::filesystem::path& file) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        if (!line.ends_with("[vdso]")) continue;
        unsigned long long start = 0, end = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx", &start, &end) != 2 || end <= start) break;
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(static_cast<std::uintptr_t>(start)),
                  static_cast<std::streamsize>(end - start));
        out.close();
        if (!out) return Error::from_errno(errno, "writing the vDSO to " + file.string());
        ECPI_ASSIGN_OR_RETURN(auto layout, read_elf_layout(file));
        if (layout.build_id.empty()) return Error("the vDSO has no build id");
        return layout.build_id;
    }
    return Error("this process has no [vdso] mapping");
}

Result<std::uint64_t> kernel_text_address(const std::filesystem::path& kallsyms) {
    std::ifstream in(kallsyms);
    if (!in) return Error::from_errno(errno, "opening " + kallsyms.string());
    std::string line;
    while (std::getline(in, line)) {
        // "ffffffff81000000 T _text"
        auto sp = line.find(' ');
        if (sp == std::string::npos || line.size() < sp + 3) continue;
        if (line.compare(sp + 3, std::string::npos, "_text") != 0) continue;
        std::uint64_t addr = std::strtoull(line.c_str(), nullptr, 16);
        if (addr == 0)
            return Error(kallsyms.string() +
                         ": kernel addresses are hidden (kptr_restrict); run as root or set kernel.kptr_restrict=0");
        return addr;
    }
    return Error(kallsyms.string() + ": no _text symbol");
}

ProcessTable::Process& ProcessTable::process(std::uint32_t pid) {
    auto& p = processes_[pid];
    if (p.spaces.empty()) p.spaces.emplace_back();
    return p;
}

bool ProcessTable::in_foreign_namespace(std::uint32_t pid) {
    struct stat own{}, theirs{};
    if (!own_mnt_ns_) {
        if (::stat((proc_root_ / "self/ns/mnt").c_str(), &own) == 0) own_mnt_ns_ = own.st_ino;
        else own_mnt_ns_ = 0;
    }
    if (::stat((proc_root_ / std::to_string(pid) / "ns/mnt").c_str(), &theirs) != 0) return false;
    return *own_mnt_ns_ != 0 && theirs.st_ino != *own_mnt_ns_;
}

void ProcessTable::read_elf(ImageInfo& image) {
    if (image.elf_read) return;
    image.elf_read = true;
    auto layout = read_elf_layout(image.readable_path);
    if (!layout.ok()) {
        image.elf_error = layout.error().message();
        return;
    }
    image.segments = std::move(layout->segments);
    if (image.id.build_id.empty()) image.id.build_id = layout->build_id;
}

std::uint32_t ProcessTable::intern_image(std::uint32_t pid, const std::string& path, const std::string& build_id,
                                         std::uint64_t start, std::uint64_t end) {
    if (auto pseudo = pseudo_image_name(path)) {
        auto key = std::make_pair(*pseudo, std::string());
        auto it = image_index_.find(key);
        if (it != image_index_.end()) return it->second;
        ImageInfo info;
        info.id.path = *pseudo;
        if (*pseudo == store::kVdsoImage) info.id.build_id = vdso_build_id_;
        info.elf_read = true;
        images_.push_back(std::move(info));
        return image_index_[key] = static_cast<std::uint32_t>(images_.size() - 1);
    }
    bool foreign = in_foreign_namespace(pid);
    bool deleted = path.ends_with(" (deleted)");
    // Without a build id, the same path in two mount namespaces may be two
    // different files: keep them apart.
    std::string key_id = build_id;
    if (key_id.empty() && (foreign || deleted)) key_id = "pid:" + std::to_string(pid);
    auto key = std::make_pair(path, key_id);
    auto it = image_index_.find(key);
    if (it != image_index_.end()) return it->second;

    ImageInfo info;
    info.id.path = deleted ? path.substr(0, path.size() - 10) : path;
    info.id.build_id = build_id;
    info.foreign_namespace = foreign;
    if (deleted) {
        char range[64];
        std::snprintf(range, sizeof range, "%" PRIx64 "-%" PRIx64, start, end);
        info.readable_path = (proc_root_ / std::to_string(pid) / "map_files" / range).string();
    } else if (foreign) {
        info.readable_path = (proc_root_ / std::to_string(pid) / "root").string() + path;
    } else {
        info.readable_path = path;
    }
    // Read the ELF now: a short-lived process may be gone (with its mount
    // namespace) by the time its samples are drained.
    read_elf(info);
    if (new_image_hook) new_image_hook(info);
    images_.push_back(std::move(info));
    return image_index_[key] = static_cast<std::uint32_t>(images_.size() - 1);
}

void ProcessTable::on_mmap(std::uint32_t pid, std::uint64_t start, std::uint64_t len, std::uint64_t pgoff,
                           const std::string& path, const std::string& build_id, std::uint64_t time_ns) {
    if (len == 0) return;
    std::uint64_t end = start + len;
    std::uint32_t image = intern_image(pid, path, build_id, start, end);
    auto& space = process(pid).spaces.back();
    auto& maps = space.mappings;
    // A new mapping replaces whatever it overlaps (munmap is not reported);
    // the part it replaces names the samples taken before time_ns.
    std::vector<Mapping> kept;
    kept.reserve(maps.size() + 2);
    for (const auto& m : maps) {
        if (m.end <= start || m.start >= end) {
            kept.push_back(m);
            continue;
        }
        if (m.start < start) kept.push_back({m.start, start, m.pgoff, m.image});
        if (m.end > end) kept.push_back({end, m.end, m.pgoff + (end - m.start), m.image});
        const std::uint64_t from = std::max(m.start, start);
        if (time_ns != 0)
            space.replaced.push_back({{from, std::min(m.end, end), m.pgoff + (from - m.start), m.image}, time_ns});
    }
    if (space.replaced.size() > kMaxReplaced) {
        const auto excess = static_cast<std::ptrdiff_t>(space.replaced.size() - kMaxReplaced);
        space.replaced.erase(space.replaced.begin(), space.replaced.begin() + excess);
    }
    kept.push_back({start, end, pgoff, image});
    std::sort(kept.begin(), kept.end(), [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
    maps = std::move(kept);
}

void ProcessTable::on_comm(std::uint32_t pid, const std::string& comm, bool exec) {
    auto& p = process(pid);
    p.comm = comm;
    if (exec) {
        p.spaces.emplace_back();
        if (p.spaces.size() > kMaxOldSpaces + 1) p.spaces.erase(p.spaces.begin());
    }
}

void ProcessTable::on_fork(std::uint32_t pid, std::uint32_t parent_pid) {
    if (pid == parent_pid) return;  // a new thread shares the address space
    Process child;
    auto parent = processes_.find(parent_pid);
    if (parent != processes_.end() && !parent->second.spaces.empty()) {
        child.comm = parent->second.comm;
        child.cmdline = parent->second.cmdline;
        child.spaces.push_back(parent->second.spaces.back());
    } else {
        child.spaces.emplace_back();
    }
    processes_[pid] = std::move(child);  // replaces a reused pid's old state
}

void ProcessTable::on_exit(std::uint32_t pid) {
    auto it = processes_.find(pid);
    if (it != processes_.end() && it->second.exit_age < 0) it->second.exit_age = 0;
}

void ProcessTable::reap_exited() {
    for (auto it = processes_.begin(); it != processes_.end();) {
        auto& p = it->second;
        if (p.exit_age >= 1) {
            it = processes_.erase(it);
            continue;
        }
        if (p.exit_age == 0) p.exit_age = 1;
        ++it;
    }
}

void ProcessTable::scan_proc(std::uint32_t pid) {
    auto dir = proc_root_ / std::to_string(pid);
    std::ifstream maps(dir / "maps");
    if (!maps) return;  // vanished, or a kernel thread's maps are empty anyway
    std::string comm;
    if (read_line_file(dir / "comm", comm)) process(pid).comm = comm;
    std::string line;
    while (std::getline(maps, line)) {
        // start-end perms offset dev inode [path]
        unsigned long long start = 0, end = 0, offset = 0;
        char perms[8] = {};
        int path_pos = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset, &path_pos) < 4)
            continue;
        if (std::strchr(perms, 'x') == nullptr) continue;
        std::string path = path_pos > 0 && static_cast<std::size_t>(path_pos) <= line.size() ? line.substr(path_pos) : "";
        if (path == "[vsyscall]") continue;
        on_mmap(pid, start, end - start, offset, path, "");
    }
}

void ProcessTable::scan_all_proc() {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(proc_root_, ec)) {
        const auto name = entry.path().filename().string();
        if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
        scan_proc(static_cast<std::uint32_t>(std::stoul(name)));
    }
}

// The mapping at `pc` when the sample was taken: the earliest replaced one
// whose replacement came after time_ns, else the current one.
std::optional<ResolvedPc> ProcessTable::resolve_in(const AddressSpace& space, std::uint64_t pc,
                                                   std::uint64_t time_ns) {
    const Replaced* then = nullptr;
    for (const auto& r : space.replaced) {
        if (r.until_ns <= time_ns || pc < r.mapping.start || pc >= r.mapping.end) continue;
        if (!then || r.until_ns < then->until_ns) then = &r;
    }
    if (then) return resolve_mapping(then->mapping, pc);
    const auto& maps = space.mappings;
    auto it = std::upper_bound(maps.begin(), maps.end(), pc,
                               [](std::uint64_t v, const Mapping& m) { return v < m.start; });
    if (it == maps.begin()) return std::nullopt;
    --it;
    if (pc >= it->end) return std::nullopt;
    return resolve_mapping(*it, pc);
}

ResolvedPc ProcessTable::resolve_mapping(const Mapping& m, std::uint64_t pc) {
    const ImageInfo& image = images_[m.image];
    // JIT code is looked up by absolute address (as perf-PID.map files do);
    // other pseudo images ([vdso]) relative to where they were mapped.
    if (image.id.path == "[anon]") return ResolvedPc{m.image, pc};
    if (image.id.path.starts_with('[')) return ResolvedPc{m.image, pc - m.start + m.pgoff};
    std::uint64_t file_offset = pc - m.start + m.pgoff;
    for (const auto& seg : image.segments) {
        if (file_offset >= seg.offset && file_offset < seg.offset + seg.filesz)
            return ResolvedPc{m.image, file_offset - seg.offset + seg.vaddr};
    }
    // No executable segment covers it (unreadable file): keep the file offset.
    return ResolvedPc{m.image, file_offset};
}

void ProcessTable::forget_replaced_before(std::uint64_t horizon_ns) {
    for (auto& [pid, p] : processes_)
        for (auto& space : p.spaces)
            std::erase_if(space.replaced, [&](const Replaced& r) { return r.until_ns <= horizon_ns; });
}

std::optional<ResolvedPc> ProcessTable::resolve(std::uint32_t pid, std::uint64_t pc, std::uint64_t time_ns) {
    if (time_ns == 0) time_ns = kNow;  // no time known (never a kernel's: its clock starts at boot)
    auto it = processes_.find(pid);
    if (it == processes_.end()) {
        // Never seen (records lost?): the process may still be alive.
        scan_proc(pid);
        it = processes_.find(pid);
        if (it == processes_.end()) return std::nullopt;
    }
    const auto& spaces = it->second.spaces;
    for (auto s = spaces.rbegin(); s != spaces.rend(); ++s) {
        if (auto r = resolve_in(*s, pc, time_ns)) return r;
    }
    return std::nullopt;
}

std::string ProcessTable::comm(std::uint32_t pid) const {
    auto it = processes_.find(pid);
    return it == processes_.end() ? std::string() : it->second.comm;
}

std::string ProcessTable::cmdline(std::uint32_t pid) const {
    auto it = processes_.find(pid);
    if (it == processes_.end()) return {};
    return it->second.cmdline.empty() ? it->second.exec_args : it->second.cmdline;
}

}  // namespace ecpi::loader
