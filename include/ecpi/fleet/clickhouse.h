// A small ClickHouse client over its HTTP interface (libcurl): queries whose
// answers come back as TabSeparated text, and inserts of RowBinary bodies,
// gzip-compressed. Credentials come from the environment or a file, never
// from the URL or the command line, and never appear in an error message.
// fleet/ depends on store/ and analyze/ (symbols) and on nothing of the
// kernel or BPF.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ecpi/result.h"

namespace ecpi::fleet {

// A ClickHouse URL as ecpi reads it:
//   http[s]://HOST[:PORT][/DATABASE][?host=H&since=T&until=T&image=I]
// DATABASE defaults to "ecpi". The query part carries report filters
// (fleet_source.h), never ClickHouse settings. `user@` is accepted in the
// authority; a password there is refused (it would end up in process lists
// and shell histories).
struct ClickHouseUrl {
    bool tls = false;
    std::string host;
    std::uint16_t port = 8123;
    std::string database = "ecpi";
    std::string user;                                  // from the URL, "" when absent
    std::multimap<std::string, std::string> params;    // our filters, decoded
    // "http://host:port/database": safe to print (no credentials, no filters).
    std::string display() const;
    // Base of every request: scheme, host and port.
    std::string endpoint() const;
};

// Whether a profile argument names a ClickHouse server rather than a database directory.
bool is_clickhouse_url(std::string_view text);
[[nodiscard]] Result<ClickHouseUrl> parse_clickhouse_url(std::string_view text);

struct Credentials {
    std::string user = "default";
    std::string password;
};

// The user: the URL's, else $ECPI_CLICKHOUSE_USER, else "default".
// The password: `password_file` (first line) when given, else the file named
// by $ECPI_CLICKHOUSE_PASSWORD_FILE, else $ECPI_CLICKHOUSE_PASSWORD, else empty.
[[nodiscard]] Result<Credentials> load_credentials(const ClickHouseUrl& url, const std::string& password_file = {});

struct ClientOptions {
    double connect_timeout_s = 5;
    double timeout_s = 60;                // whole request
    std::string ca_file;                  // https: CA bundle ("" = system's; $ECPI_CLICKHOUSE_CA_FILE)
    // Loaded at the first connect, not at start-up (include/ecpi/shared_library.h);
    // tests name one that is not there.
    std::string curl_library = "libcurl.so.4";
};

struct CurlApi;  // libcurl's functions, once loaded (clickhouse.cpp)

// One server. Not thread-safe; one per thread.
class ClickHouseClient {
public:
    // Loads libcurl (options.curl_library) at the first call; when it cannot,
    // the error names the library and the Debian package to install.
    static Result<ClickHouseClient> connect(const ClickHouseUrl& url, Credentials credentials,
                                            ClientOptions options = {});
    ClickHouseClient(ClickHouseClient&&) noexcept;
    ClickHouseClient& operator=(ClickHouseClient&&) noexcept;
    ~ClickHouseClient();

    // Runs `sql` (POSTed) and returns the response body. A statement without
    // FORMAT answers TabSeparated. `settings` go into the URL (names and
    // values are ours, never user input).
    Result<std::string> execute(const std::string& sql, const std::map<std::string, std::string>& settings = {});
    // SELECT ... FORMAT TabSeparated, split into rows of unescaped fields.
    Result<std::vector<std::vector<std::string>>> select(const std::string& sql);
    // INSERT INTO `table` FORMAT RowBinary with `rows` (RowBinary bytes),
    // sent gzip-compressed. `settings` as for execute().
    Result<void> insert_row_binary(const std::string& table, const std::vector<std::uint8_t>& rows,
                                   const std::map<std::string, std::string>& settings = {});
    // The same with rows already gzip-compressed (the push backlog keeps them so).
    Result<void> insert_gzipped(const std::string& table, const std::vector<std::uint8_t>& gzipped_rows,
                                const std::map<std::string, std::string>& settings = {});

    // Another client to the same server with the same credentials.
    Result<ClickHouseClient> clone() const { return connect(url_, credentials_, options_); }

    const ClickHouseUrl& url() const { return url_; }
    std::uint64_t bytes_sent() const { return bytes_sent_; }

private:
    ClickHouseClient() = default;
    Result<std::string> post(const std::string& query_string, const std::vector<std::uint8_t>& body, bool gzip_body);

    ClickHouseUrl url_;
    Credentials credentials_;
    ClientOptions options_;
    const CurlApi* api_ = nullptr;       // the libcurl curl_ came from
    void* curl_ = nullptr;               // CURL*, kept for connection reuse
    std::uint64_t bytes_sent_ = 0;
};

// SQL literals for values that come from users or profiles.
std::string sql_string(std::string_view text);       // 'text' with \\ \' and control bytes escaped
std::string sql_identifier(std::string_view name);   // `name` (letters, digits and _ only; checked by callers)
bool is_plain_identifier(std::string_view name);

// RowBinary encoders (little-endian integers, LEB128-length strings).
struct RowBinaryWriter {
    std::vector<std::uint8_t> bytes;
    void u8(std::uint8_t v) { bytes.push_back(v); }
    void u16(std::uint16_t v);
    void u32(std::uint32_t v);
    void u64(std::uint64_t v);
    void string(std::string_view s);
    void varint(std::uint64_t v);
};

// gzip (RFC 1952) of `data`, as HTTP Content-Encoding: gzip expects.
[[nodiscard]] Result<std::vector<std::uint8_t>> gzip_compress(const std::vector<std::uint8_t>& data);

// TabSeparated field unescaping (\t \n \\ \' \0 \b \f \r).
std::string tsv_unescape(std::string_view field);

}  // namespace ecpi::fleet
