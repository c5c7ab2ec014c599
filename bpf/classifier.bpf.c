// SPDX-License-Identifier: GPL-2.0
/* pspxdp TC egress classifier (clsact, DESIGN.md §1).
 *
 * Parses the packet (parse.h), picks a class, and hands the packet to the
 * pacer:
 *
 *   class = port rule (dst port, then src port)
 *         → longest dst prefix → longest src prefix → pacer_state.default_classid
 *
 * A packet the parser cannot fully trust (truncated, garbled, too deep) goes
 * to the default class: we never match a rule on bytes we are not sure of.
 * Non-first fragments carry no L4 header, so they match address rules only.
 *
 * Fail-open: if the daemon's heartbeat is stale, or the class has no pacer
 * queue, the packet continues untouched (TC_ACT_OK) and is counted.
 *
 * The hand-over is bpf_clone_redirect + TC_ACT_STOLEN, not bpf_redirect: a
 * connected socket's cached tx queue would otherwise override our
 * queue_mapping (kernel-facts §3). That verdict is only right under clsact.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <stdbool.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "pspxdp/shared.h"

/* Set by tests before load: mirror the decision into skb->cb[0] (the
 * queue_mapping we set, 0 = passed) and cb[1] (classid), because
 * BPF_PROG_TEST_RUN copies cb back but not queue_mapping (kernel-facts §6).
 * Off in production: cb belongs to the qdisc layer on egress. */
const volatile bool test_mode = false;

/* Written by the CLI, read by the daemon. Defined here so the loader creates
 * and pins it with BTF (bpftool prints field names); the programs never use it. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PSPXDP_MAX_CLASSES);
    __type(key, struct pspxdp_classid);
    __type(value, struct pspxdp_class_config);
} class_config SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PSPXDP_MAX_CLASSES);
    __type(key, struct pspxdp_classid);
    __type(value, struct pspxdp_pacer_stats);
} pacer_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PSPXDP_MAX_CLASSES);
    __type(key, struct pspxdp_classid);
    __type(value, struct pspxdp_class_slot);
} class_slot SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct pspxdp_pacer_state);
} pacer_state SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_HASH);
    __uint(max_entries, PSPXDP_MAX_CLASSES);
    __type(key, struct pspxdp_classid);
    __type(value, struct pspxdp_class_tc_stats);
} class_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct pspxdp_tc_counters);
} tc_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);
    __uint(max_entries, PSPXDP_MAX_RULES);
    __uint(map_flags, BPF_F_NO_PREALLOC); /* LPM tries require it */
    __type(key, struct pspxdp_lpm_v4);
    __type(value, __u32);
} rules_dst_v4 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);
    __uint(max_entries, PSPXDP_MAX_RULES);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct pspxdp_lpm_v4);
    __type(value, __u32);
} rules_src_v4 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);
    __uint(max_entries, PSPXDP_MAX_RULES);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct pspxdp_lpm_v6);
    __type(value, __u32);
} rules_dst_v6 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);
    __uint(max_entries, PSPXDP_MAX_RULES);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct pspxdp_lpm_v6);
    __type(value, __u32);
} rules_src_v6 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PSPXDP_MAX_RULES);
    __type(key, struct pspxdp_port_key);
    __type(value, __u32);
} rules_port SEC(".maps");

static __always_inline void count(__u32 counter) {
    __u32 zero = 0;
    struct pspxdp_tc_counters *c = bpf_map_lookup_elem(&tc_stats, &zero);

    PSPXDP_COUNT(c, counter, PSPXDP_TC_NR_COUNTERS);
}

#include "parse.h"

/* Rule lookup in the documented order; 0 = nothing matched. Class id 0 is
 * never a valid target (tc's 0:0 is "unspecified"), so it doubles as "none". */
