// docs/design.md §11.7.
#include "etcd/etcd.hpp"

#include "common/clock.hpp"

#include <cctype>
#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <list>
#include <mutex>

namespace pspxdp::etcd {

std::string base64_encode(std::string_view bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    int n =
        EVP_EncodeBlock(reinterpret_cast<unsigned char *>(out.data()),
                        reinterpret_cast<const unsigned char *>(bytes.data()), int(bytes.size()));
    out.resize(size_t(n));
    return out;
}

Result<std::string> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0)
        return err("base64 \"" + std::string(text) + "\": length not a multiple of 4");
    std::string out(text.size() / 4 * 3, '\0');
    int n = EVP_DecodeBlock(reinterpret_cast<unsigned char *>(out.data()),
                            reinterpret_cast<const unsigned char *>(text.data()), int(text.size()));
    if (n < 0) return err("base64 \"" + std::string(text) + "\": not base64");
    // EVP_DecodeBlock counts the padding as zero bytes.
    size_t pad = 0;
    for (size_t i = text.size(); i > 0 && text[i - 1] == '=' && pad < 2; --i) ++pad;
    out.resize(size_t(n) - pad);
    return out;
}

std::string prefix_end(std::string_view prefix) {
    std::string end(prefix);
    while (!end.empty()) {
        if (static_cast<unsigned char>(end.back()) < 0xff) {
            end.back() = char(static_cast<unsigned char>(end.back()) + 1);
            return end;
        }
        end.pop_back();
    }
    return std::string(1, '\0'); // every key
}

namespace {

// The gateway writes 64-bit integers as strings and leaves out zero values.
Result<int64_t> int_field(const Json &j, const char *name) {
    auto it = j.find(name);
    if (it == j.end()) return int64_t(0);
    if (it->is_number_integer()) return it->get<int64_t>();
    if (it->is_string()) {
        try {
            size_t used = 0;
            const std::string &s = it->get_ref<const std::string &>();
            long long v = std::stoll(s, &used);
            if (used == s.size()) return int64_t(v);
        } catch (const std::exception &) {
        }
    }
    return err(std::string("etcd answer: \"") + name + "\" is not an integer: " + it->dump());
}

Result<std::string> bytes_field(const Json &j, const char *name) {
    auto it = j.find(name);
    if (it == j.end()) return std::string();
    if (!it->is_string())
        return err(std::string("etcd answer: \"") + name + "\" is not a string: " + it->dump());
    return base64_decode(it->get_ref<const std::string &>());
}

Result<int64_t> header_revision(const Json &j) {
    auto h = j.find("header");
    if (h == j.end() || !h->is_object()) return err("etcd answer without a header: " + j.dump());
    return int_field(*h, "revision");
}

Result<KeyValue> parse_kv(const Json &j) {
    KeyValue kv;
    auto key = bytes_field(j, "key");
    if (!key) return key.failure();
    auto value = bytes_field(j, "value");
    if (!value) return value.failure();
    auto mod = int_field(j, "mod_revision");
    if (!mod) return mod.failure();
    auto version = int_field(j, "version");
    if (!version) return version.failure();
    auto lease = int_field(j, "lease");
    if (!lease) return lease.failure();
    kv.key = std::move(key.value());
    kv.value = std::move(value.value());
    kv.mod_revision = *mod;
    kv.version = *version;
    kv.lease = *lease;
    return kv;
}

// A gRPC error comes through the gateway as {"error": ..., "code": N, "message": ...}.
Result<void> grpc_error(const Json &j) {
    if (!j.is_object()) return err("etcd answer is not a JSON object: " + j.dump());
    auto e = j.find("error");
    if (e == j.end()) return {};
    auto m = j.find("message");
    return err("etcd: " + (m != j.end() && m->is_string() ? m->get<std::string>() : e->dump()));
}

} // namespace

Json range_request(std::string_view key, std::string_view range_end) {
    return Json{{"key", base64_encode(key)}, {"range_end", base64_encode(range_end)}};
}

Json put_request(std::string_view key, std::string_view value, int64_t lease) {
    Json j{{"key", base64_encode(key)}, {"value", base64_encode(value)}};
    if (lease != 0) j["lease"] = std::to_string(lease);
    return j;
}

