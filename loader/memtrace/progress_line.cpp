// A progress line on a terminal (include/ecpi/loader/progress_line.h).
#include "ecpi/loader/progress_line.h"

#include <unistd.h>

namespace ecpi::loader {
namespace {

void write_all(int fd, const std::string& s) {
    std::size_t done = 0;
    while (done < s.size()) {
        ssize_t n = ::write(fd, s.data() + done, s.size() - done);
        if (n <= 0) return;  // a progress line is not worth an error
        done += std::size_t(n);
    }
}

}  // namespace

ProgressLine::ProgressLine(int fd, std::chrono::milliseconds period)
    : fd_(fd), enabled_(::isatty(fd) == 1), period_(period), started_(Clock::now()), last_(started_) {}

ProgressLine::~ProgressLine() { clear(); }

bool ProgressLine::due() const { return enabled_ && Clock::now() - last_ >= period_; }

void ProgressLine::show(const std::string& text) {
    if (!due()) return;
    last_ = Clock::now();
    write_all(fd_, "\r" + text + "\x1b[K");
    shown_ = true;
}

void ProgressLine::clear() {
    if (!shown_) return;
    write_all(fd_, "\r\x1b[K");
    shown_ = false;
}

}  // namespace ecpi::loader
