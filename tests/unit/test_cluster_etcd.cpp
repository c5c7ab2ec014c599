// The etcd v3 JSON gateway client's pure parts and the group's keys as
// JSON (docs/design.md §11.7, §11.1): encoding, answers as etcd 3.4 writes
// them, the watch stream's lines, failover order, the rate log.
#include "agent/agent.hpp"
#include "agent/codec.hpp"
#include "control/filter_spec.hpp"
#include "etcd/etcd.hpp"

#include <catch2/catch.hpp>

using namespace pspxdp;
using etcd::Json;

TEST_CASE("etcd: base64 both ways, prefix ends", "[cluster]") {
    CHECK(etcd::base64_encode("foo") == "Zm9v");
    CHECK(etcd::base64_encode("fo") == "Zm8=");
    CHECK(etcd::base64_encode("") == "");
    const std::vector<std::string> samples = {
        "", "a", "ab", "abc", "/pspxdp/group/g/live/h1", std::string("\0\xff", 2)};
    for (const std::string &s : samples)
        CHECK(etcd::base64_decode(etcd::base64_encode(s)).value() == s);
    CHECK(!etcd::base64_decode("Zm9"));
    CHECK(!etcd::base64_decode("Zm9v!!!!"));
    CHECK(etcd::prefix_end("/a/") == "/a0");
    CHECK(etcd::prefix_end(std::string("a\xff", 2)) == "b");
}

TEST_CASE("etcd: request bodies as the gateway takes them", "[cluster]") {
    Json put = etcd::put_request("k", "v", 7);
    CHECK(put == Json{{"key", "aw=="}, {"value", "dg=="}, {"lease", "7"}});
    CHECK(!etcd::put_request("k", "v", 0).contains("lease"));
    Json cas = etcd::cas_request("k", "v", 0);
    CHECK(cas["compare"][0]["target"] == "MOD");
    CHECK(cas["compare"][0]["mod_revision"] == "0");
    CHECK(cas["compare"][0]["result"] == "EQUAL");
    CHECK(cas["success"][0]["request_put"]["key"] == "aw==");
    Json w = etcd::watch_request("/a/", "/a0", 12);
    CHECK(w["create_request"]["start_revision"] == "12");
    CHECK(w["create_request"]["range_end"] == etcd::base64_encode("/a0"));
}

TEST_CASE("etcd: answers of etcd 3.4, and errors named", "[cluster]") {
    // Copied from etcd 3.4.23's gateway.
    auto range = etcd::parse_range(Json::parse(
        R"({"header":{"cluster_id":"3","member_id":"4","revision":"2","raft_term":"2"},
            "kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YmFy","lease":"99"}],"count":"1"})"));
    REQUIRE(range);
    CHECK(range->revision == 2);
    REQUIRE(range->kvs.size() == 1);
    CHECK(range->kvs[0].key == "foo");
    CHECK(range->kvs[0].value == "bar");
    CHECK(range->kvs[0].mod_revision == 2);
    CHECK(range->kvs[0].lease == 99);
    auto empty = etcd::parse_range(Json::parse(R"({"header":{"revision":"5"}})"));
    REQUIRE(empty);
    CHECK(empty->kvs.empty());
    CHECK(!etcd::parse_range(Json::parse(R"({"kvs":[]})")));
    CHECK(etcd::parse_txn(Json::parse(R"({"header":{"revision":"4"},"succeeded":true})")).value());
    CHECK(!etcd::parse_txn(Json::parse(R"({"header":{"revision":"4"}})")).value());
    auto grant = etcd::parse_grant(
        Json::parse(R"({"header":{"revision":"1"},"ID":"2324035651616576517","TTL":"3"})"));
    REQUIRE(grant);
    CHECK(grant->first == 2324035651616576517);
    CHECK(grant->second == 3);
    CHECK(etcd::parse_keepalive(
              Json::parse(R"({"result":{"header":{"revision":"1"},"ID":"5","TTL":"3"}})"))
              .value() == 3);
    // A lease etcd does not know: no TTL.
    CHECK(
        etcd::parse_keepalive(Json::parse(R"({"result":{"header":{"revision":"4"},"ID":"12345"}})"))
            .value() == 0);
    auto e =
        etcd::parse_txn(Json::parse(R"({"error":"etcdserver: requested lease not found","code":5,
                                             "message":"etcdserver: requested lease not found"})"));
    REQUIRE(!e);
    CHECK(e.error() == "etcd: etcdserver: requested lease not found");
    auto bad = etcd::parse_range(Json::parse(R"({"header":{"revision":"x2"}})"));
    REQUIRE(!bad);
    CHECK(bad.error().find("revision") != std::string::npos);
}

