// Flushing: what the drains accumulated is merged into the database (the
// flat counts, the call stacks, the register snapshots, the epoch's
// metadata); new epochs.
#include <sys/utsname.h>

#include <chrono>
#include <map>

#include "recorder_session.h"

namespace ecpi::loader::detail {

Result<void> Session::flush() {
    take_lost_counts();
    take_idle_counts();
    std::string first_error;
    auto keep_first = [&](const Result<void>& r) {
        if (!r.ok() && first_error.empty()) first_error = r.error().message();
    };
    keep_first(flush_registers());
    if (options_.daemon) {
        ECPI_RETURN_IF_ERROR(flush_journal());
        if (!first_error.empty()) return Error("writing to " + options_.database.string() + ": " + first_error);
        return ok();
    }
    keep_first(flush_flat());
    keep_first(flush_stacks());
    const store::EpochMeta meta = epoch_meta();
    if (first_error.empty()) {
        auto r = db_->merge(epoch_, meta);
        if (!r.ok()) {
            first_error = r.error().message();
        } else {
            kernel_idle_.settle();
            count_flushed();
        }
    }
    if (!first_error.empty()) return Error("writing to " + options_.database.string() + ": " + first_error);
    if (options_.merged) options_.merged();
    return ok();
}

// The store's name of a loader image index.
store::ImageId Session::image_id(std::uint32_t index) const {
    if (index == kKernelImageIndex) return {store::kKernelImage, ""};
    if (index == kUnknownImageIndex) return {store::kUnknownImage, ""};
    return processes_.images()[index].id;
}

// Lost counts are cumulative in the kernel: store the increase.
void Session::take_lost_counts() {
    auto counters = sampler_->counters();
    if (counters.ok()) {
        for (std::size_t i = 0; i < events_.size(); ++i) {
            auto lost = (*counters)[i].ringbuf_lost;
            unflushed_meta_[i].lost += lost - flushed_lost_[i];
            flushed_lost_[i] = lost;
            const auto registers_lost = (*counters)[i].registers_lost;
            unflushed_meta_[i].registers_lost += registers_lost - flushed_registers_lost_[i];
            flushed_registers_lost_[i] = registers_lost;
            add_stack_ends((*counters)[i], flushed_stack_ends_[i], unflushed_meta_[i]);
            if (unwinder_) unwinder_->add_copied_ends(static_cast<std::uint16_t>(i), unflushed_meta_[i]);
        }
    }
}

// The flat samples, one ImageProfile per (image, event).
std::vector<store::ImageProfile> Session::flat_profiles() const {
    std::map<std::pair<std::uint32_t, std::uint16_t>, std::map<std::uint32_t, std::map<std::uint64_t, std::uint64_t>>>
        grouped;
    for (const auto& [k, n] : flat_) grouped[{k.image, k.event}][k.pid][k.offset] += n;
    std::vector<store::ImageProfile> out;
    for (const auto& [key, by_pid] : grouped) {
        store::ImageProfile& profile = out.emplace_back();
        profile.image = image_id(key.first);
        profile.event = events_[key.second].name;
        profile.period = mean_periods_[key.second];
        for (const auto& [pid, offsets] : by_pid) {
            store::ProcessCounts pc;
            pc.pid = pid;
            for (const auto& [off, n] : offsets) pc.counts.push_back({off, n});
            profile.processes.push_back(std::move(pc));
        }
    }
    return out;
}

// Merged one file at a time; the samples of a file not written stay for the
// next flush.
Result<void> Session::flush_flat() {
    std::string first_error;
    std::unordered_map<FlatKey, std::uint64_t, FlatKeyHash> unwritten;
    for (const store::ImageProfile& profile : flat_profiles()) {
        auto r = db_->merge(epoch_, profile);
        if (r.ok()) continue;
        if (first_error.empty()) first_error = r.error().message();
        // Keep the samples for the next flush rather than losing them.
        for (const auto& [k, n] : flat_)
            if (image_id(k.image) == profile.image && events_[k.event].name == profile.event) unwritten[k] += n;
    }
    flat_ = std::move(unwritten);
    if (!first_error.empty()) return Error(first_error);
    return ok();
}

// One StackProfile per event (none for an event without stacks).
std::vector<store::StackProfile> Session::stack_profiles() const {
    std::vector<store::StackProfile> per_event(events_.size());
    std::vector<std::map<std::uint32_t, std::uint32_t>> image_slots(events_.size());
    for (std::size_t i = 0; i < events_.size(); ++i) {
        per_event[i].event = events_[i].name;
        per_event[i].period = mean_periods_[i];
    }
    for (const auto& [key, n] : stacks_) {
        auto& sp = per_event[key.event];
        auto& slots = image_slots[key.event];
        store::StackSample sample;
        sample.pid = key.pid;
        sample.count = n;
        for (const auto& [img, off] : key.frames) {
            auto [it, inserted] = slots.emplace(img, static_cast<std::uint32_t>(sp.images.size()));
            if (inserted) sp.images.push_back(image_id(img));
            sample.frames.push_back({it->second, off});
        }
        sp.stacks.push_back(std::move(sample));
    }
    std::erase_if(per_event, [](const store::StackProfile& sp) { return sp.stacks.empty(); });
    return per_event;
}

// The stacks stay for the next flush unless all were written.
Result<void> Session::flush_stacks() {
    std::string first_error;
    for (const auto& sp : stack_profiles()) {
        auto r = db_->merge(epoch_, sp);
        if (!r.ok() && first_error.empty()) first_error = r.error().message();
    }
    if (!first_error.empty()) return Error(first_error);
    stacks_.clear();
    return ok();
}

// The epoch's metadata for this flush: per event counts, the processes'
// names, the host and its CPU, the time.
store::EpochMeta Session::epoch_meta() {
    store::EpochMeta meta;
    for (std::size_t i = 0; i < events_.size(); ++i) {
        auto m = unflushed_meta_[i];
        m.period = mean_periods_[i];
        meta.events[events_[i].name] = m;
    }
    for (auto pid : pids_seen_) meta.processes[pid] = process_meta_[pid];
    if (options_.daemon) forget_stored_processes(meta);
    utsname uts{};
    if (uname(&uts) == 0) {
        meta.hostname = uts.nodename;
        meta.kernel_release = uts.release;
    }
    meta.cpu_mhz = mhz_;
    meta.cpu_mhz_measured = measured_mhz_;
    meta.cpu_mhz_sampled = sampled_mhz_;
    meta.chase_latency = chase_latency_;
    meta.cpu_vendor = cpu_.vendor;
    meta.cpu_family = cpu_.family;
    meta.cpu_model = cpu_.model;
    meta.cpu_name = cpu_.name;
    auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    meta.first_sample_unix = now;  // merge keeps the earliest
    meta.last_update_unix = now;
    if (auto idle = kernel_idle_.pending(); idle.ok()) meta.idle_ns_per_cpu = std::move(*idle);
    else warn_once(idle.error().message());
    return meta;
}

// What was written is counted in the summary and forgotten.
void Session::count_flushed() {
    for (std::size_t i = 0; i < events_.size(); ++i) {
        auto& e = summary_.events[i];
        e.samples += unflushed_meta_[i].samples;
        e.unknown += unflushed_meta_[i].unknown;
        e.lost += unflushed_meta_[i].lost;
        e.idle += unflushed_meta_[i].idle;
    }
    unflushed_meta_.assign(events_.size(), {});
    pids_seen_.clear();
    process_meta_.clear();  // names are kept on disk; memory stays bounded
}

// Idle samples (the CPU in its idle task, pid 0) are counted in the kernel
// per event and CPU and never aggregated by pc (issue 20): store the
// increase since the last flush in the epoch's metadata.
void Session::take_idle_counts() {
    auto idle = sampler_->idle_counts();
    if (!idle.ok()) {
        warn_once(idle.error().message());
        return;
    }
    flushed_idle_.resize(events_.size());
    for (std::size_t i = 0; i < events_.size() && i < idle->size(); ++i) {
        const auto& now = (*idle)[i];
        auto& before = flushed_idle_[i];
        before.resize(now.size(), 0);
        auto& meta = unflushed_meta_[i];
        if (meta.idle_per_cpu.size() < now.size()) meta.idle_per_cpu.resize(now.size(), 0);
        for (std::size_t cpu = 0; cpu < now.size(); ++cpu) {
            const std::uint64_t added = now[cpu] - before[cpu];
            meta.idle_per_cpu[cpu] += added;
            meta.idle += added;
            before[cpu] = now[cpu];
        }
    }
}

// One RegisterProfile per event, its image table built from the loader's
// image indices. Snapshots that could not be written stay for the next flush.
Result<void> Session::flush_registers() {
    std::string first_error;
    for (std::size_t i = 0; i < events_.size(); ++i) {
        if (registers_[i].empty()) continue;
        store::RegisterProfile profile;
        profile.event = events_[i].name;
        profile.period = mean_periods_[i];
        profile.every = options_.registers_every;
        // Snapshots come sorted by (process, pc): consecutive ones share
        // their image, so the last lookup is remembered.
        std::unordered_map<std::uint32_t, std::uint32_t> slots;
        std::vector<std::uint32_t> loader_index;  // per slot
        std::uint32_t last_image = UINT32_MAX, last_slot = 0;
        profile.samples = std::move(registers_[i]);
        for (store::RegisterSample& s : profile.samples) {
            if (s.image != last_image) {
                auto [it, inserted] = slots.emplace(s.image, static_cast<std::uint32_t>(profile.images.size()));
                if (inserted) {
                    profile.images.push_back(image_id(s.image));
                    loader_index.push_back(s.image);
                }
                last_image = s.image;
                last_slot = it->second;
            }
            s.image = last_slot;
        }
        auto r = db_->merge(epoch_, profile);
        if (!r.ok()) {
            // Kept for the next flush, with the loader's image indices back.
            for (store::RegisterSample& s : profile.samples) s.image = loader_index[s.image];
            registers_[i] = std::move(profile.samples);
            if (first_error.empty()) first_error = r.error().message();
            continue;
        }
        summary_.events[i].registers += profile.samples.size();
        registers_[i].clear();
    }
    if (!first_error.empty()) return Error(first_error);
    return ok();
}

// Drains and flushes the current epoch, then records into a new one; returns
// the closed epoch's name.
Result<std::string> Session::start_new_epoch() {
    auto drained = drain_cycle();
    auto flushed = flush();
    if (!drained.ok()) return drained.error();
    if (!flushed.ok()) return flushed.error();
    ECPI_ASSIGN_OR_RETURN(std::string next, db_->new_epoch());
    std::string closed = epoch_;
    epoch_ = next;
    summary_.epoch = epoch_;
    log("closed epoch " + closed + ", started epoch " + epoch_);
    if (options_.daemon) {
        stored_processes_.clear();  // a new epoch names its processes anew
        epoch_started_unix_ = 0;
        compact_epoch(closed, 0);
    }
    return closed;
}

}  // namespace ecpi::loader::detail
