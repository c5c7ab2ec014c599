#include "datapath/xsk.hpp"

#include "common/text.hpp"

#include "pspxdp/shared.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <linux/if_xdp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xdp/xsk.h>

#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif

namespace pspxdp::datapath {

std::string busy_queue_text(int rc) {
    return common::errno_text(rc) +
           (rc == -EBUSY ? " for " + std::to_string(kBusyQueueWaitMs / 1000) +
                               " s: another AF_XDP socket holds the queue, or the kernel has "
                               "not yet released a closed one's (deferred work under rtnl_lock)"
                         : "");
}

namespace {
// Flat out a round is about a window long (43 full-size frames in 64 KB):
// at 32 descriptors a sendto() every round's last 11 went in a call of
// their own; 64 sends a round in one.
constexpr uint32_t kWantedTxBudget = 64;

uint32_t pow2_floor(uint64_t v) {
    uint32_t p = 1;
    while (p * 2ull <= v && p < (1u << 30)) p *= 2;
    return p;
}
// Copy-mode RX puts the frame XDP_PACKET_HEADROOM into its chunk.
constexpr uint32_t kRxHeadroom = 256;
// The UMEM's own fill ring belongs to the TX socket, which never receives.
constexpr uint32_t kTxSocketFillRing = 64;
// The automatic RX ring size: a quarter of the buffer spread over the
// sockets, within these bounds. The kernel fills a socket's RX ring from its
// fill ring while the daemon does not run: the depth is how long a stalled
// daemon loses nothing (4096 frames: 3 ms of 64-byte frames at line rate on
// 1 GbE, 50 ms of full ones, for the flows hashed to one socket).
constexpr uint32_t kMinRxRing = 64;
constexpr uint32_t kMaxRxRing = 4096;
} // namespace

uint32_t set_tx_budget(int fd, uint32_t descs) {
    constexpr int kXdpMaxTxSkbBudget = 9; // uapi/linux/if_xdp.h, Linux >= 6.17
    if (descs > kDefaultTxBudget &&
        setsockopt(fd, SOL_XDP, kXdpMaxTxSkbBudget, &descs, sizeof(descs)) == 0)
        return descs;
    return kDefaultTxBudget;
}

// libxdp leaves cached_prod/cached_cons uninitialised: value-initialise.
struct RxRings {
    xsk_ring_cons rx{};
    xsk_ring_prod fill{};
    xsk_ring_cons comp{}; // required by the kernel per (dev, queue); unused
};

struct XskPlane::TxSide {
    xsk_socket *xsk = nullptr;
    xsk_ring_prod tx{};
    xsk_ring_prod fill{}; // the UMEM's own rings belong to the first socket: this one
    xsk_ring_cons comp{}; // every TX completion arrives here
    uint32_t size = 0;
};

Result<std::unique_ptr<XskPlane>> XskPlane::create(const PlaneConfig &cfg) {
    std::unique_ptr<XskPlane> p(new XskPlane());
    p->cfg_ = cfg;
    const uint32_t n = cfg.rx_sockets;
    if (n == 0 || n > PSPXDP_MAX_SOCKETS)
        return err("RX sockets must be 1.." + std::to_string(PSPXDP_MAX_SOCKETS));
    // What the pacer receives: the prefix, then a frame of up to MTU + 14 + one VLAN tag.
    p->max_tx_len_ = cfg.mtu + kEthHeaderBytes + 4;
    const uint32_t max_rx_len = cfg.rx_prefix + p->max_tx_len_;
    p->frame_size_ = (max_rx_len + kRxHeadroom <= 2048) ? 2048 : 4096;
    if (max_rx_len + kRxHeadroom > 4096)
        return err("MTU " + std::to_string(cfg.mtu) + " too large for AF_XDP frames (max " +
                   std::to_string(4096 - kRxHeadroom - kEthHeaderBytes - 4 - cfg.rx_prefix) + ")");
    if (cfg.tx_ring == 0 || (cfg.tx_ring & (cfg.tx_ring - 1)))
        return err("TX ring size must be a power of two");
    uint64_t frames = cfg.buffer_bytes / p->frame_size_;
    uint32_t ring = cfg.rx_ring;
    if (!ring) ring = std::clamp(pow2_floor(frames / (4ull * n)), kMinRxRing, kMaxRxRing);
    if (ring & (ring - 1)) return err("RX ring size must be a power of two");
    // The rings' share, the TX ring, and as much again for the queues.
    uint64_t need = 2 * (uint64_t(n) * ring + cfg.tx_ring);
    if (frames < need)
        return err("buffer of " + std::to_string(cfg.buffer_bytes) + " bytes holds " +
                   std::to_string(frames) + " frames of " + std::to_string(p->frame_size_) +
                   " B; " + std::to_string(n) + " sockets need at least " + std::to_string(need) +
                   " (" + std::to_string(need * p->frame_size_) + " bytes)");
    if (frames >= (1ull << 31)) return err("buffer too large");
    p->frames_ = uint32_t(frames);
    p->fill_target_ = ring;

    // The PAUSE frame: one max-size frame, gaps are prefixes of it.
    uint32_t pause_len = cfg.framing.max_frame_len();
    auto pause = build_pause_frame(cfg.mac, pause_len, cfg.framing);
    if (!pause) return err("building PAUSE frame: " + pause.error());
    auto small = build_pause_frame(cfg.mac, cfg.framing.min_frame_bytes, cfg.framing);
    if (!small || std::memcmp(small->data(), pause->data(), small->size()) != 0)
        return err("PAUSE frames of different lengths are not prefixes of each other: "
                   "gap descriptors cannot share one frame");

    uint64_t total = frames + 1;
    p->area_bytes_ = (total * p->frame_size_ + 4095) & ~uint64_t(4095);
    void *area = mmap(nullptr, p->area_bytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (area == MAP_FAILED)
        return err("mapping UMEM of " + std::to_string(p->area_bytes_ >> 20) +
                   " MiB: " + common::errno_text(errno));
    p->area_ = static_cast<uint8_t *>(area);
    p->pause_addr_ = frames * p->frame_size_;
    std::memcpy(p->area_ + p->pause_addr_, pause->data(), pause->size());
    p->table_.assign(total, FrameMeta{});
    p->state_.assign(total, State::Free);
    p->state_[frames] = State::Pause;
    p->pool_.reserve(frames);
    for (uint32_t f = p->frames_; f-- > 0;) p->pool_.push_back(f); // frame 0 on top

    p->tx_ = std::make_unique<TxSide>();
    p->tx_->size = cfg.tx_ring;
    xsk_umem_config ucfg{};
    // Every socket's fill and completion rings get these sizes (libxdp
    // creates a shared socket's rings from the UMEM's config).
    ucfg.fill_size = std::max(ring, kTxSocketFillRing);
    ucfg.comp_size = cfg.tx_ring;
    ucfg.frame_size = p->frame_size_;
    ucfg.frame_headroom = 0;
    ucfg.flags = 0;
    int rc =
        xsk_umem__create(&p->umem_, p->area_, p->area_bytes_, &p->tx_->fill, &p->tx_->comp, &ucfg);
    if (rc)
        return err("creating UMEM (" + std::to_string(total) +
                   " frames): " + common::errno_text(rc));

    // The TX socket first: its bind mode (copy) is the one every shared socket
    // inherits; zero-copy is impossible anyway with RX on a veth.
    xsk_socket_config scfg{};
    scfg.rx_size = 0;
    scfg.tx_size = cfg.tx_ring;
    scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
    scfg.bind_flags = XDP_COPY;
    rc = retry_busy([&] {
        return xsk_socket__create_shared(&p->tx_->xsk, cfg.tx_dev.c_str(), 0, p->umem_, nullptr,
                                         &p->tx_->tx, &p->tx_->fill, &p->tx_->comp, &scfg);
    });
    if (rc)
        return err("creating AF_XDP TX socket on " + cfg.tx_dev +
                   " queue 0: " + busy_queue_text(rc));
    p->descs_per_kick_ =
        set_tx_budget(xsk_socket__fd(p->tx_->xsk), std::min(kWantedTxBudget, cfg.tx_ring));

    p->rx_.resize(n);
    for (uint32_t q = 0; q < n; ++q) {
        auto &r = p->rx_[q];
        r.rings = std::make_unique<RxRings>();
        xsk_socket_config rcfg{};
        rcfg.rx_size = ring;
        rcfg.tx_size = 0;
        rcfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
        rcfg.bind_flags = XDP_COPY;
        rc = retry_busy([&] {
            return xsk_socket__create_shared(&r.xsk, cfg.rx_dev.c_str(), q, p->umem_, &r.rings->rx,
                                             nullptr, &r.rings->fill, &r.rings->comp, &rcfg);
        });
        if (rc)
            return err("creating AF_XDP RX socket on " + cfg.rx_dev + " queue " +
                       std::to_string(q) + ": " + busy_queue_text(rc));
        if (cfg.busy_poll) {
            // The daemon's own recvfrom/poll then runs the veth's NAPI poll
            // instead of waiting for softirq (kernel >= 5.11).
            int one = 1, usecs = 20, budget = 64;
            int fd = xsk_socket__fd(r.xsk);
            if (setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one)) ||
                setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &usecs, sizeof(usecs)) ||
                setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget, sizeof(budget)))
                return err("busy polling on RX socket " + std::to_string(q) + ": " +
                           common::errno_text(errno));
        }
        if (cfg.xsks_map_fd >= 0) {
            rc = xsk_socket__update_xskmap(r.xsk, cfg.xsks_map_fd);
            if (rc)
                return err("registering RX socket of queue " + std::to_string(q) +
                           " in xsks_map: " + common::errno_text(rc));
        }
    }
    p->refill();
    return p;
}

