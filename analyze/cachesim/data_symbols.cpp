// Global and static variables by address (include/ecpi/analyze/cachesim/data_symbols.h).
#include "ecpi/analyze/cachesim/data_symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

namespace ecpi::analyze {

// STT_OBJECT symbols and the first PT_LOAD (data_symbols.h).
void read_elf_data(const std::string& path, std::vector<DataSymbol>& out, std::optional<std::uint64_t>& load_delta) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return;
    }
    elf_version(EV_CURRENT);
    Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    if (!elf) {
        ::close(fd);
        return;
    }
    std::size_t nph = 0;
    if (elf_getphdrnum(elf, &nph) == 0) {
        for (std::size_t i = 0; i < nph && i < 4096; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(elf, int(i), &ph) && ph.p_type == PT_LOAD) {
                load_delta = ph.p_vaddr - ph.p_offset;
                break;
            }
        }
    }
    for (int pass = 0; pass < 2 && out.empty(); pass++) {
        Elf_Scn* scn = nullptr;
        while ((scn = elf_nextscn(elf, scn)) != nullptr) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh) || sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM) || sh.sh_entsize == 0) continue;
            Elf_Data* d = elf_getdata(scn, nullptr);
            if (!d) continue;
            std::size_t count = std::min<std::size_t>(sh.sh_size / sh.sh_entsize, 10'000'000);
            for (std::size_t i = 1; i < count; i++) {
                GElf_Sym sym;
                if (!gelf_getsym(d, int(i), &sym)) continue;
                if (GELF_ST_TYPE(sym.st_info) != STT_OBJECT || sym.st_size == 0 || sym.st_shndx == SHN_UNDEF) continue;
                const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
                if (!name || !*name) continue;
                out.push_back({sym.st_value, sym.st_value + sym.st_size, name});
            }
        }
    }
    elf_end(elf);
    ::close(fd);
    std::sort(out.begin(), out.end(), [](const DataSymbol& a, const DataSymbol& b) { return a.start < b.start; });
}

std::uint64_t module_bias(const TraceModule& m, std::optional<std::uint64_t> load_delta) {
    return m.bias_known ? m.base : m.start - load_delta.value_or(0);
}

DataSymbolIndex::DataSymbolIndex(const std::vector<TraceModule>& modules) {
    for (const TraceModule& m : modules) {
        Module out{m.start, m.end, 0, {}};
        std::optional<std::uint64_t> delta;
        read_elf_data(m.path, out.data, delta);
        if (out.data.empty()) continue;
        out.bias = module_bias(m, delta);
        modules_.push_back(std::move(out));
    }
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> DataSymbolIndex::range_of(std::uint64_t address) const {
    for (const Module& m : modules_) {
        if (address < m.start || address >= m.end) continue;
        const std::uint64_t vaddr = address - m.bias;
        auto it = std::upper_bound(m.data.begin(), m.data.end(), vaddr,
                                   [](std::uint64_t a, const DataSymbol& s) { return a < s.start; });
        if (it == m.data.begin()) return std::nullopt;
        --it;
        if (vaddr >= it->end) return std::nullopt;
        return std::pair{it->start + m.bias, it->end + m.bias};
    }
    return std::nullopt;
}

void key_statics_by_symbols(const std::vector<TraceModule>& modules, CacheSimulator& sim, CacheSimulator* sets) {
    auto index = std::make_shared<const DataSymbolIndex>(modules);
    auto range_of = [index](std::uint64_t address) { return index->range_of(address); };
    sim.key_statics_by(range_of);
    if (sets) sets->key_statics_by(range_of);
}

}  // namespace ecpi::analyze