Json cas_request(std::string_view key, std::string_view value, int64_t expected_mod_rev) {
    // A missing key's mod revision is 0, so the same compare creates it.
    return Json{{"compare", Json::array({{{"target", "MOD"},
                                          {"key", base64_encode(key)},
                                          {"mod_revision", std::to_string(expected_mod_rev)},
                                          {"result", "EQUAL"}}})},
                {"success", Json::array({{{"request_put", put_request(key, value, 0)}}})}};
}

Json exclusive_put_request(std::string_view key, std::string_view value, int64_t lease,
                           bool create) {
    // A missing key compares as lease 0 and create revision 0.
    Json cmp = create ? Json{{"target", "CREATE"}, {"create_revision", "0"}}
                      : Json{{"target", "LEASE"}, {"lease", std::to_string(lease)}};
    cmp["key"] = base64_encode(key);
    cmp["result"] = "EQUAL";
    return Json{{"compare", Json::array({cmp})},
                {"success", Json::array({{{"request_put", put_request(key, value, lease)}}})},
                {"failure", Json::array({{{"request_range", range_request(key, "")}}})}};
}

Json watch_request(std::string_view key, std::string_view range_end, int64_t start_revision) {
    return Json{{"create_request",
                 {{"key", base64_encode(key)},
                  {"range_end", base64_encode(range_end)},
                  {"start_revision", std::to_string(start_revision)}}}};
}

Result<RangeAnswer> parse_range(const Json &answer) {
    if (auto e = grpc_error(answer); !e) return e.failure();
    RangeAnswer out;
    auto rev = header_revision(answer);
    if (!rev) return rev.failure();
    out.revision = *rev;
    if (auto kvs = answer.find("kvs"); kvs != answer.end()) {
        if (!kvs->is_array()) return err("etcd range answer: \"kvs\" is not a list");
        for (const auto &j : *kvs) {
            auto kv = parse_kv(j);
            if (!kv) return kv.failure();
            out.kvs.push_back(std::move(kv.value()));
        }
    }
    return out;
}

Result<bool> parse_txn(const Json &answer) {
    if (auto e = grpc_error(answer); !e) return e.failure();
    if (auto rev = header_revision(answer); !rev) return rev.failure();
    auto s = answer.find("succeeded");
    return s != answer.end() && s->is_boolean() && s->get<bool>();
}

Result<std::pair<int64_t, int64_t>> parse_grant(const Json &answer) {
    if (auto e = grpc_error(answer); !e) return e.failure();
    auto id = int_field(answer, "ID");
    if (!id) return id.failure();
    auto ttl = int_field(answer, "TTL");
    if (!ttl) return ttl.failure();
    if (*id == 0 || *ttl <= 0) return err("etcd lease grant answered no lease: " + answer.dump());
    return std::pair{*id, *ttl};
}

Result<int64_t> parse_keepalive(const Json &answer) {
    if (auto e = grpc_error(answer); !e) return e.failure();
    auto r = answer.find("result");
    if (r == answer.end() || !r->is_object())
        return err("etcd keep-alive answer without a result: " + answer.dump());
    if (auto rev = header_revision(*r); !rev) return rev.failure();
    // etcd answers a lease it does not know with no TTL (0).
    return int_field(*r, "TTL");
}

Result<WatchAnswer> parse_watch_line(std::string_view line) {
    Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded()) return err("etcd watch: not JSON: " + std::string(line.substr(0, 200)));
    if (auto e = grpc_error(j); !e) return e.failure();
    auto r = j.find("result");
    if (r == j.end() || !r->is_object()) return err("etcd watch: a line without a result");
    WatchAnswer out;
    auto rev = header_revision(*r);
    if (!rev) return rev.failure();
    out.revision = *rev;
    out.created = r->value("created", false);
    out.canceled = r->value("canceled", false);
    if (auto evs = r->find("events"); evs != r->end()) {
        if (!evs->is_array()) return err("etcd watch: \"events\" is not a list");
        for (const auto &ej : *evs) {
            Event ev;
            // PUT is the enum's zero: the gateway leaves it out.
            ev.type = ej.value("type", std::string("PUT")) == "DELETE" ? Event::Type::del
                                                                       : Event::Type::put;
            auto kv = ej.find("kv");
            if (kv == ej.end()) return err("etcd watch: an event without a kv");
            auto parsed = parse_kv(*kv);
            if (!parsed) return parsed.failure();
            ev.kv = std::move(parsed.value());
            out.events.push_back(std::move(ev));
        }
    }
    return out;
}