TEST_CASE("etcd: watch stream lines", "[cluster]") {
    auto created =
        etcd::parse_watch_line(R"({"result":{"header":{"revision":"2"},"created":true}})");
    REQUIRE(created);
    CHECK(created->created);
    CHECK(created->events.empty());
    auto put = etcd::parse_watch_line(
        R"({"result":{"header":{"revision":"2"},"events":[{"kv":{"key":"Zm9v","mod_revision":"2","value":"YmFy"}}]}})");
    REQUIRE(put);
    REQUIRE(put->events.size() == 1);
    CHECK(put->events[0].type == etcd::Event::Type::put); // PUT is left out
    CHECK(put->events[0].kv.value == "bar");
    auto del = etcd::parse_watch_line(
        R"({"result":{"header":{"revision":"3"},"events":[{"type":"DELETE","kv":{"key":"Zm9v","mod_revision":"3"}}]}})");
    REQUIRE(del);
    CHECK(del->revision == 3);
    CHECK(del->events[0].type == etcd::Event::Type::del);
    auto cancel = etcd::parse_watch_line(
        R"({"result":{"header":{"revision":"9"},"canceled":true,"compact_revision":"5"}})");
    REQUIRE(cancel);
    CHECK(cancel->canceled);
    CHECK(!etcd::parse_watch_line("{not json"));
    CHECK(!etcd::parse_watch_line(R"({"error":{"grpc_code":14,"message":"unavailable"}})"));
}

TEST_CASE("etcd: failover order and endpoint lists", "[cluster]") {
    CHECK(etcd::next_endpoint(0, 3) == 1);
    CHECK(etcd::next_endpoint(2, 3) == 0);
    CHECK(etcd::next_endpoint(0, 1) == 0);
    auto eps = etcd::parse_endpoints("http://10.0.0.1:2379,http://10.0.0.2:2379/");
    REQUIRE(eps);
    CHECK(*eps == std::vector<std::string>{"http://10.0.0.1:2379", "http://10.0.0.2:2379"});
    auto bad = etcd::parse_endpoints("http://a:1,,http://b:2");
    REQUIRE(!bad);
    CHECK(bad.exit_code() == 2);
    CHECK(!etcd::parse_endpoints("https://a:1"));
    CHECK(!etcd::parse_endpoints(""));
    // Host and port checked before anything is touched.
    CHECK(etcd::parse_endpoints("http://etcd-1.example:2379,http://[::1]:2379,http://h"));
    auto error = [](std::string_view list) {
        auto r = etcd::parse_endpoints(list);
        return r ? std::string() : r.error() + " (" + std::to_string(r.exit_code()) + ")";
    };
    CHECK(error("http://127.0.0.1:99999") ==
          "--etcd \"http://127.0.0.1:99999\": port \"99999\" is not 1-65535 (2)");
    CHECK(error("http://127.0.0.1:0") ==
          "--etcd \"http://127.0.0.1:0\": port \"0\" is not 1-65535 (2)");
    CHECK(error("http://127.0.0.1:") ==
          "--etcd \"http://127.0.0.1:\": port \"\" is not 1-65535 (2)");
    CHECK(error("http://127.0.0.1:x1") ==
          "--etcd \"http://127.0.0.1:x1\": port \"x1\" is not 1-65535 (2)");
    CHECK(error("http://:2379") == "--etcd \"http://:2379\": no host (2)");
    CHECK(error("http://a:2379/v3") ==
          "--etcd \"http://a:2379/v3\": nothing may follow the host but :PORT (no path) (2)");
    CHECK(error("http://a b:1") == "--etcd \"http://a b:1\": host \"a b\" is not a name or an "
                                   "address (nothing may follow HOST:PORT) (2)");
    CHECK(error("http://[::1") == "--etcd \"http://[::1\": an IPv6 address is written [ADDR] (2)");
}

