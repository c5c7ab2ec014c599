// SPDX-License-Identifier: GPL-2.0
/* pspxdp TC egress classifier (clsact, docs/design.md §1).
 *
 * Parses the packet (parse.h), picks a class, and hands the packet to the
 * pacer:
 *
 *   class = skb->priority, when it is major:minor of an existing class and
 *           major is the default class's (htb's rule; off with
 *           PSPXDP_STATE_F_PRIO_DIRECT_OFF)
 *         → the best matching filter (match.h: lowest pref, then the one
 *           added first) → pacer_state.default_classid
 *
 * A packet the parser cannot fully trust (truncated, garbled, too deep) goes
 * to the default class: we never match a filter on bytes we are not sure of.
 * Non-first fragments carry no L4 header, so they match only filters without
 * ports.
 *
 * The hand-over (shared.h): class -> class_config.slot ->
 * pacer_stats[slot] must say SERVED for this very class; then the packet gets
 * a struct pspxdp_tag {slot, classid} pushed in front of its Ethernet header
 * (bpf_skb_change_head) and is redirected into the pacer veth (bpf_redirect,
 * TC_ACT_REDIRECT). The pacer veth segments GSO packets (its TSO is off while
 * its peer has XDP) and every segment starts with a copy of the tag: the
 * segmenter copies everything from the MAC header on, and change_head moved
 * the MAC header to the tag (measured on 6.18: UDP GSO, 10 segments, 10 tags).
 * Any rx queue of the pacer will do: every queue has an AF_XDP socket.
 *
 * Fail-open: the packet continues untouched (TC_ACT_OK), counted, when the
 * daemon's heartbeat is stale, when the class is not served, or when the
 * hand-over cannot happen. Everything that can refuse it is asked before the
 * tag is pushed (bpf_check_mtu: the pacer veth exists and the tagged packet
 * fits its MTU), because a packet that carries a tag may never reach DEV:
 * once tagged it goes to the pacer, which drops a bad tag and counts it.
 */
#include "pspxdp/shared.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <stdbool.h>

/* Set by tests before load: mirror the decision into skb->cb[0] (the slot
 * the packet was handed over on, 0 = passed) and cb[1] (classid). The tag
 * itself is visible in BPF_PROG_TEST_RUN's data_out; cb says what the
 * program decided also when it passed the packet. Off in production: cb
 * belongs to the qdisc layer on egress. */
const volatile bool test_mode = false;

/* Written by the CLI, read by the daemon and by served_slot() below, which
 * looks up the slot of the packet's class (the hand-over). Defined here, in
 * the program that reads it, so the loader creates and pins it with BTF
 * (bpftool prints field names). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PSPXDP_MAX_CLASSES);
    __type(key, struct pspxdp_classid);
    __type(value, struct pspxdp_class_config);
} class_config SEC(".maps");

/* Mmapable: the daemon writes these in place (shared.h). */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, PSPXDP_MAX_CLASSES);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, struct pspxdp_class_counters);
} pacer_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, struct pspxdp_daemon_stats);
} daemon_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, struct pspxdp_pacer_state);
} pacer_state SEC(".maps");

/* The daemon's release-lateness histogram (shared.h); nothing here reads it:
 * defined here so the loader pins it with the others. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, struct pspxdp_lateness);
} lateness SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_HASH);
    __uint(max_entries, PSPXDP_MAX_CLASSES);
    __type(key, struct pspxdp_classid);
    __type(value, struct pspxdp_class_tc_stats);
} class_stats SEC(".maps");

/* Every counter of each configured class, for bpftool (shared.h); written by
 * the daemon, nothing here reads it: defined here so the loader pins it with
 * BTF. No prealloc: it takes memory for the classes that exist, not for
 * PSPXDP_MAX_CLASSES. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PSPXDP_MAX_CLASSES);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct pspxdp_classid);
    __type(value, struct pspxdp_class_entry);
} classes SEC(".maps");

#include "match.h"
#include "parse.h"

/* What happened to a packet, for class_stats. */
enum outcome {
    HANDED_OVER,     /* tagged and redirected into the pacer */
    PASSED,          /* pacer dead or class not served: untouched */
    HANDOVER_FAILED, /* the pacer could not take it: untouched */
};

static __always_inline void count_class(__u32 classid, __u64 len, __u32 segs,
                                        enum outcome outcome) {
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
    if (outcome == HANDED_OVER) {
        cs->tc_packets += 1;
        cs->tc_skb_bytes += len;
        cs->tc_frames += segs;
    } else {
        cs->tc_passed += 1;
        if (outcome == HANDOVER_FAILED) cs->tc_errors += 1;
    }
}