size_t next_endpoint(size_t failed, size_t n) { return n == 0 ? 0 : (failed + 1) % n; }

Result<void> check_endpoint(std::string_view url) {
    // http://HOST[:PORT], HOST a name, an IPv4 address or [IPv6]; nothing
    // after it (the gateway's paths are the client's).
    const std::string what = "--etcd \"" + std::string(url) + "\": ";
    std::string_view rest = url.substr(7), host;
    if (rest.starts_with('[')) {
        size_t close = rest.find(']');
        if (close == std::string_view::npos || close == 1)
            return refuse(what + "an IPv6 address is written [ADDR]");
        host = rest.substr(0, close + 1);
    } else {
        host = rest.substr(0, rest.find(':'));
        if (host.empty()) return refuse(what + "no host");
        for (char c : host)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_')
                return refuse(what + "host \"" + std::string(host) +
                              "\" is not a name or an address (nothing may follow HOST:PORT)");
    }
    rest.remove_prefix(host.size());
    if (rest.empty()) return {}; // http's port, 80
    if (rest.find('/') != std::string_view::npos)
        return refuse(what + "nothing may follow the host but :PORT (no path)");
    if (rest.front() != ':') return refuse(what + "nothing may follow the host but :PORT");
    std::string_view port = rest.substr(1);
    bool digits = !port.empty() && port.size() <= 5;
    for (char c : port) digits = digits && c >= '0' && c <= '9';
    unsigned long n = digits ? std::stoul(std::string(port)) : 0;
    if (n < 1 || n > 65535)
        return refuse(what + "port \"" + std::string(port) + "\" is not 1-65535");
    return {};
}

Result<std::vector<std::string>> parse_endpoints(std::string_view list) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        std::string_view url = list.substr(
            start, comma == std::string_view::npos ? list.size() - start : comma - start);
        if (url.substr(0, 7) != "http://" || url.size() <= 7)
            return refuse("--etcd \"" + std::string(url) +
                          "\": not an http:// URL (give URL[,URL...], e.g. http://10.0.0.1:2379)");
        while (!url.empty() && url.back() == '/') url.remove_suffix(1);
        if (auto ok = check_endpoint(url); !ok) return ok.failure();
        out.emplace_back(url);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return out;
}

namespace {

void curl_global() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t append(char *data, size_t size, size_t n, void *user) {
    static_cast<std::string *>(user)->append(data, size * n);
    return size * n;
}

struct Stream {
    std::string buffer;
    const std::function<bool(const WatchAnswer &)> *on_answer;
    const std::atomic<bool> *stop;
    std::string error;
};

// The watch stream, line by line as it arrives.
size_t stream_lines(char *data, size_t size, size_t n, void *user) {
    auto *s = static_cast<Stream *>(user);
    s->buffer.append(data, size * n);
    size_t nl;
    while ((nl = s->buffer.find('\n')) != std::string::npos) {
        std::string line = s->buffer.substr(0, nl);
        s->buffer.erase(0, nl + 1);
        if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
        auto answer = parse_watch_line(line);
        if (!answer) {
            s->error = answer.error();
            return 0; // aborts the transfer
        }
        if (!(*s->on_answer)(*answer)) return 0;
    }
    return size * n;
}

int stream_progress(void *user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<Stream *>(user)->stop->load() ? 1 : 0;
}

} // namespace

Client::Client(std::vector<std::string> endpoints, long timeout_ms)
    : endpoints_(std::move(endpoints)), timeout_ms_(timeout_ms) {
    curl_global();
    curl_ = curl_easy_init();
}

Client::~Client() {
    if (curl_) curl_easy_cleanup(static_cast<CURL *>(curl_));
}