TEST_CASE("group keys: JSON both ways and a view kept by events", "[cluster]") {
    agent::GroupKeys keys("g1");
    cluster::Roster r;
    r.budget_bps = 1'000'000'000;
    r.members["h1"] = cluster::Member{100'000'000, 2, 0x10001};
    r.members["h2"] = cluster::Member{0, 1, 0x10002};
    auto r2 = agent::parse_roster(agent::roster_json(r));
    REQUIRE(r2);
    CHECK(r2->budget_bps == r.budget_bps);
    CHECK(r2->members == r.members);
    // The orphan span: left out when 0 (rosters written before it), kept.
    CHECK(r2->orphan_after_ns == 0);
    CHECK(agent::roster_json(r).find("orphan") == std::string::npos);
    r.orphan_after_ns = 2'000'000'000;
    r2 = agent::parse_roster(agent::roster_json(r));
    REQUIRE(r2);
    CHECK(r2->orphan_after_ns == 2'000'000'000);
    // An inner class's member (docs/design.md §11.10): how many classes are
    // below it, for group show; left out when 0 (rosters written before).
    CHECK(agent::roster_json(r).find("classes_below") == std::string::npos);
    r.members["h2"].classes_below = 5;
    r2 = agent::parse_roster(agent::roster_json(r));
    REQUIRE(r2);
    CHECK(r2->members.at("h2").classes_below == 5);
    CHECK(r2->members.at("h1").classes_below == 0);
    cluster::Allocation a{4, {{"h1", 600}, {"h2", 400}}};
    auto a2 = agent::parse_alloc(agent::alloc_json(a));
    REQUIRE(a2);
    CHECK(a2->epoch == 4);
    CHECK(a2->rate_bps == a.rate_bps);
    // ack_from (§11.3, R2): left out when empty (every ack asked), kept.
    CHECK(a2->ack_from.empty());
    CHECK(agent::alloc_json(a).find("ack_from") == std::string::npos);
    a.ack_from = {{"h1", 2}, {"h2", 4}};
    a2 = agent::parse_alloc(agent::alloc_json(a));
    REQUIRE(a2);
    CHECK(a2->ack_from == a.ack_from);
    CHECK(a2->ack_needed("h1") == 2);
    CHECK(a2->ack_needed("h3") == 4);
    auto l = agent::parse_live(agent::live_json(cluster::Live{77, 4, 5000}));
    REQUIRE(l);
    CHECK(l->lease == 77);
    CHECK(l->ack_epoch == 4);
    CHECK(l->demand_bps == 5000);
    CHECK(!agent::parse_roster(R"({"budget_bps":1})"));
    CHECK(!agent::parse_live(R"({"lease":"x","ack_epoch":1,"demand_bps":1})"));

    etcd::RangeAnswer range{10,
                            {{keys.roster(), agent::roster_json(r), 3, 1, 0},
                             {keys.alloc(), agent::alloc_json(a), 8, 2, 0},
                             {keys.live("h1"), agent::live_json({77, 4, 5000}), 9, 1, 77},
                             {"/pspxdp/group/g10/roster", "not ours", 5, 1, 0}}};
    auto v = agent::view_from_range(keys, range);
    REQUIRE(v);
    CHECK(v->revision == 10);
    CHECK(v->roster_rev == 3);
    CHECK(v->alloc_rev == 8);
    CHECK(v->live.size() == 1);
    cluster::View view = *v;
    REQUIRE(agent::apply_kv(view, keys, {keys.live("h1"), "", 11, 0, 0}, true));
    CHECK(view.live.empty());
    REQUIRE(agent::apply_kv(view, keys, {keys.alloc(), "", 12, 0, 0}, true));
    CHECK(!view.alloc);
    CHECK(view.alloc_rev == 0);
    // A malformed value leaves the view as it was.
    CHECK(!agent::apply_kv(view, keys, {keys.roster(), "{", 13, 2, 0}, false));
    CHECK(view.roster_rev == 3);
    CHECK(agent::check_name("--group", "rack-1.a_b"));
    CHECK(!agent::check_name("--group", "a/b"));
    CHECK(!agent::check_name("--group", ""));
}

TEST_CASE("rate log: the line format the checker reads", "[cluster]") {
    std::string text = agent::rate_log_line(10, 0) + agent::rate_log_line(20, 500) + "# note\n";
    auto log = agent::parse_rate_log(text);
    REQUIRE(log);
    REQUIRE(log->size() == 2);
    CHECK((*log)[1].time_ns == 20);
    CHECK((*log)[1].rate_bps == 500);
    auto bad = agent::parse_rate_log("10 5\n9 1\n");
    REQUIRE(!bad);
    CHECK(bad.error() == "line 2: time goes back");
    CHECK(!agent::parse_rate_log("10 5x\n"));
    CHECK(!agent::parse_rate_log("10\n"));
}

TEST_CASE("group join: the class the agent's etcd connection goes through", "[cluster]") {
    // DEV's filters as `filter add` words, in evaluation order.
    auto filters = [](std::vector<std::vector<std::string>> lines) {
        std::vector<control::FilterSpec> out;
        for (const auto &w : lines) out.push_back(control::parse_filter(w).value());
        return out;
    };
    const uint8_t src[4] = {10, 0, 0, 1}, etcd_ip[4] = {10, 0, 0, 10};
    const uint32_t group = 0x10001, other = 0x1ffff;
    // No filter: the default class, which may be the group's (refused).
    CHECK(control::class_for_tcp({}, group, 4, src, etcd_ip, 2379) == group);
    // The etcd port sent elsewhere: that class.
    auto f = filters({{"proto", "tcp", "dport", "2379", "classid", "1:ffff"}});
    CHECK(control::class_for_tcp(f, group, 4, src, etcd_ip, 2379) == other);
    CHECK(control::class_for_tcp(f, group, 4, src, etcd_ip, 2380) == group);
    // UDP, another destination, a source port (the kernel's choice): not it.
    f = filters({{"proto", "udp", "dport", "2379", "classid", "1:ffff"},
                 {"dst", "10.0.1.0/24", "classid", "1:ffff"},
                 {"sport", "2379", "classid", "1:ffff"}});
    CHECK(control::class_for_tcp(f, group, 4, src, etcd_ip, 2379) == group);
    // The first that matches wins: a prefix over etcd's address, then a port.
    f = filters({{"pref", "1", "dst", "10.0.0.0/28", "classid", "1:1"},
                 {"pref", "2", "dport", "2379", "classid", "1:ffff"}});
    CHECK(control::class_for_tcp(f, other, 4, src, etcd_ip, 2379) == group);
    f = filters({{"src", "10.0.0.0/31", "dport", "2000-3000", "classid", "1:ffff"}});
    CHECK(control::class_for_tcp(f, group, 4, src, etcd_ip, 2379) == other);
}
