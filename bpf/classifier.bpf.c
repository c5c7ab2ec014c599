// SPDX-License-Identifier: GPL-2.0
/* pspxdp TC egress classifier (clsact, DESIGN.md §1).
 *
 * Parses Ethernet, up to two VLAN tags (802.1Q / 802.1ad), IPv4 (with
 * options) or IPv6 (walking up to PSPXDP_V6_EXT_MAX extension headers) and
 * the TCP/UDP ports, picks a class, and hands the packet to the pacer:
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
 *
 * Headers are read with bpf_skb_load_bytes, not direct packet access: it
 * works on non-linear (GSO) skbs and checks every offset at run time, which
 * keeps the variable-length walks (IHL, IPv6 extension headers) simple for
 * the verifier. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <stdbool.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "pspxdp/shared.h"

#define PSPXDP_VLAN_MAX 2   /* QinQ: outer 802.1ad + inner 802.1Q */
#define PSPXDP_V6_EXT_MAX 6 /* extension headers walked before giving up */

#define ETH_P_QINQ_OLD 0x9100 /* pre-standard QinQ, still emitted by some gear */
#define IP_OFFSET_MASK 0x1fff
#define IP6_OFFSET_MASK 0xfff8
#define NEXTHDR_HOP 0
#define NEXTHDR_ROUTING 43
#define NEXTHDR_FRAGMENT 44
#define NEXTHDR_AUTH 51
#define NEXTHDR_DEST 60

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
    __type(key, __u32);
    __type(value, struct pspxdp_class_config);
} class_config SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PSPXDP_MAX_CLASSES);
    __type(key, __u32);
    __type(value, struct pspxdp_pacer_stats);
} pacer_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PSPXDP_MAX_CLASSES);
    __type(key, __u32);
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
    __type(key, __u32);
    __type(value, struct pspxdp_class_stats);
} class_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, PSPXDP_TC_NR_COUNTERS);
    __type(key, __u32);
    __type(value, __u64);
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

/* What the parser established. Only fields it vouches for are used. */
struct flow {
    __u8 family;    /* 4 or 6 */
    __u8 l4_proto;  /* IPPROTO_*, valid with has_ports */
    __u8 has_ports; /* TCP/UDP header present and complete, first fragment */
    __u8 pad;
    __u16 sport; /* host order */
    __u16 dport;
    __u8 saddr[16]; /* IPv4 uses the first 4 bytes */
    __u8 daddr[16];
};

/* Parse outcome: PARSE_OK or the tc_stats counter that explains the failure. */
#define PARSE_OK 0

static __always_inline void count(__u32 counter) {
    __u64 *v = bpf_map_lookup_elem(&tc_stats, &counter);
    if (v) *v += 1;
}

static __always_inline int load(struct __sk_buff *skb, __u32 off, void *to, __u32 len) {
    return bpf_skb_load_bytes(skb, off, to, len);
}

/* TCP/UDP ports at l4_off; every byte of the L4 header must be there. */
static __always_inline int parse_l4(struct __sk_buff *skb, __u32 l4_off, struct flow *f) {
    __be16 ports[2];

    if (f->l4_proto != IPPROTO_TCP && f->l4_proto != IPPROTO_UDP) return PARSE_OK;
    if (load(skb, l4_off, ports, sizeof(ports))) return PSPXDP_TC_TRUNCATED;
    if (f->l4_proto == IPPROTO_TCP) {
        __u8 doff_byte;
        __u8 last;

        if (load(skb, l4_off + 12, &doff_byte, 1)) return PSPXDP_TC_TRUNCATED;
        __u32 hlen = (__u32)(doff_byte >> 4) * 4;
        if (hlen < 20) return PSPXDP_TC_BAD_HEADER;
        if (load(skb, l4_off + hlen - 1, &last, 1)) return PSPXDP_TC_TRUNCATED;
    } else {
        __u8 last;

        if (load(skb, l4_off + 7, &last, 1)) return PSPXDP_TC_TRUNCATED;
    }
    f->sport = bpf_ntohs(ports[0]);
    f->dport = bpf_ntohs(ports[1]);
    f->has_ports = 1;
    return PARSE_OK;
}

