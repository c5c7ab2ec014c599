/* SPDX-License-Identifier: GPL-2.0 */
/* A program's per-CPU counters (tc_stats, xdp_stats): a one-entry
 * PERCPU_ARRAY whose value is a struct of __u64 counters (shared.h), and the
 * function that adds one to counter number `counter` of it.
 *
 * PSPXDP_PERCPU_COUNTERS(fn, map, value_type, nr) defines both: the map
 * `map` and `static void fn(__u32 counter)`; a counter >= nr is ignored. */
#ifndef PSPXDP_BPF_COUNTERS_H
#define PSPXDP_BPF_COUNTERS_H

#include "pspxdp/shared.h"
#include <bpf/bpf_helpers.h>
#include <linux/bpf.h>

#define PSPXDP_PERCPU_COUNTERS(fn, map, value_type, nr)                                            \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                                   \
        __uint(max_entries, 1);                                                                    \
        __type(key, __u32);                                                                        \
        __type(value, value_type);                                                                 \
    } map SEC(".maps");                                                                            \
                                                                                                   \
    static __always_inline void fn(__u32 counter) {                                                \
        __u32 zero = 0;                                                                            \
        value_type *c = bpf_map_lookup_elem(&map, &zero);                                          \
                                                                                                   \
        PSPXDP_COUNT(c, counter, nr);                                                              \
    }

#endif
