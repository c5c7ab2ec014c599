#include "common/paths.hpp"

#include "common/caps.hpp"
#include "common/text.hpp"

#include <cerrno>
#include <sys/stat.h>

namespace pspxdp::common {

Result<Paths> paths_for(std::string_view dev) {
    if (auto r = check_dev_name(dev); !r) return r.failure();
    Paths p;
    p.dev = std::string(dev);
    p.pin_dir = std::string(kPinRoot) + "/" + p.dev;
    const std::string base = std::string(kRunDir) + "/" + p.dev;
    p.lock = base + ".lock";
    p.state = base + ".state";
    p.pid = base + ".pid";
    p.log = base + ".log";
    return p;
}

Result<void> mkdir_p(const std::string &path, unsigned mode) {
    std::string cur;
    size_t at = 0;
    while (at < path.size()) {
        size_t next = path.find('/', at + 1);
        if (next == std::string::npos) next = path.size();
        cur = path.substr(0, next);
        at = next;
        if (cur.empty() || cur == "/") continue;
        if (mkdir(cur.c_str(), mode) < 0 && errno != EEXIST)
            return err(path_error("creating " + path, cur, errno));
    }
    return {};
}

} // namespace pspxdp::common
