// In-memory operations on profiles: totals, canonical form, merging.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "canonical.h"
#include "ecpi/store/profile.h"

namespace ecpi::store {
namespace {

using detail::saturating_add;

std::string describe(const ImageId& image) {
    std::string s = image.path.empty() ? std::string("(no path)") : image.path;
    if (!image.build_id.empty()) s += " (build id " + image.build_id + ")";
    return s;
}

// Sorted by offset, equal offsets summed, zero counts dropped.
void sort_and_combine(std::vector<OffsetCount>& counts) {
    std::sort(counts.begin(), counts.end(),
              [](const OffsetCount& a, const OffsetCount& b) { return a.offset < b.offset; });
    std::size_t out = 0;
    for (const OffsetCount& oc : counts) {
        if (oc.count == 0) continue;
        if (out > 0 && counts[out - 1].offset == oc.offset) {
            counts[out - 1].count = saturating_add(counts[out - 1].count, oc.count);
        } else {
            counts[out++] = oc;
        }
    }
    counts.resize(out);
}

// Linear merge of two canonical count vectors.
std::vector<OffsetCount> merge_counts(const std::vector<OffsetCount>& a, const std::vector<OffsetCount>& b) {
    std::vector<OffsetCount> out;
    out.reserve(a.size() + b.size());
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < a.size() && j < b.size()) {
        if (a[i].offset < b[j].offset) {
            out.push_back(a[i++]);
        } else if (b[j].offset < a[i].offset) {
            out.push_back(b[j++]);
        } else {
            out.push_back({a[i].offset, saturating_add(a[i].count, b[j].count)});
            ++i;
            ++j;
        }
    }
    out.insert(out.end(), a.begin() + static_cast<std::ptrdiff_t>(i), a.end());
    out.insert(out.end(), b.begin() + static_cast<std::ptrdiff_t>(j), b.end());
    return out;
}

bool stack_less(const StackSample& a, const StackSample& b) {
    if (a.pid != b.pid) return a.pid < b.pid;
    return a.frames < b.frames;
}

}  // namespace

