/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Everything that crosses the BPF / userspace line: map keys and values,
 * counters and constants. UAPI types only, so both clang -target bpf and g++
 * compile it. Userspace checks the layouts with static_assert (at the end).
 *
 * Pins live under PSPXDP_PIN_ROOT/<DEV>/ (e.g. /sys/fs/bpf/pspxdp/eth0/),
 * one file per map, named as the map. Every map carries BTF, so
 * `bpftool map dump pinned ...` prints field names, class ids as
 * {major, minor} and kinds as enum names.
 *
 * Who writes what:
 *   class_config  CLI  -> TC, daemon   what the user asked for (rate, kind, limits, slot)
 *   class_stats   TC                   per-class, per-CPU classification counters
 *   pacer_stats   daemon -> TC, CLI    per-slot: the class served there, its state, its
 *                                      counters (mmapable: the daemon writes it in place)
 *   classes       daemon -> bpftool    per configured class: all its counters (below)
 *   daemon_stats  daemon               device-wide counters of the pacer (mmapable)
 *   lateness      daemon               release-lateness histogram (mmapable; see below)
 *   pacer_state   CLI, daemon -> TC    heartbeat, default class, pacer ifindex, line rate,
 *                                      config generation (mmapable)
 *   tc_stats      TC                   per-CPU counters of unusual events (struct
 * pspxdp_tc_counters) xdp_stats     XDP                  per-CPU redirect counters (struct
 * pspxdp_xdp_counters) xsks_map      daemon -> XDP        pacer rx queue -> AF_XDP socket filter
 * maps   CLI  -> TC           see "Filters" below
 *
 * The data path: classes are not sockets. The TC program picks a class,
 * looks up its slot (class_config.slot), checks that the daemon serves that
 * slot (pacer_stats[slot].state == PSPXDP_SLOT_SERVED and .classid matches),
 * pushes a struct pspxdp_tag in front of the frame and redirects it into the
 * pacer veth. The XDP program on the peer hands every frame to the AF_XDP
 * socket of its rx queue (a handful of sockets, not one per class). The daemon
 * reads the tag, queues the frame on its class and transmits it from
 * addr + PSPXDP_TAG_BYTES. */
#ifndef PSPXDP_SHARED_H
#define PSPXDP_SHARED_H

#include <linux/types.h>

#define PSPXDP_PIN_ROOT "/sys/fs/bpf/pspxdp"

/* Slots are 1..PSPXDP_MAX_CLASSES - 1; slot 0 is never used (it means "no
 * slot" in every map). class_config holds at most PSPXDP_MAX_CLASSES - 1. */
#define PSPXDP_MAX_CLASSES 131072
/* Pacer rx queues, one AF_XDP RX socket each (about one per core). */
#define PSPXDP_MAX_SOCKETS 64
#define PSPXDP_HEARTBEAT_TIMEOUT_NS (100ULL * 1000 * 1000)

#ifdef __bpf__
#define PSPXDP_INLINE static __always_inline
#else
#define PSPXDP_INLINE static inline
#endif

/* tc's class id major:minor. In memory it is the u32 TC_H_MAKE(major, minor)
 * on a little-endian host (the only kind pspxdp builds for); as a struct,
 * bpftool prints it as {"minor":1,"major":1} instead of 65537. */
struct pspxdp_classid {
    __u16 minor;
    __u16 major;
};
#define PSPXDP_CLASSID(maj, min) ((((__u32)(maj)) << 16) | ((__u32)(min)&0xffff))
PSPXDP_INLINE __u32 pspxdp_classid_raw(struct pspxdp_classid c) {
    return PSPXDP_CLASSID(c.major, c.minor);
}
PSPXDP_INLINE struct pspxdp_classid pspxdp_classid_of(__u32 raw) {
    struct pspxdp_classid c = {(__u16)(raw & 0xffff), (__u16)(raw >> 16)};
    return c;
}

enum pspxdp_class_kind {
    PSPXDP_CLASS_NORMAL = 0, /* unpaced gap filler (the original's "default") */
    PSPXDP_CLASS_PACED = 1,  /* paced at rate_bps */
};

/* class_config: HASH, key struct pspxdp_classid. Written by the control plane
 * under its lock; read by TC (slot) and by the daemon (everything). */
