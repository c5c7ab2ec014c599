#include "daemon/log.hpp"

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

namespace pspxdp::daemon {

namespace {

struct Sink {
    std::string dev;
    bool journal = false;
    std::string file; // stderr's path when it is a regular file: rotated
    uint64_t max_bytes = kLogMaxBytes;
};
Sink g_sink;

// JOURNAL_STREAM is "DEV:INODE" of the stream systemd connected to the
// service's stdout/stderr; inherited by a child whose stderr went
// elsewhere, it no longer matches (sd_journal_stream_fd(3)).
bool stderr_is_journal(const struct stat &st) {
    const char *js = std::getenv("JOURNAL_STREAM");
    unsigned long long dev = 0, ino = 0;
    return js && std::sscanf(js, "%llu:%llu", &dev, &ino) == 2 && dev == st.st_dev &&
           ino == st.st_ino;
}

// Past max_bytes: the file becomes FILE.1 (the one before is dropped) and
// stdout and stderr go to a new FILE. A failure leaves the file as it is:
// a log that grows beats a daemon that stops logging.
void rotate_if_full() {
    struct stat st {};
    if (g_sink.file.empty() || fstat(STDERR_FILENO, &st) != 0 ||
        uint64_t(st.st_size) < g_sink.max_bytes)
        return;
    const std::string old = g_sink.file + ".1";
    if (std::rename(g_sink.file.c_str(), old.c_str()) != 0) return;
    int fd =
        open(g_sink.file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return;
    // stdout too: attach sent both here (setup::start_daemon).
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    std::fprintf(stderr, "(the lines before are in %s)\n", old.c_str());
}

} // namespace

void set_log_device(const std::string &dev, uint64_t max_bytes) {
    g_sink = Sink{dev, false, "", max_bytes};
    struct stat st {};
    if (fstat(STDERR_FILENO, &st) != 0) return;
    if (stderr_is_journal(st)) {
        g_sink.journal = true;
        return;
    }
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/fd/2", path, sizeof(path) - 1);
    if (S_ISREG(st.st_mode) && n > 0) g_sink.file.assign(path, size_t(n));
}

void logf(const char *fmt, ...) {
    if (g_sink.journal) {
        std::fprintf(stderr, SD_INFO "daemon %s: ", g_sink.dev.c_str());
    } else {
        char ts[32];
        timespec now{};
        clock_gettime(CLOCK_REALTIME, &now);
        tm tmv;
        localtime_r(&now.tv_sec, &tmv);
        strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tmv);
        // Milliseconds: how fast a configuration change takes effect shows here.
        std::fprintf(stderr, "%s.%03ld pspxdp daemon %s: ", ts, now.tv_nsec / 1'000'000,
                     g_sink.dev.c_str());
    }
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
    std::fflush(stderr);
    rotate_if_full();
}

void LogBatch::add(const char *fmt, ...) {
    if (lines_.size() >= kLines) {
        ++more_;
        return;
    }
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    lines_.emplace_back(buf);
}

void LogBatch::flush(const char *what) {
    for (const auto &l : lines_) logf("%s", l.c_str());
    if (more_) logf("... and %zu more %s", more_, what);
    lines_.clear();
    more_ = 0;
}

} // namespace pspxdp::daemon
