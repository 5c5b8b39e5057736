// One procedure's machine code and control-flow graph (DCPI 6.1.1): the
// bytes read from the ELF image, disassembled with Capstone (x86-64, detail
// mode) into instructions that carry what the CFG builder and the machine
// model need, then cut into basic blocks joined by typed edges.
//
// Rules the rest of the analysis relies on:
//  - Block 0 is the procedure's entry block; blocks are in address order and
//    every instruction belongs to exactly one block.
//  - Calls do not end blocks, except calls to functions that never return
//    (exit, abort, __stack_chk_fail, __cxa_throw, ...), which end the block
//    with an edge to the exit.
//  - Every way out of the procedure (return, tail jump, no-return call, trap,
//    indirect jump treated as a tail call) is an edge to kExitBlock; the
//    procedure entry is an edge from kEntryBlock to block 0.
//  - `missing_edges` is set when an indirect jump could not be resolved: the
//    graph then lacks some of that jump's successors (DCPI 6.1.1) and the
//    frequency analysis degrades to one class per block and per edge.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ecpi/result.h"

namespace ecpi::analyze {

// What an instruction does to control flow.
enum class FlowKind : std::uint8_t {
    kNone,          // falls through
    kCondJump,      // jcc/jrcxz/loop: taken target or fall-through
    kJump,          // direct unconditional jump
    kIndirectJump,  // jmp reg/mem: a jump table, an indirect tail call, or unknown
    kCall,          // direct call
    kIndirectCall,  // call reg/mem
    kReturn,        // ret
    kTrap,          // ud2, hlt, int3: execution does not continue here
};

inline bool is_call(FlowKind f) { return f == FlowKind::kCall || f == FlowKind::kIndirectCall; }

// Where a memory operand points (for store-to-load forwarding in the model).
struct MemoryOperand {
    std::uint16_t segment = 0, base = 0, index = 0;  // canonical register ids (0: none)
    std::int32_t scale = 1;
    std::int64_t disp = 0;
    bool operator==(const MemoryOperand&) const = default;
};

// A small set of canonical register ids, stored inline (decoding millions
// of instructions for `ecpi calc --all` must not allocate per instruction).
class RegisterSet {
public:
    static constexpr std::size_t kCapacity = 24;  // vzeroupper writes 16 registers
    const std::uint16_t* begin() const { return regs_.data(); }
    const std::uint16_t* end() const { return regs_.data() + size_; }
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    std::uint16_t front() const { return regs_[0]; }
    bool contains(std::uint16_t r) const { return std::find(begin(), end(), r) != end(); }
    void clear() { size_ = 0; }
    // Adds r unless 0, present, or the set is full.
    void add(std::uint16_t r) {
        if (r != 0 && !contains(r) && size_ < kCapacity) regs_[size_++] = r;
    }
    void remove(std::uint16_t r) {
        auto* e = std::remove(regs_.data(), regs_.data() + size_, r);
        size_ = static_cast<std::uint8_t>(e - regs_.data());
    }

private:
    std::array<std::uint16_t, kCapacity> regs_{};
    std::uint8_t size_ = 0;
};

// One decoded instruction. Register ids are canonical: every alias of a
// register (al, ax, eax, rax; xmm3, ymm3, zmm3) maps to one id, and the
// flags register is kFlagsRegister.
struct DecodedInstruction {
    std::uint64_t address = 0;
    std::uint8_t size = 0;
    unsigned id = 0;                   // Capstone instruction id (X86_INS_*); 0 for undecodable bytes
    std::string mnemonic;              // "mov", "jne", "(bad)"
    std::string operands;              // Intel syntax
    FlowKind flow = FlowKind::kNone;
    std::uint64_t target = 0;          // direct jump/call target, when known
    RegisterSet reads;                 // registers read (explicit, implicit, address registers)
    RegisterSet writes;                // registers written
    bool loads = false;                // reads memory
    bool stores = false;               // writes memory
    MemoryOperand memory;              // the memory operand (also lea's); rip-relative disp made absolute
    bool zero_idiom = false;           // xor r,r / sub r,r / pxor x,x ...: no input dependency
    bool reg_move = false;             // register-to-register move (candidate for move elimination)
    bool vector = false;               // uses xmm/ymm/zmm registers
    // The first operand when it is a register (canonical id; 0: not a
    // register) and its width in bytes; the immediate operand, if any. Loop
    // analysis (loops.h) reads induction steps from them.
    // (ah, bh, ch, dh are not plain registers here: 0.) The second operand
    // likewise, when it is a register.
    std::uint16_t first_register = 0;
    std::uint8_t first_size = 0;
    std::uint16_t second_register = 0;
    bool has_immediate = false;
    std::int64_t immediate = 0;
    std::string text() const;          // "mnemonic operands"
};

inline constexpr std::uint16_t kFlagsRegister = 1;
inline constexpr std::uint16_t kStackPointer = 2;

// The hardware number (0 = rax, 1 = rcx, ... 4 = rsp, ... 15 = r15; the
// order of store::GpRegister) of a canonical general-purpose register id,
// or -1 for any other register.
int gp_register_number(std::uint16_t canonical);
// The canonical id of general-purpose register number n (0..15).
std::uint16_t gp_register_id(int n);

// Decodes `bytes` (loaded at `address`) as x86-64. Undecodable bytes become
// one-byte "(bad)" instructions with FlowKind::kTrap so the listing covers
// the whole range.
[[nodiscard]] Result<std::vector<DecodedInstruction>> decode_x86_64(std::uint64_t address,
                                                                  std::span<const std::uint8_t> bytes);

class ImageBytes;

// Whether the code of [start, end) is a leaf: no call and no jump out of
// itself (a tail call could go anywhere). False when it cannot be read.
bool is_leaf_function(const ImageBytes& image, std::uint64_t start, std::uint64_t end);

// The loaded contents of an ELF file by virtual address (allocated sections
// with file contents), for code and for jump tables in .rodata.
class ImageBytes {
public:
    static Result<ImageBytes> open(const std::filesystem::path& elf_file);
    ImageBytes(ImageBytes&&) noexcept;
    ImageBytes& operator=(ImageBytes&&) noexcept;
    ~ImageBytes();