struct pspxdp_class_config {
    __u64 rate_bps;        /* paced: L2 bits/s including FCS; 0 for a normal class */
    __u64 limit_bytes;     /* backlog limit in L2 bytes; 0: limit_ns, or the default */
    __u64 limit_ns;        /* backlog limit as time at rate_bps (paced only); 0: see above */
    __u64 ce_threshold_ns; /* paced only: ECT frames joining a backlog longer than
                            * this (time at rate_bps) get CE; 0: the default;
                            * PSPXDP_CE_THRESHOLD_OFF: never mark */
    __u32 slot;            /* 1..PSPXDP_MAX_CLASSES-1, chosen by the control plane when the
                            * class is created and kept for its life: the index of
                            * pacer_stats and of the daemon's class table */
    enum pspxdp_class_kind kind;
    /* Daemon only (TC reads slot): the class's burst bound in clockless mode
     * (docs/design.md §4.5), in L2 bytes or in largest frames at DEV's MTU;
     * at most one is set, both 0: the attachment's default (attach --burst). */
    __u32 burst_bytes;
    __u32 burst_mtus;
    __u32 flags; /* PSPXDP_CLASS_* */
    /* Class trees (docs/design.md §3.12), daemon only: the parent class
     * ({0, 0}: the wire, top level), the ceil (L2 bits/s with FCS; 0: the
     * rate) and prio (lower borrows first). A class with children holds no
     * frames. */
    struct pspxdp_classid parent;
    __u64 ceil_bps;
    __u32 prio;
    __u32 reserved;
};
/* flows off: the class is one FIFO (CE above ce_threshold_ns, as before
 * per-flow queues, docs/design.md §1.5) instead of per-flow queues under DRR with CoDel. */
#define PSPXDP_CLASS_FLOWS_OFF 1u
#define PSPXDP_CE_THRESHOLD_OFF (~0ULL)
/* What 0 means in class_config. The default limit is what the class's rate
 * drains in PSPXDP_DEFAULT_LIMIT_NS, but never fewer than
 * PSPXDP_DEFAULT_LIMIT_FRAMES frames: a burst Linux's default FIFO
 * (txqueuelen 1000) would absorb is absorbed, also by a slow class. An
 * explicit limit (bytes, or time at the rate) always admits at least
 * PSPXDP_MIN_LIMIT_FRAMES frames, so a class can always hold something.
 * A normal class has no rate: its default limit is the frame count alone. */
#define PSPXDP_DEFAULT_LIMIT_NS (100ULL * 1000 * 1000)
#define PSPXDP_DEFAULT_LIMIT_FRAMES 1000
#define PSPXDP_MIN_LIMIT_FRAMES 2
#define PSPXDP_DEFAULT_CE_THRESHOLD_NS (4ULL * 1000 * 1000)

/* What the TC program pushes in front of every frame it hands to the pacer.
 * The daemon checks it against its class table (slot -> classid) and sends
 * the frame from addr + PSPXDP_TAG_BYTES. The pacer veth's MTU is DEV's plus
 * PSPXDP_TAG_BYTES, so a full-size frame still passes. */
struct pspxdp_tag {
    __u32 slot;
    struct pspxdp_classid classid;
    __u32 flow_hash; /* skb->hash (bpf_get_hash_recalc): the flow inside the class */
    __u32 segs;      /* frames of the packet this frame is part of (GSO segments; 1) */
};
#define PSPXDP_TAG_BYTES 16

/* pacer_state: ARRAY (mmapable), one entry, key 0. */
struct pspxdp_pacer_state {
    __u64 heartbeat_ns;  /* daemon: CLOCK_MONOTONIC of its last beat (bpf_ktime_get_ns) */
    __u32 pacer_ifindex; /* attach: the pacer veth TC redirects into */
    struct pspxdp_classid default_classid; /* CLI: unclassified traffic goes here */
    /* attach / CLI: the wire's rate M in bit/s (ethtool speed or set by
     * hand). The control plane refuses paced classes summing above it; 0
     * means unknown, and then no paced class can be configured. */
    __u64 line_rate_bps;
    /* CLI: bumped after every change of class_config, the default class or
     * the line rate; the daemon re-reads its configuration when it moves. */
    __u64 config_gen;
    __u32 flags; /* PSPXDP_STATE_F_* */
    /* daemon: one past the highest slot it ever served (written before the
     * slot becomes SERVED), so a restarted daemon looks for a dead one's
     * leftovers in pacer_stats[1..slots_end) only, not in all 131072 slots. */
    __u32 slots_end;
};
/* Set by the first daemon of an attachment; a daemon that finds it set is a
 * restart (daemon_stats.restarts). */
#define PSPXDP_STATE_F_DAEMON_STARTED (1u << 0)
/* attach: the clsact qdisc on DEV was created by pspxdp, so detach may
 * delete it (the pins say so even when the state file was removed). */
#define PSPXDP_STATE_F_CLSACT_OURS (1u << 1)
/* CLI (pspxdp change DEV prio-direct off): skb->priority does not pick a
 * class. Clear (the default), a packet whose skb->priority is major:minor of
 * an existing class, major the default class's, goes to that class before
 * the filters are tried, as htb does (docs/design.md §1.3.1). */
#define PSPXDP_STATE_F_PRIO_DIRECT_OFF (1u << 2)

