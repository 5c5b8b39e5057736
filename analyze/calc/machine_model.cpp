// The idealized out-of-order core behind M_i (DCPI 6.1.3 on x86-64). See
// machine_model.h and docs/MACHINE_MODEL.md.
#include "ecpi/analyze/calc/machine_model.h"

#include <capstone/capstone.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <fstream>
#include <limits>
#include <span>

namespace ecpi::analyze {

// Generated from analyze/machine/*.json at build time (builtin_machines.cpp.in).
extern const std::vector<std::pair<std::string, std::string>>& builtin_machine_files();

namespace {

template <typename T>
Result<T> field(const nlohmann::json& j, const char* key, T fallback) {
    if (!j.contains(key)) return fallback;
    try {
        return j.at(key).get<T>();
    } catch (const nlohmann::json::exception& e) {
        return Error(std::string("machine model field \"") + key + "\": " + e.what());
    }
}

}  // namespace

std::vector<std::string> MachineModel::builtin_names() {
    std::vector<std::string> names;
    for (const auto& [name, text] : builtin_machine_files()) names.push_back(name);
    return names;
}

std::optional<std::string> MachineModel::builtin_for_cpu(std::string_view vendor, std::uint64_t family,
                                                         std::uint64_t model) {
    if (vendor.empty()) return std::nullopt;
    auto in = [](const std::vector<std::uint64_t>& set, std::uint64_t v) {
        return set.empty() || std::find(set.begin(), set.end(), v) != set.end();
    };
    for (const auto& [name, text] : builtin_machine_files()) {
        auto j = nlohmann::json::parse(text, nullptr, false);
        if (j.is_discarded()) continue;
        auto m = from_json(j);
        if (!m.ok() || m.value().match_vendor_ != vendor) continue;
        if (in(m.value().match_families_, family) && in(m.value().match_models_, model)) return name;
    }
    return std::nullopt;
}

Result<MachineModel> MachineModel::load(std::string_view name_or_path) {
    for (const auto& [name, text] : builtin_machine_files()) {
        if (name == name_or_path) {
            auto j = nlohmann::json::parse(text, nullptr, false);
            if (j.is_discarded()) return Error("built-in machine model " + name + " is not valid JSON");
            return from_json(j);
        }
    }
    std::ifstream in{std::string(name_or_path)};
    if (!in) {
        std::string names;
        for (const auto& n : builtin_names()) names += (names.empty() ? "" : ", ") + n;
        return Error("no machine model \"" + std::string(name_or_path) + "\" (built in: " + names +
                     "; or give a JSON file)");
    }
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded()) return Error(std::string(name_or_path) + ": not valid JSON");
    auto m = from_json(j);
    if (!m.ok()) return m.error().with_context(std::string(name_or_path));
    return m;
}

