// The daemon's log sink (daemon/log.hpp): a file is rotated at its cap with
// one old file kept; under systemd (JOURNAL_STREAM names stderr) each line
// carries the journal's priority prefix instead of a time stamp.
#include <catch2/catch.hpp>

#include "daemon/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace pspxdp::daemon;
namespace fs = std::filesystem;

namespace {

// stdout and stderr sent to path for the scope (the sink dup2()s both when it
// rotates), restored after: Catch2 reports on them.
class Redirect {
  public:
    explicit Redirect(const std::string &path)
        : out_(dup(STDOUT_FILENO)), err_(dup(STDERR_FILENO)) {
        std::fflush(stdout);
        std::fflush(stderr);
        int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    ~Redirect() {
        std::fflush(stdout);
        std::fflush(stderr);
        dup2(out_, STDOUT_FILENO);
        dup2(err_, STDERR_FILENO);
        close(out_);
        close(err_);
        set_log_device("");
    }

  private:
    int out_, err_;
};

std::string first_line(const std::string &path) {
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    return line;
}

fs::path scratch() {
    char tmpl[] = "/tmp/pspxdp-log-test.XXXXXX";
    REQUIRE(mkdtemp(tmpl));
    return tmpl;
}

} // namespace

TEST_CASE("the daemon's log file is rotated at its cap, one old file kept", "[daemon][log]") {
    const fs::path dir = scratch();
    const std::string log = dir / "t0.log";
    constexpr uint64_t kCap = 4096;
    {
        Redirect r(log);
        set_log_device("t0", kCap);
        // 100 lines of ~100 bytes: the cap is passed twice.
        for (int i = 0; i < 100; ++i) logf("line %03d %s", i, std::string(60, 'x').c_str());
    }
    CHECK(fs::exists(log + ".1"));
    CHECK(!fs::exists(log + ".2"));
    // Each file holds at most the cap and the line that crossed it.
    CHECK(fs::file_size(log) < kCap + 200);
    CHECK(fs::file_size(log + ".1") >= kCap);
    CHECK(fs::file_size(log + ".1") < kCap + 200);
    // The new file says where the lines before went, then goes on.
    CHECK(first_line(log) == "(the lines before are in " + log + ".1)");
    std::ifstream f(log);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(text.find("pspxdp daemon t0: line 099 ") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("under systemd the daemon logs to the journal with a priority, never rotated",
          "[daemon][log]") {
    const fs::path dir = scratch();
    const std::string log = dir / "journal";
    {
        Redirect r(log);
        struct stat st {};
        REQUIRE(fstat(STDERR_FILENO, &st) == 0);
        // What systemd sets for StandardError=journal: stderr's device:inode.
        const std::string stream = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
        setenv("JOURNAL_STREAM", stream.c_str(), 1);
        set_log_device("t0", 512);
        for (int i = 0; i < 50; ++i) logf("reload %d applied", i);
        unsetenv("JOURNAL_STREAM");
    }
    CHECK(first_line(log) == "<6>daemon t0: reload 0 applied");
    CHECK(!fs::exists(log + ".1"));
    fs::remove_all(dir);
}