/* Is the daemon alive? The one test, for the TC program (fail-open) and for
 * every userspace reader (status, attach). The heartbeat is CLOCK_MONOTONIC,
 * the clock of bpf_ktime_get_ns. A beat slightly in the future is a race
 * with the daemon's write, not death; one far in the future is garbage and
 * must not keep a dead pacer alive. */
PSPXDP_INLINE int pspxdp_pacer_alive(const struct pspxdp_pacer_state *st, __u64 now_ns) {
    __u64 hb = st->heartbeat_ns;

    if (!hb || !st->pacer_ifindex) return 0;
    if (hb <= now_ns) return now_ns - hb <= PSPXDP_HEARTBEAT_TIMEOUT_NS;
    return hb - now_ns <= PSPXDP_HEARTBEAT_TIMEOUT_NS;
}

/* Counters. Each list below is the one place its counters are named and
 * described: the struct fields (hence the BTF names bpftool prints), the CLI's
 * text columns and its JSON keys all come from it, so one counter has one
 * name everywhere. X(name, help). */
#define PSPXDP_COUNTER_FIELD(name, help) __u64 name;

/* class_stats: PERCPU_HASH, key struct pspxdp_classid. Written by TC. */
#define PSPXDP_TC_CLASS_COUNTERS(X)                                                                \
    X(tc_packets, "packets classified to the class and handed to the pacer (a GSO packet is one)") \
    X(tc_skb_bytes, "skb bytes of those packets (a GSO packet counted whole, no FCS)")             \
    X(tc_frames, "frames those packets become on the wire (GSO segments)")                         \
    X(tc_passed, "packets classified to the class but passed unpaced: pacer dead or class "        \
                 "not served")                                                                     \
    X(tc_errors, "packets the hand-over to the pacer failed for (passed unpaced)")
struct pspxdp_class_tc_stats {
    PSPXDP_TC_CLASS_COUNTERS(PSPXDP_COUNTER_FIELD)
};

/* pacer_stats: ARRAY (mmapable), index = slot. Written by the daemon in place,
 * so the counters are exact up to the last frame even if it is killed, and
 * survive its restart (the next daemon continues them, and counts what a dead
 * daemon still held as drop_died). All byte counters are L2 bytes with FCS,
 * max(L, 60) + 4: the bytes a class's rate counts. */
enum pspxdp_slot_state {
    PSPXDP_SLOT_FREE = 0,     /* no class here: the control plane may give the slot out */
    PSPXDP_SLOT_SERVED = 1,   /* the daemon serves classid here: TC may hand frames over */
    PSPXDP_SLOT_DRAINING = 2, /* classid was deleted: TC stops, the daemon empties its queue */
};
/* A deleted class keeps of its queue what its rate sends in this time (the
 * rest is taken from its fattest flows, or its newest frames with flows off)
 * and sends that, paced; the rest is dropped at once
 * (drop_deleted). Judged in bytes at the class's rate, not by the clock, so
 * a busy machine does not change what is dropped. A normal class (no rate)
 * drains as gap filler for this long. Whatever is still queued after
 * PSPXDP_DELETE_DRAIN_CAP times this (a starved daemon) is dropped too.
 * Then the slot goes FREE; its counters stay readable until it is given out
 * again. */
#define PSPXDP_DELETE_DRAIN_NS (2000ULL * 1000 * 1000)
#define PSPXDP_DELETE_DRAIN_CAP 5
#define PSPXDP_CLASS_COUNTERS(X)                                                                   \
    X(rx_frames, "frames the pacer took from its sockets for the class")                           \
    X(rx_bytes, "their L2 bytes with FCS")                                                         \
    X(tx_frames, "frames sent on the wire")                                                        \
    X(tx_bytes, "their L2 bytes with FCS")                                                         \
    X(backlog_frames, "frames queued in the pacer now")                                            \
    X(backlog_bytes, "their L2 bytes with FCS")                                                    \
    X(ce_marked, "frames that got ECN CE: from CoDel (flows on), or they joined a backlog longer " \
                 "than ce_threshold (flows off)")                                                  \
    X(drop_limit, "frames dropped because the class's backlog was at its limit")                   \
    X(drop_overflow, "frames dropped because the shared buffer was full (from the longest "        \
                     "backlog)")                                                                   \
    X(drop_deleted, "frames still queued when the class was deleted and not sent")                 \
    X(drop_shutdown, "frames still queued when the daemon stopped")                                \
    X(drop_died, "frames a killed daemon held, counted by the next one")                           \
    X(drop_invalid, "frames the pacer could not send (length, tag)")                               \
    X(late_lost_ns, "clockless: real time given up because a late wake-up exceeded the class's "   \
                    "burst bound (its rate is short by this much)")                                \
    X(drop_aqm,                                                                                    \
      "frames CoDel dropped from the flow whose queue stood above target (not ECN-capable)")       \
    X(new_flows, "frames that arrived for a flow not in the class's lists: it joins the new "      \
                 "(sparse) list, served first")                                                    \
    X(active_flows, "flows in the class's lists now (with frames, or empty waiting for their "     \
                    "turn in the old list)")                                                       \
    X(sparse_flows, "of them, in the new (sparse) list now")                                       \
    X(bulk_flows, "of them, in the old (bulk) list now")                                           \
    X(empty_ns, "paced: time the class's queue sat empty after its rate would have let it send "   \
                "its next frame, ns (its sender fell behind, not the pacer: the rate is short "    \
                "by this much); counted when a frame arrives")                                     \
    X(empty_events, "paced: how many such stretches ended (a frame arrived after its due time)")   \
    X(lent_bytes, "class trees: L2 bytes this class lent from its rate to a class below it "       \
                  "that borrowed (design §3.12)")                                                  \
    X(borrowed_bytes, "class trees: L2 bytes this class sent beyond its rate, borrowed from a "    \
                      "class above it or from the wire (an inner class: its subtree's)")
