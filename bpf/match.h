/* SPDX-License-Identifier: GPL-2.0 */
/* Filter matching for the TC classifier: tuple space search over the filter
 * maps described in shared.h ("Filters").
 *
 * The packet's key is built once from the parser's flow. For each shape in
 * the live set of filter_shapes, in ascending order of the shape's best
 * (lowest) filter order, the key is masked with the shape's masks and looked
 * up in filter_entries. The walk stops at the first shape whose best order
 * cannot beat the best match found so far (the set is sorted, so no later
 * shape can), and at the end of the set. Cost: at most one hash lookup per shape,
 * independent of the number of filters.
 *
 * Two fields come from the skb, not from the parser: skb->mark (masked by
 * the shape's mark mask, as any other field) and the sending socket's cgroup.
 * A cgroup shape carries the level of its filters' cgroups: the packet's key
 * gets the id of the socket cgroup's ancestor at that level
 * (bpf_skb_ancestor_cgroup_id, 0 without a full socket or above the socket's
 * own level, and no filter has id 0), so a filter on /a matches what sockets
 * in /a and in every cgroup below it send, at one lookup per level in use.
 *
 * The filter maps are defined here, next to the only code that reads them.
 * The includer includes parse.h first. */
#ifndef PSPXDP_BPF_MATCH_H
#define PSPXDP_BPF_MATCH_H

#include "parse.h"
#include "pspxdp/shared.h"
#include <bpf/bpf_helpers.h>
#include <linux/bpf.h>

/* Read by the CLI only (show, save, delete); here so the loader creates and
 * pins it with BTF. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PSPXDP_MAX_FILTERS);
    __uint(map_flags, BPF_F_NO_PREALLOC); /* memory as filters are added */
    __type(key, __u32);
    __type(value, struct pspxdp_filter);
} filters SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PSPXDP_MAX_FILTER_ENTRIES);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct pspxdp_filter_key);
    __type(value, struct pspxdp_filter_entry);
} filter_entries SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 2 * PSPXDP_FILTER_SET_SLOTS);
    __type(key, __u32);
    __type(value, struct pspxdp_filter_shape_slot);
} filter_shapes SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct pspxdp_filter_state);
} filter_state SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, PSPXDP_MAX_FILTERS);
    __type(key, __u32);
    __type(value, struct pspxdp_filter_stats);
} filter_stats SEC(".maps");

/* A key as nine words, so masking is seven ANDs after the two words of the
 * shape (shared.h asserts the layout). */
union filter_words {
    struct pspxdp_filter_key k;
    __u64 w[9];
};

struct filter_walk {
    struct __sk_buff *skb;  /* for the socket's cgroup ancestors */
    union filter_words pkt; /* pkt.k.shape: the packet's family and the fields it has */
    __u64 best_order;
    struct pspxdp_filter_entry best;
    __u32 base; /* first slot of the live set */
};

static long filter_walk_shape(__u32 i, void *ctx) {
    struct filter_walk *w = ctx;
    __u32 idx = w->base + i;
    const struct pspxdp_filter_shape_slot *s = bpf_map_lookup_elem(&filter_shapes, &idx);

    /* The end of the set, or (sorted by best_order) nothing further can win. */
    if (!s || !s->mask.shape.fields || s->best_order >= w->best_order) return 1;
    /* A shape needing a field the packet lacks (ports of a later fragment,
     * a tag on an untagged frame) or of the other family cannot match. */
    if (s->mask.shape.fields & ~w->pkt.k.shape.fields) return 0;
    if (s->mask.shape.family && s->mask.shape.family != w->pkt.k.shape.family) return 0;

    const union filter_words *m = (const void *)&s->mask;
    union filter_words key;
    key.w[0] = m->w[0]; /* the shape itself */
    key.w[1] = m->w[1];
    key.w[2] = w->pkt.w[2] & m->w[2];
    key.w[3] = w->pkt.w[3] & m->w[3];
    key.w[4] = w->pkt.w[4] & m->w[4];
    key.w[5] = w->pkt.w[5] & m->w[5];
    key.w[6] = w->pkt.w[6] & m->w[6];
    key.w[7] = w->pkt.w[7] & m->w[7];
    key.k.cgroup_id = 0;
    if (s->mask.shape.fields & PSPXDP_FF_CGROUP)
        key.k.cgroup_id = bpf_skb_ancestor_cgroup_id(w->skb, s->mask.shape.cgroup_level);
    const struct pspxdp_filter_entry *e = bpf_map_lookup_elem(&filter_entries, &key.k);
    if (e && e->order < w->best_order) {
        w->best_order = e->order;
        w->best = *e;
    }
    return 0;
}

/* The class of the best filter matching the packet, or 0 (no filter). why is
 * parse()'s outcome: garbled or truncated packets match nothing; a non-IP
 * packet can still match a filter on its VLAN id, mark or cgroup alone.
 * skb_len feeds the winning filter's counters. */
static __always_inline __u32 filter_match(struct __sk_buff *skb, const struct flow *f, int why,
                                          __u32 skb_len) {
    __u32 zero = 0;

    if (why != PARSE_OK && why != PSPXDP_TC_NON_IP) return 0;
    const struct pspxdp_filter_state *st = bpf_map_lookup_elem(&filter_state, &zero);
    if (!st) return 0;

    struct filter_walk w = {};
    w.best_order = PSPXDP_FILTER_ORDER_NONE;
    w.base = st->active_set ? PSPXDP_FILTER_SET_SLOTS : 0;
    w.skb = skb;
    /* Every packet has a mark; a socket's packets have a cgroup. */
    w.pkt.k.shape.fields = PSPXDP_FF_MARK;
    w.pkt.k.mark = skb->mark;
    if (skb->sk) w.pkt.k.shape.fields |= PSPXDP_FF_CGROUP;
    if (f->has_vlan) {
        w.pkt.k.shape.fields |= PSPXDP_FF_VLAN;
        w.pkt.k.vlan = f->vlan;
    }
    if (why == PARSE_OK) {
        w.pkt.k.shape.family = f->family;
        w.pkt.k.shape.fields |= PSPXDP_FF_SRC | PSPXDP_FF_DST | PSPXDP_FF_PROTO | PSPXDP_FF_DSCP;
        __builtin_memcpy(w.pkt.k.src, f->saddr, 16);
        __builtin_memcpy(w.pkt.k.dst, f->daddr, 16);
        w.pkt.k.proto = f->l4_proto;
        w.pkt.k.dscp = f->dscp;
        if (f->has_ports) {
            w.pkt.k.shape.fields |= PSPXDP_FF_SPORT | PSPXDP_FF_DPORT;
            w.pkt.k.sport = f->sport;
            w.pkt.k.dport = f->dport;
        }
    }
    bpf_loop(PSPXDP_FILTER_SET_SLOTS, filter_walk_shape, &w, 0);
    if (w.best_order == PSPXDP_FILTER_ORDER_NONE) return 0;

    struct pspxdp_filter_stats *fs = bpf_map_lookup_elem(&filter_stats, &w.best.filter_id);
    if (fs) {
        fs->matched_packets += 1;
        fs->matched_skb_bytes += skb_len;
    }
    return pspxdp_classid_raw(w.best.classid);
}

#endif /* PSPXDP_BPF_MATCH_H */