namespace detail {

bool is_canonical(const ImageProfile& profile) {
    for (std::size_t i = 0; i < profile.processes.size(); ++i) {
        const ProcessCounts& p = profile.processes[i];
        if (i > 0 && p.pid <= profile.processes[i - 1].pid) return false;
        if (p.counts.empty()) return false;
        for (std::size_t j = 0; j < p.counts.size(); ++j) {
            if (p.counts[j].count == 0) return false;
            if (j > 0 && p.counts[j].offset <= p.counts[j - 1].offset) return false;
        }
    }
    return true;
}

ImageProfile canonical(ImageProfile profile) {
    if (is_canonical(profile)) return profile;
    std::map<std::uint32_t, std::vector<OffsetCount>> by_pid;
    for (ProcessCounts& p : profile.processes) {
        auto& dst = by_pid[p.pid];
        dst.insert(dst.end(), p.counts.begin(), p.counts.end());
    }
    profile.processes.clear();
    for (auto& [pid, counts] : by_pid) {
        sort_and_combine(counts);
        if (!counts.empty()) profile.processes.push_back({pid, std::move(counts)});
    }
    return profile;
}

bool is_canonical(const StackProfile& stacks) {
    std::set<ImageId> seen(stacks.images.begin(), stacks.images.end());
    if (seen.size() != stacks.images.size()) return false;
    for (std::size_t i = 0; i < stacks.stacks.size(); ++i) {
        const StackSample& s = stacks.stacks[i];
        if (s.count == 0) return false;
        if (i > 0 && !stack_less(stacks.stacks[i - 1], s)) return false;
        for (const StackFrame& f : s.frames) {
            if (f.image >= stacks.images.size()) return false;
        }
    }
    return true;
}

StackProfile canonical(StackProfile stacks) {
    if (is_canonical(stacks)) return stacks;
    std::vector<ImageId> images;
    std::map<ImageId, std::uint32_t> index;
    auto intern = [&](const ImageId& id) {
        auto [it, inserted] = index.emplace(id, static_cast<std::uint32_t>(images.size()));
        if (inserted) images.push_back(id);
        return it->second;
    };
    std::vector<std::uint32_t> remap;
    remap.reserve(stacks.images.size());
    for (const ImageId& id : stacks.images) remap.push_back(intern(id));

    std::map<std::pair<std::uint32_t, std::vector<StackFrame>>, std::uint64_t> sums;
    for (StackSample& s : stacks.stacks) {
        if (s.count == 0) continue;
        for (StackFrame& f : s.frames) {
            f.image = f.image < remap.size() ? remap[f.image] : intern(ImageId{kUnknownImage, ""});
        }
        auto& sum = sums[{s.pid, std::move(s.frames)}];
        sum = saturating_add(sum, s.count);
    }
    stacks.images = std::move(images);
    stacks.stacks.clear();
    stacks.stacks.reserve(sums.size());
    for (auto& [key, count] : sums) stacks.stacks.push_back({key.first, key.second, count});
    return stacks;
}

bool is_canonical(const RegisterProfile& registers) {
    if (registers.every == 0) return false;
    std::set<ImageId> seen(registers.images.begin(), registers.images.end());
    if (seen.size() != registers.images.size()) return false;
    for (std::size_t i = 0; i < registers.samples.size(); ++i) {
        const RegisterSample& s = registers.samples[i];
        if (s.image >= registers.images.size()) return false;
        if (i > 0 && !register_sample_less(registers.samples[i - 1], s)) return false;
    }
    return true;
}

RegisterProfile canonical(RegisterProfile registers) {
    if (is_canonical(registers)) return registers;
    if (registers.every == 0) registers.every = 1;
    std::vector<ImageId> images;
    std::map<ImageId, std::uint32_t> index;
    auto intern = [&](const ImageId& id) {
        auto [it, inserted] = index.emplace(id, static_cast<std::uint32_t>(images.size()));
        if (inserted) images.push_back(id);
        return it->second;
    };
    std::vector<std::uint32_t> remap;
    remap.reserve(registers.images.size());
    for (const ImageId& id : registers.images) remap.push_back(intern(id));
    for (RegisterSample& s : registers.samples) {
        s.image = s.image < remap.size() ? remap[s.image] : intern(ImageId{kUnknownImage, ""});
    }
    registers.images = std::move(images);
    std::sort(registers.samples.begin(), registers.samples.end(), register_sample_less);
    registers.samples.erase(std::unique(registers.samples.begin(), registers.samples.end()),
                            registers.samples.end());
    return registers;
}

}  // namespace detail

std::uint64_t ImageProfile::total() const {
    std::uint64_t sum = 0;
    for (const ProcessCounts& p : processes) {
        for (const OffsetCount& oc : p.counts) sum = saturating_add(sum, oc.count);
    }
    return sum;
}

std::vector<OffsetCount> ImageProfile::merged() const {
    std::vector<OffsetCount> all;
    std::size_t n = 0;
    for (const ProcessCounts& p : processes) n += p.counts.size();
    all.reserve(n);
    for (const ProcessCounts& p : processes) all.insert(all.end(), p.counts.begin(), p.counts.end());
    sort_and_combine(all);
    return all;
}