struct pspxdp_class_counters {
    struct pspxdp_classid classid; /* the class on this slot (0:0 = none) */
    enum pspxdp_slot_state state;
    PSPXDP_CLASS_COUNTERS(PSPXDP_COUNTER_FIELD)
};

/* classes: HASH (no prealloc: its memory is what its entries take), key
 * struct pspxdp_classid, one entry per configured class, deleted when the
 * class is gone (a deleted class stays while it drains). Written by the
 * daemon only, in one batch once a second, at every
 * configuration change and when it stops; read by nobody in pspxdp: it is
 * the map for `bpftool map dump pinned PSPXDP_PIN_ROOT/DEV/classes` (a few
 * dozen lines per class) and, for class 1:a (key bytes minor, major, little
 * endian), `bpftool map lookup pinned PSPXDP_PIN_ROOT/DEV/classes key 0xa 0 1 0`.
 * Every per-class counter, under the names `pspxdp stats` uses: TC's summed
 * over CPUs, then pacer_stats' (the slot's), as of updated_ns. `pspxdp stats`
 * reads the live maps instead. */
struct pspxdp_class_entry {
    __u64 updated_ns; /* CLOCK_MONOTONIC of the daemon's write */
    __u64 rate_bps;   /* class_config's; 0 for a normal class */
    enum pspxdp_class_kind kind;
    enum pspxdp_slot_state state; /* FREE: configured but not served (see status) */
    __u32 slot;
    /* The class's place in a tree (docs/design.md §3.12), as class_config
     * has it: prio, parent ({0, 0}: top level) and ceil (0: the rate). */
    __u32 prio;
    struct pspxdp_classid parent;
    __u32 reserved;
    __u64 ceil_bps;
    PSPXDP_TC_CLASS_COUNTERS(PSPXDP_COUNTER_FIELD)
    PSPXDP_CLASS_COUNTERS(PSPXDP_COUNTER_FIELD)
};

/* daemon_stats: ARRAY (mmapable), one entry. Device-wide counters of the
 * pacer, written in place by the daemon and continued across restarts. */
#define PSPXDP_DAEMON_COUNTERS(X)                                                                  \
    X(rx_frames, "frames taken from the pacer sockets (all slots, unknown tags included)")         \
    X(wire_frames, "real frames sent on the wire")                                                 \
    X(wire_frame_bytes, "their wire bytes (max(L,60) + framing overhead)")                         \
    X(gap_frames, "PAUSE gap frames sent")                                                         \
    X(gap_bytes, "their wire bytes")                                                               \
    X(gap_overshoot_bytes, "byte times minimum-size gaps went past their target")                  \
    X(idle_resyncs, "times the wire idled with nothing backlogged")                                \
    X(underruns, "times the wire idled although a class was backlogged (daemon late)")             \
    X(underrun_bytes, "byte times lost to those underruns")                                        \
    X(kicks, "sendto() calls that pushed the TX ring")                                             \
    X(kick_errors, "sendto() calls that failed for good (not EAGAIN/EBUSY/ENOBUFS)")               \
    X(socket_ring_full, "frames the kernel dropped: a pacer socket's RX ring was full")            \
    X(socket_fill_empty, "frames the kernel dropped: no free frame in a fill ring (or too long)")  \
    X(no_socket, "frames on a pacer rx queue without a socket (counted by XDP)")                   \
    X(unknown_class, "frames whose tag named no class the daemon serves")                          \
    X(died_in_rings,                                                                               \
      "frames left in the socket rings of a daemon that died or stopped, counted by the next one") \
    X(config_refused, "class configurations the daemon could not apply")                           \
    X(config_reloads, "times the daemon re-read its configuration")                                \
    X(accounting_checks, "UMEM accounting checks run (one a second, and at shutdown)")             \
    X(file_reloads, "SIGHUPs that applied the attach --config file again (changes or none)")       \
    X(file_reload_failures, "SIGHUPs whose file was refused (logged; nothing changed)")            \
    X(accounting_failures, "UMEM accounting checks that did not balance (a bug)")                  \
    X(restarts, "daemon starts on this attachment after the first")                                \
    X(planned_idles, "times the wire idled by plan (gap horizon, clockless) instead of carrying "  \
                     "gap frames")                                                                 \
    X(planned_idle_bytes, "byte times of those idles (wire time without gap frames)")              \
    X(late_wakeups, "planned idles the daemon woke from after a paced frame's due time")           \
    X(late_ns, "by this much in all, ns (the only lateness that costs precision)")                 \
    X(late_max_ns, "the longest of them, ns")                                                      \
    X(clockless, "1: clockless mode (no gap frames, frames released at their real-time due "       \
                 "time); 0: byte clock")                                                           \
    X(clock_forced, "1: the clock mode was forced (--clock byte/none); 0: chosen from DEV's "      \
                    "driver")                                                                      \
    X(gap_horizon_ns, "the gap horizon H, ns; 18446744073709551615 (2^64-1): inf, the paper's "    \
                      "rule")                                                                      \
    X(lost_wire_ns, "wire time the daemon was behind, ns: underruns (byte clock) and late "        \
                    "wake-ups (late_ns)")                                                          \
    X(lost_wire_ppm, "share of the wire's time lost so in the last second, parts per million")     \
    X(flow_reclaims, "empty flows reclaimed while waiting for their turn, because the flow pool "  \
                     "ran short (no frame lost)")
