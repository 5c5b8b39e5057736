#include "ecpi/loader/probe_symbols.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <gelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <set>

#include "ecpi/loader/process_table.h"

namespace ecpi::loader {
namespace fs = std::filesystem;

namespace {

std::string demangle(const std::string& name) {
    if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
    int status = 0;
    char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    if (status != 0 || !out) return name;
    std::string s(out);
    std::free(out);
    return s;
}

// "ns::f(int) const" -> "ns::f"; templates and operators keep their text up
// to the parameter list's opening parenthesis at nesting level 0.
std::string without_parameters(const std::string& demangled) {
    int angle = 0;
    for (std::size_t i = 0; i < demangled.size(); ++i) {
        char c = demangled[i];
        if (c == '<') ++angle;
        else if (c == '>' && angle > 0) --angle;
        else if (c == '(' && angle == 0 && i > 0) {
            // "operator()" keeps its own parentheses.
            if (demangled.compare(i >= 8 ? i - 8 : 0, 8, "operator") == 0 && i + 1 < demangled.size() &&
                demangled[i + 1] == ')')
                continue;
            return demangled.substr(0, i);
        }
    }
    return demangled;
}

bool glob(const std::string& pattern, const std::string& text) {
    return ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

}  // namespace

Result<ElfSymbols> ElfSymbols::read(const fs::path& file) {
    if (elf_version(EV_CURRENT) == EV_NONE) return Error("libelf initialization failed");
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error::from_errno(errno, "opening " + file.string());
    Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        if (elf) elf_end(elf);
        ::close(fd);
        return Error(file.string() + " is not an ELF file");
    }
    ElfSymbols out;
    std::size_t phnum = 0;
    if (elf_getphdrnum(elf, &phnum) != 0) phnum = 0;
    for (std::size_t i = 0; i < phnum; ++i) {
        GElf_Phdr phdr;
        if (!gelf_getphdr(elf, static_cast<int>(i), &phdr)) continue;
        if (phdr.p_type == PT_LOAD) out.segments_.push_back({phdr.p_offset, phdr.p_filesz, phdr.p_vaddr});
    }
    ElfSymbols tmp;
    Elf_Scn* dynsym = nullptr;
    Elf_Scn* symtab = nullptr;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr)) continue;
        if (shdr.sh_type == SHT_SYMTAB) symtab = scn;
        if (shdr.sh_type == SHT_DYNSYM) dynsym = scn;
        if (shdr.sh_type == SHT_DYNAMIC) {
            Elf_Data* data = elf_getdata(scn, nullptr);
            std::size_t n = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
            for (std::size_t i = 0; data && i < n; ++i) {
                GElf_Dyn dyn;
                if (!gelf_getdyn(data, static_cast<int>(i), &dyn)) break;
                const char* s = nullptr;
                if (dyn.d_tag == DT_NEEDED || dyn.d_tag == DT_RUNPATH || dyn.d_tag == DT_RPATH)
                    s = elf_strptr(elf, shdr.sh_link, dyn.d_un.d_val);
                if (!s) continue;
                if (dyn.d_tag == DT_NEEDED) {
                    out.needed_.emplace_back(s);
                } else {
                    std::string list(s);
                    std::size_t start = 0;
                    while (start <= list.size()) {
                        std::size_t colon = list.find(':', start);
                        std::string dir = list.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
                        if (!dir.empty()) out.runpath_.push_back(dir);
                        if (colon == std::string::npos) break;
                        start = colon + 1;
                    }
                }
            }
        }
    }
    out.has_symtab_ = symtab != nullptr;
    Elf_Scn* scn = symtab ? symtab : dynsym;
    if (scn) {
        GElf_Shdr shdr;
        gelf_getshdr(scn, &shdr);
        Elf_Data* data = elf_getdata(scn, nullptr);
        std::size_t n = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
        for (std::size_t i = 0; data && i < n; ++i) {
            GElf_Sym sym;
            if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
            if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
            const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
            if (!name || !*name) continue;
            FunctionSymbol f;
            f.name = name;
            // Versioned dynamic names ("memcpy@@GLIBC_2.14") are probed by their base name.
            if (auto at = f.name.find('@'); at != std::string::npos) f.name.resize(at);
            f.demangled = demangle(f.name);
            f.vaddr = sym.st_value;
            f.size = sym.st_size;
            f.global = GELF_ST_BIND(sym.st_info) != STB_LOCAL;
            out.functions_.push_back(std::move(f));
        }
    }
    elf_end(elf);
    ::close(fd);
    std::sort(out.functions_.begin(), out.functions_.end(), [](const FunctionSymbol& a, const FunctionSymbol& b) {
        if (a.vaddr != b.vaddr) return a.vaddr < b.vaddr;
        if (a.global != b.global) return a.global;  // the global name of an address first
        return a.name < b.name;
    });
    out.functions_.erase(std::unique(out.functions_.begin(), out.functions_.end(),
                                     [](const FunctionSymbol& a, const FunctionSymbol& b) {
                                         return a.vaddr == b.vaddr && a.name == b.name;
                                     }),
                         out.functions_.end());
    if (auto layout = read_elf_layout(file); layout.ok()) out.build_id_ = layout->build_id;
    return out;
}

