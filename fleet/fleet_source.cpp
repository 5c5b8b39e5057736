// Fleet reports answered by ClickHouse. Contracts: include/ecpi/fleet/fleet_source.h.
#include "ecpi/fleet/fleet_source.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <tuple>

#include "ecpi/fleet/schema.h"

namespace ecpi::fleet {

namespace {

constexpr const char* kPreferredEvent = "cpu-clock";
constexpr const char* kUnknownProcedure = "[unknown]";

// A sample no symbol covers is stored as "[unknown]"; reports name it after
// its image ("[gzip]"), as local reports do (issue 30: one name per meaning).
std::string procedure_name(const std::string& procedure, const std::string& image_path) {
    return procedure == kUnknownProcedure ? analyze::unsymbolized_name({image_path, ""}) : procedure;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
    std::string out;
    for (const auto& item : items) {
        if (!out.empty()) out += sep;
        out += item;
    }
    return out;
}

std::uint64_t to_u64(const std::string& text) {
    std::uint64_t v = 0;
    std::from_chars(text.data(), text.data() + text.size(), v);
    return v;
}

std::string utc_text(std::int64_t t, const char* fmt = "%Y-%m-%d %H:%M:%S UTC") {
    std::time_t tt = static_cast<std::time_t>(t);
    std::tm tm {};
    gmtime_r(&tt, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, fmt, &tm);
    return buf;
}

std::string date_literal(std::int64_t t) { return "toDate(" + sql_string(utc_text(t, "%Y-%m-%d")) + ")"; }

void cpu_clock_first(std::vector<std::string>& events) {
    auto it = std::find(events.begin(), events.end(), kPreferredEvent);
    if (it != events.end()) std::rotate(events.begin(), it, it + 1);
}

std::string image_key(const std::string& path, const std::string& build_id) {
    return build_id.empty() ? path : build_id;
}

// Rows (image, build id, procedure, samples) -> flat rows merged by image
// key, named after the path with the most samples (as flatten_profile does).
std::vector<analyze::FlatRow> merge_by_image_key(const std::vector<std::vector<std::string>>& rows) {
    struct Merged {
        analyze::FlatRow row;
        std::map<std::string, std::uint64_t> per_path;
    };
    std::map<std::pair<std::string, std::string>, Merged> merged;
    for (const auto& r : rows) {
        if (r.size() != 4) continue;
        std::uint64_t n = to_u64(r[3]);
        if (n == 0) continue;
        const std::string procedure = r[2].empty() ? r[2] : procedure_name(r[2], r[0]);
        Merged& m = merged[{image_key(r[0], r[1]), procedure}];
        m.row.procedure = procedure;
        m.row.build_id = r[1];
        m.row.samples += n;
        m.per_path[r[0]] += n;
    }
    std::vector<analyze::FlatRow> out;
    for (auto& [key, m] : merged) {
        std::uint64_t best = 0;
        for (const auto& [path, n] : m.per_path) {
            if (n > best) {
                best = n;
                m.row.image = path;
            }
        }
        out.push_back(std::move(m.row));
    }
    std::sort(out.begin(), out.end(), [](const analyze::FlatRow& a, const analyze::FlatRow& b) {
        if (a.samples != b.samples) return a.samples > b.samples;
        return std::tie(a.procedure, a.image, a.build_id) < std::tie(b.procedure, b.image, b.build_id);
    });
    return out;
}

// The event a report over several profiles uses (the rule of analyze::common_event).
Result<std::string> choose_event(const std::vector<std::pair<std::string, std::vector<std::string>>>& per_source,
                                 const std::optional<std::string>& requested) {
    for (const auto& [label, events] : per_source)
        if (events.empty()) return Error(label + " holds no samples");
    if (requested) {
        for (const auto& [label, events] : per_source)
            if (std::find(events.begin(), events.end(), *requested) == events.end())
                return Error(label + " has no " + *requested + " samples (it has " + join(events, ", ") + ")");
        return *requested;
    }
    std::set<std::string> shared(per_source.front().second.begin(), per_source.front().second.end());
    for (const auto& [label, events] : per_source) {
        std::set<std::string> next;
        for (const auto& e : events)
            if (shared.count(e) != 0) next.insert(e);
        shared = std::move(next);
    }
    if (shared.empty()) {
        std::vector<std::string> parts;
        for (const auto& [label, events] : per_source) parts.push_back(label + " has " + join(events, ", "));
        return Error("cannot compare profiles of different events: " + join(parts, "; "));
    }
    if (shared.count(kPreferredEvent) != 0) return std::string(kPreferredEvent);
    return *shared.begin();
}

Result<void> refuse_pid(const std::optional<std::uint32_t>& pid) {
    if (pid) return Error("--pid reads local databases only: the fleet's rows carry no process ids");
    return ok();
}

}  // namespace

// ---- filters -------------------------------------------------------------------

std::string FleetFilter::describe() const {
    std::vector<std::string> parts;
    parts.push_back(hosts.empty() ? "all hosts" : (hosts.size() == 1 ? "host " : "hosts ") + join(hosts, ", "));
    if (since) parts.push_back("since " + utc_text(*since));
    if (until) parts.push_back("until " + utc_text(*until));
    if (!images.empty()) parts.push_back("images " + join(images, ", "));
    return join(parts, "; ");
}

Result<std::int64_t> parse_time(std::string_view text, std::int64_t now) {
    std::string t(text);
    if (t.empty()) return Error("empty time");
    auto all_digits = [](std::string_view s) {
        return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (t.front() == '@' && all_digits(t.substr(1))) return static_cast<std::int64_t>(to_u64(t.substr(1)));
    if (t.size() >= 2 && all_digits(t.substr(0, t.size() - 1))) {
        std::int64_t n = static_cast<std::int64_t>(to_u64(t.substr(0, t.size() - 1)));
        switch (t.back()) {
            case 's': return now - n;
            case 'm': return now - n * 60;
            case 'h': return now - n * 3600;
            case 'd': return now - n * 86400;
            default: break;
        }
    }
    std::tm tm {};
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
    char sep = 0;
    int fields = std::sscanf(t.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d", &y, &mo, &d, &sep, &h, &mi, &s);
    bool date_only = fields == 3 && t.size() == 10;
    bool with_time = fields >= 6 && (sep == ' ' || sep == 'T');
    if (with_time) {
        std::string tail = t.substr(t.find(':') + 3 + (fields == 7 ? 3 : 0));
        if (!tail.empty() && tail != "Z") with_time = false;
    }
    if (!date_only && !with_time)
        return Error("cannot read time '" + t +
                     "': use YYYY-MM-DD, 'YYYY-MM-DD HH:MM[:SS]' (UTC), @UNIXSECONDS, or an age like 90s, 30m, 6h, 7d");
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return Error("time '" + t + "' is out of range");
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    return static_cast<std::int64_t>(timegm(&tm));
}

Result<FleetFilter> make_filter(const FleetFilterArgs& args, const ClickHouseUrl& url, std::int64_t now) {
    FleetFilter f;
    f.hosts = args.hosts;
    f.images = args.images;
    std::string since = args.since, until = args.until;
    std::vector<std::string> url_hosts, url_images;
    for (const auto& [key, value] : url.params) {
        if (key == "host") url_hosts.push_back(value);
        else if (key == "image") url_images.push_back(value);
        else if (key == "since") since = value;
        else if (key == "until") until = value;
        else return Error("unknown filter '" + key + "' in the ClickHouse URL (filters: host, since, until, image)");
    }
    if (!url_hosts.empty()) f.hosts = url_hosts;
    if (!url_images.empty()) f.images = url_images;
    if (!since.empty()) {
        ECPI_ASSIGN_OR_RETURN(std::int64_t t, parse_time(since, now));
        f.since = t;
    }
    if (!until.empty()) {
        ECPI_ASSIGN_OR_RETURN(std::int64_t t, parse_time(until, now));
        f.until = t;
    }
    if (f.since && f.until && *f.since >= *f.until) return Error("--since must be before --until");
    return f;
}

// ---- the source ----------------------------------------------------------------

Result<FleetSource> FleetSource::open(const std::string& spec, const FleetFilterArgs& args) {
    ECPI_ASSIGN_OR_RETURN(ClickHouseUrl url, parse_clickhouse_url(spec));
    ECPI_ASSIGN_OR_RETURN(FleetFilter filter, make_filter(args, url, static_cast<std::int64_t>(std::time(nullptr))));
    ECPI_ASSIGN_OR_RETURN(Credentials credentials, load_credentials(url, args.password_file));
    ECPI_ASSIGN_OR_RETURN(ClickHouseClient client, ClickHouseClient::connect(url, std::move(credentials)));
    ECPI_RETURN_IF_ERROR(check_schema(client));
    std::string label = url.display();
    if (!url.params.empty()) {
        std::vector<std::string> parts;
        for (const auto& [k, v] : url.params) parts.push_back(k + "=" + v);
        label += "?" + join(parts, "&");
    }
    return FleetSource(std::move(client), std::move(filter), std::move(label));
}

Result<FleetSource> FleetSource::for_host(const std::string& host) const {
    ECPI_ASSIGN_OR_RETURN(ClickHouseClient client, client_.clone());
    FleetFilter f = filter_;
    f.hosts = {host};
    return FleetSource(std::move(client), std::move(f), label_ + " host " + host);
}

std::string FleetSource::table(const char* name) const {
    return sql_identifier(client_.url().database) + "." + name;
}

bool FleetSource::hourly() const {
    return (!filter_.since || *filter_.since % 3600 == 0) && (!filter_.until || *filter_.until % 3600 == 0);
}

std::string FleetSource::procedure_table() const { return table(hourly() ? "procedures_hourly" : "samples"); }

std::string FleetSource::procedure_where() const {
    if (!hourly()) return where(true);
    std::string w = where_hosts_images(true);
    if (filter_.since) w += " AND date >= " + date_literal(*filter_.since - 86400) + " AND hour >= toDateTime(" + std::to_string(*filter_.since) + ")";
    if (filter_.until) w += " AND date <= " + date_literal(*filter_.until + 86400) + " AND hour < toDateTime(" + std::to_string(*filter_.until) + ")";
    return w;
}

std::string FleetSource::where(bool with_image) const {
    std::string w = where_hosts_images(with_image);
    // The date conditions let ClickHouse skip whole partitions; the time ones are exact.
    if (filter_.since) w += " AND date >= " + date_literal(*filter_.since - 86400) + " AND time >= toDateTime(" + std::to_string(*filter_.since) + ")";
    if (filter_.until) w += " AND date <= " + date_literal(*filter_.until + 86400) + " AND time < toDateTime(" + std::to_string(*filter_.until) + ")";
    return w;
}

std::string FleetSource::where_hosts_images(bool with_image) const {
    std::string w = "1";
    if (!filter_.hosts.empty()) {
        std::vector<std::string> quoted;
        for (const auto& h : filter_.hosts) quoted.push_back(sql_string(h));
        w += " AND host IN (" + join(quoted, ", ") + ")";
    }
    if (with_image && !filter_.images.empty()) {
        std::vector<std::string> alternatives;
        for (const auto& image : filter_.images) {
            alternatives.push_back("image = " + sql_string(image));
            if (image.find('/') == std::string::npos) alternatives.push_back("endsWith(image, " + sql_string("/" + image) + ")");
        }
        w += " AND (" + join(alternatives, " OR ") + ")";
    }
    return w;
}

Result<std::vector<std::string>> FleetSource::events() {
    // The event table has one row per batch and event: far fewer to read than
    // the samples, unless an image filter needs the samples themselves.
    const bool by_image = !filter_.images.empty();
    ECPI_ASSIGN_OR_RETURN(auto rows, client_.select("SELECT event FROM " + table(by_image ? "samples" : "events") +
                                                   " WHERE " + where(by_image) +
                                                   " GROUP BY event HAVING sum(samples) > 0 ORDER BY event"));
    std::vector<std::string> out;
    for (const auto& r : rows)
        if (!r.empty()) out.push_back(r[0]);
    cpu_clock_first(out);
    return out;
}

Result<std::vector<std::string>> FleetSource::hosts() {
    ECPI_ASSIGN_OR_RETURN(auto rows, client_.select("SELECT host FROM " + procedure_table() + " WHERE " + procedure_where() +
                                                   " GROUP BY host HAVING sum(samples) > 0 ORDER BY host"));
    std::vector<std::string> out;
    for (const auto& r : rows)
        if (!r.empty()) out.push_back(r[0]);
    return out;
}

Result<void> FleetSource::add_event_meta(analyze::ProfReport& report, const std::string& events_in) {
    ECPI_ASSIGN_OR_RETURN(auto meta, client_.select("SELECT event, max(period), sum(lost), sum(idle) FROM " + table("events") +
                                                   " WHERE " + where(false) + " AND " + events_in + " GROUP BY event"));
    for (const auto& r : meta) {
        if (r.size() != 4) continue;
        report.totals[r[0]].period = to_u64(r[1]);
        report.totals[r[0]].lost = to_u64(r[2]);
        report.totals[r[0]].idle = to_u64(r[3]);  // per CPU is not pushed: CPU numbers differ between hosts
    }
    return ok();
}

Result<analyze::ProfReport> FleetSource::prof_report(const analyze::ProfOptions& options) {
    ECPI_RETURN_IF_ERROR(refuse_pid(options.pid));
    analyze::ProfReport report;
    report.database = label_;
    report.epoch = "fleet (" + filter_.describe() + ")";
    report.by = options.by;
    ECPI_ASSIGN_OR_RETURN(std::vector<std::string> present, events());
    if (options.events.empty()) {
        report.events = present;
    } else {
        for (const auto& e : options.events) {
            if (std::find(present.begin(), present.end(), e) == present.end())
                return Error("event " + e + " has no samples in " + label_ + " for " + filter_.describe() +
                             " (it has: " + (present.empty() ? std::string("no events") : join(present, ", ")) + ")");
            if (std::find(report.events.begin(), report.events.end(), e) == report.events.end()) report.events.push_back(e);
        }
    }
    if (report.events.empty()) return report;
    report.sort_event = report.events.front();
    std::vector<std::string> quoted;
    for (const auto& e : report.events) quoted.push_back(sql_string(e));
    const std::string events_in = "event IN (" + join(quoted, ", ") + ")";
    const bool by_procedure = options.by == analyze::ProfOptions::By::kProcedure;
    const std::string keys = by_procedure ? "image, build_id, procedure" : "image, build_id";

    ECPI_RETURN_IF_ERROR(add_event_meta(report, events_in));
    // Rows and totals: one scan when one event is shown (the common case),
    // otherwise totals, then the rows of the top keys by the sort event.
    const std::string order = by_procedure ? "procedure, image, build_id" : "image, build_id";
    const std::string limit = options.limit != 0 ? " LIMIT " + std::to_string(options.limit) : std::string();
    std::map<std::tuple<std::string, std::string, std::string>, std::map<std::string, std::uint64_t>> grouped;
    const std::size_t key_count = by_procedure ? 3 : 2;
    if (report.events.size() == 1) {
        ECPI_ASSIGN_OR_RETURN(auto rows, client_.select("SELECT " + keys + ", sum(samples) AS n, sumIf(samples, image = "
                                                       "'[unknown]') FROM " + procedure_table() + " WHERE " + procedure_where() +
                                                       " AND " + events_in + " GROUP BY " + keys +
                                                       " WITH TOTALS ORDER BY n DESC, " + order + limit));
        bool totals_next = false;
        for (const auto& r : rows) {
            if (r.size() == 1 && r[0].empty()) {  // WITH TOTALS: a blank line, then the totals row
                totals_next = true;
                continue;
            }
            if (r.size() != key_count + 2) continue;
            if (totals_next) {
                report.totals[report.sort_event].samples = to_u64(r[key_count]);
                report.totals[report.sort_event].unknown = to_u64(r[key_count + 1]);
                continue;
            }
            grouped[{r[0], r[1], by_procedure ? procedure_name(r[2], r[0]) : std::string()}][report.sort_event] += to_u64(r[key_count]);
        }
    } else {
        ECPI_ASSIGN_OR_RETURN(auto totals, client_.select("SELECT event, sum(samples), sumIf(samples, image = '[unknown]') FROM " +
                                                         procedure_table() + " WHERE " + procedure_where() + " AND " + events_in +
                                                         " GROUP BY event"));
        for (const auto& r : totals) {
            if (r.size() != 3) continue;
            report.totals[r[0]].samples = to_u64(r[1]);
            report.totals[r[0]].unknown = to_u64(r[2]);
        }
        std::string sql = "SELECT event, " + keys + ", sum(samples) FROM " + procedure_table() + " WHERE " + procedure_where() +
                          " AND " + events_in;
        if (options.limit != 0) {
            sql += " AND (" + keys + ") IN (SELECT " + keys + " FROM " + procedure_table() + " WHERE " + procedure_where() +
                   " AND event = " + sql_string(report.sort_event) + " GROUP BY " + keys +
                   " ORDER BY sum(samples) DESC, " + order + limit + ")";
        }
        ECPI_ASSIGN_OR_RETURN(auto rows, client_.select(sql + " GROUP BY event, " + keys));
        for (const auto& r : rows) {
            if (r.size() != key_count + 2) continue;
            grouped[{r[1], r[2], by_procedure ? procedure_name(r[3], r[1]) : std::string()}][r[0]] += to_u64(r.back());
        }
    }
    for (auto& [key, samples] : grouped) {
        analyze::ProfRow row;
        std::tie(row.image, row.build_id, row.procedure) = key;
        for (const auto& e : report.events) row.samples[e] = 0;
        for (const auto& [e, n] : samples) row.samples[e] = n;
        report.rows.push_back(std::move(row));
    }
    const std::string& sort_event = report.sort_event;
    std::sort(report.rows.begin(), report.rows.end(), [&](const analyze::ProfRow& a, const analyze::ProfRow& b) {
        std::uint64_t sa = a.samples.at(sort_event), sb = b.samples.at(sort_event);
        if (sa != sb) return sa > sb;
        return std::tie(a.procedure, a.image, a.build_id) < std::tie(b.procedure, b.image, b.build_id);
    });
    std::uint64_t sort_total = report.totals[sort_event].samples, cumulative = 0;
    for (auto& row : report.rows) {
        cumulative += row.samples.at(sort_event);
        row.percent = analyze::percent_of(row.samples.at(sort_event), sort_total);
        row.cumulative_percent = analyze::percent_of(cumulative, sort_total);
    }
    if (options.limit != 0 && report.rows.size() > options.limit) report.rows.resize(options.limit);
    return report;
}

Result<analyze::FlatProfile> FleetSource::flat_profile(analyze::Grouping by, const std::string& event) {
    analyze::FlatProfile flat;
    flat.event = event;
    const bool by_procedure = by == analyze::Grouping::kProcedure;
    ECPI_ASSIGN_OR_RETURN(auto rows, client_.select("SELECT image, build_id, " +
                                                   std::string(by_procedure ? "procedure" : "''") + " AS p, sum(samples) FROM " +
                                                   procedure_table() + " WHERE " + procedure_where() + " AND event = " +
                                                   sql_string(event) + " GROUP BY image, build_id, p"));
    flat.rows = merge_by_image_key(rows);
    for (const auto& row : flat.rows) flat.total += row.samples;
    ECPI_ASSIGN_OR_RETURN(auto meta, client_.select("SELECT max(period) FROM " + table("events") + " WHERE " + where(false) +
                                                   " AND event = " + sql_string(event)));
    if (!meta.empty() && !meta.front().empty()) flat.period = to_u64(meta.front().front());
    return flat;
}

Result<analyze::ExportModel> FleetSource::export_model(const analyze::ExportOptions& options) {
    ECPI_RETURN_IF_ERROR(refuse_pid(options.pid));
    ECPI_ASSIGN_OR_RETURN(std::vector<std::string> present, events());
    if (present.empty()) return Error(label_ + " holds no samples for " + filter_.describe());
    std::vector<std::string> events;
    for (const auto& e : options.events) {
        if (std::find(present.begin(), present.end(), e) == present.end())
            return Error(label_ + " has no " + e + " samples (it has " + join(present, ", ") + ")");
        if (std::find(events.begin(), events.end(), e) == events.end()) events.push_back(e);
    }
    if (events.empty()) events = present;

    analyze::ExportModel model;
    model.database = label_;
    model.epoch = "fleet (" + filter_.describe() + ")";
    std::map<store::ImageId, std::uint32_t> images;
    std::map<std::pair<std::uint32_t, std::string>, std::uint32_t> functions;
    std::map<std::tuple<std::uint32_t, std::string, std::uint64_t>, std::uint32_t> locations;
    auto location = [&](const std::string& path, const std::string& build_id, const std::string& procedure,
                        std::uint64_t address) {
        store::ImageId id{path, build_id};
        auto [img, new_image] = images.try_emplace(id, static_cast<std::uint32_t>(model.images.size()));
        if (new_image) model.images.push_back(id);
        auto [fn, new_function] = functions.try_emplace({img->second, procedure}, static_cast<std::uint32_t>(model.functions.size()));
        if (new_function) {
            analyze::ExportFunction f;
            f.name = procedure_name(procedure, path);
            f.image = img->second;
            f.kernel = path == store::kKernelImage;
            f.symbolized = procedure != kUnknownProcedure;
            model.functions.push_back(std::move(f));
        }
        auto [loc, new_location] = locations.try_emplace({img->second, procedure, address}, static_cast<std::uint32_t>(model.locations.size()));
        if (new_location) model.locations.push_back({img->second, address, {{fn->second, 0}}});
        return loc->second;
    };

    for (const auto& name : events) {
        analyze::ExportEvent ev;
        ev.name = name;
        ECPI_ASSIGN_OR_RETURN(auto meta, client_.select("SELECT max(period), sum(lost) FROM " + table("events") + " WHERE " +
                                                       where(false) + " AND event = " + sql_string(name)));
        if (!meta.empty() && meta.front().size() == 2) {
            ev.period = to_u64(meta.front()[0]);
            ev.lost = to_u64(meta.front()[1]);
        }
        const std::string event_is = " AND event = " + sql_string(name);
        ECPI_ASSIGN_OR_RETURN(auto has_stacks, client_.select("SELECT count() FROM " + table("stack_samples") + " WHERE " +
                                                             where(false) + event_is));
        ev.stacks = !has_stacks.empty() && !has_stacks.front().empty() && has_stacks.front().front() != "0" &&
                    filter_.images.empty();
        if (ev.stacks) {
            // One row per frame of each distinct stack (ARRAY JOIN), counts summed in ClickHouse.
            std::string sql =
                "SELECT stack_id, n, i, b, im, p, a FROM (SELECT stack_id, n, bs, ims, ps, as_ FROM (SELECT stack_id, "
                "sum(samples) AS n FROM " + table("stack_samples") + " WHERE " + where(false) + event_is +
                " GROUP BY stack_id) ANY INNER JOIN (SELECT stack_id, any(build_ids) AS bs, any(images) AS ims, "
                "any(procedures) AS ps, any(addresses) AS as_ FROM " + table("stacks") +
                " GROUP BY stack_id) USING stack_id) ARRAY JOIN bs AS b, ims AS im, ps AS p, as_ AS a, arrayEnumerate(ps) AS i "
                "ORDER BY stack_id, i";
            ECPI_ASSIGN_OR_RETURN(auto rows, client_.select(sql));
            std::string current;
            for (const auto& r : rows) {
                if (r.size() != 7) continue;
                if (r[0] != current || ev.samples.empty()) {
                    current = r[0];
                    analyze::ExportSample s;
                    s.pid = store::kAllProcesses;
                    s.count = to_u64(r[1]);
                    ev.samples.push_back(std::move(s));
                    ev.total += to_u64(r[1]);
                }
                std::uint64_t address = to_u64(r[6]);
                // Caller frames are return addresses: minus 1 falls inside the call (as in analyze/reports/export.cpp).
                if (r[2] != "1" && address > 0) --address;
                ev.samples.back().locations.push_back(location(r[4], r[3], r[5], address));
            }
        } else {
            ECPI_ASSIGN_OR_RETURN(auto rows, client_.select("SELECT image, build_id, procedure, min(address), sum(samples) FROM " +
                                                           table("samples") + " WHERE " + where(true) + event_is +
                                                           " GROUP BY image, build_id, procedure"));
            for (const auto& r : rows) {
                if (r.size() != 5) continue;
                analyze::ExportSample s;
                s.pid = store::kAllProcesses;
                s.count = to_u64(r[4]);
                s.locations.push_back(location(r[0], r[1], r[2], to_u64(r[3])));
                if (r[0] == store::kUnknownImage) ev.unknown += s.count;
                ev.total += s.count;
                ev.samples.push_back(std::move(s));
            }
        }
        model.events.push_back(std::move(ev));
    }
    return model;
}

// ---- multi-profile reports -----------------------------------------------------------

std::string ReportSource::label() const { return fleet ? fleet->label() : local->source.spec; }

Result<ReportSource> open_report_source(const std::string& spec, const FleetFilterArgs& args) {
    ReportSource source;
    if (is_clickhouse_url(spec)) {
        ECPI_ASSIGN_OR_RETURN(FleetSource f, FleetSource::open(spec, args));
        source.fleet.emplace(std::move(f));
    } else {
        ECPI_ASSIGN_OR_RETURN(analyze::ProfileSource resolved, analyze::resolve_source(spec));
        ECPI_ASSIGN_OR_RETURN(analyze::LoadedProfile loaded, analyze::load_profile(resolved));
        source.local.emplace(std::move(loaded));
    }
    return source;
}

namespace {

Result<std::vector<std::string>> events_of(ReportSource& s) {
    if (s.fleet) return s.fleet->events();
    return analyze::events_in(s.local->contents);
}

Result<analyze::FlatProfile> flat_of(ReportSource& s, analyze::Grouping by, const std::string& event,
                                     const std::optional<std::uint32_t>& pid, analyze::SymbolizerPool& symbolizers) {
    if (s.fleet) {
        ECPI_RETURN_IF_ERROR(refuse_pid(pid));
        return s.fleet->flat_profile(by, event);
    }
    return analyze::flatten_profile(s.local->contents, {by, event, pid},
                                    symbolizers.for_database(s.local->source.database));
}

std::pair<std::string, std::string> database_and_epoch(const ReportSource& s) {
    if (s.fleet) return {s.fleet->client().url().display(), "fleet (" + s.fleet->filter().describe() + ")"};
    return {s.local->source.database.string(), s.local->source.epoch};
}

}  // namespace

Result<analyze::StatsReport> fleet_stats_report(std::vector<ReportSource>& sources, const analyze::StatsOptions& options,
                                                analyze::SymbolizerPool& symbolizers) {
    if (sources.empty()) return Error("no profiles given");
    // One fleet alone: one set per host, the statistics across machines.
    std::vector<ReportSource> per_host;
    std::vector<std::string> labels;
    std::vector<ReportSource>* sets = &sources;
    if (sources.size() == 1 && sources.front().fleet) {
        ECPI_ASSIGN_OR_RETURN(std::vector<std::string> hosts, sources.front().fleet->hosts());
        if (hosts.empty()) return Error(sources.front().label() + " holds no samples for " + sources.front().fleet->filter().describe());
        for (const auto& h : hosts) {
            ReportSource s;
            ECPI_ASSIGN_OR_RETURN(FleetSource fs, sources.front().fleet->for_host(h));
            s.fleet.emplace(std::move(fs));
            per_host.push_back(std::move(s));
            labels.push_back(h);
        }
        sets = &per_host;
    } else {
        for (const auto& s : sources) labels.push_back(s.label());
    }
    std::vector<std::pair<std::string, std::vector<std::string>>> events;
    for (std::size_t i = 0; i < sets->size(); ++i) {
        ECPI_ASSIGN_OR_RETURN(std::vector<std::string> e, events_of((*sets)[i]));
        events.emplace_back(labels[i], std::move(e));
    }
    ECPI_ASSIGN_OR_RETURN(std::string event, choose_event(events, options.event));
    std::vector<analyze::FlatProfile> flats;
    std::vector<analyze::StatsSet> stats_sets;
    std::vector<std::string> warnings;
    for (std::size_t i = 0; i < sets->size(); ++i) {
        auto flat = flat_of((*sets)[i], options.by, event, options.pid, symbolizers);
        if (!flat.ok()) return flat.error().with_context(labels[i]);
        if (flat->total == 0) return Error(labels[i] + " has no " + event + " samples");
        for (const auto& w : flat->warnings) warnings.push_back(labels[i] + ": " + w);
        auto [database, epoch] = database_and_epoch((*sets)[i]);
        stats_sets.push_back({labels[i], database, epoch, 0, 0});
        flats.push_back(std::move(*flat));
    }
    analyze::StatsReport report = analyze::compute_stats(std::move(stats_sets), flats, options.by);
    analyze::hide_rows_below(report, options.min_samples);
    if (options.limit != 0 && report.rows.size() > options.limit) report.rows.resize(options.limit);
    report.event = event;
    report.pid = options.pid;
    report.warnings = std::move(warnings);
    return report;
}

Result<analyze::DiffReport> fleet_diff_report(ReportSource& a, ReportSource& b, const analyze::DiffOptions& options,
                                              analyze::SymbolizerPool& symbolizers) {
    if (options.by == analyze::DiffOptions::By::kInstruction)
        return Error("diff --by instruction compares local databases only: the fleet's rows are per procedure and "
                     "offset but carry no code bytes; diff two local databases, or --by procedure");
    analyze::DiffReport report;
    report.by = options.by;
    report.pid = options.pid;
    std::vector<std::pair<std::string, std::vector<std::string>>> events;
    for (ReportSource* s : {&a, &b}) {
        ECPI_ASSIGN_OR_RETURN(std::vector<std::string> e, events_of(*s));
        events.emplace_back(s->label(), std::move(e));
    }
    ECPI_ASSIGN_OR_RETURN(report.event, choose_event(events, options.event));
    analyze::Grouping grouping = options.by == analyze::DiffOptions::By::kImage ? analyze::Grouping::kImage
                                                                                : analyze::Grouping::kProcedure;
    std::vector<analyze::FlatProfile> flats;
    for (auto [source, side] : {std::pair{&a, &report.a}, std::pair{&b, &report.b}}) {
        auto flat = flat_of(*source, grouping, report.event, options.pid, symbolizers);
        if (!flat.ok()) return flat.error().with_context(source->label());
        if (flat->total == 0) return Error(source->label() + " has no " + report.event + " samples");
        for (const auto& w : flat->warnings) report.warnings.push_back(source->label() + ": " + w);
        auto [database, epoch] = database_and_epoch(*source);
        side->label = source->label();
        side->database = database;
        side->epoch = epoch;
        side->total = flat->total;
        side->period = flat->period;
        flats.push_back(std::move(*flat));
    }
    report.rows = analyze::diff_flat(flats[0], flats[1], options.by == analyze::DiffOptions::By::kImage);
    report.rows_total = report.rows.size();
    if (options.limit != 0 && report.rows.size() > options.limit) report.rows.resize(options.limit);
    return report;
}

}  // namespace ecpi::fleet
