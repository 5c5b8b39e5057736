// ClickHouse over HTTP with libcurl. Contracts: include/ecpi/fleet/clickhouse.h.
#include "ecpi/fleet/clickhouse.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "ecpi/shared_library.h"

namespace ecpi::fleet {

// libcurl's functions, bound when the first client connects rather than by
// the dynamic loader at start-up: libcurl and the TLS, HTTP/2, LDAP and
// Kerberos libraries it brings cost every ecpi command milliseconds before
// main(), and only commands that reach ClickHouse use them
// (include/ecpi/shared_library.h).
struct CurlApi {
    decltype(&curl_global_init) global_init = nullptr;
    decltype(&curl_version_info) version_info = nullptr;
    decltype(&curl_easy_init) easy_init = nullptr;
    decltype(&curl_easy_cleanup) easy_cleanup = nullptr;
    decltype(&curl_easy_reset) easy_reset = nullptr;
    decltype(&curl_easy_setopt) easy_setopt = nullptr;
    decltype(&curl_easy_perform) easy_perform = nullptr;
    decltype(&curl_easy_getinfo) easy_getinfo = nullptr;
    decltype(&curl_easy_strerror) easy_strerror = nullptr;
    decltype(&curl_slist_append) slist_append = nullptr;
    decltype(&curl_slist_free_all) slist_free_all = nullptr;

    bool has_tls() const {
        const curl_version_info_data* info = version_info(CURLVERSION_NOW);
        return info != nullptr && (info->features & CURL_VERSION_SSL) != 0;
    }
};

namespace {

constexpr const char* kDefaultDatabase = "ecpi";
constexpr std::size_t kMaxPasswordFileBytes = 4096;
constexpr std::size_t kMaxErrorChars = 400;            // of a server's error text

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::optional<std::string> percent_decode(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%') {
            if (i + 2 >= s.size()) return std::nullopt;
            int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            out += static_cast<char>(hi * 16 + lo);
            i += 2;
        } else if (s[i] == '+') {
            out += ' ';
        } else {
            out += s[i];
        }
    }
    return out;
}

std::string percent_encode(std::string_view s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}


Result<CurlApi> bind_curl(const SharedLibrary& lib) {
    CurlApi api;
    ECPI_RETURN_IF_ERROR(lib.bind("curl_global_init", api.global_init));
    ECPI_RETURN_IF_ERROR(lib.bind("curl_version_info", api.version_info));
    ECPI_RETURN_IF_ERROR(lib.bind("curl_easy_init", api.easy_init));
    ECPI_RETURN_IF_ERROR(lib.bind("curl_easy_cleanup", api.easy_cleanup));
    ECPI_RETURN_IF_ERROR(lib.bind("curl_easy_reset", api.easy_reset));
    ECPI_RETURN_IF_ERROR(lib.bind("curl_easy_setopt", api.easy_setopt));
    ECPI_RETURN_IF_ERROR(lib.bind("curl_easy_perform", api.easy_perform));
    ECPI_RETURN_IF_ERROR(lib.bind("curl_easy_getinfo", api.easy_getinfo));
    ECPI_RETURN_IF_ERROR(lib.bind("curl_easy_strerror", api.easy_strerror));
    ECPI_RETURN_IF_ERROR(lib.bind("curl_slist_append", api.slist_append));
    ECPI_RETURN_IF_ERROR(lib.bind("curl_slist_free_all", api.slist_free_all));
    return api;
}

// The functions of library `soname`, loaded and initialised
// (curl_global_init, which is not thread-safe: under LoadedOnce's lock) once
// per process.
Result<const CurlApi*> curl_api(const std::string& soname, const ClickHouseUrl& url) {
    static LoadedOnce<CurlApi> loaded;
    return loaded.get(soname, [&]() -> Result<CurlApi> {
        ECPI_ASSIGN_OR_RETURN(SharedLibrary lib, SharedLibrary::open(soname, "libcurl4", "to reach " + url.display()));
        ECPI_ASSIGN_OR_RETURN(CurlApi api, bind_curl(lib));
        if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return Error("cannot initialize " + soname);
        return api;
    });
}

size_t append_body(char* data, size_t size, size_t n, void* user) {
    auto* out = static_cast<std::string*>(user);
    constexpr std::size_t kMaxResponse = std::size_t{1} << 30;  // a report's answer is far smaller
    if (out->size() + size * n > kMaxResponse) return 0;          // aborts the transfer
    out->append(data, size * n);
    return size * n;
}

// The first line of a server error, bounded and without control bytes.
std::string first_line(const std::string& text) {
    std::string line = text.substr(0, text.find('\n'));
    if (line.size() > kMaxErrorChars) line = line.substr(0, kMaxErrorChars) + "...";
    for (auto& c : line)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    return line;
}

