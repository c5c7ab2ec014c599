// A client of etcd's v3 JSON gateway (docs/design.md §11.7): the HTTP/JSON
// face every etcd (3.4+) serves on its client URLs at /v3/..., through
// libcurl, with nlohmann-json for the bodies. Keys and values travel as
// base64, 64-bit integers as JSON strings.
//
// Two parts: the pure encoding and parsing (requests, answers, the watch
// stream's lines, which endpoint to try next), unit-tested without an etcd;
// and Client, which posts them with a timeout each and fails over across
// the endpoints. A Client is for one thread (one curl handle).
#pragma once

#include "core/result.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace pspxdp::etcd {

using Json = nlohmann::json;

std::string base64_encode(std::string_view bytes);
Result<std::string> base64_decode(std::string_view text);
// The end of the range of every key starting with prefix ("/a/" -> "/a0").
std::string prefix_end(std::string_view prefix);

struct KeyValue {
    std::string key, value;
    int64_t mod_revision = 0;
    int64_t version = 0;
    int64_t lease = 0;
};

struct Event {
    enum class Type { put, del };
    Type type = Type::put;
    KeyValue kv;
};

// The bodies of the calls (§11.7).
Json range_request(std::string_view key, std::string_view range_end);
Json put_request(std::string_view key, std::string_view value, int64_t lease);
// Puts key=value if key's mod revision is still expected_mod_rev (0: key absent).
Json cas_request(std::string_view key, std::string_view value, int64_t expected_mod_rev);
// Puts key=value under lease if the key is under that lease (create:
// if it is absent); else ranges it.
Json exclusive_put_request(std::string_view key, std::string_view value, int64_t lease,
                           bool create);
Json watch_request(std::string_view key, std::string_view range_end, int64_t start_revision);

// Answers. Every one names what was missing or malformed.
struct RangeAnswer {
    int64_t revision = 0;
    std::vector<KeyValue> kvs;
};
Result<RangeAnswer> parse_range(const Json &answer);
Result<bool> parse_txn(const Json &answer); // succeeded
// A grant: the lease id and its TTL in seconds.
Result<std::pair<int64_t, int64_t>> parse_grant(const Json &answer);
// A keep-alive's TTL in seconds: 0 when the lease no longer exists.
Result<int64_t> parse_keepalive(const Json &answer);

// One line of the /v3/watch stream.
struct WatchAnswer {
    int64_t revision = 0;
    bool created = false;
    bool canceled = false; // compacted, or the server ended it: range again
    std::vector<Event> events;
};
Result<WatchAnswer> parse_watch_line(std::string_view line);

// Which endpoint to try after `failed` (of n) failed: the next one round
// the list. The client keeps to an endpoint while it answers.
size_t next_endpoint(size_t failed, size_t n);

// One --etcd URL: http://HOST[:PORT], PORT 1-65535, nothing after it.
Result<void> check_endpoint(std::string_view url);
// The --etcd URLs: comma-separated http:// URLs, at least one, each checked.
Result<std::vector<std::string>> parse_endpoints(std::string_view list);

class Client {
  public:
    // Each call gives every endpoint one try of timeout_ms, preferring the one
    // that answered last.
    Client(std::vector<std::string> endpoints, long timeout_ms);
    ~Client();
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;

    // POST path with body; the answer's JSON, or why no endpoint gave one.
    Result<Json> call(std::string_view path, const Json &body);

    Result<RangeAnswer> range_prefix(std::string_view prefix);
    Result<void> put(std::string_view key, std::string_view value, int64_t lease);
    Result<bool> cas(std::string_view key, std::string_view value, int64_t expected_mod_rev);
    // Puts key=value under lease if the key is absent or under that lease
    // already: one holder's record is never replaced by another's. nullopt
    // when put, else the record there (under another lease).
    Result<std::optional<KeyValue>> put_exclusive(std::string_view key, std::string_view value,
                                                  int64_t lease);
    Result<int64_t> grant(int64_t ttl_s);
    Result<int64_t> keepalive(int64_t lease);
    // A keep-alive, hedged: sent to the current endpoint, and again to the
    // next one round the list every hedge_ns that no answer came (at once
    // after a refusal), each try with the client's timeout, until one
    // answers or give_up_ns (CLOCK_BOOTTIME) passes. The answer's TTL (0:
    // the lease is gone) and when the try that got it was sent, which is
    // what R4 counts from (docs/design.md §11.3). During an election a
    // member holds a renewal until it knows a leader (etcd polls for one
    // once per election timeout), so one try at a time would wait out that
    // poll or the timeout, whichever first, after the new leader is there.
    struct KeepAlive {
        int64_t ttl_s = 0;
        uint64_t sent_ns = 0;
    };
    Result<KeepAlive> keepalive_hedged(int64_t lease, uint64_t hedge_ns, uint64_t give_up_ns);
    Result<void> revoke(int64_t lease);

    // Streams /v3/watch over [key, range_end) from start_revision on the
    // current endpoint, calling on_answer per line, until the stream fails
    // (the error: watch again after a range), on_answer returns false, or
    // stop becomes true. No timeout: a watch is silent while nothing changes.
    Result<void> watch(std::string_view key, std::string_view range_end, int64_t start_revision,
                       const std::function<bool(const WatchAnswer &)> &on_answer,
                       const std::atomic<bool> &stop);
    // After a failed watch: the next endpoint.
    void fail_over() { current_ = next_endpoint(current_, endpoints_.size()); }
    const std::string &endpoint() const { return endpoints_[current_]; }

  private:
    Result<Json> post(const std::string &url, const std::string &body, long timeout_ms);

    std::vector<std::string> endpoints_;
    long timeout_ms_;
    size_t current_ = 0;
    void *curl_ = nullptr;
};

} // namespace pspxdp::etcd