struct pspxdp_daemon_stats {
    PSPXDP_DAEMON_COUNTERS(PSPXDP_COUNTER_FIELD)
};

/* tc_stats: PERCPU_ARRAY, one entry (key 0), value struct pspxdp_tc_counters:
 * named fields, so bpftool prints names (an ARRAY's key must be a plain
 * integer in BTF, so an enum key could not name them). The program counts by
 * enum pspxdp_tc_counter, the index of the field. Every packet the
 * classifier could not fully trust is counted here once, by the first
 * reason found. X(ENUM_SUFFIX, field, help). */
#define PSPXDP_TC_COUNTERS(X)                                                                      \
    X(SEEN, seen, "every packet the classifier ran on")                                            \
    X(TRUNCATED, truncated, "a header ended early: default class")                                 \
    X(BAD_HEADER, bad_header, "IP version / IHL / length garbled: default class")                  \
    X(VLAN_DEPTH, vlan_depth, "more than 2 VLAN tags: default class")                              \
    X(EXT_DEPTH, ext_depth, "more IPv6 extension headers than we walk: default class")             \
    X(FRAGMENT, fragment, "non-first fragment: no port rules, addresses only")                     \
    X(NON_IP, non_ip, "neither IPv4 nor IPv6: default class")                                      \
    X(PACER_DEAD, pacer_dead, "heartbeat stale or no pacer ifindex: passed unpaced")               \
    X(NO_SLOT, no_slot, "class not served by the daemon: passed unpaced")                          \
    X(REDIRECT_ERR, redirect_err, "the hand-over to the pacer failed: passed unpaced")             \
    X(STATS_FULL, stats_full, "class_stats full: the class was not counted")                       \
    X(PRIO_DIRECT, prio_direct,                                                                    \
      "classified by skb->priority (SO_PRIORITY major:minor naming an "                            \
      "existing class), before the filters")
#define PSPXDP_TC_COUNTER_ENUM(up, name, help) PSPXDP_TC_##up,
enum pspxdp_tc_counter { PSPXDP_TC_COUNTERS(PSPXDP_TC_COUNTER_ENUM) PSPXDP_TC_NR_COUNTERS };
#define PSPXDP_NAMED_COUNTER_FIELD(up, name, help) __u64 name;
struct pspxdp_tc_counters {
    PSPXDP_TC_COUNTERS(PSPXDP_NAMED_COUNTER_FIELD)
};

/* xdp_stats: PERCPU_ARRAY, one entry (key 0), value struct pspxdp_xdp_counters,
 * counted by enum pspxdp_xdp_counter as tc_stats is. */
#define PSPXDP_XDP_COUNTERS(X)                                                                     \
    X(REDIRECTED, redirected, "frames handed to the AF_XDP socket of their pacer rx queue")        \
    X(NO_SOCKET, no_socket, "frames on a pacer rx queue without a socket: dropped")
#define PSPXDP_XDP_COUNTER_ENUM(up, name, help) PSPXDP_XDP_##up,
enum pspxdp_xdp_counter { PSPXDP_XDP_COUNTERS(PSPXDP_XDP_COUNTER_ENUM) PSPXDP_XDP_NR_COUNTERS };
struct pspxdp_xdp_counters {
    PSPXDP_XDP_COUNTERS(PSPXDP_NAMED_COUNTER_FIELD)
};