const FunctionSymbol* ElfSymbols::containing(std::uint64_t vaddr) const {
    auto it = std::upper_bound(functions_.begin(), functions_.end(), vaddr,
                               [](std::uint64_t v, const FunctionSymbol& f) { return v < f.vaddr; });
    if (it == functions_.begin()) return nullptr;
    --it;
    // Go to the first alias of this address (the global one sorts first).
    std::uint64_t start = it->vaddr;
    while (it != functions_.begin() && std::prev(it)->vaddr == start) --it;
    const FunctionSymbol* best = &*it;
    // Prefer a sized symbol that really holds the address.
    for (auto j = it; j != functions_.end() && j->vaddr == start; ++j)
        if (vaddr < j->vaddr + j->size) return &*j;
    if (best->size != 0) return nullptr;  // past the end of the nearest function
    return best;
}

std::optional<std::uint64_t> ElfSymbols::file_offset(std::uint64_t vaddr) const {
    for (const auto& s : segments_)
        if (vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz) return vaddr - s.vaddr + s.offset;
    return std::nullopt;
}

std::optional<std::uint64_t> ElfSymbols::vaddr_of_offset(std::uint64_t offset) const {
    for (const auto& s : segments_)
        if (offset >= s.offset && offset < s.offset + s.filesz) return offset - s.offset + s.vaddr;
    return std::nullopt;
}

Result<FunctionPattern> parse_function_pattern(std::string_view text) {
    FunctionPattern p;
    p.text = std::string(text);
    std::size_t split = std::string_view::npos;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != ':') continue;
        if (i + 1 < text.size() && text[i + 1] == ':') {
            ++i;  // "::" of a C++ name
            continue;
        }
        split = i;
        break;
    }
    if (split != std::string_view::npos) {
        p.image = std::string(text.substr(0, split));
        p.function = std::string(text.substr(split + 1));
        if (p.image.empty()) return Error("pattern '" + p.text + "' has an empty image part before ':'");
    } else {
        p.function = std::string(text);
    }
    if (p.function.empty()) return Error("pattern '" + p.text + "' names no function");
    return p;
}

bool image_matches(const FunctionPattern& pattern, const fs::path& image) {
    if (pattern.image.empty()) return true;
    const std::string base = image.filename().string();
    if (pattern.image.find('/') != std::string::npos) {
        std::error_code ec;
        return pattern.image == image.string() || fs::equivalent(pattern.image, image, ec);
    }
    if (base == pattern.image) return true;
    if (base.size() > pattern.image.size() && base.compare(0, pattern.image.size(), pattern.image) == 0) {
        char next = base[pattern.image.size()];
        if (next == '.' || next == '-') return true;
    }
    return glob(pattern.image, base);
}

bool function_matches(const FunctionPattern& pattern, const FunctionSymbol& symbol) {
    if (glob(pattern.function, symbol.name)) return true;
    if (symbol.demangled == symbol.name) return false;
    return glob(pattern.function, symbol.demangled) || glob(pattern.function, without_parameters(symbol.demangled));
}