XskPlane::~XskPlane() {
    // Sockets before the UMEM (the UMEM is refcounted by them); the kernel
    // removes closed sockets from xsks_map by itself.
    for (auto &r : rx_)
        if (r.xsk) xsk_socket__delete(r.xsk);
    if (tx_ && tx_->xsk) xsk_socket__delete(tx_->xsk);
    if (umem_) xsk_umem__delete(umem_);
    if (area_) munmap(area_, area_bytes_);
}

int XskPlane::rx_fd(uint32_t q) const { return xsk_socket__fd(rx_[q].xsk); }
int XskPlane::tx_fd() const { return xsk_socket__fd(tx_->xsk); }

bool XskPlane::transition(uint32_t frame, State from, State to) {
    if (frame >= state_.size() || state_[frame] != from) {
        ++counters_.state_errors;
        return false;
    }
    state_[frame] = to;
    return true;
}

void XskPlane::busy_poll(uint32_t q) {
    recvfrom(xsk_socket__fd(rx_[q].xsk), nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
}

bool XskPlane::rx_ready(uint32_t q) const {
    const auto &rx = rx_[q].rings->rx;
    // Same test as xsk_cons_nb_avail, without touching the cached index.
    return __atomic_load_n(rx.producer, __ATOMIC_ACQUIRE) != rx.cached_cons;
}

uint32_t XskPlane::rx_burst(uint32_t q, uint32_t *out, uint32_t max) {
    auto &r = rx_[q];
    uint32_t idx = 0;
    uint32_t n = xsk_ring_cons__peek(&r.rings->rx, max, &idx);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const xdp_desc *d = xsk_ring_cons__rx_desc(&r.rings->rx, idx + i);
        uint32_t f = frame_of(d->addr);
        if (!transition(f, State::Fill, State::Held)) continue;
        --r.in_kernel;
        ++held_;
        FrameMeta &m = table_[f];
        m.offset = uint16_t(d->addr - uint64_t(f) * frame_size_);
        m.len = uint16_t(d->len); // the chunk bounds it: < 4096
        out[kept++] = f;
    }
    if (n) xsk_ring_cons__release(&r.rings->rx, n);
    return kept;
}