/* Adds one to counter `idx` of a struct of __u64 counters (tc_stats,
 * xdp_stats): the enum is the field's index. */
#define PSPXDP_COUNT(counters_ptr, idx, nr)                                                        \
    do {                                                                                           \
        if ((counters_ptr) && (idx) < (nr)) ((__u64 *)(counters_ptr))[(idx)] += 1;                 \
    } while (0)

/* ---- Filters: tc-style conjunctive filters in tuple-space form.
 *
 * A filter is a conjunction of optional fields (src/dst prefix, proto, sport
 * and dport ranges, outer VLAN id, DSCP, skb->mark under a mask, the
 * sending socket's cgroup v2 or an ancestor of it) with a preference; among the filters
 * that match a packet the lowest order = pref << PSPXDP_FILTER_SEQ_BITS | seq
 * wins (equal pref: the one added first). Unmatched traffic goes to
 * pacer_state.default_classid.
 *
 * The control plane expands every filter into exact-match entries: a port
 * range becomes the minimal set of aligned power-of-two blocks, and each
 * entry's "shape" (which fields, which prefix lengths) is part of its key.
 * All entries of all filters live in one hash map (filter_entries); where two
 * filters yield the same key the entry holds the lower order. The classifier
 * walks the shape table (filter_shapes) in ascending order of each shape's
 * best order, masks the packet's key with the shape's masks and looks it up;
 * it stops at the first shape whose best order cannot beat what it found. A
 * packet costs one lookup per shape at most, whatever the number of filters.
 *
 * Maps (pinned as named here):
 *   filters         HASH  key __u32 filter id -> struct pspxdp_filter: the filter
 *                         as the user wrote it (show, save, delete); CLI only
 *   filter_entries  HASH  struct pspxdp_filter_key -> struct pspxdp_filter_entry
 *   filter_shapes   ARRAY 2 sets of PSPXDP_FILTER_SET_SLOTS struct
 *                         pspxdp_filter_shape_slot, each ended by a slot with
 *                         no fields (so a zeroed map is two empty sets)
 *   filter_state    ARRAY one struct pspxdp_filter_state: which set is live
 *   filter_stats    PERCPU_ARRAY by filter id, struct pspxdp_filter_stats
 * A change writes the idle set in full, then flips filter_state.active_set
 * (one byte changes: no torn read), so the classifier never sees half a table. */
#define PSPXDP_MAX_FILTERS 16384
#define PSPXDP_MAX_FILTER_ENTRIES 131072
#define PSPXDP_MAX_FILTER_SHAPES 255
#define PSPXDP_FILTER_SET_SLOTS (PSPXDP_MAX_FILTER_SHAPES + 1) /* + the end slot */
#define PSPXDP_FILTER_PREF_MIN 1
#define PSPXDP_FILTER_PREF_MAX 65535     /* tc's preference is 16 bits */
#define PSPXDP_FILTER_PREF_DEFAULT 49152 /* pref when omitted: tc's first auto pref */
#define PSPXDP_FILTER_SEQ_BITS 48
#define PSPXDP_FILTER_ORDER(pref, seq) (((__u64)(pref) << PSPXDP_FILTER_SEQ_BITS) | (seq))
#define PSPXDP_FILTER_ORDER_NONE (~0ULL) /* "no filter" */

/* Bits of pspxdp_filter.fields and pspxdp_filter_shape.fields. In the
 * classifier's packet key the same bits say which fields the packet has
 * (ports: TCP/UDP/SCTP/UDP-Lite first fragments; vlan: tagged). */
enum pspxdp_filter_field {
    PSPXDP_FF_SRC = 1 << 0,
    PSPXDP_FF_DST = 1 << 1,
    PSPXDP_FF_PROTO = 1 << 2,
    PSPXDP_FF_SPORT = 1 << 3,
    PSPXDP_FF_DPORT = 1 << 4,
    PSPXDP_FF_VLAN = 1 << 5,
    PSPXDP_FF_DSCP = 1 << 6,
    PSPXDP_FF_MARK = 1 << 7,   /* skb->mark & shape.mark_mask */
    PSPXDP_FF_CGROUP = 1 << 8, /* the socket's cgroup's ancestor at shape.cgroup_level */
};

/* The shape of an entry: the first 16 bytes of its key. A cgroup level is
 * one more dimension of the shape, as a prefix length is: the classifier
 * reads the socket's ancestor cgroup at that level (bpf_skb_ancestor_cgroup_id)
 * once per cgroup shape, and a mark mask is one too. */
