// What the BPF tests share: the root/BPF skip, a private network namespace,
// and packet builders. Header-only: one copy for every tests/bpf/test_*.cpp.
#pragma once

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/ns.hpp"
#include "pspxdp/shared.h"
#include "setup/loader.hpp"
#include "setup/state.hpp"

namespace psptest {

using Bytes = std::vector<uint8_t>;

// ---------------------------------------------------------------- skip

inline void require_root_or_skip() {
    if (geteuid() != 0) {
        std::fprintf(stderr, "bpf_tests: not root, skipping\n");
        std::exit(77);
    }
    static bool probed = false;
    if (probed) return;
    probed = true;
    // BPF available at all? A trivial array map answers that without
    // involving the code under test (whose load failures are real failures).
    int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "psp_probe", 4, 4, 1, nullptr);
    if (fd < 0) {
        std::fprintf(stderr, "bpf_tests: BPF unavailable (%s), skipping\n", std::strerror(errno));
        std::exit(77);
    }
    close(fd);
    if (std::system("ip netns list >/dev/null 2>&1") != 0) {
        std::fprintf(stderr, "bpf_tests: iproute2 netns unavailable, skipping\n");
        std::exit(77);
    }
}

// ---------------------------------------------------------------- netns

inline void sh(const std::string &cmd) {
    if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0)
        throw std::runtime_error("command failed: " + cmd);
}

class PrivateNetns {
  public:
    PrivateNetns() {
        static int counter = 0;
        name_ = "psp-bpf-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
        orig_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (orig_ < 0) throw std::runtime_error("open own netns");
        try {
            sh("ip netns add " + name_);
            created_ = true;
            sh("ip -n " + name_ +
               " link add psp0 numtxqueues 8 numrxqueues 8 type veth peer name psp1"
               " numtxqueues 8 numrxqueues 8");
            sh("ip -n " + name_ + " link set psp0 up");
            sh("ip -n " + name_ + " link set psp1 up");
            int fd = open(("/run/netns/" + name_).c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) throw std::runtime_error("open /run/netns/" + name_);
            int rc = setns(fd, CLONE_NEWNET);
            close(fd);
            if (rc != 0) throw std::runtime_error("setns " + name_);
            entered_ = true;
            psp0 = if_nametoindex("psp0");
            psp1 = if_nametoindex("psp1");
            if (!psp0 || !psp1) throw std::runtime_error("veth pair missing in " + name_);
        } catch (...) {
            cleanup();
            throw;
        }
    }
    ~PrivateNetns() { cleanup(); }
    PrivateNetns(const PrivateNetns &) = delete;
    PrivateNetns &operator=(const PrivateNetns &) = delete;

    unsigned psp0 = 0, psp1 = 0;

  private:
    void cleanup() {
        if (entered_ && setns(orig_, CLONE_NEWNET) != 0) std::perror("setns back");
        entered_ = false;
        if (created_) std::system(("ip netns del " + name_ + " >/dev/null 2>&1").c_str());
        created_ = false;
        if (orig_ >= 0) close(orig_);
        orig_ = -1;
    }
    std::string name_;
    int orig_ = -1;
    bool created_ = false, entered_ = false;
};

// A device DEV in the current network namespace with a state file that says
// it is attached here (name, ifindex, namespace), as attach leaves it: the
// CLI acts only on such a device (setup::check_here). Enter a PrivateNetns
// first. Removes both.
class AttachedHere {
  public:
    explicit AttachedHere(std::string dev) : paths_(pspxdp::common::paths_for(dev).value()) {
        sh("ip link add " + dev + " type veth peer name " + dev + "p");
        pspxdp::setup::AttachState st;
        st.dev = dev;
        st.dev_ifindex = if_nametoindex(dev.c_str());
        const pspxdp::common::NetnsId ns = pspxdp::common::netns_here();
        st.netns = ns.inode;
        st.netns_cookie = ns.cookie;
        if (!st.dev_ifindex) throw std::runtime_error("no device " + dev);
        // Built whole (TC attached last): one that is not is half made.
        st.pins_created = st.xdp_attached = st.tc_attached = true;
        mkdir("/run/pspxdp", 0755); // may exist
        auto r = pspxdp::setup::write_state(paths_, st);
        if (!r) throw std::runtime_error(r.error());
        // The lock file attach leaves: a change takes it, never creates it.
        const int fd = open(paths_.lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0) throw std::runtime_error("creating " + paths_.lock);
        close(fd);
    }
    ~AttachedHere() {
        unlink(paths_.state.c_str());
        unlink(paths_.lock.c_str());
        std::system(("ip link del " + paths_.dev + " >/dev/null 2>&1").c_str());
    }
    AttachedHere(const AttachedHere &) = delete;
    AttachedHere &operator=(const AttachedHere &) = delete;