Result<MachineModel> MachineModel::from_json(const nlohmann::json& j) {
    if (!j.is_object() || j.value("schema", "") != "ecpi.machine")
        return Error("machine model: not an \"ecpi.machine\" document");
    if (j.value("version", 0) != 1) return Error("machine model: unsupported version (this ecpi reads version 1)");
    MachineModel m;
    ECPI_ASSIGN_OR_RETURN(m.name_, field<std::string>(j, "name", "unnamed"));
    ECPI_ASSIGN_OR_RETURN(m.dispatch_width_, field<int>(j, "dispatch_width", 4));
    ECPI_ASSIGN_OR_RETURN(m.retire_width_, field<int>(j, "retire_width", 4));
    ECPI_ASSIGN_OR_RETURN(m.widest_retire_, field<int>(j, "widest_retire", m.retire_width_));
    ECPI_ASSIGN_OR_RETURN(m.rob_size_, field<int>(j, "rob_size", 224));
    ECPI_ASSIGN_OR_RETURN(m.load_latency_, field<double>(j, "load_latency", 5));
    ECPI_ASSIGN_OR_RETURN(m.store_forward_latency_, field<double>(j, "store_forward_latency", 5));
    ECPI_ASSIGN_OR_RETURN(m.sample_skid_, field<int>(j, "sample_skid", 1));
    ECPI_ASSIGN_OR_RETURN(m.whole_block_below_, field<std::uint32_t>(j, "whole_block_below", 0));
    ECPI_ASSIGN_OR_RETURN(m.call_return_cycles_, field<double>(j, "call_return_cycles", 0));
    ECPI_ASSIGN_OR_RETURN(m.indirect_call_return_cycles_,
                          field<double>(j, "indirect_call_return_cycles", m.call_return_cycles_));
    if (j.contains("match")) {
        const auto& match = j["match"];
        if (!match.is_object()) return Error("machine model: \"match\" is not an object");
        ECPI_ASSIGN_OR_RETURN(m.match_vendor_, field<std::string>(match, "vendor", ""));
        ECPI_ASSIGN_OR_RETURN(m.match_families_, field<std::vector<std::uint64_t>>(match, "families", {}));
        ECPI_ASSIGN_OR_RETURN(m.match_models_, field<std::vector<std::uint64_t>>(match, "models", {}));
        if (m.match_vendor_.empty()) return Error("machine model: \"match\" needs a \"vendor\"");
    }
    ECPI_ASSIGN_OR_RETURN(m.mispredict_penalty_, field<double>(j, "mispredict_penalty", 17));
    ECPI_ASSIGN_OR_RETURN(m.memory_latency_, field<double>(j, "memory_latency", 600));
    ECPI_ASSIGN_OR_RETURN(m.page_walk_latency_, field<double>(j, "page_walk_latency", 2 * m.memory_latency_));
    ECPI_ASSIGN_OR_RETURN(m.loop_iterations_, field<int>(j, "loop_iterations", 8));
    static std::atomic<std::uint64_t> next_identity{1};
    m.identity_ = next_identity++;
    ECPI_ASSIGN_OR_RETURN(m.macro_fusion_, field<bool>(j, "macro_fusion", true));
    ECPI_ASSIGN_OR_RETURN(m.move_elimination_, field<bool>(j, "move_elimination", true));
    ECPI_ASSIGN_OR_RETURN(m.zero_idioms_, field<bool>(j, "zero_idioms", true));
    ECPI_ASSIGN_OR_RETURN(m.overlap_blocks_, field<bool>(j, "overlap_blocks", true));
    if (m.dispatch_width_ < 1 || m.retire_width_ < 1 || m.widest_retire_ < m.retire_width_ || m.rob_size_ < 1 || m.sample_skid_ < 0 ||
        m.loop_iterations_ < 2 || m.call_return_cycles_ < 0 || m.indirect_call_return_cycles_ < 0)
        return Error("machine model: widths and rob_size must be >= 1 (widest_retire >= retire_width), sample_skid >= 0, loop_iterations >= 2, "
                     "call_return_cycles and indirect_call_return_cycles >= 0");

    std::map<std::string, int> port_index;
    if (!j.contains("ports") || !j["ports"].is_object()) return Error("machine model: \"ports\" object missing");
    for (const auto& [name, count] : j["ports"].items()) {
        if (!count.is_number_integer() || count.get<int>() < 1) return Error("machine model: port " + name + " count");
        port_index[name] = static_cast<int>(m.port_counts_.size());
        m.port_counts_.push_back(count.get<int>());
    }
    if (!j.contains("classes") || !j["classes"].is_object()) return Error("machine model: \"classes\" object missing");
    std::map<std::string, std::size_t> class_index;
    for (const auto& [name, c] : j["classes"].items()) {
        InstructionClass ic;
        ic.name = name;
        ic.latency = c.value("latency", 1.0);
        ic.uops = c.value("uops", 1);
        ic.occupancy = c.value("occupancy", 1.0);
        ic.unknown = c.value("unknown", false);
        if (c.contains("port") && !c["port"].is_null()) {
            auto p = port_index.find(c["port"].get<std::string>());
            if (p == port_index.end()) return Error("machine model: class " + name + " names an unknown port");
            ic.port = p->second;
        }
        ic.stack_op = name == "push" || name == "pop" || name == "call" || name == "ret";
        ic.pure_load = name == "load" || name == "pop";
        ic.stores_itself = name == "store" || name == "push" || name == "call";
        ic.long_latency = ic.occupancy > 1;
        ic.sync = name == "atomic" || name == "serialize";
        class_index[name] = m.classes_.size();
        m.classes_.push_back(ic);
    }
    auto need_class = [&](const std::string& name) -> Result<std::size_t> {
        auto it = class_index.find(name);
        if (it == class_index.end()) return Error("machine model: no class \"" + name + "\"");
        return it->second;
    };
    if (j.contains("mnemonics"))
        for (const auto& [mn, cls] : j["mnemonics"].items()) {
            ECPI_ASSIGN_OR_RETURN(auto c, need_class(cls.get<std::string>()));
            m.by_mnemonic_.emplace(mn, c);
        }
    if (j.contains("prefixes"))
        for (const auto& pair : j["prefixes"]) {
            ECPI_ASSIGN_OR_RETURN(auto c, need_class(pair.at(1).get<std::string>()));
            m.by_prefix_.emplace_back(pair.at(0).get<std::string>(), c);
        }
    ECPI_ASSIGN_OR_RETURN(m.default_class_, need_class(j.value("default_class", "alu")));
    ECPI_ASSIGN_OR_RETURN(m.default_vector_class_, need_class(j.value("default_vector_class", "vec_alu")));
    ECPI_ASSIGN_OR_RETURN(m.load_class_, need_class("load"));
    ECPI_ASSIGN_OR_RETURN(m.store_class_, need_class("store"));
    ECPI_ASSIGN_OR_RETURN(m.nop_class_, need_class("nop"));
    return m;
}