Result<std::string> read_password_file(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return Error::from_errno(errno, "reading the ClickHouse password file " + path);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return Error("the ClickHouse password file " + path + " is not a regular file");
    }
    std::string text(kMaxPasswordFileBytes + 1, '\0');
    ssize_t n = ::read(fd, text.data(), text.size());
    int err = errno;
    ::close(fd);
    if (n < 0) return Error::from_errno(err, "reading the ClickHouse password file " + path);
    if (static_cast<std::size_t>(n) > kMaxPasswordFileBytes)
        return Error("the ClickHouse password file " + path + " is longer than 4096 bytes: it should hold one line");
    text.resize(static_cast<std::size_t>(n));
    text = text.substr(0, text.find('\n'));
    if (!text.empty() && text.back() == '\r') text.pop_back();
    return text;
}

}  // namespace

bool is_clickhouse_url(std::string_view text) {
    return text.starts_with("http://") || text.starts_with("https://");
}

std::string ClickHouseUrl::endpoint() const {
    std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    return std::string(tls ? "https://" : "http://") + h + ":" + std::to_string(port);
}

std::string ClickHouseUrl::display() const { return endpoint() + "/" + database; }

Result<ClickHouseUrl> parse_clickhouse_url(std::string_view text) {
    ClickHouseUrl url;
    std::string_view rest;
    if (text.starts_with("https://")) {
        url.tls = true;
        url.port = 8443;
        rest = text.substr(8);
    } else if (text.starts_with("http://")) {
        rest = text.substr(7);
    } else {
        return Error("not a ClickHouse URL (want http://HOST:PORT[/DATABASE] or https://...)");
    }
    std::size_t end_authority = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, end_authority);
    std::string_view tail = end_authority == std::string_view::npos ? std::string_view() : rest.substr(end_authority);
    if (std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
        std::string_view userinfo = authority.substr(0, at);
        if (userinfo.find(':') != std::string_view::npos)
            return Error("a password in the ClickHouse URL would show in process lists and logs: put it in a file "
                         "(--password-file or ECPI_CLICKHOUSE_PASSWORD_FILE) or in ECPI_CLICKHOUSE_PASSWORD");
        auto user = percent_decode(userinfo);
        if (!user) return Error("bad %-escape in the ClickHouse URL's user name");
        url.user = *user;
        authority = authority.substr(at + 1);
    }
    std::string_view port_text;
    if (authority.starts_with("[")) {
        std::size_t close = authority.find(']');
        if (close == std::string_view::npos) return Error("unclosed [ in the ClickHouse URL's host");
        url.host = std::string(authority.substr(1, close - 1));
        std::string_view after = authority.substr(close + 1);
        if (after.starts_with(":")) port_text = after.substr(1);
        else if (!after.empty()) return Error("unexpected text after ] in the ClickHouse URL");
    } else {
        std::size_t colon = authority.rfind(':');
        url.host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
    }
    if (url.host.empty()) return Error("the ClickHouse URL has no host");
    if (!port_text.empty()) {
        unsigned long port = 0;
        for (char c : port_text) {
            if (!std::isdigit(static_cast<unsigned char>(c)) || port > 65535) return Error("bad port in the ClickHouse URL");
            port = port * 10 + static_cast<unsigned long>(c - '0');
        }
        if (port == 0 || port > 65535) return Error("bad port in the ClickHouse URL");
        url.port = static_cast<std::uint16_t>(port);
    }
    std::string_view path = tail.substr(0, tail.find_first_of("?#"));
    while (path.starts_with("/")) path.remove_prefix(1);
    while (path.ends_with("/")) path.remove_suffix(1);
    url.database = path.empty() ? kDefaultDatabase : std::string(path);
    if (!is_plain_identifier(url.database))
        return Error("the ClickHouse database name '" + url.database + "' must be letters, digits and _");
    if (std::size_t q = tail.find('?'); q != std::string_view::npos) {
        std::string_view query = tail.substr(q + 1);
        query = query.substr(0, query.find('#'));
        while (!query.empty()) {
            std::string_view item = query.substr(0, query.find('&'));
            query = item.size() == query.size() ? std::string_view() : query.substr(item.size() + 1);
            if (item.empty()) continue;
            std::size_t eq = item.find('=');
            auto key = percent_decode(item.substr(0, eq));
            auto value = percent_decode(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
            if (!key || !value) return Error("bad %-escape in the ClickHouse URL's query");
            url.params.emplace(*key, *value);
        }
    }
    return url;
}

