/* SPDX-License-Identifier: GPL-2.0 */
/* The TC classifier's packet parser: Ethernet, up to two VLAN tags
 * (802.1Q / 802.1ad) in the data plus one offloaded to skb->vlan_tci, IPv4
 * (with options) or IPv6 (walking up to PSPXDP_V6_EXT_MAX extension headers),
 * DSCP, and the ports of TCP, UDP, SCTP and UDP-Lite.
 *
 * A packet the parser cannot fully trust (truncated, garbled, too deep) is
 * reported with the tc_stats counter that explains why, and the caller sends
 * it to the default class: no filter is ever matched on bytes we are not sure
 * of. Non-first fragments carry no L4 header, so they match only filters
 * without ports. A non-IP packet (PSPXDP_TC_NON_IP) still has its VLAN id.
 *
 * Headers are read with bpf_skb_load_bytes, not direct packet access: it
 * works on non-linear (GSO) skbs and checks every offset at run time, which
 * keeps the variable-length walks (IHL, IPv6 extension headers) simple for
 * the verifier.
 *
 * The classifier's tc_stats counters and count() are defined here, with
 * the parser that counts most of their reasons. */
#ifndef PSPXDP_BPF_PARSE_H
#define PSPXDP_BPF_PARSE_H

#include "counters.h"
#include "pspxdp/shared.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>

PSPXDP_PERCPU_COUNTERS(count, tc_stats, struct pspxdp_tc_counters, PSPXDP_TC_NR_COUNTERS)

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

static __always_inline int load(struct __sk_buff *skb, __u32 off, void *to, __u32 len) {
    return bpf_skb_load_bytes(skb, off, to, len);
}

/* What the parser established. Only fields it vouches for are used. */
struct flow {
    __u8 family;    /* 4 or 6; 0 for a non-IP packet */
    __u8 l4_proto;  /* IPv4 protocol, IPv6 next header after the extension headers */
    __u8 has_ports; /* L4 header with ports present and complete, first fragment */
    __u8 has_vlan;  /* vlan is the outer tag (offloaded or in the data) */
    __u16 sport;    /* host order */
    __u16 dport;
    __u16 vlan; /* VLAN id of the outer tag, 0..4095 */
    __u8 dscp;  /* IPv4 TOS >> 2, IPv6 traffic class >> 2 */
    __u8 pad;
    __u8 saddr[16]; /* IPv4 uses the first 4 bytes */
    __u8 daddr[16];
};

/* Parse outcome: PARSE_OK or the tc_stats counter that explains the failure. */
#define PARSE_OK 0

/* Ports at l4_off (TCP, UDP, SCTP, UDP-Lite: all start with sport, dport);
 * every byte of the L4 header must be there. */
static __always_inline int parse_l4(struct __sk_buff *skb, __u32 l4_off, struct flow *f) {
    __be16 ports[2];
    __u8 last;

    if (f->l4_proto != IPPROTO_TCP && f->l4_proto != IPPROTO_UDP && f->l4_proto != IPPROTO_SCTP &&
        f->l4_proto != IPPROTO_UDPLITE)
        return PARSE_OK;
    if (load(skb, l4_off, ports, sizeof(ports))) return PSPXDP_TC_TRUNCATED;
    if (f->l4_proto == IPPROTO_TCP) {
        __u8 doff_byte;

        if (load(skb, l4_off + 12, &doff_byte, 1)) return PSPXDP_TC_TRUNCATED;
        __u32 hlen = (__u32)(doff_byte >> 4) * 4;
        if (hlen < 20) return PSPXDP_TC_BAD_HEADER;
        if (load(skb, l4_off + hlen - 1, &last, 1)) return PSPXDP_TC_TRUNCATED;
    } else {
        /* UDP, UDP-Lite: 8-byte header; SCTP: 12-byte common header. */
        __u32 hlen = f->l4_proto == IPPROTO_SCTP ? 12 : 8;
        if (load(skb, l4_off + hlen - 1, &last, 1)) return PSPXDP_TC_TRUNCATED;
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
    f->dscp = ip.tos >> 2;
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
    f->dscp = (bpf_ntohl(ip6.ver_tc_flow) >> 22) & 0x3f;
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
     * MAC addresses is then already the inner ethertype. The offloaded tag
     * is the outer one; otherwise the first tag in the data is. */
    if (skb->vlan_present) {
        f->vlan = skb->vlan_tci & 0x0fff;
        f->has_vlan = 1;
    }
    for (int i = 0; i < PSPXDP_VLAN_MAX; i++) {
        __be16 tag[2]; /* TCI, then the next ethertype */

        if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD) &&
            proto != bpf_htons(ETH_P_QINQ_OLD))
            break;
        if (load(skb, off, tag, sizeof(tag))) return PSPXDP_TC_TRUNCATED;
        if (!f->has_vlan) {
            f->vlan = bpf_ntohs(tag[0]) & 0x0fff;
            f->has_vlan = 1;
        }
        proto = tag[1];
        off += 4;
    }
    if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD) ||
        proto == bpf_htons(ETH_P_QINQ_OLD))
        return PSPXDP_TC_VLAN_DEPTH;
    if (proto == bpf_htons(ETH_P_IP)) return parse_v4(skb, off, f);
    if (proto == bpf_htons(ETH_P_IPV6)) return parse_v6(skb, off, f);
    return PSPXDP_TC_NON_IP;
}

#endif /* PSPXDP_BPF_PARSE_H */