  private:
    pspxdp::setup::Paths paths_;
};

// Counter idx of a per-CPU struct-of-__u64 counters map (tc_stats,
// xdp_stats: one entry, the enum indexes the fields), summed over CPUs.
template <class Counters> uint64_t percpu_counter(int map_fd, uint32_t idx) {
    const int ncpu = libbpf_num_possible_cpus();
    std::vector<Counters> v(static_cast<size_t>(ncpu));
    uint32_t key = 0;
    REQUIRE(bpf_map_lookup_elem(map_fd, &key, v.data()) == 0);
    uint64_t sum = 0;
    for (const auto &c : v) sum += reinterpret_cast<const uint64_t *>(&c)[idx];
    return sum;
}

// ---------------------------------------------------------------- pins

// A BPF object's maps pinned under PSPXDP_PIN_ROOT/<dev>, as attach does;
// unpinned and removed by the destructor.
class Pins {
  public:
    Pins(bpf_object *obj, std::string dev) : dev_(std::move(dev)) {
        mkdir(PSPXDP_PIN_ROOT, 0755); // may exist
        dir_ = std::string(PSPXDP_PIN_ROOT) + "/" + dev_;
        REQUIRE(mkdir(dir_.c_str(), 0755) == 0);
        bpf_map *m;
        bpf_object__for_each_map(m, obj) {
            if (std::strchr(bpf_map__name(m), '.')) continue; // .rodata
            std::string path = dir_ + "/" + bpf_map__name(m);
            REQUIRE(bpf_map__pin(m, path.c_str()) == 0);
            pinned_.push_back(m);
        }
    }
    ~Pins() {
        for (bpf_map *m : pinned_) bpf_map__unpin(m, nullptr);
        rmdir(dir_.c_str());
        // The device's lock file (common::DevLock), as detach removes it.
        unlink(("/run/pspxdp/" + dev_ + ".lock").c_str());
        rmdir("/run/pspxdp"); // only when empty
    }
    Pins(const Pins &) = delete;
    Pins &operator=(const Pins &) = delete;

  private:
    std::string dev_, dir_;
    std::vector<bpf_map *> pinned_;
};

inline bool bpffs_mounted() {
    constexpr long kBpfFsMagic = 0xcafe4a11;
    struct statfs fs {};
    return statfs("/sys/fs/bpf", &fs) == 0 && long(fs.f_type) == kBpfFsMagic;
}

// ---------------------------------------------------------------- packets

inline void put16(Bytes &b, uint16_t v) {
    b.push_back(uint8_t(v >> 8));
    b.push_back(uint8_t(v));
}

// Tags in the data: the first (outer) gets VLAN id first_vid, the next first_vid + 1.
inline Bytes eth(uint16_t ethertype, std::initializer_list<uint16_t> tpids = {},
                 uint16_t first_vid = 100) {
    Bytes b = {0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1};
    uint16_t vid = first_vid;
    for (uint16_t tpid : tpids) {
        put16(b, tpid);
        put16(b, vid++);
    }
    put16(b, ethertype);
    return b;
}

inline Bytes v4addr(const char *s) {
    Bytes a(4);
    REQUIRE(inet_pton(AF_INET, s, a.data()) == 1);
    return a;
}
inline Bytes v6addr(const char *s) {
    Bytes a(16);
    REQUIRE(inet_pton(AF_INET6, s, a.data()) == 1);
    return a;
}