// classify_by_name compares strings: run on every instruction it was 9% of
// `calc --all` (callgrind, libLLVM). A class depends only on the mnemonic
// and the load, store and vector flags, so classes are cached per Capstone
// id, for the first spelling seen with that id (another, e.g. with a
// prefix, is classified anew), as indices into classes_, per thread and
// per loaded model.
const InstructionClass& MachineModel::classify(const DecodedInstruction& insn) const {
    struct CachedClass {
        std::string mnemonic;
        std::array<std::uint16_t, 8> by_flags{};  // class index + 1; 0: not yet
    };
    static thread_local std::uint64_t cache_owner = 0;
    static thread_local std::vector<CachedClass> cache;
    if (insn.id == 0 || identity_ == 0) return classify_by_name(insn);
    if (cache_owner != identity_) {
        cache.clear();
        cache_owner = identity_;
    }
    if (insn.id >= cache.size()) cache.resize(insn.id + 1);
    CachedClass& c = cache[insn.id];
    if (c.mnemonic.empty()) c.mnemonic = insn.mnemonic;
    else if (c.mnemonic != insn.mnemonic) return classify_by_name(insn);
    const unsigned flags = (insn.loads ? 1u : 0u) | (insn.stores ? 2u : 0u) | (insn.vector ? 4u : 0u);
    if (c.by_flags[flags] == 0)
        c.by_flags[flags] = static_cast<std::uint16_t>(&classify_by_name(insn) - classes_.data() + 1);
    return classes_[c.by_flags[flags] - 1];
}

const InstructionClass& MachineModel::classify_by_name(const DecodedInstruction& insn) const {
    std::string_view mn = insn.mnemonic;
    for (const auto& [prefix, cls] : by_prefix_)
        if (mn.substr(0, prefix.size()) == prefix && prefix.back() == ' ') return classes_[cls];
    for (std::string_view strip : {"bnd ", "notrack ", "repz ", "rep "})
        if (mn.substr(0, strip.size()) == strip) mn.remove_prefix(strip.size());
    if (auto it = by_mnemonic_.find(mn); it != by_mnemonic_.end()) {
        const auto& c = classes_[it->second];
        // mov to/from memory: a plain load or store
        if (c.name == "move" || c.name == "vec_move") {
            if (insn.stores) return classes_[store_class_];
            if (insn.loads) return classes_[load_class_];
        }
        return c;
    }
    if (mn.size() > 1 && mn[0] == 'v') {  // AVX form of an SSE instruction
        if (auto it = by_mnemonic_.find(mn.substr(1)); it != by_mnemonic_.end()) {
            const auto& c = classes_[it->second];
            if (c.name == "vec_move") {
                if (insn.stores) return classes_[store_class_];
                if (insn.loads) return classes_[load_class_];
            }
            return c;
        }
    }
    for (const auto& [prefix, cls] : by_prefix_)
        if (mn.substr(0, prefix.size()) == prefix) return classes_[cls];
    return classes_[insn.vector ? default_vector_class_ : default_class_];
}

// ---------------------------------------------------------------------------
// The simulation

namespace {

constexpr std::size_t kRegisters = 512;
constexpr std::uint32_t kNoProducer = std::numeric_limits<std::uint32_t>::max();
// Longest code sequence simulated for one block (loops are repeated up to it).
constexpr std::size_t kMaxSimulated = 2048;
// How far back a unique-predecessor chain is followed for context.
constexpr std::size_t kMaxContextInstructions = 48;

bool fusible_with_jcc(unsigned id) {
    return id == X86_INS_CMP || id == X86_INS_TEST || id == X86_INS_ADD || id == X86_INS_SUB || id == X86_INS_AND ||
           id == X86_INS_INC || id == X86_INS_DEC;
}

}  // namespace

// One block's instructions through an out-of-order core, in named steps:
// dispatch in order, wait for operands (a load first for its address, then
// its data, forwarded from an older store where one matches), execute on a
// free unit, retire in order, and name why each instruction kept retirement
// waiting (DCPI 6.3's static stall causes).
struct MachineModel::Simulation {
    struct Step {
        const DecodedInstruction* insn;
        const InstructionClass* cls;
        bool segment_start;  // first of the sequence or right after a call: wait unknown
    };
    struct Out {
        std::vector<double> wait;
        std::vector<bool> wait_known;
        std::vector<std::uint32_t> producer;  // position of the critical producer, or kNoProducer
        std::vector<StaticCause> cause;       // why the instruction kept retirement waiting
        std::vector<std::uint32_t> culprit;   // position of the instruction it waited for, or kNoProducer
    };

