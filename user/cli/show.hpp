// What `pspxdp show`, `stats`, `status` and `class show` print: one device's
// configuration and counters, through the one printer (output.hpp).
#pragma once

#include "cli/command.hpp"
#include "cli/output.hpp"
#include "control/control.hpp"

#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

namespace pspxdp::cli {

// Which classes get per-class series in the Prometheus output (the
// cardinality bound: docs/design.md, Metrics). Device-wide series always.
struct PromOptions {
    size_t max_classes = 1000;     // per-class series for at most this many classes
    std::vector<uint32_t> classes; // only these (raw class ids); empty: the first max_classes
};

struct ShowOptions {
    bool stats = false; // counters, as tc -s
    bool json = false;
    bool detail = true;      // stats text: every counter (else one line per class)
    bool prometheus = false; // the Prometheus text format (one snapshot, no rates)
    PromOptions prom;
    uint64_t interval_ns = 0; // measure rates over this before printing (0: none)
    uint64_t watch_ns = 0;    // print again every watch_ns (0: once)
    uint64_t count = 0;       // with watch: stop after count prints (0: until interrupted)
};

// One reading of a device: its pacer_state, classes and counters, when.
struct Snapshot {
    uint64_t t_ns = 0;
    pspxdp_pacer_state st{};
    std::vector<control::ClassInfo> classes;
    control::DeviceCounters counters;
    pid_t daemon_pid = 0; // the daemon's, if it runs (its pidfile, checked)
};
Result<Snapshot> take(const control::Device &d);
// Is DEV paced? The one verdict status (with DEV and without), show, stats
// and the exporter give: the daemon runs and its heartbeat is fresh. (Just
// after a kill the heartbeat is still fresh for up to
// PSPXDP_HEARTBEAT_TIMEOUT_NS, while TC still sends to the dead pacer: not
// alive either; a SIGSTOPped daemon runs but does not beat: not alive.)
bool pacer_alive(pid_t daemon_pid, const pspxdp_pacer_state &st, uint64_t now_ns);
bool pacer_alive(const Snapshot &s); // of the snapshot's daemon, pacer_state and time
// The device's classes (and with stats its counters; rates when before is
// given: measured from before to s).
// Text with stats and !detail: one line per class, device-wide counters not
// 0 (stats' default); JSON is the same either way.
void print_device(Printer &p, const std::string &dev, const Snapshot &s, const Snapshot *before,
                  bool stats, bool detail = true);

// s in the Prometheus text exposition format (prometheus.cpp): per-class
// series for the classes o selects, device-wide ones always. `stats --format
// prometheus` prints it, `pspxdp exporter` serves it.
std::string format_prometheus(const std::string &dev, const Snapshot &s, const PromOptions &o);
// The options that fill PromOptions, declared once for stats and exporter:
// --max-classes N and --class CLASSID (repeatable).
Option max_classes_option();
Option prom_class_option();
PromOptions prom_options(const Args &args);

// DEV nullptr: the only attached device.
int show_device(const std::string *dev, const ShowOptions &o);

} // namespace pspxdp::cli