struct pspxdp_filter_shape {
    __u8 family;       /* 4 or 6 with src/dst; 0 (any packet) without */
    __u8 cgroup_level; /* with PSPXDP_FF_CGROUP: the cgroup's level (the root is 0) */
    __u16 fields;      /* enum pspxdp_filter_field bits */
    __u8 src_plen;     /* prefix lengths, 0..32 / 0..128 */
    __u8 dst_plen;
    __u8 sport_plen; /* port block: the top sport_plen bits are matched, 0..16 */
    __u8 dport_plen;
    __u32 mark_mask; /* with PSPXDP_FF_MARK: the bits of skb->mark matched */
    __u32 pad;
};

/* filter_entries key. IPv4 addresses use the first 4 bytes of src/dst. Ports
 * are in host byte order. Fields outside the shape, and bits below a prefix,
 * are zero. */
struct pspxdp_filter_key {
    struct pspxdp_filter_shape shape;
    __u8 src[16];
    __u8 dst[16];
    __u16 sport;
    __u16 dport;
    __u16 vlan; /* VLAN id, 0..4095 */
    __u8 proto; /* IPv4 protocol / IPv6 upper-layer next header */
    __u8 dscp;  /* 0..63 */
    __u32 mark; /* skb->mark & shape.mark_mask */
    __u32 pad;
    __u64 cgroup_id; /* the cgroup v2 id (its inode number in the cgroup2 fs) */
};

/* filter_entries value. */
struct pspxdp_filter_entry {
    __u64 order; /* PSPXDP_FILTER_ORDER(pref, seq) of the filter it came from */
    struct pspxdp_classid classid;
    __u32 filter_id; /* key of filters, index of filter_stats */
};

/* filter_shapes value. mask.shape is the shape itself (fields 0: the end of
 * the set); the other fields of mask are all-ones over what the shape matches. */
struct pspxdp_filter_shape_slot {
    struct pspxdp_filter_key mask;
    __u64 best_order; /* lowest order of the shape's entries */
};

/* filter_state: ARRAY, one entry, key 0. */
struct pspxdp_filter_state {
    __u32 active_set; /* 0 or 1: the set of filter_shapes the classifier walks */
    __u32 pad;
    __u64 next_seq; /* CLI: sequence number of the next filter added */
};

/* filters value: one filter as the user wrote it. */
#define PSPXDP_CGROUP_PATH_MAX 512 /* with the ending NUL */
struct pspxdp_filter {
    __u32 pref;
    struct pspxdp_classid classid;
    __u64 seq;         /* order of addition, breaks ties between equal prefs */
    __u8 family;       /* 4, 6 or 0 (no src/dst) */
    __u8 cgroup_level; /* with a cgroup: its level, the root's 0 */
    __u16 fields;      /* enum pspxdp_filter_field bits */
    __u8 src_plen;
    __u8 dst_plen;
    __u8 proto;
    __u8 dscp;
    __u16 vlan;
    __u16 pad;
    __u32 mark; /* mark VALUE/MASK */
    __u32 mark_mask;
    __u8 src[16];
    __u8 dst[16];
    __u16 sport_min; /* inclusive ranges, host order */
    __u16 sport_max;
    __u16 dport_min;
    __u16 dport_max;
    __u32 pad2;
    __u64 cgroup_id;                          /* the cgroup's id when the filter was added */
    char cgroup_path[PSPXDP_CGROUP_PATH_MAX]; /* under the cgroup2 mount, "/a/b", NUL ended */
};

/* filter_stats: PERCPU_ARRAY indexed by filter id. Written by TC for the
 * filter that decided a packet's class; zeroed when an id is given out. */
#define PSPXDP_FILTER_COUNTERS(X)                                                                  \
    X(matched_packets, "packets this filter classified (it matched and won)")                      \
    X(matched_skb_bytes, "skb bytes of those packets (a GSO packet counted whole, no FCS)")
struct pspxdp_filter_stats {
    PSPXDP_FILTER_COUNTERS(PSPXDP_COUNTER_FIELD)
};

/* lateness: ARRAY (mmapable), one entry, key 0. Written by the daemon in
 * place, continued across restarts. How late the daemon resumed from a wait
 * the engine planned while a paced frame waited: against the frame's due
 * time clockless (so how late that frame was released), against the planned
 * wake-up on the byte clock (the gap frames queued ahead absorb a late one up
 * to the slack). One sample per such wake-up, counted into fixed log-spaced
 * buckets, 1-2-5 per decade: bucket i (i < PSPXDP_LATENESS_BUCKETS - 1) holds
 * lateness in (bound(i-1), bound(i)], bound(i) = {1,2,5}[i % 3] * 10^(i / 3)
 * * 100 ns (100 ns .. 1 s); the last one everything later than 1 s. Counts are
 * per bucket (not cumulative): one increment per sample. */
#define PSPXDP_LATENESS_BUCKETS 23
struct pspxdp_lateness {
    __u64 sum_ns; /* all samples added up */
    __u64 max_ns; /* the longest sample */
    __u64 bucket[PSPXDP_LATENESS_BUCKETS];
};

