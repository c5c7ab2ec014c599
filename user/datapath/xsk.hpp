// The AF_XDP plane of the pacer: one UMEM shared by every socket, N RX
// sockets on the pacer veth peer (one per rx queue, about one per core) and
// one TX socket on DEV queue 0. Frames are forwarded by descriptor, never
// copied in userspace.
//
// Frames are identified by their index in the UMEM. There is one global pool
// of free frames (no frame belongs to a queue): refill() keeps every RX
// socket's share of the kernel's frames (its fill ring plus what is on the
// way to its RX ring) at fill_target(), and a completed TX frame goes back to
// the pool whichever socket it came in on. One more chunk holds a max-size
// PAUSE frame: a gap of any length L is the descriptor {pause, L}, because a
// PAUSE frame of length L is a prefix of the max one (checked at create).
//
// Every real frame is in exactly one place, tracked per frame:
//   Free  the pool                         Fill  the kernel's: a fill ring, or
//   Held  taken from an RX ring, the             received and not read yet
//         caller's (its class FIFO)        Tx    on the TX ring / in flight
// check_accounting() recounts the per-frame states and compares them with
// the running counters and the rings; the daemon calls it periodically and
// at shutdown, tests after every run. It is what shows that no frame was
// lost without a counter.
//
// Sent is when the kernel consumes the TX descriptor (copy mode transmits
// inside our sendto()). kick() reports each frame and gap as sent just
// before the sendto() that sends it and takes back what that call did not
// take: a counter of sent frames is then exact even for a daemon killed
// with descriptors still on its ring, or right as a sendto() returns.
#pragma once

#include "core/framing.hpp"
#include "core/result.hpp"
#include "datapath/frame_fifo.hpp"

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

struct xsk_umem;
struct xsk_socket;