Result<Credentials> load_credentials(const ClickHouseUrl& url, const std::string& password_file) {
    Credentials c;
    if (!url.user.empty()) {
        c.user = url.user;
    } else if (const char* u = std::getenv("ECPI_CLICKHOUSE_USER"); u != nullptr && *u != '\0') {
        c.user = u;
    }
    if (!password_file.empty()) {
        ECPI_ASSIGN_OR_RETURN(c.password, read_password_file(password_file));
    } else if (const char* f = std::getenv("ECPI_CLICKHOUSE_PASSWORD_FILE"); f != nullptr && *f != '\0') {
        ECPI_ASSIGN_OR_RETURN(c.password, read_password_file(f));
    } else if (const char* p = std::getenv("ECPI_CLICKHOUSE_PASSWORD"); p != nullptr) {
        c.password = p;
    }
    return c;
}

Result<ClickHouseClient> ClickHouseClient::connect(const ClickHouseUrl& url, Credentials credentials,
                                                   ClientOptions options) {
    ECPI_ASSIGN_OR_RETURN(const CurlApi* api, curl_api(options.curl_library, url));
    if (url.tls && !api->has_tls())
        return Error(url.display() + " asks for TLS (https) but this ecpi's libcurl was built without TLS: "
                     "use http:// on a trusted network or install libcurl with OpenSSL");
    if (options.ca_file.empty())
        if (const char* ca = std::getenv("ECPI_CLICKHOUSE_CA_FILE"); ca != nullptr) options.ca_file = ca;
    ClickHouseClient client;
    client.url_ = url;
    client.credentials_ = std::move(credentials);
    client.options_ = std::move(options);
    client.api_ = api;
    client.curl_ = api->easy_init();
    if (client.curl_ == nullptr) return Error("cannot initialize libcurl");
    return client;
}

ClickHouseClient::ClickHouseClient(ClickHouseClient&& other) noexcept
    : url_(std::move(other.url_)),
      credentials_(std::move(other.credentials_)),
      options_(std::move(other.options_)),
      api_(other.api_),
      curl_(other.curl_),
      bytes_sent_(other.bytes_sent_) {
    other.curl_ = nullptr;
}

ClickHouseClient& ClickHouseClient::operator=(ClickHouseClient&& other) noexcept {
    if (this != &other) {
        if (curl_ != nullptr) api_->easy_cleanup(static_cast<CURL*>(curl_));
        url_ = std::move(other.url_);
        credentials_ = std::move(other.credentials_);
        options_ = std::move(other.options_);
        api_ = other.api_;
        curl_ = other.curl_;
        bytes_sent_ = other.bytes_sent_;
        other.curl_ = nullptr;
    }
    return *this;
}

ClickHouseClient::~ClickHouseClient() {
    if (curl_ != nullptr) api_->easy_cleanup(static_cast<CURL*>(curl_));
}

Result<std::string> ClickHouseClient::post(const std::string& query_string, const std::vector<std::uint8_t>& body,
                                           bool gzip_body) {
    const CurlApi& c = *api_;
    CURL* curl = static_cast<CURL*>(curl_);
    c.easy_reset(curl);
    std::string target = url_.endpoint() + "/?" + query_string;
    std::string response;
    char curl_error[CURL_ERROR_SIZE] = {0};
    // Credentials travel in headers, not in the URL (servers and proxies log URLs).
    struct curl_slist* headers = nullptr;
    std::string user_header = "X-ClickHouse-User: " + credentials_.user;
    std::string key_header = "X-ClickHouse-Key: " + credentials_.password;
    headers = c.slist_append(headers, user_header.c_str());
    headers = c.slist_append(headers, key_header.c_str());
    headers = c.slist_append(headers, "Content-Type: application/octet-stream");
    if (gzip_body) headers = c.slist_append(headers, "Content-Encoding: gzip");
    c.easy_setopt(curl, CURLOPT_URL, target.c_str());
    c.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    c.easy_setopt(curl, CURLOPT_POST, 1L);
    c.easy_setopt(curl, CURLOPT_POSTFIELDS, reinterpret_cast<const char*>(body.data()));
    c.easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    c.easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
    c.easy_setopt(curl, CURLOPT_WRITEDATA, &response);
    c.easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_error);
    c.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    c.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_s * 1000));
    c.easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout_s * 1000));
    c.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    if (url_.tls && !options_.ca_file.empty()) c.easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
    CURLcode rc = c.easy_perform(curl);
    c.slist_free_all(headers);
    if (rc != CURLE_OK) {
        std::string why = curl_error[0] != '\0' ? curl_error : c.easy_strerror(rc);
        if (rc == CURLE_COULDNT_CONNECT)
            return Error("cannot reach ClickHouse at " + url_.display() + ": " + why + " (is the server running?)");
        if (rc == CURLE_OPERATION_TIMEDOUT)
            return Error("ClickHouse at " + url_.display() + " did not answer in time: " + why);
        if (rc == CURLE_SSL_CACERT || rc == CURLE_PEER_FAILED_VERIFICATION)
            return Error("ClickHouse at " + url_.display() + ": TLS certificate not trusted: " + why +
                         " (set ECPI_CLICKHOUSE_CA_FILE to the server's CA)");
        return Error("ClickHouse at " + url_.display() + ": " + why);
    }
    bytes_sent_ += body.size();
    long status = 0;
    c.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        return Error("ClickHouse at " + url_.display() + " answered HTTP " + std::to_string(status) + ": " +
                     first_line(response));
    }
    return response;
}

