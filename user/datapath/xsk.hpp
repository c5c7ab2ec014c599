// One UMEM shared by every AF_XDP socket of the pacer: one RX socket per
// pacer queue on the veth peer and one TX socket on DEV queue 0. Frames are
// forwarded by descriptor, never copied in userspace.
//
// Frame ownership is static: rx queue i owns frames [i*F, (i+1)*F), so a TX
// completion knows whose fill ring its frame goes back to by division. One
// more frame holds a max-size PAUSE frame: a gap of any length L is a
// descriptor {pause, L}, because a PAUSE frame of length L is a prefix of the
// max one (zero padding; checked at create). Gap descriptors never return to
// a fill ring.
//
// Every real frame is in exactly one place, tracked per frame:
//   Free  userspace pool of its queue        Fill  handed to the kernel (fill ring,
//   Held  taken from the RX ring, queued           kernel pool, RX ring not yet read)
//         in the pacer (caller's FIFO)       Tx    in the TX ring / in flight
// check_accounting() recounts the per-frame states and compares them with the
// running counters and the rings; the daemon calls it periodically and at
// shutdown, tests call it after every run.
#pragma once

#include "core/framing.hpp"
#include "core/result.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct xsk_umem;
struct xsk_socket;

namespace pspxdp::datapath {

struct PlaneConfig {
    std::string tx_dev;            // DEV
    std::string rx_dev;            // pacer veth peer (b)
    uint32_t rx_queues = 16;       // RX sockets on rx queues 0..rx_queues-1
    uint32_t frames_per_queue = 0; // 0: sized from rx_queues (power of two)
    uint32_t tx_ring = 2048;
    uint32_t mtu = 1500; // of DEV: longest frame sent is mtu + 18 (VLAN)
    MacAddr mac{};       // PAUSE source address: DEV's
    Framing framing{};
    int xsks_map_fd = -1; // RX sockets are registered here (key = rx queue)
};

struct RxDesc {
    uint64_t addr = 0;
    uint32_t len = 0;
};

struct QueueCounters {
    uint64_t rx_frames = 0;
    uint64_t rx_bad_len = 0; // too short/long to send: dropped by us
    uint64_t dropped = 0;    // frames the caller dropped (drop())
    uint64_t tx_frames = 0;
    uint64_t completions = 0;
};

struct PlaneCounters {
    uint64_t tx_frames = 0;
    uint64_t tx_gaps = 0;
    uint64_t tx_gap_bytes = 0;
    uint64_t tx_frame_bytes = 0;
    uint64_t kicks = 0;
    uint64_t kick_transient = 0; // EAGAIN / EBUSY / ENOBUFS: retried later
    uint64_t kick_errors = 0;    // anything else
    uint64_t completions = 0;
    uint64_t gap_completions = 0;
    uint64_t bad_completions = 0; // an address that was not in flight: a bug
    uint64_t state_errors = 0;    // frame in the wrong state for a transition: a bug
    uint64_t fill_refills = 0;
};

// Kernel-side counters of one socket (getsockopt XDP_STATISTICS).
struct SocketStats {
    uint64_t rx_dropped = 0;
    uint64_t rx_invalid_descs = 0;
    uint64_t tx_invalid_descs = 0;
    uint64_t rx_ring_full = 0;
    uint64_t rx_fill_ring_empty_descs = 0;
    uint64_t tx_ring_empty_descs = 0;
    // Frames the kernel had to throw away on the way in.
    uint64_t rx_lost() const { return rx_dropped + rx_ring_full + rx_invalid_descs; }
};

struct Accounting {
    uint64_t total = 0; // real frames (the PAUSE frame excluded)
    uint64_t free = 0, fill = 0, held = 0, tx = 0;
    uint64_t gaps_in_flight = 0;
    bool balanced = false;
    std::string detail; // what did not balance
};

class XskPlane {
  public:
    enum class State : uint8_t { Free, Fill, Held, Tx, Pause };

    static Result<std::unique_ptr<XskPlane>> create(const PlaneConfig &cfg);
    ~XskPlane();
    XskPlane(const XskPlane &) = delete;
    XskPlane &operator=(const XskPlane &) = delete;

    uint32_t rx_queues() const { return uint32_t(rx_.size()); }
    uint32_t frames_per_queue() const { return frames_per_queue_; }
    uint32_t frame_size() const { return frame_size_; }
    int rx_fd(uint32_t q) const;
    int tx_fd() const;
    // Cheap: does RX ring q have descriptors we have not taken?
    bool rx_ready(uint32_t q) const;
    // Takes up to max descriptors from RX ring q; they become Held. Frames
    // that cannot be sent (length) are dropped here and counted.
    uint32_t rx_burst(uint32_t q, RxDesc *out, uint32_t max);
    // A Held frame that will not be sent: back to its queue's pool.
    void drop(uint64_t addr);
    // Frame's bytes (for tests and debugging).
    const uint8_t *data(uint64_t addr) const;

    // Free TX ring slots.
    uint32_t tx_free();
    // Queue a Held frame / a gap of len bytes on the TX ring. False when the
    // ring is full (nothing changes).
    bool tx_frame(const RxDesc &d);
    bool tx_gap(uint32_t len);
    // Descriptors on the TX ring the kernel has not consumed yet.
    uint32_t tx_unsent() const;
    // sendto() kicks until the ring is consumed, at most max_kicks (each kick
    // sends <= 32 in copy mode). Transient errors end the attempt, counted.
    void kick(uint32_t max_kicks = 4);
    // Completions -> frames Free (gaps: just counted); returns how many.
    uint32_t reap();
    // Free pools -> fill rings.
    void refill();
    uint64_t tx_in_flight() const { return tx_submitted_ - tx_completed_; }

    SocketStats rx_stats(uint32_t q) const;
    SocketStats tx_stats() const;
    const PlaneCounters &counters() const { return counters_; }
    int last_kick_errno() const { return last_kick_errno_; }
    const QueueCounters &queue_counters(uint32_t q) const { return rx_[q].counters; }
    uint32_t queue_of(uint64_t addr) const {
        return uint32_t(addr / frame_size_) / frames_per_queue_;
    }
    // Frames queue q has in each place.
    uint64_t queue_held(uint32_t q) const { return rx_[q].held; }

    Accounting check_accounting() const;

  private:
    XskPlane() = default;
    bool transition(uint64_t addr, State from, State to);
    uint64_t frame_index(uint64_t addr) const { return addr / frame_size_; }

    PlaneConfig cfg_;
    uint32_t frame_size_ = 0;
    uint32_t frames_per_queue_ = 0;
    uint32_t max_tx_len_ = 0;
    uint64_t pause_addr_ = 0;
    uint8_t *area_ = nullptr;
    size_t area_bytes_ = 0;
    xsk_umem *umem_ = nullptr;
    struct TxSide;
    std::unique_ptr<TxSide> tx_;
    struct Rx {
        std::unique_ptr<struct RxRings> rings;
        xsk_socket *xsk = nullptr;
        std::vector<uint64_t> pool; // Free frames (base addresses)
        uint64_t fill = 0, held = 0, tx = 0;
        QueueCounters counters;
    };
    std::vector<Rx> rx_;
    std::vector<State> state_;
    uint64_t tx_submitted_ = 0, tx_completed_ = 0, gaps_in_flight_ = 0;
    PlaneCounters counters_;
    int last_kick_errno_ = 0;
};

} // namespace pspxdp::datapath
