// A scope during which the calling thread runs on one CPU.
#pragma once

#include <sched.h>

namespace ecpi::loader {

// Pins the calling thread to one CPU while it lives, then restores its
// affinity, however the scope ends (the budget's calibration, the chase
// timed where the command ran).
class PinnedToCpu {
public:
    explicit PinnedToCpu(int cpu) {
        saved_ok_ = sched_getaffinity(0, sizeof saved_, &saved_) == 0;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pinned_ = sched_setaffinity(0, sizeof one, &one) == 0;
    }
    ~PinnedToCpu() {
        if (saved_ok_) sched_setaffinity(0, sizeof saved_, &saved_);
    }
    PinnedToCpu(const PinnedToCpu&) = delete;
    PinnedToCpu& operator=(const PinnedToCpu&) = delete;
    bool pinned() const { return pinned_; }

private:
    cpu_set_t saved_{};
    bool saved_ok_ = false;
    bool pinned_ = false;
};

}  // namespace ecpi::loader
