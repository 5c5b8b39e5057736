// Decoding, ELF bytes and CFG construction (DCPI 6.1.1). See cfg.h.
#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/symbols/capstone_library.h"

#include <capstone/capstone.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

namespace ecpi::analyze {

// ---------------------------------------------------------------------------
// Register canonicalization: one id per architectural register.

namespace {

constexpr std::uint16_t kRegisterBase = 3;  // ids 1 and 2 are flags and rsp

std::string canonical_register_name(std::string name) {
    static const std::map<std::string, std::string> kAliases = {
        {"al", "rax"}, {"ah", "rax"}, {"ax", "rax"}, {"eax", "rax"},
        {"bl", "rbx"}, {"bh", "rbx"}, {"bx", "rbx"}, {"ebx", "rbx"},
        {"cl", "rcx"}, {"ch", "rcx"}, {"cx", "rcx"}, {"ecx", "rcx"},
        {"dl", "rdx"}, {"dh", "rdx"}, {"dx", "rdx"}, {"edx", "rdx"},
        {"sil", "rsi"}, {"si", "rsi"}, {"esi", "rsi"},
        {"dil", "rdi"}, {"di", "rdi"}, {"edi", "rdi"},
        {"bpl", "rbp"}, {"bp", "rbp"}, {"ebp", "rbp"},
        {"spl", "rsp"}, {"sp", "rsp"}, {"esp", "rsp"},
        {"ip", "rip"}, {"eip", "rip"},
        {"eflags", "flags"}, {"rflags", "flags"},
    };
    if (auto it = kAliases.find(name); it != kAliases.end()) return it->second;
    // r8d, r8w, r8b -> r8
    if (name.size() >= 3 && name[0] == 'r' && std::isdigit(static_cast<unsigned char>(name[1]))) {
        char last = name.back();
        if (last == 'd' || last == 'w' || last == 'b') name.pop_back();
        return name;
    }
    // xmm3, ymm3, zmm3 -> zmm3
    if (name.size() > 3 && (name[0] == 'x' || name[0] == 'y' || name[0] == 'z') && name.compare(1, 2, "mm") == 0)
        return "z" + name.substr(1);
    return name;
}

struct RegisterTable {
    std::array<std::uint16_t, X86_REG_ENDING> canonical{};
    std::array<bool, X86_REG_ENDING> vector{};
};

const RegisterTable& register_table(const CapstoneApi& cs, csh handle) {
    static RegisterTable table;
    static std::once_flag once;
    std::call_once(once, [&cs, handle] {
        std::map<std::string, std::uint16_t> by_name;
        for (unsigned r = 1; r < X86_REG_ENDING; ++r) {
            const char* n = cs.reg_name(handle, r);
            if (n) by_name.emplace(n, static_cast<std::uint16_t>(r));
        }
        for (unsigned r = 1; r < X86_REG_ENDING; ++r) {
            const char* n = cs.reg_name(handle, r);
            if (!n) continue;
            std::string canon = canonical_register_name(n);
            std::uint16_t id;
            if (canon == "flags") {
                id = kFlagsRegister;
            } else if (canon == "rsp") {
                id = kStackPointer;
            } else {
                auto it = by_name.find(canon);
                id = static_cast<std::uint16_t>((it == by_name.end() ? r : it->second) + kRegisterBase);
            }
            table.canonical[r] = id;
            table.vector[r] = canon.rfind("zmm", 0) == 0;
        }
    });
    return table;
}

bool is_zero_idiom_candidate(unsigned id) {
    switch (id) {
        case X86_INS_XOR: case X86_INS_SUB: case X86_INS_PXOR: case X86_INS_XORPS: case X86_INS_XORPD:
        case X86_INS_VPXOR: case X86_INS_VXORPS: case X86_INS_VXORPD: case X86_INS_PSUBB: case X86_INS_PSUBW:
        case X86_INS_PSUBD: case X86_INS_PSUBQ: case X86_INS_VPXORD: case X86_INS_VPXORQ: case X86_INS_PCMPEQB:
            return true;
        default:
            return false;
    }
}

bool is_register_move(unsigned id) {
    switch (id) {
        case X86_INS_MOV: case X86_INS_MOVAPS: case X86_INS_MOVAPD: case X86_INS_MOVDQA: case X86_INS_MOVDQU:
        case X86_INS_MOVUPS: case X86_INS_VMOVAPS: case X86_INS_VMOVAPD: case X86_INS_VMOVDQA:
        case X86_INS_VMOVDQU: case X86_INS_VMOVUPS:
            return true;
        default:
            return false;
    }
}

bool has_group(const cs_detail* d, unsigned group) {
    return std::find(d->groups, d->groups + d->groups_count, group) != d->groups + d->groups_count;
}

// General-purpose registers in hardware encoding order (ModRM/REX numbers).
constexpr std::array<x86_reg, 16> kGpRegisters = {
    X86_REG_RAX, X86_REG_RCX, X86_REG_RDX, X86_REG_RBX, X86_REG_RSP, X86_REG_RBP, X86_REG_RSI, X86_REG_RDI,
    X86_REG_R8,  X86_REG_R9,  X86_REG_R10, X86_REG_R11, X86_REG_R12, X86_REG_R13, X86_REG_R14, X86_REG_R15,
};

}  // namespace

// Canonical ids are the Capstone id of the 64-bit register + kRegisterBase,
// except rsp (kStackPointer): see register_table.
std::uint16_t gp_register_id(int n) {
    if (n < 0 || n >= static_cast<int>(kGpRegisters.size())) return 0;
    if (kGpRegisters[static_cast<std::size_t>(n)] == X86_REG_RSP) return kStackPointer;
    return static_cast<std::uint16_t>(kGpRegisters[static_cast<std::size_t>(n)] + kRegisterBase);
}

int gp_register_number(std::uint16_t canonical) {
    for (int n = 0; n < static_cast<int>(kGpRegisters.size()); ++n)
        if (gp_register_id(n) == canonical) return n;
    return -1;
}

bool is_leaf_function(const ImageBytes& image, std::uint64_t start, std::uint64_t end) {
    if (end <= start) return false;
    auto bytes = image.read(start, end - start);
    if (bytes.empty()) return false;
    auto code = decode_x86_64(start, bytes);
    if (!code.ok()) return false;
    return std::none_of(code->begin(), code->end(), [&](const DecodedInstruction& c) {
        switch (c.flow) {
            case FlowKind::kCall: case FlowKind::kIndirectCall: case FlowKind::kIndirectJump:
                return true;
            case FlowKind::kJump: case FlowKind::kCondJump:
                return c.target < start || c.target >= end;
            default:
                return false;
        }
    });
}

std::string DecodedInstruction::text() const {
    return operands.empty() ? mnemonic : mnemonic + " " + operands;
}

namespace {

// One Capstone handle and instruction buffer per thread: opening them for
// every procedure was 1% of `calc --all` (34,000 procedures of libLLVM).
// Capstone itself is loaded at the first decode (capstone_library.h).
struct CapstoneDecoder {
    const CapstoneApi* cs = nullptr;
    csh handle = 0;
    cs_insn* insn = nullptr;
    std::string error;  // "" when the decoder is ready
    CapstoneDecoder() {
        auto api = capstone_api();
        if (!api.ok()) {
            error = api.error().message();
            return;
        }
        cs = *api;
        if (cs->open(CS_ARCH_X86, CS_MODE_64, &handle) != CS_ERR_OK) {
            error = "cannot open Capstone for x86-64";
            return;
        }
        cs->option(handle, CS_OPT_DETAIL, CS_OPT_ON);
        insn = cs->insn_malloc(handle);
        if (insn == nullptr) error = "cannot open Capstone for x86-64";
    }
    ~CapstoneDecoder() {
        if (insn) cs->insn_free(insn, 1);
        if (handle) cs->close(&handle);
    }
    CapstoneDecoder(const CapstoneDecoder&) = delete;
    CapstoneDecoder& operator=(const CapstoneDecoder&) = delete;
};

// The registers an instruction reads and writes, canonical (rip left out:
// it is not a data dependency).
void register_accesses(DecodedInstruction& d, const CapstoneApi& cs, csh handle, const cs_insn* insn,
                       const RegisterTable& regs) {
    cs_regs rr, ww;
    std::uint8_t nr = 0, nw = 0;
    if (cs.regs_access(handle, insn, rr, &nr, ww, &nw) == CS_ERR_OK) {
        for (int k = 0; k < nr; ++k) {
            d.reads.add(regs.canonical[rr[k]]);
            d.vector = d.vector || regs.vector[rr[k]];
        }
        for (int k = 0; k < nw; ++k) {
            d.writes.add(regs.canonical[ww[k]]);
            d.vector = d.vector || regs.vector[ww[k]];
        }
    }
    std::uint16_t rip = regs.canonical[X86_REG_RIP];
    d.reads.remove(rip);
    d.writes.remove(rip);
}

// The memory operand (its address) and whether the instruction loads or
// stores, the stack's own accesses included.
void memory_accesses(DecodedInstruction& d, const cs_insn* insn, const RegisterTable& regs) {
    const cs_x86& x86 = insn->detail->x86;
    const std::uint16_t rip = regs.canonical[X86_REG_RIP];
    bool is_lea = insn->id == X86_INS_LEA;
    bool is_nop = insn->id == X86_INS_NOP || insn->id == X86_INS_ENDBR64 || insn->id == X86_INS_PREFETCH ||
                  insn->id == X86_INS_PREFETCHT0 || insn->id == X86_INS_PREFETCHT1 ||
                  insn->id == X86_INS_PREFETCHT2 || insn->id == X86_INS_PREFETCHNTA ||
                  insn->id == X86_INS_PREFETCHW;
    for (int k = 0; k < x86.op_count; ++k) {
        const cs_x86_op& op = x86.operands[k];
        if (op.type != X86_OP_MEM || is_nop) continue;
        d.memory.segment = regs.canonical[op.mem.segment];
        d.memory.base = op.mem.base == X86_REG_RIP ? rip : regs.canonical[op.mem.base];
        d.memory.index = regs.canonical[op.mem.index];
        d.memory.scale = op.mem.scale;
        d.memory.disp = op.mem.disp;
        if (op.mem.base == X86_REG_RIP) d.memory.disp += static_cast<std::int64_t>(d.address + d.size);
        if (is_lea) continue;  // an address computation, no memory access
        if (op.access & CS_AC_READ) d.loads = true;
        if (op.access & CS_AC_WRITE) d.stores = true;
        if (!(op.access & (CS_AC_READ | CS_AC_WRITE))) d.loads = true;  // unknown access: assume a read
    }
    switch (insn->id) {
        case X86_INS_PUSH: case X86_INS_CALL: d.stores = true; break;
        case X86_INS_POP: case X86_INS_RET: d.loads = true; break;
        default: break;
    }
}

// Zero idioms, register moves, the first operands' registers and the
// immediate: what the machine model and register progress look at.
void operand_shapes(DecodedInstruction& d, const cs_insn* insn, const RegisterTable& regs) {
    const cs_x86& x86 = insn->detail->x86;
    if (is_zero_idiom_candidate(insn->id) && x86.op_count >= 2) {
        const cs_x86_op& a = x86.operands[x86.op_count - 2];
        const cs_x86_op& b = x86.operands[x86.op_count - 1];
        if (a.type == X86_OP_REG && b.type == X86_OP_REG && a.reg == b.reg) {
            d.zero_idiom = true;
            d.reads.clear();
        }
    }
    auto plain_register = [](const cs_x86_op& op) {
        return op.type == X86_OP_REG && op.reg != X86_REG_AH && op.reg != X86_REG_BH && op.reg != X86_REG_CH &&
               op.reg != X86_REG_DH;
    };
    if (x86.op_count >= 1 && plain_register(x86.operands[0])) {
        d.first_register = regs.canonical[x86.operands[0].reg];
        d.first_size = x86.operands[0].size;
    }
    if (x86.op_count >= 2 && plain_register(x86.operands[1])) d.second_register = regs.canonical[x86.operands[1].reg];
    for (int k = 0; k < x86.op_count; ++k)
        if (x86.operands[k].type == X86_OP_IMM) {
            d.has_immediate = true;
            d.immediate = x86.operands[k].imm;
        }
    if (is_register_move(insn->id) && x86.op_count == 2 && x86.operands[0].type == X86_OP_REG &&
        x86.operands[1].type == X86_OP_REG)
        d.reg_move = true;
}

// Returns, calls, jumps (with their direct targets) and traps.
void control_flow(DecodedInstruction& d, const cs_insn* insn) {
    const cs_detail* det = insn->detail;
    const cs_x86& x86 = det->x86;
    if (has_group(det, CS_GRP_RET) || insn->id == X86_INS_IRET || insn->id == X86_INS_IRETD ||
        insn->id == X86_INS_IRETQ || insn->id == X86_INS_RETF) {
        d.flow = FlowKind::kReturn;
    } else if (has_group(det, CS_GRP_CALL)) {
        if (x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM) {
            d.flow = FlowKind::kCall;
            d.target = static_cast<std::uint64_t>(x86.operands[0].imm);
        } else {
            d.flow = FlowKind::kIndirectCall;
        }
    } else if (has_group(det, CS_GRP_JUMP)) {
        bool unconditional = insn->id == X86_INS_JMP || insn->id == X86_INS_LJMP;
        bool direct = x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM;
        if (direct) d.target = static_cast<std::uint64_t>(x86.operands[0].imm);
        if (!unconditional) d.flow = FlowKind::kCondJump;
        else d.flow = direct ? FlowKind::kJump : FlowKind::kIndirectJump;
    } else if (insn->id == X86_INS_UD2 || insn->id == X86_INS_UD2B || insn->id == X86_INS_UD0 ||
               insn->id == X86_INS_HLT || insn->id == X86_INS_INT3) {
        d.flow = FlowKind::kTrap;
    }
}

// One instruction Capstone decoded.
DecodedInstruction describe(const CapstoneApi& cs, csh handle, const cs_insn* insn, const RegisterTable& regs) {
    DecodedInstruction d;
    d.address = insn->address;
    d.size = static_cast<std::uint8_t>(insn->size);
    d.id = insn->id;
    d.mnemonic = insn->mnemonic;
    d.operands = insn->op_str;
    register_accesses(d, cs, handle, insn, regs);
    memory_accesses(d, insn, regs);
    operand_shapes(d, insn, regs);
    control_flow(d, insn);
    return d;
}

// A byte Capstone cannot decode: a one-byte trap, and decoding goes on after it.
DecodedInstruction undecodable(std::uint64_t pc) {
    DecodedInstruction d;
    d.address = pc;
    d.size = 1;
    d.mnemonic = "(bad)";
    d.flow = FlowKind::kTrap;
    return d;
}

}  // namespace

Result<std::vector<DecodedInstruction>> decode_x86_64(std::uint64_t address, std::span<const std::uint8_t> bytes) {
    static thread_local CapstoneDecoder decoder;
    if (!decoder.error.empty()) return Error(decoder.error);
    const CapstoneApi& cs = *decoder.cs;
    csh handle = decoder.handle;
    const RegisterTable& regs = register_table(cs, handle);
    cs_insn* insn = decoder.insn;
    std::vector<DecodedInstruction> out;
    out.reserve(bytes.size() / 4);
    const std::uint8_t* code = bytes.data();
    std::size_t left = bytes.size();
    std::uint64_t pc = address;
    while (left > 0) {
        if (!cs.disasm_iter(handle, &code, &left, &pc, insn)) {
            out.push_back(undecodable(pc));
            ++code;
            --left;
            ++pc;
            continue;
        }
        out.push_back(describe(cs, handle, insn, regs));
    }
    return out;
}

// ---------------------------------------------------------------------------
// ImageBytes

struct ImageBytes::Impl {
    // Section contents point into the file, mapped by libelf (no copies: a
    // 100 MB library costs nothing until its pages are read).
    struct Section {
        std::uint64_t address = 0;
        const std::uint8_t* bytes = nullptr;
        std::uint64_t size = 0;
    };
    std::filesystem::path path;
    unsigned machine = 0;
    int fd = -1;
    Elf* elf = nullptr;
    std::vector<Section> sections;  // sorted by address
    std::vector<std::pair<std::uint64_t, std::uint64_t>> relative;  // R_X86_64_RELATIVE: address -> addend, sorted
    std::vector<std::uint64_t> imported;  // slots the loader fills with an undefined symbol's address, sorted

