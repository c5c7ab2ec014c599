/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Everything that crosses the BPF / userspace line: map keys and values,
 * counters and constants. UAPI types only, so both clang -target bpf and g++
 * compile it. Userspace checks the layouts with static_assert (at the end).
 *
 * Pins live under PSPXDP_PIN_ROOT/<DEV>/ (e.g. /sys/fs/bpf/pspxdp/eth0/),
 * one file per map, named as the map.
 *
 * Who writes what:
 *   class_config  CLI  -> daemon   what the user asked for (rate, kind)
 *   class_slot    daemon -> TC     which pacer queue a class is served on
 *   rules_*       CLI  -> TC       filters
 *   pacer_state   daemon -> TC     heartbeat, default class, pacer ifindex, line rate
 *   class_stats   TC               per-class, per-CPU classification counters
 *   tc_stats      TC               per-CPU counters of unusual events (enum pspxdp_tc_counter)
 *   pacer_stats   daemon           per-class counters of the scheduler
 *   xdp_stats     XDP              per-CPU redirect counters
 *   xsks_map      daemon -> XDP    rx queue -> AF_XDP socket
 */
#ifndef PSPXDP_SHARED_H
#define PSPXDP_SHARED_H

#include <linux/types.h>

#define PSPXDP_PIN_ROOT "/sys/fs/bpf/pspxdp"

/* A class served on queue q > 0 owns rx queue q - 1 of the pacer veth peer:
 * the TC program sets skb->queue_mapping = q and the veth delivers it on rx
 * queue q - 1 (kernel-facts §3). Queue 0 means "no socket": pass. */
#define PSPXDP_MAX_CLASSES 4096
#define PSPXDP_MAX_QUEUES 1024
#define PSPXDP_MAX_RULES 16384
#define PSPXDP_HEARTBEAT_TIMEOUT_NS (100ULL * 1000 * 1000)

/* Class ids are tc's major:minor as one u32 (TC_H_MAKE). */
#define PSPXDP_CLASSID(maj, min) ((((__u32)(maj)) << 16) | ((__u32)(min) & 0xffff))

enum pspxdp_class_kind {
    PSPXDP_CLASS_NORMAL = 0, /* unpaced gap filler (the original's "default") */
    PSPXDP_CLASS_PACED = 1,  /* paced at rate_bps */
};

/* class_config: key __u32 classid. */
struct pspxdp_class_config {
    __u64 rate_bps; /* L2 bits/s including FCS; 0 for a normal class */
    __u32 kind;     /* enum pspxdp_class_kind */
    __u32 pad;
};

/* class_slot: key __u32 classid. */
struct pspxdp_class_slot {
    __u32 queue; /* 1..PSPXDP_MAX_QUEUES, 0 = not served */
    __u32 pad;
};

/* pacer_state: ARRAY, one entry, key 0. */
struct pspxdp_pacer_state {
    __u64 heartbeat_ns;    /* bpf_ktime_get_ns() / CLOCK_MONOTONIC of the daemon's last beat */
    __u32 pacer_ifindex;   /* the pacer veth (TC redirects into it) */
    __u32 default_classid; /* unclassified traffic goes here */
    __u32 flags;
    __u32 pad;
    /* The wire's rate M in bit/s, written at attach (ethtool speed or set by
     * hand). The control plane refuses paced classes summing above it; 0
     * means unknown, and then no paced class can be configured. */
    __u64 line_rate_bps;
};

/* Is the daemon alive? The one test, for the TC program (fail-open) and for
 * every userspace reader (status, attach). The heartbeat is CLOCK_MONOTONIC,
 * the clock of bpf_ktime_get_ns. A beat slightly in the future is a race
 * with the daemon's write, not death; one far in the future is garbage and
 * must not keep a dead pacer alive. */
#ifdef __bpf__
#define PSPXDP_INLINE static __always_inline
#else
#define PSPXDP_INLINE static inline
#endif
PSPXDP_INLINE int pspxdp_pacer_alive(const struct pspxdp_pacer_state *st, __u64 now_ns) {
    __u64 hb = st->heartbeat_ns;

    if (!hb || !st->pacer_ifindex) return 0;
    if (hb <= now_ns) return now_ns - hb <= PSPXDP_HEARTBEAT_TIMEOUT_NS;
    return hb - now_ns <= PSPXDP_HEARTBEAT_TIMEOUT_NS;
}

/* class_stats: PERCPU_HASH, key __u32 classid. Written by the TC program. */
struct pspxdp_class_stats {
    __u64 packets;      /* classified to this class and redirected to the pacer */
    __u64 bytes;        /* skb->len of those (GSO super-packets count whole) */
    __u64 pass_packets; /* classified here but passed unpaced: no socket or pacer dead */
    __u64 redirect_errors;
};