const uint8_t *XskPlane::take_prefix(uint32_t frame) {
    FrameMeta &m = table_[frame];
    if (m.len < cfg_.rx_prefix) return nullptr;
    const uint8_t *p = data(frame);
    // Aligned-mode UMEM: a TX descriptor may start anywhere inside its chunk.
    m.offset = uint16_t(m.offset + cfg_.rx_prefix);
    m.len = uint16_t(m.len - cfg_.rx_prefix);
    return p;
}

void XskPlane::release(uint32_t frame) {
    if (!transition(frame, State::Held, State::Free)) return;
    --held_;
    pool_.push_back(frame);
}

uint32_t XskPlane::tx_free() { return xsk_prod_nb_free(&tx_->tx, tx_->size); }

bool XskPlane::tx_frame(uint32_t frame) {
    uint32_t idx;
    if (xsk_ring_prod__reserve(&tx_->tx, 1, &idx) != 1) return false;
    if (!transition(frame, State::Held, State::Tx)) {
        // Not ours to send: give the slot back untouched.
        tx_->tx.cached_prod--;
        return false;
    }
    const FrameMeta &m = table_[frame];
    // XDP wrote this frame on the other core: its lines sit in that core's
    // cache, and the kernel's copy in the kick would stall on each one.
    // Fetching them now overlaps the misses with deciding the rest of the batch.
    const uint8_t *p = data(frame);
    for (uint32_t off = 0; off < m.len; off += 64) __builtin_prefetch(p + off, 0, 3);
    xdp_desc *t = xsk_ring_prod__tx_desc(&tx_->tx, idx);
    t->addr = uint64_t(frame) * frame_size_ + m.offset;
    t->len = m.len;
    t->options = 0;
    xsk_ring_prod__submit(&tx_->tx, 1);
    --held_;
    ++in_tx_;
    ++frames_unsent_;
    ++tx_submitted_;
    return true;
}

