// Benchmarks pin themselves to one core (--cpu N) so that a figure is not a
// migration's; a failure is reported, not fatal (the figure just gets noisier).
#pragma once

#include <cstdio>
#include <string>

#include <sched.h>

inline void pin_cpu(int cpu, const char *program) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        std::perror((std::string(program) + ": sched_setaffinity").c_str());
}
