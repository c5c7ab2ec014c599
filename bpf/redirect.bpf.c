// SPDX-License-Identifier: GPL-2.0
/* pspxdp XDP program on the pacer veth peer (docs/design.md §1).
 *
 * Every frame goes to the AF_XDP socket of its rx queue. The daemon has one
 * RX socket on every queue of the pacer (a handful, about one per core), and
 * each frame carries its class in the tag TC pushed in front of it, so which
 * queue a frame lands on does not matter.
 *
 * A frame on a queue without a socket is dropped and counted, never passed:
 * it is tagged (pacer_b's stack could only misread it) and its sender's
 * transport recovers. That happens only while the daemon restarts within the
 * heartbeat timeout (its sockets are gone, TC still hands over). Stack noise
 * of the pacer veths themselves (IPv6 ND/MLD) is avoided at the source: set-up
 * disables IPv6 on both (docs/design.md §9.2); anything that still arrives
 * untagged is dropped by the daemon as unknown_class. */
#include "counters.h"
#include "pspxdp/shared.h"
#include <bpf/bpf_helpers.h>
#include <linux/bpf.h>

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, PSPXDP_MAX_SOCKETS);
    __type(key, __u32);
    __type(value, __u32);
} xsks_map SEC(".maps");

PSPXDP_PERCPU_COUNTERS(count, xdp_stats, struct pspxdp_xdp_counters, PSPXDP_XDP_NR_COUNTERS)

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