std::vector<std::string> near_matches(const FunctionPattern& pattern, const std::vector<const ElfSymbols*>& images,
                                      std::size_t limit) {
    auto lower = [](std::string s) {
        std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
        return s;
    };
    // Globs are compared by their literal part.
    std::string want;
    for (char c : pattern.function)
        if (c != '*' && c != '?' && c != '[' && c != ']') want += c;
    want = lower(want);
    if (want.empty()) return {};
    std::set<std::pair<std::size_t, std::string>> scored;
    std::set<std::string> seen;
    const std::size_t max_distance = std::max<std::size_t>(2, want.size() / 3);
    for (const ElfSymbols* image : images) {
        for (const auto& f : image->functions()) {
            std::string shown = without_parameters(f.demangled);
            if (!seen.insert(shown).second) continue;
            std::string l = lower(shown);
            std::size_t score;
            if (l.find(want) != std::string::npos || (want.size() >= 4 && want.find(l) != std::string::npos && l.size() >= 4)) {
                score = l.size() > want.size() ? l.size() - want.size() : want.size() - l.size();
            } else {
                std::size_t d = edit_distance(l, want);
                if (d > max_distance) continue;
                score = 100 + d;
            }
            scored.insert({score, shown});
        }
    }
    std::vector<std::string> out;
    for (const auto& [score, name] : scored) {
        if (out.size() >= limit) break;
        out.push_back(name);
    }
    return out;
}

namespace {

std::vector<std::string> split_paths(const char* list) {
    std::vector<std::string> out;
    if (!list) return out;
    std::string s(list);
    std::size_t start = 0;
    while (start <= s.size()) {
        std::size_t sep = s.find_first_of(":;", start);
        std::string dir = s.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
        if (!dir.empty()) out.push_back(dir);
        if (sep == std::string::npos) break;
        start = sep + 1;
    }
    return out;
}

void read_ld_so_conf(const fs::path& file, std::vector<std::string>& dirs, int depth) {
    std::ifstream in(file);
    std::string line;
    while (depth < 4 && std::getline(in, line)) {
        if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
        std::size_t b = line.find_first_not_of(" \t");
        if (b == std::string::npos) continue;
        line = line.substr(b);
        if (line.rfind("include", 0) == 0) {
            std::string pattern = line.substr(7);
            pattern.erase(0, pattern.find_first_not_of(" \t"));
            fs::path dir = fs::path(pattern).parent_path();
            std::string name_glob = fs::path(pattern).filename().string();
            std::error_code ec;
            std::vector<fs::path> files;
            for (const auto& e : fs::directory_iterator(dir, ec))
                if (glob(name_glob, e.path().filename().string())) files.push_back(e.path());
            std::sort(files.begin(), files.end());
            for (const auto& f : files) read_ld_so_conf(f, dirs, depth + 1);
        } else {
            dirs.push_back(line);
        }
    }
}

}  // namespace

std::vector<fs::path> needed_libraries(const fs::path& executable) {
    std::vector<std::string> system_dirs;
    read_ld_so_conf("/etc/ld.so.conf", system_dirs, 0);
    for (const char* d : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib",
                          "/usr/lib"})
        system_dirs.emplace_back(d);
    const std::vector<std::string> env_dirs = split_paths(std::getenv("LD_LIBRARY_PATH"));

    std::vector<fs::path> out;
    std::set<std::string> seen_names;
    std::deque<fs::path> queue{executable};
    std::set<fs::path> visited;
    while (!queue.empty()) {
        fs::path image = queue.front();
        queue.pop_front();
        if (!visited.insert(image).second) continue;
        auto elf = ElfSymbols::read(image);
        if (!elf.ok()) continue;
        std::vector<std::string> dirs;
        auto expand = [&](std::string dir) {
            if (auto pos = dir.find("$ORIGIN"); pos != std::string::npos) dir.replace(pos, 7, image.parent_path().string());
            return dir;
        };
        // DT_RPATH is searched before LD_LIBRARY_PATH only when there is no DT_RUNPATH;
        // both are collected in runpath(): treat them as DT_RUNPATH (after the environment).
        dirs.insert(dirs.end(), env_dirs.begin(), env_dirs.end());
        for (const auto& d : elf->runpath()) dirs.push_back(expand(d));
        dirs.insert(dirs.end(), system_dirs.begin(), system_dirs.end());
        for (const auto& name : elf->needed()) {
            if (!seen_names.insert(name).second) continue;
            std::optional<fs::path> found;
            if (name.find('/') != std::string::npos) {
                found = fs::path(name);
            } else {
                for (const auto& d : dirs) {
                    std::error_code ec;
                    fs::path candidate = fs::path(d) / name;
                    if (fs::is_regular_file(candidate, ec)) {
                        found = candidate;
                        break;
                    }
                }
            }
            if (!found) continue;
            std::error_code ec;
            fs::path canonical = fs::weakly_canonical(*found, ec);
            if (ec) canonical = *found;
            out.push_back(canonical);
            queue.push_back(canonical);
        }
    }
    return out;
}

}  // namespace ecpi::loader