// A default-constructed `into` adopts `from`'s identity, so callers can
// accumulate into a fresh ImageProfile{} without copying the first one.
Result<void> merge_into(ImageProfile& into, const ImageProfile& from) {
    if (into == ImageProfile{}) {
        into = detail::canonical(from);
        return ok();
    }
    if (into.image != from.image) {
        return Error("cannot merge the profile of " + describe(from.image) + " into the profile of " +
                     describe(into.image) + ": different images (each image has its own profile)");
    }
    if (into.event != from.event) {
        return Error("cannot merge '" + from.event + "' samples of " + describe(from.image) + " into its '" +
                     into.event + "' profile: different events (each event has its own profile)");
    }
    if (into.period != from.period) {
        return Error("cannot merge '" + from.event + "' samples of " + describe(from.image) + " taken with period " +
                     std::to_string(from.period) + " into a profile sampled with period " +
                     std::to_string(into.period) +
                     ": counts with different periods do not add up; record with the same period, "
                     "or record into a new epoch");
    }
    ImageProfile a = detail::canonical(std::move(into));
    const ImageProfile b = detail::canonical(from);
    std::vector<ProcessCounts> out;
    out.reserve(a.processes.size() + b.processes.size());
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < a.processes.size() || j < b.processes.size()) {
        if (j == b.processes.size() || (i < a.processes.size() && a.processes[i].pid < b.processes[j].pid)) {
            out.push_back(std::move(a.processes[i++]));
        } else if (i == a.processes.size() || b.processes[j].pid < a.processes[i].pid) {
            out.push_back(b.processes[j++]);
        } else {
            out.push_back({a.processes[i].pid, merge_counts(a.processes[i].counts, b.processes[j].counts)});
            ++i;
            ++j;
        }
    }
    a.processes = std::move(out);
    into = std::move(a);
    return ok();
}

Result<void> merge_into(StackProfile& into, const StackProfile& from) {
    if (into == StackProfile{}) {
        into = detail::canonical(from);
        return ok();
    }
    if (into.event != from.event) {
        return Error("cannot merge '" + from.event + "' call stacks into the '" + into.event +
                     "' stack profile: different events (each event has its own stack file)");
    }
    if (into.period != from.period) {
        return Error("cannot merge '" + from.event + "' call stacks taken with period " + std::to_string(from.period) +
                     " into a stack profile sampled with period " + std::to_string(into.period) +
                     ": counts with different periods do not add up; record with the same period, "
                     "or record into a new epoch");
    }
    // Appending `from` (images and stacks re-indexed) and canonicalizing
    // deduplicates images and sums stacks with the same (pid, frames).
    StackProfile all = detail::canonical(std::move(into));  // all its indices valid before the shift
    const auto base = static_cast<std::uint32_t>(all.images.size());
    all.images.insert(all.images.end(), from.images.begin(), from.images.end());
    all.stacks.reserve(all.stacks.size() + from.stacks.size());
    for (const StackSample& s : from.stacks) {
        StackSample copy = s;
        for (StackFrame& f : copy.frames) {
            // Out-of-range indices must stay out of range after the shift, so
            // canonical() still attributes them to [unknown].
            f.image = f.image < from.images.size() ? base + f.image : static_cast<std::uint32_t>(all.images.size());
        }
        all.stacks.push_back(std::move(copy));
    }
    into = detail::canonical(std::move(all));
    return ok();
}

Result<void> merge_into(RegisterProfile& into, const RegisterProfile& from) {
    if (into == RegisterProfile{}) {
        into = detail::canonical(from);
        return ok();
    }
    if (into.event != from.event) {
        return Error("cannot merge '" + from.event + "' register snapshots into the '" + into.event +
                     "' register file: different events (each event has its own register file)");
    }
    if (into.period != from.period || into.every != from.every) {
        return Error("cannot merge '" + from.event + "' register snapshots taken with period " +
                     std::to_string(from.period) + ", one sample in " + std::to_string(from.every) +
                     ", into snapshots taken with period " + std::to_string(into.period) + ", one sample in " +
                     std::to_string(into.every) +
                     ": snapshot rates would not add up; record with the same period and --registers, "
                     "or record into a new epoch");
    }
    // Appending `from` (image indices shifted) and canonicalizing merges the
    // image tables and keeps each snapshot once, in order.
    RegisterProfile all = detail::canonical(std::move(into));
    const auto base = static_cast<std::uint32_t>(all.images.size());
    all.images.insert(all.images.end(), from.images.begin(), from.images.end());
    all.samples.reserve(all.samples.size() + from.samples.size());
    for (RegisterSample s : from.samples) {
        // Out-of-range indices stay out of range, so canonical() attributes
        // them to [unknown].
        s.image = s.image < from.images.size() ? base + s.image : static_cast<std::uint32_t>(all.images.size());
        all.samples.push_back(s);
    }
    into = detail::canonical(std::move(all));
    return ok();
}

