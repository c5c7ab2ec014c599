// SPDX-License-Identifier: GPL-2.0
/* Placeholder TC egress program: passes everything. Replaced by the classifier. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include "pspxdp/shared.h"

SEC("tc")
int pspxdp_classify(struct __sk_buff *skb) { return TC_ACT_OK; }

char LICENSE[] SEC("license") = "GPL";