bool XskPlane::tx_gap(uint32_t len) { return tx_gaps(len, 1); }

bool XskPlane::tx_gaps(uint32_t len, uint32_t n) {
    if (len < cfg_.framing.min_frame_bytes || len > cfg_.framing.max_frame_len()) {
        ++counters_.state_errors;
        return false;
    }
    uint32_t idx;
    if (!n || xsk_ring_prod__reserve(&tx_->tx, n, &idx) != n) return false;
    for (uint32_t i = 0; i < n; ++i) {
        xdp_desc *t = xsk_ring_prod__tx_desc(&tx_->tx, idx + i);
        t->addr = pause_addr_;
        t->len = len;
        t->options = 0;
    }
    xsk_ring_prod__submit(&tx_->tx, n);
    tx_submitted_ += n;
    gaps_in_flight_ += n;
    return true;
}

uint32_t XskPlane::tx_unsent() const {
    return tx_->tx.cached_prod - __atomic_load_n(tx_->tx.consumer, __ATOMIC_ACQUIRE);
}

void XskPlane::report(TxObserver &o, uint32_t from, uint32_t to, bool sent) {
    int64_t gaps = 0, gap_wire_bytes = 0;
    for (uint32_t i = from; i != to; ++i) {
        const xdp_desc *d = xsk_ring_prod__tx_desc(&tx_->tx, i);
        uint32_t f = frame_of(d->addr);
        if (f == frames_) {
            ++gaps;
            gap_wire_bytes += cfg_.framing.wire_bytes(d->len);
        } else if (sent) {
            --frames_unsent_;
            o.sent(f, d->len);
        } else {
            ++frames_unsent_;
            o.unsent(f, d->len);
        }
    }
    if (gaps) o.gaps_sent(sent ? gaps : -gaps, sent ? gap_wire_bytes : -gap_wire_bytes);
}

// Copy mode consumes TX descriptors only inside our own sendto(), so the
// descriptors between the consumer and tx_reported_ are still ours to read.
void XskPlane::kick(TxObserver &o, uint32_t max_kicks) {
    for (uint32_t k = 0; k < max_kicks && tx_unsent() > 0; ++k) {
        uint32_t cons = __atomic_load_n(tx_->tx.consumer, __ATOMIC_ACQUIRE);
        uint32_t batch = std::min(tx_->tx.cached_prod - cons, descs_per_kick_);
        uint32_t credit_to = cons + batch;
        report(o, tx_reported_, credit_to, true);
        tx_reported_ = credit_to;
        ++counters_.kicks;
        int rc = int(sendto(tx_fd(), nullptr, 0, MSG_DONTWAIT, nullptr, 0));
        int e = errno;
        uint32_t now_cons = __atomic_load_n(tx_->tx.consumer, __ATOMIC_ACQUIRE);
        if (int32_t(now_cons - tx_reported_) > 0) { // took more than one batch
            report(o, tx_reported_, now_cons, true);
            tx_reported_ = now_cons;
        } else if (now_cons != tx_reported_) { // took fewer: still on the ring
            report(o, now_cons, tx_reported_, false);
            tx_reported_ = now_cons;
        }
        if (rc >= 0) continue;
        if (e == EAGAIN || e == EBUSY || e == ENOBUFS || e == EINTR) {
            // EAGAIN: more than one batch (32) left; EBUSY/ENOBUFS: the
            // device or skb allocation is busy. Retried on the next round.
            ++counters_.kick_transient;
            if (e != EAGAIN) break;
            continue;
        }
        ++counters_.kick_errors;
        last_kick_errno_ = e;
        break;
    }
}

uint32_t XskPlane::reap() {
    uint32_t idx = 0;
    uint32_t n = xsk_ring_cons__peek(&tx_->comp, tx_->size, &idx);
    for (uint32_t i = 0; i < n; ++i) {
        uint32_t f = frame_of(*xsk_ring_cons__comp_addr(&tx_->comp, idx + i));
        ++tx_completed_;
        ++counters_.completions;
        if (f == frames_) {
            if (gaps_in_flight_)
                --gaps_in_flight_;
            else
                ++counters_.bad_completions;
            continue;
        }
        if (!transition(f, State::Tx, State::Free)) {
            ++counters_.bad_completions;
            continue;
        }
        --in_tx_;
        pool_.push_back(f);
    }
    if (n) xsk_ring_cons__release(&tx_->comp, n);
    return n;
}