/* tc_stats: PERCPU_ARRAY indexed by enum pspxdp_tc_counter, value __u64.
 * Every packet the classifier could not fully trust is counted here once,
 * by the first reason found. */
enum pspxdp_tc_counter {
    PSPXDP_TC_SEEN = 0,         /* every packet the classifier ran on */
    PSPXDP_TC_TRUNCATED = 1,    /* a header ended early: default class */
    PSPXDP_TC_BAD_HEADER = 2,   /* IP version / IHL / length garbled: default class */
    PSPXDP_TC_VLAN_DEPTH = 3,   /* more than 2 VLAN tags: default class */
    PSPXDP_TC_EXT_DEPTH = 4,    /* more IPv6 extension headers than we walk: default class */
    PSPXDP_TC_FRAGMENT = 5,     /* non-first fragment: no port rules, addresses only */
    PSPXDP_TC_NON_IP = 6,       /* neither IPv4 nor IPv6: default class */
    PSPXDP_TC_PACER_DEAD = 7,   /* heartbeat stale or no pacer ifindex: passed */
    PSPXDP_TC_NO_SLOT = 8,      /* class has no queue: passed */
    PSPXDP_TC_REDIRECT_ERR = 9, /* bpf_clone_redirect failed: passed */
    PSPXDP_TC_STATS_FULL = 10,  /* class_stats full, class not counted */
    PSPXDP_TC_NR_COUNTERS
};

/* pacer_stats: HASH, key __u32 classid. Written by the daemon. */
struct pspxdp_pacer_stats {
    __u64 tx_frames;    /* real frames sent on the wire */
    __u64 tx_bytes;     /* their L2 bytes (FCS included) */
    __u64 rx_frames;    /* frames taken from the class's AF_XDP socket */
    __u64 drops;        /* frames lost on the way: socket ring full, invalid, ... */
    __u64 backlog;      /* frames queued in the pacer now */
};

/* xdp_stats: PERCPU_ARRAY indexed by enum pspxdp_xdp_counter, value __u64. */
enum pspxdp_xdp_counter {
    PSPXDP_XDP_REDIRECTED = 0,
    PSPXDP_XDP_NO_SOCKET = 1, /* rx queue without an XSK: dropped and counted */
    PSPXDP_XDP_NR_COUNTERS
};

/* Filters. Lookup order in the TC program: port rules (proto + port, most
 * specific), then longest prefix on the destination, then on the source,
 * then the default class. Values are __u32 classids. */
struct pspxdp_lpm_v4 {
    __u32 prefixlen;
    __u8 addr[4];
};
struct pspxdp_lpm_v6 {
    __u32 prefixlen;
    __u8 addr[16];
};
enum pspxdp_port_dir { PSPXDP_PORT_DST = 0, PSPXDP_PORT_SRC = 1 };
struct pspxdp_port_key {
    __u8 proto; /* IPPROTO_TCP / IPPROTO_UDP */
    __u8 dir;   /* enum pspxdp_port_dir */
    __u16 port; /* host byte order */
};

#ifdef __cplusplus
static_assert(sizeof(struct pspxdp_class_config) == 16, "class_config layout");
static_assert(sizeof(struct pspxdp_class_slot) == 8, "class_slot layout");
static_assert(sizeof(struct pspxdp_pacer_state) == 32, "pacer_state layout");
static_assert(__builtin_offsetof(struct pspxdp_pacer_state, pacer_ifindex) == 8, "pacer_state");
static_assert(__builtin_offsetof(struct pspxdp_pacer_state, default_classid) == 12, "pacer_state");
static_assert(__builtin_offsetof(struct pspxdp_pacer_state, line_rate_bps) == 24, "pacer_state");
static_assert(sizeof(struct pspxdp_class_stats) == 32, "class_stats layout");
static_assert(sizeof(struct pspxdp_pacer_stats) == 40, "pacer_stats layout");
static_assert(sizeof(struct pspxdp_lpm_v4) == 8, "lpm_v4 layout");
static_assert(sizeof(struct pspxdp_lpm_v6) == 20, "lpm_v6 layout");
static_assert(sizeof(struct pspxdp_port_key) == 4, "port_key layout");
static_assert(__builtin_offsetof(struct pspxdp_port_key, port) == 2, "port_key layout");
static_assert(__builtin_offsetof(struct pspxdp_lpm_v6, addr) == 4, "lpm_v6 layout");
static_assert(PSPXDP_TC_NR_COUNTERS == 11, "tc_stats counters");
static_assert(PSPXDP_XDP_NR_COUNTERS == 2, "xdp_stats counters");
#endif

#endif /* PSPXDP_SHARED_H */