void merge_into(EpochMeta& into, const EpochMeta& from) {
    for (const auto& [name, event] : from.events) {
        EventMeta& dst = into.events[name];
        if (event.period != 0) dst.period = event.period;
        dst.samples = saturating_add(dst.samples, event.samples);
        dst.unknown = saturating_add(dst.unknown, event.unknown);
        dst.lost = saturating_add(dst.lost, event.lost);
        dst.registers_lost = saturating_add(dst.registers_lost, event.registers_lost);
        for (const auto& [end, n] : event.stack_ends) dst.stack_ends[end] = saturating_add(dst.stack_ends[end], n);
        // Per-CPU idle counts add up while both sides know them per CPU; a
        // side with only a total (an old database) leaves only the total.
        const bool per_cpu = (dst.idle == 0 || !dst.idle_per_cpu.empty()) && (event.idle == 0 || !event.idle_per_cpu.empty());
        dst.idle = saturating_add(dst.idle, event.idle);
        if (!per_cpu) {
            dst.idle_per_cpu.clear();
        } else {
            if (dst.idle_per_cpu.size() < event.idle_per_cpu.size()) dst.idle_per_cpu.resize(event.idle_per_cpu.size());
            for (std::size_t cpu = 0; cpu < event.idle_per_cpu.size(); ++cpu)
                dst.idle_per_cpu[cpu] = saturating_add(dst.idle_per_cpu[cpu], event.idle_per_cpu[cpu]);
        }
    }
    if (into.idle_ns_per_cpu.size() < from.idle_ns_per_cpu.size()) into.idle_ns_per_cpu.resize(from.idle_ns_per_cpu.size());
    for (std::size_t cpu = 0; cpu < from.idle_ns_per_cpu.size(); ++cpu)
        into.idle_ns_per_cpu[cpu] = saturating_add(into.idle_ns_per_cpu[cpu], from.idle_ns_per_cpu[cpu]);
    for (const auto& [pid, process] : from.processes) {
        ProcessMeta& dst = into.processes[pid];
        if (!process.comm.empty()) dst.comm = process.comm;
        if (!process.cmdline.empty()) dst.cmdline = process.cmdline;
    }
    if (!from.hostname.empty()) into.hostname = from.hostname;
    if (!from.kernel_release.empty()) into.kernel_release = from.kernel_release;
    if (from.cpu_mhz != 0) into.cpu_mhz = from.cpu_mhz;
    if (from.cpu_mhz_measured != 0) into.cpu_mhz_measured = from.cpu_mhz_measured;
    if (from.cpu_mhz_sampled != 0) into.cpu_mhz_sampled = from.cpu_mhz_sampled;
    if (!from.chase_latency.empty()) into.chase_latency = from.chase_latency;
    if (!from.cpu_vendor.empty()) {
        into.cpu_vendor = from.cpu_vendor;
        into.cpu_family = from.cpu_family;
        into.cpu_model = from.cpu_model;
        into.cpu_name = from.cpu_name;
    }
    // The first sample of the union is the earlier one (0 means unknown).
    if (from.first_sample_unix != 0 &&
        (into.first_sample_unix == 0 || from.first_sample_unix < into.first_sample_unix)) {
        into.first_sample_unix = from.first_sample_unix;
    }
    into.last_update_unix = std::max(into.last_update_unix, from.last_update_unix);
}

}  // namespace ecpi::store