    // The result is reused by the next call on the same thread.
    // repetition > 0: the steps are the same block repeated back to back,
    // `repetition` instructions each, on no cycle of the CFG (see
    // time_blocks): a value the block loads from memory is not carried into
    // its next repetition, which really follows other code.
    static const Out& run(const MachineModel& model, const std::vector<Step>& steps, std::size_t repetition = 0) {
        // The state's buffers are reused across calls (run is called once
        // per block): only the registers the last call wrote are reset, not
        // all 512 (that memset was 5% of `calc --all`).
        static thread_local Simulation sim;
        sim.start(model, steps.size());
        for (std::size_t p = 0; p < steps.size(); ++p) {
            if (repetition > 0 && p > 0 && p % repetition == 0) sim.forget_loaded_values(steps);
            sim.simulate(steps, p);
        }
        return sim.out_;
    }

private:
    // What one instruction's way through the core looked like.
    struct Timing {
        int uops = 0;
        bool eliminated = false;  // zero idiom or register move: no unit
        double dispatch_before = 0, dispatched = 0;
        double ready = 0, address_ready = 0;  // register operands; a load's address registers
        std::uint32_t producer = kNoProducer, address_producer = kNoProducer;
        double operands = 0;  // every input, loaded value included
        // What set `operands` (for the static stall's cause).
        StaticCause operand_cause = StaticCause::kNone;
        std::uint32_t operand_culprit = kNoProducer;
        double port_delay = 0;
        double complete = 0;
    };
    struct StoreRecord {
        MemoryOperand mem;
        double data_ready;
        bool valid;  // false once a register of its address is written
        std::uint32_t position;
    };

    const MachineModel* model_ = nullptr;
    Out out_;
    std::vector<double> reg_ready_ = std::vector<double>(kRegisters, 0);
    std::vector<std::uint32_t> reg_producer_ = std::vector<std::uint32_t>(kRegisters, kNoProducer);
    std::vector<std::uint16_t> reg_written_;
    // Port use per cycle (a calendar per port group), so an instruction
    // issues in the first cycle at or after it is ready with a free unit of
    // its group, however late older instructions issue: execution is out of
    // order. Units that are not pipelined (occupancy > 1, e.g. the divider)
    // are also kept busy for their occupancy.
    std::vector<std::vector<std::uint8_t>> calendar_;
    std::vector<std::vector<double>> busy_until_;
    std::array<StoreRecord, 16> stores_{};
    std::size_t store_count_ = 0;
    std::vector<double> retire_;  // retire cycle per position
    double dispatch_cycle_ = 0;
    int dispatch_used_ = 0;
    double last_retire_ = 0;
    int retire_used_ = 0;

    void start(const MachineModel& model, std::size_t n) {
        model_ = &model;
        out_.wait.assign(n, 0);
        out_.wait_known.assign(n, true);
        out_.producer.assign(n, kNoProducer);
        out_.cause.assign(n, StaticCause::kNone);
        out_.culprit.assign(n, kNoProducer);
        for (auto r : reg_written_) {
            reg_ready_[r] = 0;
            reg_producer_[r] = kNoProducer;
        }
        reg_written_.clear();
        calendar_.resize(model.port_counts_.size());
        busy_until_.resize(model.port_counts_.size());
        for (std::size_t g = 0; g < calendar_.size(); ++g) {
            calendar_[g].clear();
            busy_until_[g].assign(static_cast<std::size_t>(model.port_counts_[g]), 0);
        }
        stores_ = {};
        store_count_ = 0;
        retire_.assign(n, 0);
        dispatch_cycle_ = 0;
        dispatch_used_ = 0;
        last_retire_ = 0;
        retire_used_ = 0;
    }

    void forget_loaded_values(const std::vector<Step>& steps) {
        for (auto r : reg_written_)
            if (reg_producer_[r] != kNoProducer && steps[reg_producer_[r]].cls->pure_load) reg_ready_[r] = 0;
    }

    void simulate(const std::vector<Step>& steps, std::size_t p) {
        const DecodedInstruction& d = *steps[p].insn;
        const InstructionClass& cls = *steps[p].cls;
        Timing t;
        t.eliminated = (model_->zero_idioms_ && d.zero_idiom) || (model_->move_elimination_ && d.reg_move && !d.vector);
        t.uops = uops_of(steps, p);
        dispatch(t, p);
        read_registers(t, d, cls.stack_op);
        if (d.loads) load(t, d, cls);
        execute(t, cls);
        if (d.stores) {
            stores_[store_count_ % stores_.size()] = {d.memory, t.complete, true, static_cast<std::uint32_t>(p)};
            ++store_count_;
        }
        write_registers(t, d, cls.stack_op, p);
        retire(t, cls, p);
        out_.producer[p] = t.producer;
        out_.wait_known[p] = !steps[p].segment_start && !cls.unknown && d.flow != FlowKind::kTrap;
    }