// One POST of the v3 gateway on handle c (reset first), its answer into
// *answer: the one setup for the plain calls (post()) and the hedged tries.
static void setup_post(CURL *c, const std::string &url, const std::string &body,
                       std::string *answer, long timeout_ms) {
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, long(body.size()));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, answer);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
}

// What a finished POST to url gave: the answer's JSON, or why not.
static Result<Json> judge_post(const std::string &url, CURLcode rc, CURL *c,
                               const std::string &answer) {
    if (rc != CURLE_OK) return err(url + ": " + curl_easy_strerror(rc));
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    // 4xx/5xx carry a gRPC error body: an unavailable member (no leader)
    // answers 503, which is worth another endpoint.
    if (status >= 500 || answer.empty())
        return err(url + ": HTTP " + std::to_string(status) + " " + answer);
    Json j = Json::parse(answer, nullptr, false);
    if (j.is_discarded()) return err(url + ": not JSON: " + answer.substr(0, 200));
    return j;
}

Result<Json> Client::post(const std::string &url, const std::string &body, long timeout_ms) {
    CURL *c = static_cast<CURL *>(curl_);
    if (!c) return err("etcd: curl_easy_init failed");
    std::string answer;
    setup_post(c, url, body, &answer, timeout_ms);
    return judge_post(url, curl_easy_perform(c), c, answer);
}

Result<Json> Client::call(std::string_view path, const Json &body) {
    std::string text = body.dump();
    std::string errors;
    for (size_t tried = 0; tried < endpoints_.size(); ++tried) {
        auto answer = post(endpoints_[current_] + std::string(path), text, timeout_ms_);
        if (answer) return answer;
        errors = answer.error();
        current_ = next_endpoint(current_, endpoints_.size());
    }
    return err("no etcd endpoint answered (last: " + errors + ")");
}

Result<RangeAnswer> Client::range_prefix(std::string_view prefix) {
    auto j = call("/v3/kv/range", range_request(prefix, prefix_end(prefix)));
    if (!j) return j.failure();
    return parse_range(*j);
}

Result<void> Client::put(std::string_view key, std::string_view value, int64_t lease) {
    auto j = call("/v3/kv/put", put_request(key, value, lease));
    if (!j) return j.failure();
    if (auto e = grpc_error(*j); !e) return e;
    return {};
}

Result<bool> Client::cas(std::string_view key, std::string_view value, int64_t expected_mod_rev) {
    auto j = call("/v3/kv/txn", cas_request(key, value, expected_mod_rev));
    if (!j) return j.failure();
    return parse_txn(*j);
}

Result<std::optional<KeyValue>> Client::put_exclusive(std::string_view key, std::string_view value,
                                                      int64_t lease) {
    std::optional<KeyValue> there;
    for (bool create : {false, true}) {
        auto j = call("/v3/kv/txn", exclusive_put_request(key, value, lease, create));
        if (!j) return j.failure();
        auto ok = parse_txn(*j);
        if (!ok) return ok.failure();
        if (*ok) return std::optional<KeyValue>{};
        there.reset();
        // The failure branch's range: the record that is there.
        const Json *kvs = nullptr;
        if (auto r = j->find("responses"); r != j->end() && r->is_array() && !r->empty())
            if (auto rr = (*r)[0].find("response_range"); rr != (*r)[0].end())
                if (auto k = rr->find("kvs"); k != rr->end() && k->is_array() && !k->empty())
                    kvs = &(*k)[0];
        if (kvs) {
            auto kv = parse_kv(*kvs);
            if (!kv) return kv.failure();
            there = std::move(kv.value());
        }
    }
    if (!there) return err("etcd: " + std::string(key) + " neither absent nor present");
    return there;
}

Result<int64_t> Client::grant(int64_t ttl_s) {
    auto j = call("/v3/lease/grant", Json{{"TTL", std::to_string(ttl_s)}});
    if (!j) return j.failure();
    auto g = parse_grant(*j);
    if (!g) return g.failure();
    return g->first;
}

Result<int64_t> Client::keepalive(int64_t lease) {
    auto j = call("/v3/lease/keepalive", Json{{"ID", std::to_string(lease)}});
    if (!j) return j.failure();
    return parse_keepalive(*j);
}

