// The original PSPacer scheduler (paper §3.4), kept as a reference model for
// tests and benchmarks: every decision scans the class list, paced classes in
// order of rate (highest first). It keeps the engine's protocol (set_head,
// set_empty, next) so the same simulator drives both. Unlike the engine it
// ignores real time, and a gap shorter than the smallest gap frame becomes a
// full-size gap, as the original did: a known source of its 2-MTU bursts.
#pragma once

#include "core/engine.hpp"

#include <vector>

namespace pspxdp::sim {

class ReferenceScan {
  public:
    explicit ReferenceScan(const EngineConfig &config) : cfg_(config) {}

    Result<uint32_t> add_class(uint64_t rate_bps);
    void set_head(uint32_t cls, uint32_t len);
    void set_empty(uint32_t cls);
    Decision next(uint64_t now_ns);
    uint64_t byte_clock() const { return g_; }

  private:
    struct Class {
        uint64_t rate_bps = 0;
        uint64_t clock = 0;
        uint64_t frac = 0;
        uint32_t head_len = 0;
        bool backlogged = false;
        bool idle = true;
    };
    EngineConfig cfg_;
    uint64_t g_ = 0;
    std::vector<Class> classes_;
    std::vector<uint32_t> by_rate_; // paced class handles, highest rate first
    std::vector<uint32_t> normal_;  // normal class handles
    size_t normal_next_ = 0;
};

} // namespace pspxdp::sim