static __always_inline int parse_v4(struct __sk_buff *skb, __u32 off, struct flow *f) {
    struct {
        __u8 ver_ihl;
        __u8 tos;
        __be16 tot_len;
        __be16 id;
        __be16 frag_off;
        __u8 ttl;
        __u8 protocol;
        __be16 check;
        __u8 saddr[4];
        __u8 daddr[4];
    } ip;
    __u8 last;

    if (load(skb, off, &ip, sizeof(ip))) return PSPXDP_TC_TRUNCATED;
    __u32 hlen = (__u32)(ip.ver_ihl & 0x0f) * 4;
    if ((ip.ver_ihl >> 4) != 4 || hlen < 20) return PSPXDP_TC_BAD_HEADER;
    /* tot_len 0 is legal for BIG TCP GSO packets; otherwise it must cover
     * the header and fit in the skb, or the header is not what it claims. */
    __u32 tot_len = bpf_ntohs(ip.tot_len);
    if (tot_len) {
        if (tot_len < hlen) return PSPXDP_TC_BAD_HEADER;
        if (off + tot_len > skb->len) return PSPXDP_TC_TRUNCATED;
    }
    if (load(skb, off + hlen - 1, &last, 1)) return PSPXDP_TC_TRUNCATED; /* options */

    f->family = 4;
    f->l4_proto = ip.protocol;
    __builtin_memcpy(f->saddr, ip.saddr, 4);
    __builtin_memcpy(f->daddr, ip.daddr, 4);
    if (bpf_ntohs(ip.frag_off) & IP_OFFSET_MASK) {
        count(PSPXDP_TC_FRAGMENT); /* no L4 header here: addresses only */
        return PARSE_OK;
    }
    return parse_l4(skb, off + hlen, f);
}

static __always_inline int parse_v6(struct __sk_buff *skb, __u32 off, struct flow *f) {
    struct {
        __be32 ver_tc_flow;
        __be16 payload_len;
        __u8 nexthdr;
        __u8 hop_limit;
        __u8 saddr[16];
        __u8 daddr[16];
    } ip6;

    if (load(skb, off, &ip6, sizeof(ip6))) return PSPXDP_TC_TRUNCATED;
    if ((bpf_ntohl(ip6.ver_tc_flow) >> 28) != 6) return PSPXDP_TC_BAD_HEADER;
    /* payload_len 0: jumbogram / BIG TCP; otherwise it must fit. */
    __u32 payload_len = bpf_ntohs(ip6.payload_len);
    if (payload_len && off + sizeof(ip6) + payload_len > skb->len) return PSPXDP_TC_TRUNCATED;

    f->family = 6;
    __builtin_memcpy(f->saddr, ip6.saddr, 16);
    __builtin_memcpy(f->daddr, ip6.daddr, 16);

    __u8 nh = ip6.nexthdr;
    off += sizeof(ip6);
    int i;
    for (i = 0; i < PSPXDP_V6_EXT_MAX; i++) {
        struct {
            __u8 nexthdr;
            __u8 len;
            __be16 frag_off; /* fragment header only */
        } ext;

        if (nh != NEXTHDR_HOP && nh != NEXTHDR_ROUTING && nh != NEXTHDR_DEST &&
            nh != NEXTHDR_AUTH && nh != NEXTHDR_FRAGMENT)
            break;
        if (load(skb, off, &ext, sizeof(ext))) return PSPXDP_TC_TRUNCATED;
        if (nh == NEXTHDR_FRAGMENT) {
            __u8 last;

            if (load(skb, off + 7, &last, 1)) return PSPXDP_TC_TRUNCATED;
            off += 8;
            nh = ext.nexthdr;
            if (bpf_ntohs(ext.frag_off) & IP6_OFFSET_MASK) {
                /* What follows is payload, not headers: stop walking. */
                f->l4_proto = nh;
                count(PSPXDP_TC_FRAGMENT);
                return PARSE_OK;
            }
            continue;
        }
        /* AH counts its length in 4-byte units minus 2, the others in
         * 8-byte units minus 1 (RFC 4302, RFC 8200). */
        __u32 len = nh == NEXTHDR_AUTH ? ((__u32)ext.len + 2) * 4 : ((__u32)ext.len + 1) * 8;
        __u8 last;
        if (load(skb, off + len - 1, &last, 1)) return PSPXDP_TC_TRUNCATED;
        off += len;
        nh = ext.nexthdr;
    }
    if (i == PSPXDP_V6_EXT_MAX)
        if (nh == NEXTHDR_HOP || nh == NEXTHDR_ROUTING || nh == NEXTHDR_DEST ||
            nh == NEXTHDR_AUTH || nh == NEXTHDR_FRAGMENT)
            return PSPXDP_TC_EXT_DEPTH;
    f->l4_proto = nh;
    return parse_l4(skb, off, f);
}