Result<Client::KeepAlive> Client::keepalive_hedged(int64_t lease, uint64_t hedge_ns,
                                                   uint64_t give_up_ns) {
    struct Try {
        CURL *easy;
        size_t endpoint;
        uint64_t sent_ns;
        std::string url, answer;
    };
    CURLM *multi = curl_multi_init();
    if (!multi) return err("etcd: curl_multi_init failed");
    const std::string body = Json{{"ID", std::to_string(lease)}}.dump();
    std::list<Try> tries;
    std::string errors = "no answer in time";
    std::optional<KeepAlive> got;
    size_t next = current_;
    uint64_t next_try_ns = 0;
    for (;;) {
        uint64_t now = common::boot_ns();
        if (now >= give_up_ns) break;
        if (now >= next_try_ns && tries.size() < 2 * endpoints_.size()) {
            Try &t = tries.emplace_back();
            t.easy = curl_easy_init();
            t.endpoint = next;
            t.url = endpoints_[next] + "/v3/lease/keepalive";
            next = next_endpoint(next, endpoints_.size());
            setup_post(t.easy, t.url, body, &t.answer, timeout_ms_);
            curl_easy_setopt(t.easy, CURLOPT_PRIVATE, &t);
            // Before the request can leave: the renewal happens after this.
            t.sent_ns = common::boot_ns();
            curl_multi_add_handle(multi, t.easy);
            next_try_ns = t.sent_ns + hedge_ns;
        }
        int running = 0;
        curl_multi_perform(multi, &running);
        int left = 0;
        while (CURLMsg *m = curl_multi_info_read(multi, &left)) {
            if (m->msg != CURLMSG_DONE) continue;
            Try *t = nullptr;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char **>(&t));
            if (auto j = judge_post(t->url, m->data.result, t->easy, t->answer); !j) {
                errors = j.error();
            } else if (auto ttl = parse_keepalive(*j); !ttl) {
                errors = t->url + ": " + ttl.error();
            } else if (!got || t->sent_ns > got->sent_ns) {
                got = KeepAlive{*ttl, t->sent_ns};
                current_ = t->endpoint;
            }
            // A try that failed (a refused connection: a dead member) is
            // followed soon, not a whole hedge later; not at once, or an
            // etcd refusing everywhere would be asked in a busy loop.
            if (!got) next_try_ns = std::min(next_try_ns, common::boot_ns() + hedge_ns / 4);
            curl_multi_remove_handle(multi, t->easy);
            curl_easy_cleanup(t->easy);
            tries.remove_if([t](const Try &x) { return &x == t; });
        }
        if (got) break;
        int fds = 0;
        curl_multi_poll(multi, nullptr, 0, 10, &fds);
    }
    for (Try &t : tries) {
        curl_multi_remove_handle(multi, t.easy);
        curl_easy_cleanup(t.easy);
    }
    curl_multi_cleanup(multi);
    if (got) return *got;
    return err("no etcd endpoint answered the keep-alive (last: " + errors + ")");
}

Result<void> Client::revoke(int64_t lease) {
    auto j = call("/v3/lease/revoke", Json{{"ID", std::to_string(lease)}});
    if (!j) return j.failure();
    if (auto e = grpc_error(*j); !e) return e;
    return {};
}

Result<void> Client::watch(std::string_view key, std::string_view range_end, int64_t start_revision,
                           const std::function<bool(const WatchAnswer &)> &on_answer,
                           const std::atomic<bool> &stop) {
    CURL *c = static_cast<CURL *>(curl_);
    if (!c) return err("etcd: curl_easy_init failed");
    curl_easy_reset(c);
    std::string url = endpoints_[current_] + "/v3/watch";
    std::string body = watch_request(key, range_end, start_revision).dump();
    Stream s{{}, &on_answer, &stop, {}};
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, long(body.size()));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, stream_lines);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, stream_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms_);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    // A dead peer is noticed by TCP keep-alive probes, not by silence.
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 1L);
    CURLcode rc = curl_easy_perform(c);
    if (!s.error.empty()) return err(s.error);
    if (stop.load()) return {};
    if (rc == CURLE_OK) return err(url + ": the watch ended");
    return err(url + ": " + curl_easy_strerror(rc));
}

} // namespace pspxdp::etcd
