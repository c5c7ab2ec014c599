// SPDX-License-Identifier: GPL-2.0
/* Placeholder XDP program: passes everything. Replaced by the rx-queue redirect. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "pspxdp/shared.h"

SEC("xdp")
int pspxdp_redirect(struct xdp_md *ctx) { return XDP_PASS; }

char LICENSE[] SEC("license") = "GPL";
