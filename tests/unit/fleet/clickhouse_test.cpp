#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "ecpi/fleet/clickhouse.h"
#include "ecpi/fleet/fleet_source.h"
#include "ecpi/fleet/schema.h"

using namespace ecpi::fleet;

TEST_CASE("ClickHouse URLs: scheme, host, port, database and filters") {
    auto u = parse_clickhouse_url("http://ch.example:8124/prof?host=web1&host=web%202&since=7d");
    REQUIRE(u.ok());
    CHECK_FALSE(u->tls);
    CHECK(u->host == "ch.example");
    CHECK(u->port == 8124);
    CHECK(u->database == "prof");
    CHECK(u->params.count("host") == 2);
    CHECK(u->params.find("since")->second == "7d");
    CHECK(u->display() == "http://ch.example:8124/prof");

    auto d = parse_clickhouse_url("https://[::1]");
    REQUIRE(d.ok());
    CHECK(d->tls);
    CHECK(d->port == 8443);
    CHECK(d->database == "ecpi");
    CHECK(d->endpoint() == "https://[::1]:8443");

    auto user = parse_clickhouse_url("http://reader@h:1/");
    REQUIRE(user.ok());
    CHECK(user->user == "reader");
    CHECK(user->database == "ecpi");
}

TEST_CASE("a password in the URL is refused and not repeated") {
    auto u = parse_clickhouse_url("http://ecpi:s3cret@h:8123/");
    REQUIRE_FALSE(u.ok());
    CHECK(u.error().message().find("s3cret") == std::string::npos);
    CHECK(u.error().message().find("password-file") != std::string::npos);
    CHECK_FALSE(parse_clickhouse_url("http://h:99999/").ok());
    CHECK_FALSE(parse_clickhouse_url("http://h/bad-db").ok());
    CHECK_FALSE(parse_clickhouse_url("ftp://h/").ok());
    CHECK_FALSE(parse_clickhouse_url("http://:8123/").ok());
    CHECK_FALSE(parse_clickhouse_url("http://h/?host=%zz").ok());
    CHECK(is_clickhouse_url("https://x"));
    CHECK_FALSE(is_clickhouse_url("ecpi.db"));
}

TEST_CASE("credentials come from a file or the environment") {
    auto url = parse_clickhouse_url("http://h/").value();
    std::string dir = std::filesystem::temp_directory_path() / ("ecpi-cred-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        std::ofstream f(dir + "/pw");
        f << "from-file\nsecond line\n";
    }
    ::unsetenv("ECPI_CLICKHOUSE_PASSWORD_FILE");
    ::setenv("ECPI_CLICKHOUSE_PASSWORD", "from-env", 1);
    ::setenv("ECPI_CLICKHOUSE_USER", "writer", 1);
    auto env = load_credentials(url);
    REQUIRE(env.ok());
    CHECK(env->user == "writer");
    CHECK(env->password == "from-env");
    auto file = load_credentials(url, dir + "/pw");
    REQUIRE(file.ok());
    CHECK(file->password == "from-file");
    ::setenv("ECPI_CLICKHOUSE_PASSWORD_FILE", (dir + "/pw").c_str(), 1);
    CHECK(load_credentials(url)->password == "from-file");
    CHECK_FALSE(load_credentials(url, dir).ok());  // a directory is not a password file
    CHECK_FALSE(load_credentials(url, dir + "/missing").ok());
    ::unsetenv("ECPI_CLICKHOUSE_PASSWORD_FILE");
    ::unsetenv("ECPI_CLICKHOUSE_PASSWORD");
    ::unsetenv("ECPI_CLICKHOUSE_USER");
    std::filesystem::remove_all(dir);
}

// libcurl is loaded at the first connect, not at start-up
// (include/ecpi/shared_library.h): a library that is missing, or lacks a
// function ecpi calls, is one line naming it and the package to install.
TEST_CASE("a libcurl that cannot be loaded is named with its package") {
    auto url = parse_clickhouse_url("http://127.0.0.1:1/").value();
    auto refused = [&](const std::string& library) {
        ClientOptions options;
        options.curl_library = library;
        auto client = ClickHouseClient::connect(url, Credentials{}, options);
        REQUIRE_FALSE(client.ok());
        CHECK(client.error().errno_value() == ELIBACC);
        CHECK(client.error().message().find('\n') == std::string::npos);
        CHECK_MESSAGE(client.error().message().ends_with("; install the Debian package libcurl4"),
                      client.error().message());
        return client.error().message();
    };
    const std::string missing = refused("libecpi-no-such-curl.so.4");
    CHECK_MESSAGE(missing.starts_with("cannot load libecpi-no-such-curl.so.4 to reach http://127.0.0.1:1/ecpi ("),
                  missing);
    const std::string other = refused("libz.so.1");
    CHECK_MESSAGE(other.starts_with("libz.so.1 has no function curl_"), other);
}