    int uops_of(const std::vector<Step>& steps, std::size_t p) const {
        const DecodedInstruction& d = *steps[p].insn;
        int uops = steps[p].cls->uops;
        if (d.stores && !steps[p].cls->stores_itself) uops += 1;  // read-modify-write: the store is a separate fused uop
        if (model_->macro_fusion_ && d.flow == FlowKind::kCondJump && p > 0 &&
            fusible_with_jcc(steps[p - 1].insn->id) && !steps[p - 1].insn->loads)
            uops = 0;
        return uops;
    }

    // In order, dispatch_width uops per cycle, bounded by the ROB.
    void dispatch(Timing& t, std::size_t p) {
        t.dispatch_before = dispatch_cycle_;
        if (dispatch_used_ + t.uops > model_->dispatch_width_) {
            dispatch_cycle_ += 1;
            dispatch_used_ = 0;
        }
        dispatch_used_ += t.uops;
        t.dispatched = dispatch_cycle_;
        const auto rob = static_cast<std::size_t>(model_->rob_size_);
        if (p >= rob) t.dispatched = std::max(t.dispatched, retire_[p - rob]);
        dispatch_cycle_ = std::max(dispatch_cycle_, t.dispatched);
    }

    // A memory source is read by a load uop that needs only the address
    // registers; the operation then waits for the loaded value and its other
    // register operands.
    void read_registers(Timing& t, const DecodedInstruction& d, bool stack_op) {
        t.ready = t.address_ready = t.dispatched;
        for (auto r : d.reads) {
            if (stack_op && r == kStackPointer) continue;  // the stack engine tracks rsp at decode
            const bool address = d.loads && (r == d.memory.base || r == d.memory.index);
            if (address) {
                if (reg_ready_[r] > t.address_ready) {
                    t.address_ready = reg_ready_[r];
                    t.address_producer = reg_producer_[r];
                }
            } else if (reg_ready_[r] > t.ready) {
                t.ready = reg_ready_[r];
                t.producer = reg_producer_[r];
            }
        }
        t.operands = t.ready;
        if (t.ready > t.dispatched) {
            t.operand_cause = StaticCause::kDependency;
            t.operand_culprit = t.producer;
        }
    }

    void load(Timing& t, const DecodedInstruction& d, const InstructionClass& cls) {
        const int load_group = model_->classes_[model_->load_class_].port;
        const double start = take_port(load_group, t.address_ready, 1);
        double data = start + model_->load_latency_;
        StaticCause cause = t.address_ready > t.dispatched ? StaticCause::kDependency : StaticCause::kLatency;
        std::uint32_t culprit = t.address_ready > t.dispatched ? t.address_producer : kNoProducer;
        if (start > t.address_ready) {
            cause = StaticCause::kPort;
            culprit = kNoProducer;
        }
        // A locked read-modify-write holds its line: no forwarding delay on
        // top of its own time (Zen 5: `lock add [p], 1` in a loop, 19.8
        // cycles an iteration, its latency alone).
        for (std::size_t k = 0; !cls.sync && k < std::min(store_count_, stores_.size()); ++k) {
            const auto& s = stores_[k];
            if (s.valid && s.mem == d.memory && s.data_ready + model_->store_forward_latency_ > data) {
                data = s.data_ready + model_->store_forward_latency_;
                cause = StaticCause::kMemoryDependency;
                culprit = s.position;
            }
        }
        if (data > t.operands) {
            t.operands = data;
            t.producer = t.address_producer;
            t.operand_cause = cause;
            t.operand_culprit = culprit;
        }
    }

    void execute(Timing& t, const InstructionClass& cls) {
        if (t.eliminated || cls.pure_load) {
            t.complete = t.operands;
            return;
        }
        const double start = take_port(cls.port, t.operands, cls.occupancy);
        t.port_delay = start - t.operands;
        t.complete = start + cls.latency;
    }

    void write_registers(const Timing& t, const DecodedInstruction& d, bool stack_op, std::size_t p) {
        for (auto r : d.writes) {
            for (auto& s : stores_)
                if (s.mem.base == r || s.mem.index == r) s.valid = false;
            if (stack_op && r == kStackPointer) continue;
            if (reg_producer_[r] == kNoProducer) reg_written_.push_back(r);
            reg_ready_[r] = t.complete;
            reg_producer_[r] = static_cast<std::uint32_t>(p);
        }
    }