void XskPlane::refill() {
    for (auto &r : rx_) {
        if (pool_.empty()) return;
        uint32_t want = fill_target_ - r.in_kernel;
        if (!want) continue;
        want = std::min<uint32_t>(want, uint32_t(std::min<size_t>(pool_.size(), fill_target_)));
        // reserve() is all-or-nothing: ask only for what fits.
        want = std::min(want, xsk_prod_nb_free(&r.rings->fill, want));
        uint32_t idx = 0;
        uint32_t got = want ? xsk_ring_prod__reserve(&r.rings->fill, want, &idx) : 0;
        for (uint32_t i = 0; i < got; ++i) {
            uint32_t f = pool_.back();
            pool_.pop_back();
            transition(f, State::Free, State::Fill);
            *xsk_ring_prod__fill_addr(&r.rings->fill, idx + i) = uint64_t(f) * frame_size_;
        }
        if (got) xsk_ring_prod__submit(&r.rings->fill, got);
        r.in_kernel += got;
    }
}

uint64_t XskPlane::fill_shortfall() const {
    uint64_t want = 0;
    for (const auto &r : rx_) want += fill_target_ - r.in_kernel;
    return want > pool_.size() ? want - pool_.size() : 0;
}

static SocketStats stats_of(xsk_socket *xsk) {
    SocketStats s;
    xdp_statistics st{};
    socklen_t len = sizeof(st);
    if (getsockopt(xsk_socket__fd(xsk), SOL_XDP, XDP_STATISTICS, &st, &len) < 0) return s;
    s.rx_dropped = st.rx_dropped;
    s.rx_invalid_descs = st.rx_invalid_descs;
    s.tx_invalid_descs = st.tx_invalid_descs;
    s.rx_ring_full = st.rx_ring_full;
    s.rx_fill_ring_empty_descs = st.rx_fill_ring_empty_descs;
    s.tx_ring_empty_descs = st.tx_ring_empty_descs;
    return s;
}

SocketStats XskPlane::rx_stats(uint32_t q) const { return stats_of(rx_[q].xsk); }

Accounting XskPlane::check_accounting() const {
    Accounting a;
    a.total = frames_;
    a.gaps_in_flight = gaps_in_flight_;
    std::string detail;
    uint64_t count[5] = {};
    for (uint64_t i = 0; i < state_.size(); ++i) ++count[uint32_t(state_[i])];
    a.free = count[uint32_t(State::Free)];
    a.fill = count[uint32_t(State::Fill)];
    a.held = count[uint32_t(State::Held)];
    a.tx = count[uint32_t(State::Tx)];
    uint64_t in_kernel = 0;
    for (const auto &r : rx_) in_kernel += r.in_kernel;
    auto mismatch = [&](const char *what, uint64_t states, uint64_t counted) {
        if (states != counted)
            detail += std::string(what) + ": " + std::to_string(states) +
                      " frames in that state, " + std::to_string(counted) + " counted; ";
    };
    mismatch("free", a.free, pool_.size());
    mismatch("fill", a.fill, in_kernel);
    mismatch("held", a.held, held_);
    mismatch("tx", a.tx, in_tx_);
    if (count[uint32_t(State::Pause)] != 1 || state_[frames_] != State::Pause)
        detail += "the PAUSE chunk is not where it belongs; ";
    if (a.free + a.fill + a.held + a.tx != frames_)
        detail += "states add up to " + std::to_string(a.free + a.fill + a.held + a.tx) +
                  " frames, not " + std::to_string(frames_) + "; ";
    if (tx_submitted_ - tx_completed_ != a.tx + gaps_in_flight_)
        detail += "TX in flight " + std::to_string(tx_submitted_ - tx_completed_) + " != frames " +
                  std::to_string(a.tx) + " + gaps " + std::to_string(gaps_in_flight_) + "; ";
    if (counters_.state_errors || counters_.bad_completions)
        detail += "state errors " + std::to_string(counters_.state_errors) + ", bad completions " +
                  std::to_string(counters_.bad_completions) + "; ";
    a.balanced = detail.empty();
    a.detail = detail;
    return a;
}

} // namespace pspxdp::datapath