namespace pspxdp::datapath {

inline constexpr uint64_t kDefaultBufferBytes = 64ull << 20;

// One copy-mode sendto() sends at most kDefaultTxBudget descriptors unless
// the socket asks for more (XDP_MAX_TX_SKB_BUDGET, Linux >= 6.17: 32 up to
// the TX ring's size once the socket has its TX ring; docs/design.md §9.4).
// Asks for descs; returns the budget in force (the default when the kernel
// refuses or lacks the option: errno then says why).
inline constexpr uint32_t kDefaultTxBudget = 32;
uint32_t set_tx_budget(int fd, uint32_t descs);

// Binding a queue a closed AF_XDP socket held fails with EBUSY until the
// kernel has released it, and that is deferred: the queue stays claimed
// until the socket's last reference goes (sk_destruct, after the frames it
// sent are freed), then a work item takes rtnl_lock to unregister the pool
// (net/xdp/xsk_buff_pool.c, xp_put_pool -> xp_release_deferred ->
// xp_clear_dev). With other netlink work holding rtnl_lock (namespaces and
// veths being deleted) that took 12 s here. So create() is tried again,
// 10 ms apart, while it returns -EBUSY, for up to kBusyQueueWaitMs; then its
// -EBUSY stands (busy_queue_text says why).
inline constexpr uint64_t kBusyQueueWaitMs = 30'000;
template <class Create> int retry_busy(Create create) {
    int rc = create();
    for (uint64_t i = 0; i < kBusyQueueWaitMs / 10 && rc == -EBUSY; ++i) {
        usleep(10'000);
        rc = create();
    }
    return rc;
}
// errno_text(-rc), and for -EBUSY after retry_busy what holds the queue.
std::string busy_queue_text(int rc);

struct PlaneConfig {
    std::string tx_dev;                          // DEV
    std::string rx_dev;                          // pacer veth peer (b)
    uint32_t rx_sockets = 2;                     // RX sockets on rx queues 0..rx_sockets-1
    uint64_t buffer_bytes = kDefaultBufferBytes; // the UMEM: every frame the pacer can hold
    uint32_t rx_ring =
        0; // RX and fill ring size per socket (power of two); 0: sized from the buffer
    uint32_t tx_ring = 2048;
    uint32_t mtu = 1500;    // of DEV: longest frame sent is mtu + 18 (VLAN)
    uint32_t rx_prefix = 0; // bytes in front of every received frame (the hand-over tag)
    MacAddr mac{};          // PAUSE source address: DEV's
    Framing framing{};
    int xsks_map_fd = -1;   // RX sockets are registered here (key = rx queue)
    bool busy_poll = false; // SO_PREFER_BUSY_POLL / SO_BUSY_POLL on the RX sockets
};

struct PlaneCounters {
    uint64_t kicks = 0;
    uint64_t kick_transient = 0; // EAGAIN / EBUSY / ENOBUFS: retried later
    uint64_t kick_errors = 0;    // anything else
    uint64_t completions = 0;
    uint64_t bad_completions = 0; // an address that was not in flight: a bug
    uint64_t state_errors = 0;    // frame in the wrong state for a transition: a bug
};

// Kernel-side counters of one socket (getsockopt XDP_STATISTICS).
struct SocketStats {
    uint64_t rx_dropped = 0; // no free frame in the fill ring (or frame too long)
    uint64_t rx_invalid_descs = 0;
    uint64_t tx_invalid_descs = 0;
    uint64_t rx_ring_full = 0;
    uint64_t rx_fill_ring_empty_descs = 0; // attempts, not frames: a frame may count several
    uint64_t tx_ring_empty_descs = 0;
};

struct Accounting {
    uint64_t total = 0; // real frames (the PAUSE chunk excluded)
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

    uint32_t rx_sockets() const { return uint32_t(rx_.size()); }
    uint32_t frames() const { return frames_; }
    uint32_t frame_size() const { return frame_size_; }
    uint32_t fill_target() const { return fill_target_; }
    int rx_fd(uint32_t q) const;
    int tx_fd() const;

    // The frames' metadata; the caller links its FIFOs through it and sets
    // owner. offset/len are the plane's (see take_prefix).
    FrameTable &table() { return table_; }
    const FrameMeta &meta(uint32_t frame) const { return table_[frame]; }
    uint8_t *data(uint32_t frame) {
        return area_ + uint64_t(frame) * frame_size_ + table_[frame].offset;
    }

    // busy_poll: recvfrom() on socket q, which runs the device's NAPI poll
    // for its queue here, now (SO_PREFER_BUSY_POLL), instead of in softirq.
    void busy_poll(uint32_t q);
    // Cheap: does RX ring q have descriptors we have not taken?
    bool rx_ready(uint32_t q) const;
    // Takes up to max frames from RX ring q; they become Held.
    uint32_t rx_burst(uint32_t q, uint32_t *frames, uint32_t max);
    // The rx_prefix bytes in front of a Held frame: returns them and drops
    // them from the frame, which is then sent without them. nullptr (frame
    // unchanged) when the frame is shorter than the prefix.
    const uint8_t *take_prefix(uint32_t frame);
    // Can copy-mode TX on DEV send a frame of len bytes? 14..mtu+18: the
    // kernel swallows anything else with EBUSY and never completes it.
    bool sendable(uint32_t len) const { return len >= kEthHeaderBytes && len <= max_tx_len_; }
    // A Held frame that will not be sent: back to the pool.
    void release(uint32_t frame);

    // Free TX ring slots.
    uint32_t tx_free();
    // Puts a Held frame / a gap of len bytes on the TX ring. False when the
    // ring is full (nothing changes).
    bool tx_frame(uint32_t frame);
    bool tx_gap(uint32_t len);
    // n gaps of len bytes at once; false (nothing put) unless all fit.
    bool tx_gaps(uint32_t len, uint32_t n);
    // Descriptors on the TX ring the kernel has not consumed yet.
    uint32_t tx_unsent() const;
    // Told what the kernel takes from the TX ring: a frame (by index) of len
    // bytes, and gap frames in sums (flat out, 9 descriptors in 10 are gaps).
    struct TxObserver {
        virtual void sent(uint32_t frame, uint32_t len) = 0;
        // A descriptor reported sent that the kernel did not take after all
        // (the sendto() stopped early): it is still on the ring.
        virtual void unsent(uint32_t frame, uint32_t len) = 0;
        // Gap frames sent (or, negative, taken back as unsent) and their
        // bytes on the wire.
        virtual void gaps_sent(int64_t frames, int64_t wire_bytes) = 0;

      protected:
        ~TxObserver() = default;
    };
    // sendto() kicks until the ring is consumed, at most max_kicks (each kick
    // sends <= 32 in copy mode, 64 from Linux 6.17); transient errors end the
    // attempt, counted.
    // The descriptors a kick will send are reported sent *before* it, and
    // taken back if it did not: a daemon killed at the end of the syscall
    // (where a signal strikes) has counted exactly what the kernel sent.
    void kick(TxObserver &observer, uint32_t max_kicks = 4);
    // Completions -> frames Free; returns how many.
    uint32_t reap();
    // Pool -> fill rings, each socket up to fill_target().
    void refill();
    // Frames the pool lacks to bring every socket to fill_target() (0 when
    // the pool can): what the caller must free by dropping queued frames.
    uint64_t fill_shortfall() const;
    uint64_t free_frames() const { return pool_.size(); }
    uint64_t held_frames() const { return held_; }
    uint64_t tx_in_flight() const { return tx_submitted_ - tx_completed_; }
    // Frames (not gaps) on the TX ring the kernel has not taken yet.
    uint64_t frames_unsent() const { return frames_unsent_; }

    SocketStats rx_stats(uint32_t q) const;
    const PlaneCounters &counters() const { return counters_; }
    int last_kick_errno() const { return last_kick_errno_; }

    Accounting check_accounting() const;

  private:
    XskPlane() = default;
    bool transition(uint32_t frame, State from, State to);
    uint32_t frame_of(uint64_t addr) const { return uint32_t(addr / frame_size_); }
    void report(TxObserver &o, uint32_t from, uint32_t to, bool sent);

    PlaneConfig cfg_;
    uint32_t frame_size_ = 0;
    uint32_t frames_ = 0;                        // real frames; the PAUSE chunk is frame frames_
    uint32_t descs_per_kick_ = kDefaultTxBudget; // what one sendto() may send (set_tx_budget)
    uint32_t fill_target_ = 0;
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
        uint32_t in_kernel = 0; // frames given to the fill ring and not received back
    };
    std::vector<Rx> rx_;
    FrameTable table_;
    std::vector<State> state_;
    std::vector<uint32_t> pool_;    // Free frames, LIFO (the warmest first)
    uint64_t held_ = 0, in_tx_ = 0; // frames Held, Tx
    uint64_t frames_unsent_ = 0;
    uint64_t tx_submitted_ = 0, tx_completed_ = 0, gaps_in_flight_ = 0;
    uint32_t tx_reported_ = 0; // TX ring index up to which kick() reported sent
    PlaneCounters counters_;
    int last_kick_errno_ = 0;
};

} // namespace pspxdp::datapath