#ifdef __cplusplus
static_assert(sizeof(struct pspxdp_classid) == 4, "classid layout");
static_assert(sizeof(enum pspxdp_class_kind) == 4, "enum fields are 4 bytes");
static_assert(sizeof(enum pspxdp_slot_state) == 4, "enum fields are 4 bytes");
static_assert(sizeof(struct pspxdp_class_config) == 72, "class_config layout");
static_assert(__builtin_offsetof(struct pspxdp_class_config, ceil_bps) == 56, "class_config");
static_assert(__builtin_offsetof(struct pspxdp_class_config, slot) == 32, "class_config");
static_assert(__builtin_offsetof(struct pspxdp_class_config, burst_bytes) == 40, "class_config");
static_assert(sizeof(struct pspxdp_tag) == PSPXDP_TAG_BYTES, "tag layout");
static_assert(sizeof(struct pspxdp_pacer_state) == 40, "pacer_state layout");
static_assert(__builtin_offsetof(struct pspxdp_pacer_state, pacer_ifindex) == 8, "pacer_state");
static_assert(__builtin_offsetof(struct pspxdp_pacer_state, default_classid) == 12, "pacer_state");
static_assert(__builtin_offsetof(struct pspxdp_pacer_state, line_rate_bps) == 16, "pacer_state");
static_assert(__builtin_offsetof(struct pspxdp_pacer_state, config_gen) == 24, "pacer_state");
static_assert(sizeof(struct pspxdp_class_tc_stats) == 5 * 8, "class_stats layout");
static_assert(sizeof(struct pspxdp_class_counters) == 8 + 23 * 8, "pacer_stats layout");
static_assert(sizeof(struct pspxdp_class_entry) == 48 + 5 * 8 + 23 * 8, "classes layout");
static_assert(sizeof(struct pspxdp_daemon_stats) == 34 * 8, "daemon_stats layout");
static_assert(__builtin_offsetof(struct pspxdp_pacer_state, slots_end) == 36, "pacer_state");
static_assert(sizeof(enum pspxdp_filter_field) == 4, "enum fields are 4 bytes");
static_assert(sizeof(struct pspxdp_filter_shape) == 16, "filter shape layout");
/* The classifier masks a key as nine __u64 words: the shape (2), then 7 words of fields. */
static_assert(sizeof(struct pspxdp_filter_key) == 72, "filter key layout");
static_assert(__builtin_offsetof(struct pspxdp_filter_key, src) == 16, "filter key layout");
static_assert(__builtin_offsetof(struct pspxdp_filter_key, dst) == 32, "filter key layout");
static_assert(__builtin_offsetof(struct pspxdp_filter_key, sport) == 48, "filter key layout");
static_assert(__builtin_offsetof(struct pspxdp_filter_key, dscp) == 55, "filter key layout");
static_assert(__builtin_offsetof(struct pspxdp_filter_key, mark) == 56, "filter key layout");
static_assert(__builtin_offsetof(struct pspxdp_filter_key, cgroup_id) == 64, "filter key layout");
static_assert(sizeof(struct pspxdp_filter_entry) == 16, "filter entry layout");
static_assert(sizeof(struct pspxdp_filter_shape_slot) == 80, "filter shape slot layout");
static_assert(sizeof(struct pspxdp_filter_state) == 16, "filter state layout");
static_assert(sizeof(struct pspxdp_filter) == 88 + PSPXDP_CGROUP_PATH_MAX, "filter layout");
static_assert(__builtin_offsetof(struct pspxdp_filter, src) == 36, "filter layout");
static_assert(__builtin_offsetof(struct pspxdp_filter, sport_min) == 68, "filter layout");
static_assert(__builtin_offsetof(struct pspxdp_filter, cgroup_id) == 80, "filter layout");
static_assert(sizeof(struct pspxdp_filter_stats) == 2 * 8, "filter_stats layout");
static_assert(PSPXDP_FILTER_PREF_MAX < (1u << (64 - PSPXDP_FILTER_SEQ_BITS)),
              "pref fits the order");
static_assert(PSPXDP_TC_NR_COUNTERS == 12, "tc_stats counters");
static_assert(sizeof(struct pspxdp_tc_counters) == PSPXDP_TC_NR_COUNTERS * 8, "tc_stats layout");
static_assert(PSPXDP_XDP_NR_COUNTERS == 2, "xdp_stats counters");
static_assert(sizeof(struct pspxdp_xdp_counters) == PSPXDP_XDP_NR_COUNTERS * 8, "xdp_stats layout");
static_assert(sizeof(struct pspxdp_lateness) == (2 + PSPXDP_LATENESS_BUCKETS) * 8,
              "lateness layout");
#endif

#endif /* PSPXDP_SHARED_H */