    // In order, retire_width uops per cycle; the wait since the previous
    // retirement is this instruction's, and the largest delay on its way to
    // completion names its cause.
    void retire(const Timing& t, const InstructionClass& cls, std::size_t p) {
        double r = std::max(t.complete, last_retire_);
        const int retire_uops = t.uops;  // a macro-fused jcc retires with its cmp
        if (r == last_retire_ && retire_used_ + retire_uops > model_->retire_width_) r = last_retire_ + 1;
        if (r > last_retire_) retire_used_ = 0;
        retire_used_ += retire_uops;
        out_.wait[p] = r - (p == 0 ? 0 : last_retire_);
        if (out_.wait[p] > 0) blame(t, cls, p, r);
        retire_[p] = r;
        last_retire_ = r;
    }

    void blame(const Timing& t, const InstructionClass& cls, std::size_t p, double r) {
        const bool width_bound = t.complete < r;  // retired late only for the retire width
        const double operand_delay = t.operands - t.dispatched;
        // Of the retirement wait [previous retire, r]: the part spent
        // waiting for operands against the part spent executing. A divide
        // whose dividend came a cycle late waited for its own latency, not
        // for that dependency.
        const double waited_from = p == 0 ? 0 : last_retire_;
        const double own_start = t.eliminated || cls.pure_load ? t.complete : t.complete - cls.latency;
        const double operand_part = std::max(0.0, std::min(t.operands, r) - std::max(waited_from, t.dispatched));
        const double latency_part = std::max(0.0, std::min(t.complete, r) - std::max(waited_from, own_start));
        if (width_bound) {
            out_.cause[p] = StaticCause::kFrontend;
        } else if (t.port_delay > 0 && t.port_delay >= operand_delay) {
            out_.cause[p] = StaticCause::kPort;
        } else if (t.operand_cause != StaticCause::kNone && operand_delay > 0 && operand_part >= latency_part) {
            out_.cause[p] = t.operand_cause;
            out_.culprit[p] = t.operand_culprit;
        } else if (t.dispatched > t.dispatch_before && t.dispatched >= t.complete - cls.latency) {
            out_.cause[p] = StaticCause::kFrontend;
        } else {
            out_.cause[p] = cls.long_latency ? StaticCause::kDivider : StaticCause::kLatency;
            out_.culprit[p] = static_cast<std::uint32_t>(p);
        }
    }

    double take_port(int group, double ready, double occupancy) {
        if (group < 0) return ready;
        const auto g = static_cast<std::size_t>(group);
        const int units = model_->port_counts_[g];
        auto& cal = calendar_[g];
        auto cycle = static_cast<std::size_t>(ready);
        if (occupancy > 1) {
            // A non-pipelined unit: the earliest unit free at or after `ready`.
            auto best = std::min_element(busy_until_[g].begin(), busy_until_[g].end());
            const double start = std::max(ready, *best);
            *best = start + occupancy;
            cycle = static_cast<std::size_t>(start);
        }
        for (;; ++cycle) {
            if (cycle >= cal.size()) cal.resize(cycle + 64, 0);
            if (cal[cycle] < units) break;
        }
        ++cal[cycle];
        return std::max(ready, static_cast<double>(cycle));
    }
};

const char* static_cause_name(StaticCause cause) {
    switch (cause) {
        case StaticCause::kNone: return "none";
        case StaticCause::kDependency: return "dependency";
        case StaticCause::kMemoryDependency: return "memory_dependency";
        case StaticCause::kPort: return "port";
        case StaticCause::kFrontend: return "frontend";
        case StaticCause::kLatency: return "latency";
        case StaticCause::kDivider: return "divider";
    }
    return "?";
}