    ~Impl() {
        if (elf) elf_end(elf);
        if (fd >= 0) ::close(fd);
    }
};

ImageBytes::ImageBytes(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ImageBytes::ImageBytes(ImageBytes&&) noexcept = default;
ImageBytes& ImageBytes::operator=(ImageBytes&&) noexcept = default;
ImageBytes::~ImageBytes() = default;

namespace {

// An x86-64 image's R_X86_64_RELATIVE relocations (address -> addend,
// sorted): what a position-independent image's pointer tables hold once loaded.
std::vector<std::pair<std::uint64_t, std::uint64_t>> relative_relocations(Elf* elf) {
    constexpr std::uint64_t kRelative = 8;  // R_X86_64_RELATIVE
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || sh.sh_entsize == 0) continue;
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (!data) continue;
        const std::size_t n = sh.sh_size / sh.sh_entsize;
        for (std::size_t i = 0; i < n; ++i) {
            GElf_Rela r;
            if (gelf_getrela(data, static_cast<int>(i), &r) && GELF_R_TYPE(r.r_info) == kRelative)
                out.emplace_back(r.r_offset, static_cast<std::uint64_t>(r.r_addend));
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The slots an x86-64 image's R_X86_64_GLOB_DAT and R_X86_64_JUMP_SLOT
// relocations fill with the address of a symbol the image does not define
// (sorted): pointers into other images.
std::vector<std::uint64_t> imported_slots(Elf* elf) {
    constexpr std::uint64_t kGlobDat = 6, kJumpSlot = 7;
    std::vector<std::uint64_t> out;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || sh.sh_entsize == 0) continue;
        Elf_Data* data = elf_getdata(scn, nullptr);
        Elf_Scn* symbols = elf_getscn(elf, sh.sh_link);
        Elf_Data* symbol_data = symbols ? elf_getdata(symbols, nullptr) : nullptr;
        if (!data || !symbol_data) continue;
        const std::size_t n = sh.sh_size / sh.sh_entsize;
        for (std::size_t i = 0; i < n; ++i) {
            GElf_Rela r;
            GElf_Sym sym;
            if (!gelf_getrela(data, static_cast<int>(i), &r)) continue;
            const std::uint64_t type = GELF_R_TYPE(r.r_info);
            if (type != kGlobDat && type != kJumpSlot) continue;
            if (gelf_getsym(symbol_data, static_cast<int>(GELF_R_SYM(r.r_info)), &sym) && sym.st_shndx == SHN_UNDEF)
                out.push_back(r.r_offset);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

Result<ImageBytes> ImageBytes::open(const std::filesystem::path& elf_file) {
    elf_version(EV_CURRENT);
    int fd = ::open(elf_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error::from_errno(errno, "opening " + elf_file.string());
    Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        if (elf) elf_end(elf);
        ::close(fd);
        return Error(elf_file.string() + ": not an ELF file");
    }
    auto impl = std::make_unique<Impl>();
    impl->path = elf_file;
    impl->fd = fd;
    impl->elf = elf;
    GElf_Ehdr ehdr;
    if (gelf_getehdr(elf, &ehdr)) impl->machine = ehdr.e_machine;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh)) continue;
        if (!(sh.sh_flags & SHF_ALLOC) || sh.sh_type == SHT_NOBITS || sh.sh_size == 0) continue;
        Elf_Data* data = elf_rawdata(scn, nullptr);
        if (!data || !data->d_buf) continue;
        impl->sections.push_back({sh.sh_addr, static_cast<const std::uint8_t*>(data->d_buf), data->d_size});
    }
    std::sort(impl->sections.begin(), impl->sections.end(),
              [](const auto& a, const auto& b) { return a.address < b.address; });
    if (impl->sections.empty()) return Error(elf_file.string() + ": no loadable sections with contents");
    if (impl->machine == EM_X86_64) {
        impl->relative = relative_relocations(elf);
        impl->imported = imported_slots(elf);
    }
    return ImageBytes(std::move(impl));
}

std::optional<std::uint64_t> ImageBytes::pointer_at(std::uint64_t address) const {
    const auto& rel = impl_->relative;
    const auto it = std::lower_bound(rel.begin(), rel.end(), std::make_pair(address, std::uint64_t{0}));
    if (it != rel.end() && it->first == address) return it->second;
    const auto bytes = read(address, 8);
    if (bytes.size() != 8) return std::nullopt;
    std::uint64_t v = 0;
    std::memcpy(&v, bytes.data(), 8);
    return v;
}

bool ImageBytes::imported_slot(std::uint64_t address) const {
    return std::binary_search(impl_->imported.begin(), impl_->imported.end(), address);
}

std::span<const std::uint8_t> ImageBytes::read(std::uint64_t address, std::uint64_t size) const {
    auto& secs = impl_->sections;
    auto it = std::upper_bound(secs.begin(), secs.end(), address,
                               [](std::uint64_t a, const Impl::Section& s) { return a < s.address; });
    if (it == secs.begin()) return {};
    --it;
    std::uint64_t off = address - it->address;
    if (off > it->size || size > it->size - off) return {};
    return std::span<const std::uint8_t>(it->bytes + off, size);
}

unsigned ImageBytes::machine() const { return impl_->machine; }
const std::filesystem::path& ImageBytes::path() const { return impl_->path; }

// ---------------------------------------------------------------------------
// CFG

const char* edge_kind_name(EdgeKind kind) {
    switch (kind) {
        case EdgeKind::kFallThrough: return "fall-through";
        case EdgeKind::kPadding: return "padding";
        case EdgeKind::kBranch: return "branch";
        case EdgeKind::kJump: return "jump";
        case EdgeKind::kSwitch: return "switch";
        case EdgeKind::kEntry: return "entry";
        case EdgeKind::kVirtualEntry: return "virtual-entry";
        case EdgeKind::kReturn: return "return";
        case EdgeKind::kTailJump: return "tail-jump";
        case EdgeKind::kNoReturn: return "no-return";
        case EdgeKind::kTrap: return "trap";
        case EdgeKind::kUnresolved: return "unresolved";
        case EdgeKind::kLoopExit: return "loop-exit";
    }
    return "?";
}

std::uint32_t Cfg::block_of(std::uint32_t instruction) const { return instruction_block.at(instruction); }

bool is_noreturn_function(std::string_view name) {
    if (auto at = name.find('@'); at != std::string_view::npos) name = name.substr(0, at);
    if (auto paren = name.find('('); paren != std::string_view::npos) name = name.substr(0, paren);
    static const std::set<std::string_view, std::less<>> kNames = {
        "exit", "_exit", "_Exit", "quick_exit", "abort", "__stack_chk_fail", "__chk_fail", "__fortify_fail",
        "__cxa_throw", "__cxa_rethrow", "__cxa_bad_cast", "__cxa_bad_typeid", "__cxa_throw_bad_array_new_length",
        "__cxa_pure_virtual", "_Unwind_Resume", "__assert_fail", "__assert_perror_fail", "__assert",
        "longjmp", "siglongjmp", "_longjmp", "__longjmp_chk", "pthread_exit", "err", "errx", "verr", "verrx",
        "__libc_fatal", "std::terminate", "__gnu_cxx::__verbose_terminate_handler", "__ubsan_handle_builtin_unreachable",
        "std::__glibcxx_assert_fail", "__glibcxx_assert_fail",
    };
    if (kNames.count(name)) return true;
    // std::__throw_length_error, std::__throw_bad_alloc, ...
    return name.rfind("std::__throw_", 0) == 0 || name.rfind("__throw_", 0) == 0;
}

namespace {

struct AddressIndex {
    const std::vector<DecodedInstruction>& insns;
    std::optional<std::uint32_t> find(std::uint64_t address) const {
        auto it = std::lower_bound(insns.begin(), insns.end(), address,
                                   [](const DecodedInstruction& d, std::uint64_t a) { return d.address < a; });
        if (it == insns.end() || it->address != address) return std::nullopt;
        return static_cast<std::uint32_t>(it - insns.begin());
    }
};

// How far back (in instructions) the jump-table matcher looks.
constexpr int kSliceWindow = 24;
// Tables larger than this are not believed without a bound check.
constexpr std::uint32_t kMaxUnboundedEntries = 1024;

// The latest instruction before `from` (exclusive), within the window and
// not across an earlier unconditional transfer, that writes `reg`.
std::optional<std::uint32_t> last_def(const std::vector<DecodedInstruction>& insns, std::uint32_t from,
                                      std::uint16_t reg) {
    for (int back = 1; back <= kSliceWindow && back <= static_cast<int>(from); ++back) {
        std::uint32_t i = from - back;
        const auto& d = insns[i];
        if (d.flow == FlowKind::kJump || d.flow == FlowKind::kIndirectJump || d.flow == FlowKind::kReturn ||
            d.flow == FlowKind::kTrap)
            return std::nullopt;
        if (d.writes.contains(reg)) return i;
    }
    return std::nullopt;
}

// The number of table entries implied by a `cmp reg, imm` + `ja/jae/jbe/jb`
// pair before the jump (GCC and Clang bound switch indices this way).
std::optional<std::uint32_t> table_bound(const std::vector<DecodedInstruction>& insns, std::uint32_t jump) {
    for (int back = 1; back <= kSliceWindow * 2 && back <= static_cast<int>(jump); ++back) {
        std::uint32_t i = jump - back;
        const auto& d = insns[i];
        if (d.flow != FlowKind::kCondJump || i == 0) continue;
        unsigned id = d.id;
        bool above = id == X86_INS_JA || id == X86_INS_JBE;
        bool above_eq = id == X86_INS_JAE || id == X86_INS_JB;
        if (!above && !above_eq) continue;
        const auto& c = insns[i - 1];
        if (c.id != X86_INS_CMP) return std::nullopt;
        auto comma = c.operands.rfind(", ");
        if (comma == std::string::npos) return std::nullopt;
        std::string imm = c.operands.substr(comma + 2);
        char* endp = nullptr;
        unsigned long long v = std::strtoull(imm.c_str(), &endp, 0);
        if (!endp || *endp != '\0' || imm.empty()) return std::nullopt;
        if (v > 1u << 20) return std::nullopt;
        return static_cast<std::uint32_t>(above ? v + 1 : v);
    }
    return std::nullopt;
}

enum class IndirectKind { kTable, kTailCall, kUnknown };

struct IndirectResolution {
    IndirectKind kind = IndirectKind::kUnknown;
    JumpTable table;
    std::vector<std::uint64_t> targets;
};

// Reads table entries, keeping those that land on an instruction of the
// procedure; stops at the bound or at the first entry that does not.
std::vector<std::uint64_t> read_table(const ImageBytes& image, const AddressIndex& index, std::uint64_t start,
                                      std::uint64_t end, JumpTable& table, std::optional<std::uint32_t> bound) {
    std::vector<std::uint64_t> targets;
    std::uint32_t limit = bound.value_or(kMaxUnboundedEntries);
    unsigned width = table.relative ? 4 : 8;
    for (std::uint32_t k = 0; k < limit; ++k) {
        auto bytes = image.read(table.table + std::uint64_t{k} * width, width);
        if (bytes.empty()) break;
        std::uint64_t target;
        if (table.relative) {
            std::int32_t rel;
            std::memcpy(&rel, bytes.data(), 4);
            target = table.table + static_cast<std::int64_t>(rel);
        } else {
            std::memcpy(&target, bytes.data(), 8);
        }
        if (target < start || target >= end || !index.find(target)) {
            if (bound) return {};  // a bounded table must be entirely valid
            break;
        }
        targets.push_back(target);
    }
    table.entries = static_cast<std::uint32_t>(targets.size());
    if (!bound && targets.size() < 2) return {};
    return targets;
}

// The table of a PIC jump whose base register was set outside the matcher's
// window: every `lea base, [rip + T]` of the procedure is a candidate, and
// the table is the one candidate whose `bound` entries all land on
// instructions of the procedure. None, or two that do: not decided.
std::optional<std::vector<std::uint64_t>> hoisted_table(const std::vector<DecodedInstruction>& insns,
                                                        std::uint16_t base, const ImageBytes& image,
                                                        const AddressIndex& index, std::uint64_t start,
                                                        std::uint64_t end, JumpTable& table, std::uint32_t bound) {
    std::set<std::uint64_t> candidates;
    for (const auto& d : insns)
        if (d.id == X86_INS_LEA && d.writes.contains(base) && d.operands.find("rip") != std::string::npos)
            candidates.insert(static_cast<std::uint64_t>(d.memory.disp));
    std::optional<std::vector<std::uint64_t>> found;
    JumpTable chosen = table;
    for (auto address : candidates) {
        JumpTable t = table;
        t.table = address;
        auto targets = read_table(image, index, start, end, t, bound);
        if (targets.empty()) continue;
        if (found) return std::nullopt;  // two tables fit: the register's value at the jump is not known
        found = std::move(targets);
        chosen = t;
    }
    table = chosen;
    return found;
}

IndirectResolution resolve_indirect(const std::vector<DecodedInstruction>& insns, std::uint32_t jump,
                                    const CfgContext& context, const AddressIndex& index, std::uint64_t start,
                                    std::uint64_t end) {
    IndirectResolution res;
    const auto& j = insns[jump];
    JumpTable table;
    table.jump = j.address;
    auto bound = table_bound(insns, jump);

    auto try_table = [&](JumpTable t) -> bool {
        if (!context.image) return false;
        auto targets = read_table(*context.image, index, start, end, t, bound);
        if (targets.empty()) return false;
        res.kind = IndirectKind::kTable;
        res.table = t;
        res.targets = std::move(targets);
        return true;
    };

    if (j.loads) {
        // jmp qword ptr [index*8 + table] (non-PIC GCC and Clang)
        const auto& m = j.memory;
        if (m.index != 0 && m.scale == 8 && m.base == 0 && m.disp > 0) {
            table.table = static_cast<std::uint64_t>(m.disp);
            if (try_table(table)) return res;
            return res;  // an indexed jump we cannot read: unknown
        }
        if (m.index != 0) return res;
        res.kind = IndirectKind::kTailCall;  // jmp [rip + got] or jmp [reg + disp]: a call through a pointer
        return res;
    }
    // jmp reg
    if (j.reads.empty()) return res;
    std::uint16_t reg = j.reads.front();
    auto def = last_def(insns, jump, reg);
    if (!def) {
        res.kind = IndirectKind::kTailCall;  // e.g. a trampoline jumping to a pointer argument
        return res;
    }
    const auto& d = insns[*def];
    if (d.id == X86_INS_ADD && d.reads.size() >= 2) {
        // PIC: lea base, [rip + T]; movsxd reg, dword ptr [base + idx*4]; add reg, base; jmp reg
        std::uint16_t other = 0;
        for (auto r : d.reads)
            if (r != reg && r != kFlagsRegister) other = r;
        if (other == 0) return res;
        auto load = last_def(insns, *def, reg);
        if (!load) return res;
        const auto& l = insns[*load];
        if (!l.loads || l.memory.scale != 4 || l.memory.index == 0) return res;
        auto base_def = last_def(insns, *def, other);
        if (!base_def) {
            // The base was loaded before a loop the switch sits in (clang and
            // GCC hoist it out of a lexer's scanning loop).
            if (l.memory.base != other || !bound || !context.image) return res;
            table.relative = true;
            if (auto found = hoisted_table(insns, other, *context.image, index, start, end, table, *bound)) {
                res.kind = IndirectKind::kTable;
                res.table = table;
                res.targets = std::move(*found);
            }
            return res;
        }
        const auto& b = insns[*base_def];
        if (b.id != X86_INS_LEA) return res;
        // lea gives the table address: its memory operand is rip-relative (disp absolute).
        if (b.operands.find("rip") == std::string::npos) return res;
        table.table = static_cast<std::uint64_t>(b.memory.disp);  // rip-relative: already absolute
        table.relative = true;
        try_table(table);
        return res;
    }
    if (d.loads && d.memory.index != 0 && d.memory.scale == 8 && d.memory.base == 0 && d.memory.disp > 0) {
        // mov reg, qword ptr [idx*8 + T]; jmp reg
        table.table = static_cast<std::uint64_t>(d.memory.disp);
        try_table(table);
        return res;
    }
    if (d.loads && d.memory.index == 0) {
        res.kind = IndirectKind::kTailCall;  // mov rax, [rdi + 8]; jmp rax: a tail call through a pointer
        return res;
    }
    if (!d.loads && d.id != X86_INS_ADD) {
        // Computed from something other than a table (e.g. a pointer argument moved in): a tail call.
        if (d.reg_move) res.kind = IndirectKind::kTailCall;
    }
    return res;
}

// Tarjan's SCC over the blocks in `members` (iterative), calling `on_scc`
// with each component.
template <typename OnScc>
void strongly_connected(const Cfg& cfg, const std::vector<bool>& members, OnScc on_scc) {
    std::size_t n = cfg.blocks.size();
    std::vector<int> order(n, -1), low(n, 0);
    std::vector<bool> on_stack(n, false);
    std::vector<std::uint32_t> stack;
    int counter = 0;
    struct Frame {
        std::uint32_t block;
        std::size_t next_edge;
    };
    std::vector<Frame> dfs;
    for (std::uint32_t root = 0; root < n; ++root) {
        if (!members[root] || order[root] >= 0) continue;
        dfs.push_back({root, 0});
        order[root] = low[root] = counter++;
        stack.push_back(root);
        on_stack[root] = true;
        while (!dfs.empty()) {
            Frame& f = dfs.back();
            const auto& outs = cfg.blocks[f.block].out_edges;
            if (f.next_edge < outs.size()) {
                std::uint32_t to = cfg.edges[outs[f.next_edge++]].to;
                if (to == kExitBlock || !members[to]) continue;
                if (order[to] < 0) {
                    order[to] = low[to] = counter++;
                    stack.push_back(to);
                    on_stack[to] = true;
                    dfs.push_back({to, 0});
                } else if (on_stack[to]) {
                    low[f.block] = std::min(low[f.block], order[to]);
                }
                continue;
            }
            std::uint32_t b = f.block;
            dfs.pop_back();
            if (!dfs.empty()) low[dfs.back().block] = std::min(low[dfs.back().block], low[b]);
            if (low[b] == order[b]) {
                std::vector<std::uint32_t> scc;
                std::uint32_t x;
                do {
                    x = stack.back();
                    stack.pop_back();
                    on_stack[x] = false;
                    scc.push_back(x);
                } while (x != b);
                on_scc(scc);
            }
        }
    }
}

void add_edge(Cfg& cfg, std::uint32_t from, std::uint32_t to, EdgeKind kind) {
    auto e = static_cast<std::uint32_t>(cfg.edges.size());
    cfg.edges.push_back({from, to, kind});
    if (from != kEntryBlock) cfg.blocks[from].out_edges.push_back(e);
    if (to != kExitBlock) cfg.blocks[to].in_edges.push_back(e);
}

}  // namespace

void connect_entry_and_exit(Cfg& cfg) {
    const auto nb = static_cast<std::uint32_t>(cfg.blocks.size());
    if (nb == 0) return;
    // Marks every block reachable from `seeds` following edges forward
    // (forward = true) or backward.
    auto reach = [&](std::vector<bool>& seen, bool forward) {
        std::vector<std::uint32_t> work;
        for (std::uint32_t b = 0; b < nb; ++b)
            if (seen[b]) work.push_back(b);
        while (!work.empty()) {
            std::uint32_t b = work.back();
            work.pop_back();
            for (auto e : forward ? cfg.blocks[b].out_edges : cfg.blocks[b].in_edges) {
                std::uint32_t x = forward ? cfg.edges[e].to : cfg.edges[e].from;
                if (x == kExitBlock || x == kEntryBlock || seen[x]) continue;
                seen[x] = true;
                work.push_back(x);
            }
        }
    };
    // Blocks the entry does not reach (exception landing pads, code after a
    // no-return call, padding, jump-table targets we could not see): entered
    // from outside as far as we know. One virtual entry per source strongly
    // connected component of the unreached part, at its lowest address.
    std::vector<bool> from_entry(nb, false);
    for (std::uint32_t b = 0; b < nb; ++b)
        for (auto e : cfg.blocks[b].in_edges)
            if (cfg.edges[e].from == kEntryBlock) from_entry[b] = true;
    reach(from_entry, true);
    std::vector<bool> unreached(nb);
    for (std::uint32_t b = 0; b < nb; ++b) unreached[b] = !from_entry[b];
    {
        std::vector<std::uint32_t> component(nb, 0);
        std::vector<std::vector<std::uint32_t>> sccs;
        strongly_connected(cfg, unreached, [&](const std::vector<std::uint32_t>& scc) {
            for (auto b : scc) component[b] = static_cast<std::uint32_t>(sccs.size());
            sccs.push_back(scc);
        });
        for (std::uint32_t c = 0; c < sccs.size(); ++c) {
            bool source = true;
            for (auto b : sccs[c])
                for (auto e : cfg.blocks[b].in_edges) {
                    std::uint32_t from = cfg.edges[e].from;
                    if (from != kEntryBlock && component[from] != c) source = false;
                }
            if (source) add_edge(cfg, kEntryBlock, *std::min_element(sccs[c].begin(), sccs[c].end()), EdgeKind::kVirtualEntry);
        }
    }
    // DCPI 6.1.2's extension: loops that never reach the exit get an edge to
    // it, one per terminal strongly connected component, at its highest address.
    std::vector<bool> to_exit(nb, false);
    for (std::uint32_t b = 0; b < nb; ++b)
        for (auto e : cfg.blocks[b].out_edges)
            if (cfg.edges[e].to == kExitBlock) to_exit[b] = true;
    reach(to_exit, false);
    std::vector<bool> stuck(nb);
    for (std::uint32_t b = 0; b < nb; ++b) stuck[b] = !to_exit[b];
    std::vector<std::uint32_t> component(nb, 0);
    std::vector<std::vector<std::uint32_t>> sccs;
    strongly_connected(cfg, stuck, [&](const std::vector<std::uint32_t>& scc) {
        for (auto b : scc) component[b] = static_cast<std::uint32_t>(sccs.size());
        sccs.push_back(scc);
    });
    for (std::uint32_t c = 0; c < sccs.size(); ++c) {
        bool terminal = true;
        for (auto b : sccs[c])
            for (auto e : cfg.blocks[b].out_edges) {
                std::uint32_t to = cfg.edges[e].to;
                if (to != kExitBlock && component[to] != c) terminal = false;
            }
        if (terminal) add_edge(cfg, *std::max_element(sccs[c].begin(), sccs[c].end()), kExitBlock, EdgeKind::kLoopExit);
    }
}

namespace {

// What the instructions that end blocks do: where blocks start, how each
// indirect jump resolves, which calls never return.
struct BlockEnds {
    std::vector<bool> leader;
    std::map<std::uint32_t, IndirectResolution> indirect;
    std::vector<bool> noreturn_call;
};

BlockEnds find_block_ends(const Cfg& cfg, const AddressIndex& index, const CfgContext& context) {
    const auto& insns = cfg.instructions;
    const std::uint32_t n = static_cast<std::uint32_t>(insns.size());
    auto inside = [&](std::uint64_t a) { return a >= cfg.start && a < cfg.end; };
    BlockEnds out;
    out.leader.assign(n, false);
    out.leader[0] = true;
    out.noreturn_call.assign(n, false);
    for (std::uint32_t i = 0; i < n; ++i) {
        const auto& d = insns[i];
        bool ends = false;
        switch (d.flow) {
            case FlowKind::kCondJump:
            case FlowKind::kJump:
                ends = true;
                if (inside(d.target)) {
                    if (auto t = index.find(d.target)) out.leader[*t] = true;
                }
                break;
            case FlowKind::kIndirectJump: {
                ends = true;
                auto res = resolve_indirect(insns, i, context, index, cfg.start, cfg.end);
                for (auto t : res.targets) out.leader[*index.find(t)] = true;
                out.indirect.emplace(i, std::move(res));
                break;
            }
            case FlowKind::kReturn:
            case FlowKind::kTrap:
                ends = true;
                break;
            case FlowKind::kCall:
                if (context.name_at && !inside(d.target) && is_noreturn_function(context.name_at(d.target))) {
                    out.noreturn_call[i] = true;
                    ends = true;
                }
                break;
            default:
                break;
        }
        if (ends && i + 1 < n) out.leader[i + 1] = true;
    }
    return out;
}

// Cuts the instructions into blocks, one at each leader.
void cut_blocks(Cfg& cfg, const std::vector<bool>& leader) {
    const std::uint32_t n = static_cast<std::uint32_t>(cfg.instructions.size());
    cfg.instruction_block.assign(n, 0);
    for (std::uint32_t i = 0; i < n; ++i) {
        if (leader[i]) cfg.blocks.push_back({i, 0, {}, {}});
        cfg.blocks.back().count++;
        cfg.instruction_block[i] = static_cast<std::uint32_t>(cfg.blocks.size() - 1);
    }
}

// The edges out of each block, by what its last instruction does.
class BlockEdges {
public:
    BlockEdges(Cfg& cfg, const AddressIndex& index, const BlockEnds& ends) : cfg_(cfg), index_(index), ends_(ends) {}

    void add(std::uint32_t b) {
        const auto& insns = cfg_.instructions;
        std::uint32_t last = cfg_.blocks[b].first + cfg_.blocks[b].count - 1;
        const auto& d = insns[last];
        switch (d.flow) {
            case FlowKind::kCondJump:
                jump(b, d, EdgeKind::kBranch);
                fall_through(b);
                break;
            case FlowKind::kJump:
                jump(b, d, EdgeKind::kJump);
                break;
            case FlowKind::kIndirectJump:
                indirect_jump(b, d, ends_.indirect.at(last));
                break;
            case FlowKind::kReturn:
                add_edge(cfg_, b, kExitBlock, EdgeKind::kReturn);
                break;
            case FlowKind::kTrap:
                add_edge(cfg_, b, kExitBlock, EdgeKind::kTrap);
                break;
            default:
                if (ends_.noreturn_call[last]) add_edge(cfg_, b, kExitBlock, EdgeKind::kNoReturn);
                else if (is_padding(b)) add_edge(cfg_, b, kExitBlock, EdgeKind::kPadding);
                else fall_through(b);
                break;
        }
    }

private:
    bool inside(std::uint64_t a) const { return a >= cfg_.start && a < cfg_.end; }

    std::optional<std::uint32_t> block_at(std::uint64_t address) const {
        auto i = index_.find(address);
        if (!i) return std::nullopt;
        return cfg_.instruction_block[*i];
    }

    void fall_through(std::uint32_t b) {
        if (b + 1 < cfg_.blocks.size()) add_edge(cfg_, b, b + 1, EdgeKind::kFallThrough);
        else add_edge(cfg_, b, kExitBlock, EdgeKind::kTailJump);  // runs into the next function
    }

    void unresolved(std::uint32_t b, const DecodedInstruction& d) {
        cfg_.missing_edges = true;
        cfg_.unresolved_jumps.push_back(d.address);
        add_edge(cfg_, b, kExitBlock, EdgeKind::kUnresolved);
    }

    // A direct jump: out of the procedure, to a block, or (into the middle
    // of an instruction) somewhere we cannot follow.
    void jump(std::uint32_t b, const DecodedInstruction& d, EdgeKind kind) {
        if (!inside(d.target)) add_edge(cfg_, b, kExitBlock, EdgeKind::kTailJump);
        else if (auto t = block_at(d.target)) add_edge(cfg_, b, *t, kind);
        else unresolved(b, d);
    }

    void indirect_jump(std::uint32_t b, const DecodedInstruction& d, const IndirectResolution& res) {
        if (res.kind == IndirectKind::kTable) {
            cfg_.jump_tables.push_back(res.table);
            cfg_.jump_tables.back().targets = res.targets;
            std::set<std::uint32_t> seen;
            for (auto t : res.targets) {
                std::uint32_t tb = *block_at(t);
                if (seen.insert(tb).second) add_edge(cfg_, b, tb, EdgeKind::kSwitch);
            }
        } else if (res.kind == IndirectKind::kTailCall) {
            add_edge(cfg_, b, kExitBlock, EdgeKind::kTailJump);
        } else {
            unresolved(b, d);
        }
    }

    // Alignment padding: a block of NOPs right after an instruction that
    // does not fall through (nothing jumps into padding; a jump target
    // after it starts its own block).
    bool is_padding(std::uint32_t b) const {
        const auto& insns = cfg_.instructions;
        const auto& blk = cfg_.blocks[b];
        if (b == 0) return false;
        const auto& before = insns[blk.first - 1];
        bool falls = before.flow == FlowKind::kNone || before.flow == FlowKind::kCondJump || is_call(before.flow);
        if (falls && !ends_.noreturn_call[blk.first - 1]) return false;
        for (std::uint32_t i = blk.first; i < blk.first + blk.count; ++i)
            if (insns[i].mnemonic.rfind("nop", 0) != 0) return false;
        return true;
    }

    Cfg& cfg_;
    const AddressIndex& index_;
    const BlockEnds& ends_;
};

}  // namespace

Cfg build_cfg(std::uint64_t start, std::uint64_t end, std::vector<DecodedInstruction> instructions,
              const CfgContext& context) {
    Cfg cfg;
    cfg.start = start;
    cfg.end = end;
    cfg.instructions = std::move(instructions);
    if (cfg.instructions.empty()) return cfg;
    AddressIndex index{cfg.instructions};
    const BlockEnds ends = find_block_ends(cfg, index, context);
    cut_blocks(cfg, ends.leader);
    add_edge(cfg, kEntryBlock, 0, EdgeKind::kEntry);
    BlockEdges edges(cfg, index, ends);
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) edges.add(b);
    connect_entry_and_exit(cfg);
    return cfg;
}

}  // namespace ecpi::analyze