static __always_inline int parse(struct __sk_buff *skb, struct flow *f) {
    __be16 proto;
    __u32 off = ETH_HLEN;

    if (load(skb, 12, &proto, sizeof(proto))) return PSPXDP_TC_TRUNCATED;
    /* A tag offloaded to skb->vlan_tci is not in the data: what follows the
     * MAC addresses is then already the inner ethertype. */
    for (int i = 0; i < PSPXDP_VLAN_MAX; i++) {
        if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD) &&
            proto != bpf_htons(ETH_P_QINQ_OLD))
            break;
        if (load(skb, off + 2, &proto, sizeof(proto))) return PSPXDP_TC_TRUNCATED;
        off += 4;
    }
    if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD) ||
        proto == bpf_htons(ETH_P_QINQ_OLD))
        return PSPXDP_TC_VLAN_DEPTH;
    if (proto == bpf_htons(ETH_P_IP)) return parse_v4(skb, off, f);
    if (proto == bpf_htons(ETH_P_IPV6)) return parse_v6(skb, off, f);
    return PSPXDP_TC_NON_IP;
}

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

static __always_inline void count_class(__u32 classid, __u64 len, int outcome) {
    struct pspxdp_class_stats *cs = bpf_map_lookup_elem(&class_stats, &classid);

    if (!cs) {
        struct pspxdp_class_stats zero = {};
        /* NOEXIST: another CPU may have created it meanwhile; fine. */
        bpf_map_update_elem(&class_stats, &classid, &zero, BPF_NOEXIST);
        cs = bpf_map_lookup_elem(&class_stats, &classid);
        if (!cs) {
            count(PSPXDP_TC_STATS_FULL);
            return;
        }
    }
    if (outcome == 0) {
        cs->packets += 1;
        cs->bytes += len;
    } else {
        cs->pass_packets += 1;
        if (outcome == 2) cs->redirect_errors += 1;
    }
}

/* The heartbeat is CLOCK_MONOTONIC, the same clock as bpf_ktime_get_ns. A
 * beat slightly in the future is a race with the daemon's write, not death;
 * one far in the future is garbage and must not keep a dead pacer alive. */
static __always_inline bool pacer_alive(const struct pspxdp_pacer_state *st, __u64 now_ns) {
    __u64 hb = st->heartbeat_ns;

    if (!hb || !st->pacer_ifindex) return false;
    if (hb <= now_ns) return now_ns - hb <= PSPXDP_HEARTBEAT_TIMEOUT_NS;
    return hb - now_ns <= PSPXDP_HEARTBEAT_TIMEOUT_NS;
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
    if (!classid) classid = st->default_classid;

    if (!pacer_alive(st, bpf_ktime_get_ns())) {
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
    count_class(classid, skb->len, outcome);

    if (test_mode) {
        skb->cb[0] = outcome == 0 ? queue : 0;
        skb->cb[1] = classid;
    }
    return outcome == 0 ? TC_ACT_STOLEN : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
