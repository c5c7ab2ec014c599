// SPDX-License-Identifier: GPL-2.0
/* pspxdp XDP program on the pacer veth peer (DESIGN.md §1).
 *
 * The TC classifier chose the rx queue (queue_mapping q lands on rx queue
 * q - 1); here every frame goes to the AF_XDP socket of its rx queue, which
 * is the socket of its class.
 *
 * A frame on a queue without a socket is dropped and counted, never passed:
 * it is a copy of real traffic (the original was stolen at TC), so passing it
 * would hand a duplicate to pacer1's own stack, which could answer or forward
 * it. That happens while the daemon adds or removes a class, or restarts
 * within the heartbeat timeout; the sender's transport recovers. Stack noise
 * of the pacer veths themselves (IPv6 ND/MLD) is avoided at the source: the
 * dataplane disables IPv6 on both (kernel-facts §2); anything that still
 * arrives on queue 0 without a socket shows up in PSPXDP_XDP_NO_SOCKET. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "pspxdp/shared.h"

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, PSPXDP_MAX_QUEUES);
    __type(key, __u32);
    __type(value, __u32);
} xsks_map SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct pspxdp_xdp_counters);
} xdp_stats SEC(".maps");

static __always_inline void count(__u32 counter) {
    __u32 zero = 0;
    struct pspxdp_xdp_counters *c = bpf_map_lookup_elem(&xdp_stats, &zero);

    PSPXDP_COUNT(c, counter, PSPXDP_XDP_NR_COUNTERS);
}

SEC("xdp")
int pspxdp_redirect(struct xdp_md *ctx) {
    __u32 q = ctx->rx_queue_index;

    /* bpf_redirect_map looks the socket up now and returns the low bits of
     * flags (XDP_DROP) when the slot is empty or q is out of range. */
    if (bpf_redirect_map(&xsks_map, q, XDP_DROP) == XDP_REDIRECT) {
        count(PSPXDP_XDP_REDIRECTED);
        return XDP_REDIRECT;
    }
    count(PSPXDP_XDP_NO_SOCKET);
    return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
