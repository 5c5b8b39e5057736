// A progress line on a terminal: one line rewritten in place (carriage
// return, erase to the end), at most once per period, and only when the
// descriptor is a terminal (a log file or a pipe gets nothing, so captured
// stderr stays free of it). clear() erases it before other output follows.
#pragma once

#include <chrono>
#include <string>

namespace ecpi::loader {

class ProgressLine {
public:
    using Clock = std::chrono::steady_clock;
    explicit ProgressLine(int fd, std::chrono::milliseconds period = std::chrono::milliseconds(1000));
    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;
    ~ProgressLine();

    bool enabled() const { return enabled_; }
    // True when a line is due (enabled and a period has passed since the last one).
    bool due() const;
    // Shows `text` (a single line, no newline) if due.
    void show(const std::string& text);
    // Erases the line, if one is shown.
    void clear();
    double seconds() const { return std::chrono::duration<double>(Clock::now() - started_).count(); }

private:
    int fd_;
    bool enabled_;
    bool shown_ = false;
    std::chrono::milliseconds period_;
    Clock::time_point started_;
    Clock::time_point last_;
};

}  // namespace ecpi::loader