inline Bytes udp(uint16_t sport, uint16_t dport, size_t payload = 18) {
    Bytes b;
    put16(b, sport);
    put16(b, dport);
    put16(b, uint16_t(8 + payload));
    put16(b, 0);
    b.resize(b.size() + payload, 0xab);
    return b;
}

inline Bytes tcp(uint16_t sport, uint16_t dport, uint8_t doff_words = 5) {
    Bytes b;
    put16(b, sport);
    put16(b, dport);
    b.resize(12, 0);
    b.push_back(uint8_t(doff_words << 4));
    b.push_back(0x10); // ACK
    b.resize(20, 0);
    if (doff_words > 5) b.resize(size_t(doff_words) * 4, 1); // NOP options
    return b;
}

struct V4 {
    const char *src = "10.0.0.1";
    const char *dst = "8.8.8.8";
    uint8_t proto = IPPROTO_UDP;
    Bytes options;           // multiple of 4
    uint16_t frag_field = 0; // flags + offset (host order)
    int version = 4;
    uint8_t tos = 0; // DSCP << 2 | ECN
    int ihl_override = -1;
    int tot_len_override = -1;
};

inline Bytes ipv4(const V4 &h, const Bytes &l4) {
    Bytes b;
    const size_t ihl = h.ihl_override >= 0 ? size_t(h.ihl_override) : 5 + h.options.size() / 4;
    b.push_back(uint8_t(h.version << 4 | ihl));
    b.push_back(h.tos);
    const size_t tot = 20 + h.options.size() + l4.size();
    put16(b, uint16_t(h.tot_len_override >= 0 ? h.tot_len_override : int(tot)));
    put16(b, 0x1234);
    put16(b, h.frag_field);
    b.push_back(64);
    b.push_back(h.proto);
    put16(b, 0);
    Bytes s = v4addr(h.src), d = v4addr(h.dst);
    b.insert(b.end(), s.begin(), s.end());
    b.insert(b.end(), d.begin(), d.end());
    b.insert(b.end(), h.options.begin(), h.options.end());
    b.insert(b.end(), l4.begin(), l4.end());
    return b;
}

inline Bytes ipv6(uint8_t nexthdr, const char *src, const char *dst, const Bytes &payload,
                  int version = 6, uint8_t tclass = 0) {
    Bytes b;
    b.push_back(uint8_t(version << 4 | tclass >> 4));
    b.push_back(uint8_t(tclass << 4));
    put16(b, 0);
    put16(b, uint16_t(payload.size()));
    b.push_back(nexthdr);
    b.push_back(64);
    Bytes s = v6addr(src), d = v6addr(dst);
    b.insert(b.end(), s.begin(), s.end());
    b.insert(b.end(), d.begin(), d.end());
    b.insert(b.end(), payload.begin(), payload.end());
    return b;
}

// An 8-byte-unit extension header (hop-by-hop, routing, dest opts) of
// (len_units + 1) * 8 bytes, then the rest.
inline Bytes ext(uint8_t nexthdr, uint8_t len_units, const Bytes &rest) {
    Bytes b = {nexthdr, len_units};
    b.resize(size_t(len_units + 1) * 8, 0);
    if (b.size() >= 4) b[2] = 1, b[3] = 0; // PadN-ish filler, content irrelevant
    b.insert(b.end(), rest.begin(), rest.end());
    return b;
}

// AH: length in 4-byte units minus 2.
inline Bytes ah(uint8_t nexthdr, uint8_t len_field, const Bytes &rest) {
    Bytes b = {nexthdr, len_field};
    b.resize(size_t(len_field + 2) * 4, 0x5a);
    b.insert(b.end(), rest.begin(), rest.end());
    return b;
}

inline Bytes frag6(uint8_t nexthdr, uint16_t offset_units, bool more, const Bytes &rest) {
    Bytes b = {nexthdr, 0};
    put16(b, uint16_t(offset_units << 3 | (more ? 1 : 0)));
    put16(b, 0xbeef);
    put16(b, 0x0001);
    b.insert(b.end(), rest.begin(), rest.end());
    return b;
}

inline Bytes cat(Bytes a, const Bytes &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

} // namespace psptest