namespace {

// Each block's predecessors (not the entry, each once, in in-edge order),
// all in one array: built per call, they were a vector per block and per
// step of every latch walk.
class Predecessors {
public:
    explicit Predecessors(const Cfg& cfg) : start_(cfg.blocks.size() + 1, 0) {
        const auto nb = static_cast<std::uint32_t>(cfg.blocks.size());
        list_.reserve(cfg.edges.size());
        for (std::uint32_t b = 0; b < nb; ++b) {
            start_[b] = static_cast<std::uint32_t>(list_.size());
            for (auto e : cfg.blocks[b].in_edges) {
                std::uint32_t from = cfg.edges[e].from;
                auto mine = list_.begin() + start_[b];
                if (from != kEntryBlock && std::find(mine, list_.end(), from) == list_.end()) list_.push_back(from);
            }
        }
        start_[nb] = static_cast<std::uint32_t>(list_.size());
    }
    std::span<const std::uint32_t> operator()(std::uint32_t b) const {
        return std::span<const std::uint32_t>(list_.data() + start_[b], start_[b + 1] - start_[b]);
    }

private:
    std::vector<std::uint32_t> start_, list_;
};

// A cycle through b into `cycle`, in program order from b: a self-loop, or a
// latch (a predecessor at or after b) from which unique predecessors lead
// back to b. Left empty where there is none; `latches` and `path` are
// scratch.
void find_cycle(const Cfg& cfg, const Predecessors& real_preds, std::uint32_t b, std::vector<std::uint32_t>& cycle,
                std::vector<std::uint32_t>& latches, std::vector<std::uint32_t>& path) {
    const auto& blk = cfg.blocks[b];
    auto preds = real_preds(b);
    cycle.clear();
    if (std::find(preds.begin(), preds.end(), b) != preds.end()) {
        cycle.push_back(b);
        return;
    }
    latches.clear();
    for (auto p : preds)
        if (cfg.instructions[cfg.blocks[p].first].address >= cfg.instructions[blk.first].address) latches.push_back(p);
    if (latches.size() != 1) return;
    path.assign(1, latches[0]);
    std::size_t len = cfg.blocks[latches[0]].count + blk.count;
    while (path.back() != b && len < kMaxSimulated / 2) {
        auto pp = real_preds(path.back());
        if (pp.size() != 1) break;
        if (pp[0] != b && std::find(path.begin(), path.end(), pp[0]) != path.end()) break;
        path.push_back(pp[0]);
        len += cfg.blocks[pp[0]].count;
    }
    if (path.back() == b) {
        // path: latch ... b (walking backwards); the cycle in program order starts at b.
        cycle.assign(path.rbegin(), path.rend());  // b ... latch
    }
}

// The unique predecessor chain of b (whose only predecessor is another
// block) into `chain`, nearest first, up to kMaxContextInstructions.
void predecessor_chain(const Cfg& cfg, const Predecessors& real_preds, std::uint32_t b,
                       std::vector<std::uint32_t>& chain) {
    auto preds = real_preds(b);
    chain.assign(1, preds[0]);
    std::size_t len = cfg.blocks[preds[0]].count;
    while (len < kMaxContextInstructions) {
        auto pp = real_preds(chain.back());
        if (pp.size() != 1 || std::find(chain.begin(), chain.end(), pp[0]) != chain.end() || pp[0] == b) break;
        chain.push_back(pp[0]);
        len += cfg.blocks[pp[0]].count;
    }
}

}  // namespace

// Times the blocks of one CFG one by one: finds what runs before a block (a
// cycle through it or a predecessor chain), simulates that and the block,
// and keeps the block's share. Its buffers are reused for every block.
class MachineModel::BlockTimer {
public:
    BlockTimer(const MachineModel& model, const Cfg& cfg) : model_(model), cfg_(cfg), preds_(cfg) {
        // Each instruction is classified once per procedure (classify caches by Capstone id).
        classes_.resize(cfg.instructions.size());
        for (std::size_t i = 0; i < classes_.size(); ++i) classes_[i] = &model.classify(cfg.instructions[i]);
    }

    void time(std::uint32_t b, BlockTiming& t) {
        find_cycle(cfg_, preds_, b, cycle_, latches_, path_);
        // An out-of-order core overlaps a block's latencies with the code
        // around it, so a block on no cycle is timed as if it ran back to
        // back with itself: only its recurrences and resources bound it.
        bool repeated_alone = false;
        if (cycle_.empty() && model_.overlap_blocks_) {
            cycle_.push_back(b);
            repeated_alone = true;
        }
        const std::size_t block_pos = lay_out(b, t, repeated_alone);
        const auto& sim = Simulation::run(model_, steps_, repeated_alone ? cfg_.blocks[b].count : 0);
        record_waits(b, t, sim);
        record_issue_costs(b, t, sim, block_pos);
    }

private:
    void append_block(std::uint32_t b) {
        const auto& blk = cfg_.blocks[b];
        for (std::uint32_t i = 0; i < blk.count; ++i) {
            const auto* insn = &cfg_.instructions[blk.first + i];
            bool after_call = !steps_.empty() && is_call(steps_.back().insn->flow);
            steps_.push_back({insn, classes_[blk.first + i], steps_.empty() || after_call});
        }
    }