/* The slot the daemon serves classid on, 0 if none. */
static __always_inline __u32 served_slot(__u32 classid) {
    struct pspxdp_class_config *cc = bpf_map_lookup_elem(&class_config, &classid);
    if (!cc) return 0;
    __u32 slot = cc->slot;
    struct pspxdp_class_counters *pc = bpf_map_lookup_elem(&pacer_stats, &slot);
    if (!slot || !pc || pc->state != PSPXDP_SLOT_SERVED ||
        pspxdp_classid_raw(pc->classid) != classid)
        return 0;
    return slot;
}

/* htb's direct use of skb->priority (an application's SO_PRIORITY): the
 * class whose id it is, when that class exists and its major is the
 * attachment's (the default class's); 0 otherwise. Majors 0 are never
 * taken: priorities 0..7 (TC_PRIO_*, IP_TOS) are major 0. */
static __always_inline __u32 prio_direct(struct __sk_buff *skb,
                                         const struct pspxdp_pacer_state *st) {
    __u32 prio = skb->priority;

    if (st->flags & PSPXDP_STATE_F_PRIO_DIRECT_OFF) return 0;
    if (!(prio >> 16) || (prio >> 16) != st->default_classid.major || !(prio & 0xffff)) return 0;
    if (!bpf_map_lookup_elem(&class_config, &prio)) return 0;
    return prio;
}

/* Tags the packet and redirects it into the pacer veth. Returns false, with
 * the packet untouched, when the pacer cannot take it. */
static __always_inline bool hand_over(struct __sk_buff *skb, __u32 pacer_ifindex, __u32 slot,
                                      __u32 classid, __u32 segs) {
    __u32 mtu_len = 0;
    /* 0: the pacer exists and the tagged packet fits it (a GSO packet is
     * judged by its segments when the pacer segments it). */
    if (bpf_check_mtu(skb, pacer_ifindex, &mtu_len, PSPXDP_TAG_BYTES, 0) != 0) return false;
    /* The flow inside the class: the kernel's flow hash (the stack's own,
     * or the flow dissector's 5-tuple hash), before the tag hides the
     * headers from it. */
    __u32 flow_hash = bpf_get_hash_recalc(skb);
    if (bpf_skb_change_head(skb, PSPXDP_TAG_BYTES, 0) != 0) return false;
    struct pspxdp_tag tag = {
        .slot = slot, .classid = pspxdp_classid_of(classid), .flow_hash = flow_hash, .segs = segs};
    /* Cannot fail after change_head made the bytes linear. If it did, the
     * tag stays zero (change_head clears it) and the daemon drops the frame
     * as unknown_class: a tagged packet never goes back to DEV. */
    bpf_skb_store_bytes(skb, 0, &tag, sizeof(tag), 0);
    bpf_redirect(pacer_ifindex, 0);
    return true;
}

SEC("tc")
int pspxdp_classify(struct __sk_buff *skb) {
    __u32 zero = 0;
    struct flow f = {};
    __u32 classid = 0;
    __u32 slot = 0;
    enum outcome outcome = PASSED;

    count(PSPXDP_TC_SEEN);
    struct pspxdp_pacer_state *st = bpf_map_lookup_elem(&pacer_state, &zero);
    if (!st) return TC_ACT_OK;

    classid = prio_direct(skb, st);
    if (classid) {
        count(PSPXDP_TC_PRIO_DIRECT);
    } else {
        int why = parse(skb, &f);
        if (why != PARSE_OK) count(why);
        classid = filter_match(skb, &f, why, skb->len);
    }
    if (!classid) classid = pspxdp_classid_raw(st->default_classid);

    /* Read before change_head: the skb's length and segments as TC saw them. */
    __u64 len = skb->len;
    __u32 segs = skb->gso_segs > 1 ? skb->gso_segs : 1;
    if (!pspxdp_pacer_alive(st, bpf_ktime_get_ns())) {
        count(PSPXDP_TC_PACER_DEAD);
    } else if (!(slot = served_slot(classid))) {
        count(PSPXDP_TC_NO_SLOT);
    } else if (hand_over(skb, st->pacer_ifindex, slot, classid, segs)) {
        outcome = HANDED_OVER;
    } else {
        count(PSPXDP_TC_REDIRECT_ERR);
        outcome = HANDOVER_FAILED;
    }
    count_class(classid, len, segs, outcome);

    if (test_mode) {
        skb->cb[0] = outcome == HANDED_OVER ? slot : 0;
        skb->cb[1] = classid;
    }
    return outcome == HANDED_OVER ? TC_ACT_REDIRECT : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