TEST_CASE("the loaded libcurl reaches the network: a closed port is said as such") {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    ::close(fd);  // bound, then closed: nothing listens there
    const std::string where = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    auto client = ClickHouseClient::connect(parse_clickhouse_url(where + "/").value(), Credentials{});
    REQUIRE_MESSAGE(client.ok(), client.error().message());
    auto answer = client->execute("SELECT 1");
    REQUIRE_FALSE(answer.ok());
    CHECK_MESSAGE(answer.error().message().starts_with("cannot reach ClickHouse at " + where + "/ecpi: "),
                  answer.error().message());
}

TEST_CASE("SQL strings and TSV fields round-trip hostile names") {
    CHECK(sql_string("a'b\\c") == "'a\\'b\\\\c'");
    CHECK(sql_string(std::string("x\n\ty\0", 5)) == "'x\\x0a\\x09y\\x00'");
    CHECK(tsv_unescape("a\\tb\\nc\\\\d\\'e") == "a\tb\nc\\d'e");
    CHECK(is_plain_identifier("ecpi_2"));
    CHECK_FALSE(is_plain_identifier("2x"));
    CHECK_FALSE(is_plain_identifier("a`b"));
}

TEST_CASE("RowBinary encodes little-endian integers and LEB128 strings") {
    RowBinaryWriter w;
    w.u16(0x0102);
    w.u32(0x03040506);
    w.u64(1);
    w.string(std::string(200, 'x'));
    CHECK(w.bytes[0] == 0x02);
    CHECK(w.bytes[1] == 0x01);
    CHECK(w.bytes[2] == 0x06);
    CHECK(w.bytes[6] == 1);
    CHECK(w.bytes[14] == 0xc8);  // 200 = 0xc8 0x01
    CHECK(w.bytes[15] == 0x01);
    CHECK(w.bytes.size() == 2 + 4 + 8 + 2 + 200);
    auto gz = gzip_compress(w.bytes);
    REQUIRE(gz.ok());
    CHECK((*gz)[0] == 0x1f);
    CHECK((*gz)[1] == 0x8b);
}

TEST_CASE("time filters: dates, times, unix seconds and ages") {
    const std::int64_t now = 1764000000;  // 2025-11-24 16:00:00 UTC
    CHECK(parse_time("2025-11-24", now).value() == 1763942400);
    CHECK(parse_time("2025-11-24 16:00", now).value() == now);
    CHECK(parse_time("2025-11-24T16:00:00Z", now).value() == now);
    CHECK(parse_time("@1700000000", now).value() == 1700000000);
    CHECK(parse_time("90s", now).value() == now - 90);
    CHECK(parse_time("6h", now).value() == now - 6 * 3600);
    CHECK(parse_time("7d", now).value() == now - 7 * 86400);
    CHECK_FALSE(parse_time("yesterday", now).ok());
    CHECK_FALSE(parse_time("2025-13-01", now).ok());
    CHECK_FALSE(parse_time("2025-11-24 16:00 CET", now).ok());
}

TEST_CASE("URL filters replace the command line's, field by field") {
    FleetFilterArgs args;
    args.hosts = {"a"};
    args.since = "@100";
    auto url = parse_clickhouse_url("http://h/?host=b&until=@200").value();
    auto f = make_filter(args, url, 1000);
    REQUIRE(f.ok());
    CHECK(f->hosts == std::vector<std::string>{"b"});
    CHECK(*f->since == 100);
    CHECK(*f->until == 200);
    CHECK_FALSE(make_filter(args, parse_clickhouse_url("http://h/?until=@50").value(), 1000).ok());
    CHECK_FALSE(make_filter(args, parse_clickhouse_url("http://h/?user=x").value(), 1000).ok());
}

TEST_CASE("the schema: MergeTree locally, Distributed over a cluster, versioned") {
    auto local = schema_statements("ecpi", {});
    CHECK(local.front() == "CREATE DATABASE IF NOT EXISTS `ecpi`");
    bool samples = false;
    for (const auto& s : local) {
        if (s.find(".samples (") != std::string::npos) {
            samples = true;
            CHECK(s.find("MergeTree()") != std::string::npos);
            CHECK(s.find("batch UInt64") != std::string::npos);
        }
    }
    CHECK(samples);
    CHECK(local.back().find("schema_version") != std::string::npos);
    auto dist = schema_statements("ecpi_all", {"fleet2", "ecpi"});
    for (const auto& s : dist)
        if (s.find(".samples (") != std::string::npos)
            CHECK(s.find("Distributed(`fleet2`, `ecpi`, samples, cityHash64(host))") != std::string::npos);
}