    // The steps simulated for block b: its cycle repeated, or its
    // predecessor chain then b, or b alone. Returns the position of b's first
    // instruction in the steps (in the last repetition).
    std::size_t lay_out(std::uint32_t b, BlockTiming& t, bool repeated_alone) {
        auto preds = preds_(b);
        steps_.clear();
        std::size_t block_pos = 0;
        // Where b starts in the repetitions that are averaged (the second
        // half): a steady state can alternate, e.g. a 4-instruction block on
        // an 8-wide core retires two executions per cycle.
        rep_starts_.clear();
        if (!cycle_.empty()) {
            block_pos = repeat_cycle(repeated_alone);
            t.steady_state = !repeated_alone;
            t.has_context = true;
        } else if (preds.size() == 1 && preds[0] != b) {
            predecessor_chain(cfg_, preds_, b, chain_);
            for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) append_block(*it);  // oldest first
            block_pos = steps_.size();
            t.has_context = true;
        }
        if (cycle_.empty()) {
            block_pos = steps_.size();
            append_block(b);
        }
        if (rep_starts_.empty()) rep_starts_.push_back(block_pos);
        return block_pos;
    }

    // The cycle, repeated; returns where the last repetition starts.
    std::size_t repeat_cycle(bool repeated_alone) {
        std::size_t len = 0;
        for (auto c : cycle_) len += cfg_.blocks[c].count;
        // A block repeated only to overlap it with itself settles in a
        // few repetitions; a real loop gets loop_iterations.
        int wanted = repeated_alone ? std::min(model_.loop_iterations_, 4) : model_.loop_iterations_;
        int reps = std::max(2, std::min(wanted, static_cast<int>(kMaxSimulated / std::max<std::size_t>(len, 1))));
        for (int r = 0; r < reps; ++r) {
            if (r >= reps / 2) rep_starts_.push_back(steps_.size());
            for (auto c : cycle_) append_block(c);
        }
        return rep_starts_.back();
    }

    // Each instruction's wait, averaged over the repetitions, and the block's cycles.
    void record_waits(std::uint32_t b, BlockTiming& t, const Simulation::Out& sim) const {
        const auto& blk = cfg_.blocks[b];
        const double reps_averaged = static_cast<double>(rep_starts_.size());
        t.m.assign(blk.count, 0);
        t.known.assign(blk.count, false);
        t.span_start.resize(blk.count);
        t.wait.assign(blk.count, 0);
        t.static_cause.assign(blk.count, StaticCause::kNone);
        t.static_culprit.assign(blk.count, kNoInstruction);
        t.cycles = 0;
        t.call_cycles = 0;
        for (std::uint32_t i = 0; i < blk.count; ++i) {
            for (auto start : rep_starts_) t.wait[i] += sim.wait[start + i] / reps_averaged;
            t.cycles += t.wait[i];
            t.span_start[i] = i;
            t.call_cycles += model_.call_cycles(cfg_.instructions[blk.first + i].flow);
        }
    }

    // M_i as the profile charges it: W_j goes to the instruction `skid`
    // places later. With it, the static cause and culprit, and the span back
    // to the critical operand's producer.
    void record_issue_costs(std::uint32_t b, BlockTiming& t, const Simulation::Out& sim, std::size_t block_pos) const {
        const auto& blk = cfg_.blocks[b];
        const double reps_averaged = static_cast<double>(rep_starts_.size());
        const std::size_t skid = static_cast<std::size_t>(model_.sample_skid_);
        // A procedure's first instruction follows a call (in the caller),
        // and the call's cost lands on it as the callee's return lands after
        // the call: unknown, unless the entry block is a loop in its steady
        // state, whose first instruction follows the loop's own latch.
        const std::uint32_t first_timed = b == 0 && !t.steady_state ? 1 : 0;  // block 0: the entry (cfg.h)
        for (std::uint32_t i = first_timed; i < blk.count; ++i) {
            std::size_t pos = block_pos + i;
            if (pos < skid) continue;
            std::size_t src = pos - skid;  // the instruction whose wait lands on i
            const DecodedInstruction& si = *steps_[src].insn;
            if (!sim.wait_known[src]) continue;
            if (is_call(si.flow)) continue;  // the callee's ret lands here
            for (auto start : rep_starts_) t.m[i] += sim.wait[start + i - skid] / reps_averaged;
            t.known[i] = true;
            // The cause as seen in the last repetition (the steady state).
            t.static_cause[i] = sim.cause[src];
            if (sim.culprit[src] != kNoProducer)
                t.static_culprit[i] = static_cast<std::uint32_t>(steps_[sim.culprit[src]].insn - cfg_.instructions.data());
            std::uint32_t prod = sim.producer[src];
            if (prod != kNoProducer && prod >= block_pos && prod + skid + 1 < pos) {
                std::uint32_t start = static_cast<std::uint32_t>(prod + skid + 1 - block_pos);
                bool all_known = true;
                for (std::uint32_t k = start; k < i; ++k) all_known = all_known && t.known[k];
                if (all_known) t.span_start[i] = start;
            }
        }
    }

    const MachineModel& model_;
    const Cfg& cfg_;
    const Predecessors preds_;
    std::vector<const InstructionClass*> classes_;
    std::vector<Simulation::Step> steps_;
    std::vector<std::uint32_t> cycle_, latches_, path_, chain_;
    std::vector<std::size_t> rep_starts_;
};

std::vector<BlockTiming> MachineModel::time_blocks(const Cfg& cfg) const {
    std::vector<BlockTiming> timings(cfg.blocks.size());
    BlockTimer timer(*this, cfg);
    for (std::uint32_t b = 0; b < timings.size(); ++b) timer.time(b, timings[b]);
    return timings;
}

}  // namespace ecpi::analyze