Result<std::string> ClickHouseClient::execute(const std::string& sql, const std::map<std::string, std::string>& settings) {
    // Statements name their tables with the database (so a missing database
    // is a clear "no schema" rather than an HTTP 404 on every request).
    // No settings by default: a readonly=1 user may not change any, and
    // answers are aggregates, small enough to travel uncompressed.
    std::string qs;
    for (const auto& [k, v] : settings) qs += (qs.empty() ? "" : "&") + percent_encode(k) + "=" + percent_encode(v);
    return post(qs, std::vector<std::uint8_t>(sql.begin(), sql.end()), false);
}

Result<std::vector<std::vector<std::string>>> ClickHouseClient::select(const std::string& sql) {
    ECPI_ASSIGN_OR_RETURN(std::string body, execute(sql + " FORMAT TabSeparated"));
    std::vector<std::vector<std::string>> rows;
    std::size_t pos = 0;
    while (pos < body.size()) {
        std::size_t nl = body.find('\n', pos);
        if (nl == std::string::npos) nl = body.size();
        std::string_view line(body.data() + pos, nl - pos);
        std::vector<std::string> fields;
        std::size_t start = 0;
        while (true) {
            std::size_t tab = line.find('\t', start);
            fields.push_back(tsv_unescape(line.substr(start, tab == std::string_view::npos ? line.npos : tab - start)));
            if (tab == std::string_view::npos) break;
            start = tab + 1;
        }
        rows.push_back(std::move(fields));
        pos = nl + 1;
    }
    return rows;
}

Result<void> ClickHouseClient::insert_row_binary(const std::string& table, const std::vector<std::uint8_t>& rows,
                                                 const std::map<std::string, std::string>& settings) {
    ECPI_ASSIGN_OR_RETURN(std::vector<std::uint8_t> compressed, gzip_compress(rows));
    return insert_gzipped(table, compressed, settings);
}

Result<void> ClickHouseClient::insert_gzipped(const std::string& table, const std::vector<std::uint8_t>& compressed,
                                              const std::map<std::string, std::string>& settings) {
    std::string qs = "query=" + percent_encode("INSERT INTO " + sql_identifier(url_.database) + "." +
                                               sql_identifier(table) + " FORMAT RowBinary");
    for (const auto& [k, v] : settings) qs += "&" + percent_encode(k) + "=" + percent_encode(v);
    auto r = post(qs, compressed, true);
    if (!r.ok()) return r.error().with_context("inserting into " + table);
    return ok();
}

bool is_plain_identifier(std::string_view name) {
    if (name.empty() || name.size() > 64 || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
    for (char c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    return true;
}

std::string sql_identifier(std::string_view name) { return "`" + std::string(name) + "`"; }

std::string sql_string(std::string_view text) {
    static const char* hex = "0123456789abcdef";
    std::string out = "'";
    for (unsigned char c : text) {
        if (c == '\\' || c == '\'') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "'";
}

std::string tsv_unescape(std::string_view field) {
    std::string out;
    out.reserve(field.size());
    for (std::size_t i = 0; i < field.size(); ++i) {
        if (field[i] != '\\' || i + 1 == field.size()) {
            out += field[i];
            continue;
        }
        char c = field[++i];
        switch (c) {
            case 't': out += '\t'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case '0': out += '\0'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            default: out += c; break;  // \\ \' and anything else: the character itself
        }
    }
    return out;
}

void RowBinaryWriter::u16(std::uint16_t v) {
    for (int i = 0; i < 2; ++i) bytes.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void RowBinaryWriter::u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void RowBinaryWriter::u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void RowBinaryWriter::varint(std::uint64_t v) {
    while (v >= 0x80) {
        bytes.push_back(static_cast<std::uint8_t>(v | 0x80));
        v >>= 7;
    }
    bytes.push_back(static_cast<std::uint8_t>(v));
}
void RowBinaryWriter::string(std::string_view s) {
    varint(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
}

Result<std::vector<std::uint8_t>> gzip_compress(const std::vector<std::uint8_t>& data) {
    z_stream z {};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return Error("gzip: cannot initialize zlib");
    std::vector<std::uint8_t> out(deflateBound(&z, static_cast<uLong>(data.size())) + 32);
    z.next_in = const_cast<Bytef*>(data.data());
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    int rc = deflate(&z, Z_FINISH);
    std::size_t produced = out.size() - z.avail_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) return Error("gzip: compression failed");
    out.resize(produced);
    return out;
}

}  // namespace ecpi::fleet
