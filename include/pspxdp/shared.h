/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Everything that crosses the BPF / userspace line: map keys and values,
 * counters and constants. UAPI types only, so both clang -target bpf and g++
 * compile it. Userspace checks the layouts with static_assert (below). */
#ifndef PSPXDP_SHARED_H
#define PSPXDP_SHARED_H

#include <linux/types.h>

#define PSPXDP_PIN_ROOT "/sys/fs/bpf/pspxdp"

/* Classes and queues. A class with queue q > 0 owns rx queue q - 1 of the
 * pacer veth peer; the TC program sets skb->queue_mapping = q, which the veth
 * turns into rx queue q - 1 (kernel-facts §3). */
#define PSPXDP_MAX_CLASSES 4096
#define PSPXDP_MAX_QUEUES 1024
#define PSPXDP_HEARTBEAT_TIMEOUT_NS (100ULL * 1000 * 1000)

#ifdef __cplusplus
#define PSPXDP_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define PSPXDP_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#endif /* PSPXDP_SHARED_H */