    // Bytes of [address, address + size): empty when no section holds all of them.
    std::span<const std::uint8_t> read(std::uint64_t address, std::uint64_t size) const;
    // The 8-byte pointer stored at `address` as the loaded image holds it: a
    // position-independent image's R_X86_64_RELATIVE relocation's addend
    // (the file holds 0 there), else the bytes; none where unreadable.
    std::optional<std::uint64_t> pointer_at(std::uint64_t address) const;
    // Whether the 8-byte slot at `address` is one the loader fills with the
    // address of a symbol the image does not define (R_X86_64_GLOB_DAT or
    // JUMP_SLOT against an undefined symbol): a call through it leaves the image.
    bool imported_slot(std::uint64_t address) const;
    unsigned machine() const;  // ELF e_machine
    const std::filesystem::path& path() const;

private:
    struct Impl;
    explicit ImageBytes(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

enum class EdgeKind : std::uint8_t {
    kFallThrough,   // to the next block in address order
    kBranch,        // taken side of a conditional jump
    kJump,          // direct unconditional jump
    kSwitch,        // one target of a recovered jump table
    kEntry,         // kEntryBlock -> block 0
    kVirtualEntry,  // kEntryBlock -> a block with no predecessors (landing pads, unreached code)
    kReturn,        // -> kExitBlock
    kTailJump,      // direct or indirect jump out of the procedure -> kExitBlock
    kNoReturn,      // call to a function that never returns -> kExitBlock
    kTrap,          // ud2/hlt/undecodable -> kExitBlock
    kUnresolved,    // an unresolved indirect jump -> kExitBlock (its real targets are missing)
    kLoopExit,      // DCPI 6.1.2's extension: a loop that never exits -> kExitBlock
    kPadding,       // alignment NOPs after a jump or return -> kExitBlock (never run; they
                    // must not feed the code after them through a virtual entry)
};
const char* edge_kind_name(EdgeKind kind);

inline constexpr std::uint32_t kEntryBlock = 0xfffffffeu;
inline constexpr std::uint32_t kExitBlock = 0xffffffffu;

struct BasicBlock {
    std::uint32_t first = 0;                 // index of the first instruction
    std::uint32_t count = 0;                 // number of instructions
    std::vector<std::uint32_t> in_edges;     // indices into Cfg::edges
    std::vector<std::uint32_t> out_edges;
};

struct CfgEdge {
    std::uint32_t from = 0;                  // block index, or kEntryBlock
    std::uint32_t to = 0;                    // block index, or kExitBlock
    EdgeKind kind = EdgeKind::kFallThrough;
};

struct JumpTable {
    std::uint64_t jump = 0;                  // address of the indirect jump
    std::uint64_t table = 0;                 // address of the table
    std::uint32_t entries = 0;
    bool relative = false;                   // 32-bit entries relative to the table (PIC)
    std::vector<std::uint64_t> targets;      // per entry, in table order: where index k jumps
};

struct Cfg {
    std::uint64_t start = 0, end = 0;        // the procedure's [start, end)
    std::vector<DecodedInstruction> instructions;
    std::vector<BasicBlock> blocks;
    std::vector<CfgEdge> edges;              // kEntryBlock/kExitBlock edges included
    std::vector<JumpTable> jump_tables;
    bool missing_edges = false;
    std::vector<std::uint64_t> unresolved_jumps;  // addresses of unresolved indirect jumps

    // The block holding instruction index i.
    std::uint32_t block_of(std::uint32_t instruction) const;
    std::vector<std::uint32_t> instruction_block;  // per instruction
};

// Decides what a call or jump target outside the procedure is.
struct CfgContext {
    // Name of the function at an address (e.g. "exit@plt", "abort"); empty
    // when unknown. Used to recognize calls that never return.
    std::function<std::string(std::uint64_t)> name_at;
    // Reads jump tables; null disables jump-table recovery.
    const ImageBytes* image = nullptr;
};

// Whether a function name (as the symbolizer gives it: demangled, PLT
// entries as "name@plt", maybe with a parameter list) never returns.
bool is_noreturn_function(std::string_view name);

// Makes every block reachable from kEntryBlock (a kVirtualEntry edge into
// each source strongly connected component the entry does not reach) and
// able to reach kExitBlock (a kLoopExit edge out of each terminal component
// that never exits: DCPI 6.1.2's extension for infinite loops). build_cfg
// calls it; exposed for tests that make graphs by hand.
void connect_entry_and_exit(Cfg& cfg);

// Builds the CFG of [start, end) from its instructions.
Cfg build_cfg(std::uint64_t start, std::uint64_t end, std::vector<DecodedInstruction> instructions,
              const CfgContext& context);

}  // namespace ecpi::analyze
