#include "datapath/xsk.hpp"

#include <cerrno>
#include <cstring>
#include <linux/if_xdp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xdp/xsk.h>

namespace pspxdp::datapath {

namespace {
std::string errstr(int e) {
    return std::strerror(e < 0 ? -e : e);
}
uint32_t pow2_floor(uint32_t v) {
    uint32_t p = 1;
    while (p * 2 <= v)
        p *= 2;
    return p;
}
// Copy-mode RX puts the frame XDP_PACKET_HEADROOM into its chunk.
constexpr uint32_t kRxHeadroom = 256;
// Total UMEM budget when frames_per_queue is not given: 32 Ki frames.
constexpr uint32_t kFrameBudget = 32768;
} // namespace

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
};

Result<std::unique_ptr<XskPlane>> XskPlane::create(const PlaneConfig &cfg) {
    std::unique_ptr<XskPlane> p(new XskPlane());
    p->cfg_ = cfg;
    if (cfg.rx_queues == 0 || cfg.rx_queues > 1024) return err("rx queues must be 1..1024");
    uint32_t max_len = cfg.mtu + kEthHeaderBytes + 4; // one VLAN tag
    p->max_tx_len_ = max_len;
    p->frame_size_ = (max_len + kRxHeadroom <= 2048) ? 2048 : 4096;
    if (max_len + kRxHeadroom > 4096)
        return err("MTU " + std::to_string(cfg.mtu) + " too large for AF_XDP frames (max 3822)");
    uint32_t fpq = cfg.frames_per_queue;
    // Few classes get deep rings: a class's ring is how long its sender may
    // stall before the class runs dry and loses its share of the wire
    // (4096 frames of 1518 B: 100 ms at 500 Mbit/s).
    if (!fpq) fpq = std::clamp<uint32_t>(pow2_floor(kFrameBudget / cfg.rx_queues), 64, 8192);
    if (fpq & (fpq - 1)) return err("frames per queue must be a power of two");
    p->frames_per_queue_ = fpq;

    // The PAUSE frame: one max-size frame, gaps are prefixes of it.
    uint32_t pause_len = cfg.framing.max_frame_len();
    auto pause = build_pause_frame(cfg.mac, pause_len, cfg.framing);
    if (!pause) return err("building PAUSE frame: " + pause.error());
    auto small = build_pause_frame(cfg.mac, cfg.framing.min_frame_bytes, cfg.framing);
    if (!small || std::memcmp(small->data(), pause->data(), small->size()) != 0)
        return err("PAUSE frames of different lengths are not prefixes of each other: "
                   "gap descriptors cannot share one frame");

    uint64_t real_frames = uint64_t(fpq) * cfg.rx_queues;
    uint64_t total_frames = real_frames + 1;
    p->area_bytes_ = total_frames * p->frame_size_;
    p->area_bytes_ = (p->area_bytes_ + 4095) & ~uint64_t(4095);
    void *area = mmap(nullptr, p->area_bytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (area == MAP_FAILED)
        return err("mapping UMEM of " + std::to_string(p->area_bytes_ >> 20) +
                   " MiB: " + errstr(errno));
    p->area_ = static_cast<uint8_t *>(area);
    p->pause_addr_ = real_frames * p->frame_size_;
    std::memcpy(p->area_ + p->pause_addr_, pause->data(), pause->size());
    p->state_.assign(total_frames, State::Free);
    p->state_[real_frames] = State::Pause;

    p->tx_ = std::make_unique<TxSide>();
    xsk_umem_config ucfg{};
    ucfg.fill_size = fpq;
    ucfg.comp_size = cfg.tx_ring;
    ucfg.frame_size = p->frame_size_;
    ucfg.frame_headroom = 0;
    ucfg.flags = 0;
    int rc =
        xsk_umem__create(&p->umem_, p->area_, p->area_bytes_, &p->tx_->fill, &p->tx_->comp, &ucfg);
    if (rc)
        return err("creating UMEM (" + std::to_string(total_frames) + " frames): " + errstr(rc));

    // The TX socket first: its bind mode (copy) is the one every shared socket
    // inherits; zero-copy is impossible anyway with RX on a veth.
    xsk_socket_config scfg{};
    scfg.rx_size = 0;
    scfg.tx_size = cfg.tx_ring;
    scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
    scfg.bind_flags = XDP_COPY;
    rc = xsk_socket__create_shared(&p->tx_->xsk, cfg.tx_dev.c_str(), 0, p->umem_, nullptr,
                                   &p->tx_->tx, &p->tx_->fill, &p->tx_->comp, &scfg);
    if (rc) return err("creating AF_XDP TX socket on " + cfg.tx_dev + " queue 0: " + errstr(rc));

    p->rx_.resize(cfg.rx_queues);
    for (uint32_t q = 0; q < cfg.rx_queues; ++q) {
        auto &r = p->rx_[q];
        r.rings = std::make_unique<RxRings>();
        xsk_socket_config rcfg{};
        rcfg.rx_size = fpq;
        rcfg.tx_size = 0;
        rcfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
        rcfg.bind_flags = XDP_COPY;
        rc = xsk_socket__create_shared(&r.xsk, cfg.rx_dev.c_str(), q, p->umem_, &r.rings->rx,
                                       nullptr, &r.rings->fill, &r.rings->comp, &rcfg);
        if (rc)
            return err("creating AF_XDP RX socket on " + cfg.rx_dev + " queue " +
                       std::to_string(q) + ": " + errstr(rc));
        r.pool.reserve(fpq);
        for (uint32_t i = fpq; i-- > 0;)
            r.pool.push_back((uint64_t(q) * fpq + i) * p->frame_size_);
        if (cfg.xsks_map_fd >= 0) {
            rc = xsk_socket__update_xskmap(r.xsk, cfg.xsks_map_fd);
            if (rc)
                return err("registering RX socket of queue " + std::to_string(q) +
                           " in xsks_map: " + errstr(rc));
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

int XskPlane::rx_fd(uint32_t q) const {
    return xsk_socket__fd(rx_[q].xsk);
}
int XskPlane::tx_fd() const {
    return xsk_socket__fd(tx_->xsk);
}

bool XskPlane::transition(uint64_t addr, State from, State to) {
    uint64_t i = frame_index(addr);
    if (i >= state_.size() || state_[i] != from) {
        ++counters_.state_errors;
        return false;
    }
    state_[i] = to;
    return true;
}

bool XskPlane::rx_ready(uint32_t q) const {
    const auto &rx = rx_[q].rings->rx;
    // Same test as xsk_cons_nb_avail, without touching the cached index.
    return __atomic_load_n(rx.producer, __ATOMIC_ACQUIRE) != rx.cached_cons;
}

uint32_t XskPlane::rx_burst(uint32_t q, RxDesc *out, uint32_t max) {
    auto &r = rx_[q];
    uint32_t idx = 0;
    uint32_t n = xsk_ring_cons__peek(&r.rings->rx, max, &idx);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const xdp_desc *d = xsk_ring_cons__rx_desc(&r.rings->rx, idx + i);
        if (!transition(d->addr, State::Fill, State::Held)) continue;
        --r.fill;
        ++r.held;
        ++r.counters.rx_frames;
        // 14..mtu+18 is what copy-mode TX delivers; anything else would be
        // swallowed by the kernel with EBUSY and never completed.
        if (d->len < kEthHeaderBytes || d->len > max_tx_len_) {
            ++r.counters.rx_bad_len;
            drop(d->addr);
            continue;
        }
        out[kept++] = RxDesc{d->addr, d->len};
    }
    if (n) xsk_ring_cons__release(&r.rings->rx, n);
    return kept;
}

void XskPlane::drop(uint64_t addr) {
    uint64_t base = frame_index(addr) * frame_size_;
    if (!transition(addr, State::Held, State::Free)) return;
    auto &r = rx_[queue_of(addr)];
    --r.held;
    ++r.counters.dropped;
    r.pool.push_back(base);
}

const uint8_t *XskPlane::data(uint64_t addr) const {
    return area_ + addr;
}

uint32_t XskPlane::tx_free() {
    return xsk_prod_nb_free(&tx_->tx, cfg_.tx_ring);
}

bool XskPlane::tx_frame(const RxDesc &d) {
    uint32_t idx;
    if (xsk_ring_prod__reserve(&tx_->tx, 1, &idx) != 1) return false;
    if (!transition(d.addr, State::Held, State::Tx)) {
        // Not ours to send: give the slot back untouched.
        tx_->tx.cached_prod--;
        return false;
    }
    xdp_desc *t = xsk_ring_prod__tx_desc(&tx_->tx, idx);
    t->addr = d.addr;
    t->len = d.len;
    t->options = 0;
    xsk_ring_prod__submit(&tx_->tx, 1);
    auto &r = rx_[queue_of(d.addr)];
    --r.held;
    ++r.tx;
    ++r.counters.tx_frames;
    ++tx_submitted_;
    ++counters_.tx_frames;
    counters_.tx_frame_bytes += d.len;
    return true;
}

bool XskPlane::tx_gap(uint32_t len) {
    if (len < cfg_.framing.min_frame_bytes || len > cfg_.framing.max_frame_len()) {
        ++counters_.state_errors;
        return false;
    }
    uint32_t idx;
    if (xsk_ring_prod__reserve(&tx_->tx, 1, &idx) != 1) return false;
    xdp_desc *t = xsk_ring_prod__tx_desc(&tx_->tx, idx);
    t->addr = pause_addr_;
    t->len = len;
    t->options = 0;
    xsk_ring_prod__submit(&tx_->tx, 1);
    ++tx_submitted_;
    ++gaps_in_flight_;
    ++counters_.tx_gaps;
    counters_.tx_gap_bytes += len;
    return true;
}

uint32_t XskPlane::tx_unsent() const {
    return tx_->tx.cached_prod - __atomic_load_n(tx_->tx.consumer, __ATOMIC_ACQUIRE);
}

void XskPlane::kick(uint32_t max_kicks) {
    for (uint32_t k = 0; k < max_kicks && tx_unsent() > 0; ++k) {
        ++counters_.kicks;
        if (sendto(tx_fd(), nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0) continue;
        if (errno == EAGAIN || errno == EBUSY || errno == ENOBUFS || errno == EINTR) {
            // EAGAIN: more than one batch (32) left; EBUSY/ENOBUFS: the
            // device or skb allocation is busy. Retried on the next round.
            ++counters_.kick_transient;
            if (errno != EAGAIN) return;
            continue;
        }
        ++counters_.kick_errors;
        last_kick_errno_ = errno;
        return;
    }
}

uint32_t XskPlane::reap() {
    uint32_t idx = 0;
    uint32_t n = xsk_ring_cons__peek(&tx_->comp, cfg_.tx_ring, &idx);
    for (uint32_t i = 0; i < n; ++i) {
        uint64_t addr = *xsk_ring_cons__comp_addr(&tx_->comp, idx + i);
        ++tx_completed_;
        ++counters_.completions;
        if (frame_index(addr) == frame_index(pause_addr_)) {
            if (gaps_in_flight_)
                --gaps_in_flight_;
            else
                ++counters_.bad_completions;
            ++counters_.gap_completions;
            continue;
        }
        uint64_t base = frame_index(addr) * frame_size_;
        if (!transition(addr, State::Tx, State::Free)) {
            ++counters_.bad_completions;
            continue;
        }
        auto &r = rx_[queue_of(addr)];
        --r.tx;
        ++r.counters.completions;
        r.pool.push_back(base);
    }
    if (n) xsk_ring_cons__release(&tx_->comp, n);
    return n;
}

void XskPlane::refill() {
    for (uint32_t q = 0; q < rx_.size(); ++q) {
        auto &r = rx_[q];
        if (r.pool.empty()) continue;
        uint32_t idx = 0;
        // reserve() is all-or-nothing: ask only for what fits.
        uint32_t want = std::min<uint32_t>(
            uint32_t(r.pool.size()), xsk_prod_nb_free(&r.rings->fill, uint32_t(r.pool.size())));
        uint32_t n = want ? xsk_ring_prod__reserve(&r.rings->fill, want, &idx) : 0;
        if (!n) continue;
        for (uint32_t i = 0; i < n; ++i) {
            uint64_t a = r.pool.back();
            r.pool.pop_back();
            transition(a, State::Free, State::Fill);
            *xsk_ring_prod__fill_addr(&r.rings->fill, idx + i) = a;
        }
        xsk_ring_prod__submit(&r.rings->fill, n);
        r.fill += n;
        ++counters_.fill_refills;
    }
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

SocketStats XskPlane::rx_stats(uint32_t q) const {
    return stats_of(rx_[q].xsk);
}
SocketStats XskPlane::tx_stats() const {
    return stats_of(tx_->xsk);
}

Accounting XskPlane::check_accounting() const {
    Accounting a;
    a.total = uint64_t(frames_per_queue_) * rx_.size();
    a.gaps_in_flight = gaps_in_flight_;
    std::string detail;
    uint64_t pauses = 0;
    std::vector<uint64_t> cnt(5 * rx_.size(), 0);
    for (uint64_t i = 0; i < state_.size(); ++i) {
        if (state_[i] == State::Pause) {
            ++pauses;
            if (i != frame_index(pause_addr_))
                detail += "frame " + std::to_string(i) + " is Pause; ";
            continue;
        }
        uint32_t q = uint32_t(i / frames_per_queue_);
        cnt[q * 5 + uint32_t(state_[i])]++;
    }
    if (pauses != 1) detail += "PAUSE frames: " + std::to_string(pauses) + "; ";
    for (uint32_t q = 0; q < rx_.size(); ++q) {
        const auto &r = rx_[q];
        uint64_t f = cnt[q * 5 + 0], fl = cnt[q * 5 + 1], h = cnt[q * 5 + 2], t = cnt[q * 5 + 3];
        a.free += f;
        a.fill += fl;
        a.held += h;
        a.tx += t;
        if (f != r.pool.size() || fl != r.fill || h != r.held || t != r.tx)
            detail += "queue " + std::to_string(q) + ": states free/fill/held/tx " +
                      std::to_string(f) + "/" + std::to_string(fl) + "/" + std::to_string(h) + "/" +
                      std::to_string(t) + " vs counters " + std::to_string(r.pool.size()) + "/" +
                      std::to_string(r.fill) + "/" + std::to_string(r.held) + "/" +
                      std::to_string(r.tx) + "; ";
        if (f + fl + h + t != frames_per_queue_)
            detail += "queue " + std::to_string(q) + " owns " + std::to_string(f + fl + h + t) +
                      " frames, not " + std::to_string(frames_per_queue_) + "; ";
    }
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