static __always_inline __u32 match_rules(const struct flow *f) {
    __u32 *classid;

    if (f->has_ports) {
        struct pspxdp_port_key pk = {.proto = f->l4_proto, .dir = PSPXDP_PORT_DST, .port = f->dport};
        classid = bpf_map_lookup_elem(&rules_port, &pk);
        if (classid && *classid) return *classid;
        pk.dir = PSPXDP_PORT_SRC;
        pk.port = f->sport;
        classid = bpf_map_lookup_elem(&rules_port, &pk);
        if (classid && *classid) return *classid;
    }
    if (f->family == 4) {
        struct pspxdp_lpm_v4 k = {.prefixlen = 32};
        __builtin_memcpy(k.addr, f->daddr, 4);
        classid = bpf_map_lookup_elem(&rules_dst_v4, &k);
        if (classid && *classid) return *classid;
        __builtin_memcpy(k.addr, f->saddr, 4);
        classid = bpf_map_lookup_elem(&rules_src_v4, &k);
        if (classid && *classid) return *classid;
    } else if (f->family == 6) {
        struct pspxdp_lpm_v6 k = {.prefixlen = 128};
        __builtin_memcpy(k.addr, f->daddr, 16);
        classid = bpf_map_lookup_elem(&rules_dst_v6, &k);
        if (classid && *classid) return *classid;
        __builtin_memcpy(k.addr, f->saddr, 16);
        classid = bpf_map_lookup_elem(&rules_src_v6, &k);
        if (classid && *classid) return *classid;
    }
    return 0;
}

static __always_inline void count_class(__u32 classid, __u64 len, __u32 segs, int outcome) {
    struct pspxdp_class_tc_stats *cs = bpf_map_lookup_elem(&class_stats, &classid);

    if (!cs) {
        struct pspxdp_class_tc_stats zero = {};
        /* NOEXIST: another CPU may have created it meanwhile; fine. */
        bpf_map_update_elem(&class_stats, &classid, &zero, BPF_NOEXIST);
        cs = bpf_map_lookup_elem(&class_stats, &classid);
        if (!cs) {
            count(PSPXDP_TC_STATS_FULL);
            return;
        }
    }
    if (outcome == 0) {
        cs->tc_packets += 1;
        cs->tc_skb_bytes += len;
        cs->tc_frames += segs;
    } else {
        cs->tc_passed += 1;
        if (outcome == 2) cs->tc_errors += 1;
    }
}

SEC("tc")
int pspxdp_classify(struct __sk_buff *skb) {
    __u32 zero = 0;
    struct flow f = {};
    __u32 classid = 0;
    __u32 queue = 0;
    int outcome = 1; /* 0 redirected, 1 passed, 2 redirect failed (passed) */

    count(PSPXDP_TC_SEEN);
    struct pspxdp_pacer_state *st = bpf_map_lookup_elem(&pacer_state, &zero);
    if (!st) return TC_ACT_OK;

    int why = parse(skb, &f);
    if (why == PARSE_OK) classid = match_rules(&f);
    else count(why);
    if (!classid) classid = pspxdp_classid_raw(st->default_classid);

    if (!pspxdp_pacer_alive(st, bpf_ktime_get_ns())) {
        count(PSPXDP_TC_PACER_DEAD);
    } else {
        struct pspxdp_class_slot *slot = bpf_map_lookup_elem(&class_slot, &classid);
        if (!slot || !slot->queue || slot->queue > PSPXDP_MAX_QUEUES) {
            count(PSPXDP_TC_NO_SLOT);
        } else {
            /* queue_mapping q lands on the peer's rx queue q - 1 (shared.h). */
            __u32 old_mapping = skb->queue_mapping;
            queue = slot->queue;
            skb->queue_mapping = queue;
            if (bpf_clone_redirect(skb, st->pacer_ifindex, 0) == 0) {
                outcome = 0;
            } else {
                /* The original goes on to DEV: give it back its own tx queue. */
                skb->queue_mapping = old_mapping;
                count(PSPXDP_TC_REDIRECT_ERR);
                outcome = 2;
            }
        }
    }
    count_class(classid, skb->len, skb->gso_segs > 1 ? skb->gso_segs : 1, outcome);

    if (test_mode) {
        skb->cb[0] = outcome == 0 ? queue : 0;
        skb->cb[1] = classid;
    }
    return outcome == 0 ? TC_ACT_STOLEN : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
