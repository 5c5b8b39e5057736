// Non-negative least squares over spans. See span_fit.h.
#include "ecpi/analyze/paths/span_fit.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ecpi::analyze {
namespace {

using Matrix = std::vector<std::vector<double>>;

// The paths to fit: the max_paths with the most occurrences inside spans.
std::vector<std::uint32_t> choose_variables(const std::vector<std::uint64_t>& occurrences, std::size_t max_paths) {
    std::vector<std::uint32_t> order;
    for (std::uint32_t p = 0; p < occurrences.size(); p++)
        if (occurrences[p]) order.push_back(p);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return occurrences[a] > occurrences[b]; });
    if (order.size() > max_paths) order.resize(max_paths);
    return order;
}

// Normal equations of the spans' data: G = X'X, b = X'y, with the
// intercept as the last variable; unfitted paths move to y at `fixed` cost.
struct Normal {
    Matrix g;
    std::vector<double> b;
};

// A path's count enters its variable times `weight[p]` (1, or its stamped
// mean where a regular group shares one variable: see regular_group).
Normal normal_equations(const std::vector<SpanCounts>& spans, const std::vector<int>& variable_of,
                        const std::vector<double>& weight, const std::vector<double>& fixed, std::size_t k) {
    Normal n{Matrix(k + 1, std::vector<double>(k + 1, 0.0)), std::vector<double>(k + 1, 0.0)};
    std::vector<std::pair<std::size_t, double>> x;
    for (const auto& s : spans) {
        double y = s.ticks;
        x.assign(1, {k, 1.0});
        for (auto [p, c] : s.counts) {  // a variable may come twice: the products below still add up
            if (variable_of[p] >= 0) x.push_back({std::size_t(variable_of[p]), double(c) * weight[p]});
            else y -= double(c) * fixed[p];
        }
        for (auto [i, xi] : x) {
            n.b[i] += xi * y;
            for (auto [j, xj] : x) n.g[i][j] += xi * xj;
        }
    }
    return n;
}

// Solves A x = r for a symmetric positive definite A (Cholesky); false when
// A is not positive definite.
bool solve_spd(Matrix a, std::vector<double> r, std::vector<double>& x) {
    const std::size_t n = a.size();
    for (std::size_t j = 0; j < n; j++) {
        double d = a[j][j];
        for (std::size_t m = 0; m < j; m++) d -= a[j][m] * a[j][m];
        if (!(d > 0)) return false;
        a[j][j] = std::sqrt(d);
        for (std::size_t i = j + 1; i < n; i++) {
            double v = a[i][j];
            for (std::size_t m = 0; m < j; m++) v -= a[i][m] * a[j][m];
            a[i][j] = v / a[j][j];
        }
    }
    for (std::size_t i = 0; i < n; i++) {
        for (std::size_t m = 0; m < i; m++) r[i] -= a[i][m] * r[m];
        r[i] /= a[i][i];
    }
    for (std::size_t i = n; i-- > 0;) {
        for (std::size_t m = i + 1; m < n; m++) r[i] -= a[m][i] * r[m];
        r[i] /= a[i][i];
    }
    x = std::move(r);
    return true;
}

// The unconstrained solution over the variables in `free` (the others 0).
bool solve_free(const Normal& n, const std::vector<bool>& free, std::vector<double>& out) {
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < free.size(); i++)
        if (free[i]) idx.push_back(i);
    Matrix a(idx.size(), std::vector<double>(idx.size()));
    std::vector<double> r(idx.size()), x;
    for (std::size_t i = 0; i < idx.size(); i++) {
        r[i] = n.b[idx[i]];
        for (std::size_t j = 0; j < idx.size(); j++) a[i][j] = n.g[idx[i]][idx[j]];
    }
    if (!solve_spd(std::move(a), std::move(r), x)) return false;
    out.assign(free.size(), 0.0);
    for (std::size_t i = 0; i < idx.size(); i++) out[idx[i]] = x[i];
    return true;
}

// Lawson and Hanson's active set method on the normal equations from a
// feasible `mu` whose positive variables (and the intercept, the last one,
// never held at zero) are free. `mu` ends feasible.
void nnls_from(const Normal& n, std::vector<double>& mu) {
    const std::size_t k = n.b.size();
    std::vector<bool> free(k, true);
    for (std::size_t i = 0; i + 1 < k; i++)
        if (mu[i] <= 0) free[i] = false, mu[i] = 0;
    for (std::size_t round = 0; round < 4 * k + 8; round++) {
        std::vector<double> s;
        if (!solve_free(n, free, s)) return;
        double alpha = 1;
        for (std::size_t i = 0; i + 1 < k; i++)
            if (free[i] && s[i] <= 0) alpha = std::min(alpha, mu[i] / std::max(mu[i] - s[i], 1e-300));
        for (std::size_t i = 0; i < k; i++) mu[i] += alpha * (s[i] - mu[i]);
        bool dropped = false;
        for (std::size_t i = 0; i + 1 < k; i++)
            if (free[i] && (mu[i] <= 1e-12 || (alpha < 1 && s[i] <= 0))) free[i] = false, mu[i] = 0, dropped = true;
        if (dropped) continue;
        // Optimal when no held variable's gradient points inward.
        std::size_t best = k;
        double best_w = 1e-9 * (1 + std::abs(n.b.back()));
        for (std::size_t i = 0; i + 1 < k; i++) {
            if (free[i]) continue;
            double w = n.b[i];
            for (std::size_t j = 0; j < k; j++) w -= n.g[i][j] * mu[j];
            if (w > best_w) best_w = w, best = i;
        }
        if (best == k) return;
        free[best] = true;
    }
}

// Started from the unconstrained solution's positive part.
void nnls(const Normal& n, std::vector<double>& mu) {
    if (!solve_free(n, std::vector<bool>(n.b.size(), true), mu)) mu.assign(n.b.size(), 0.0);
    nnls_from(n, mu);
}

double residual_variance(const std::vector<SpanCounts>& spans, const std::vector<int>& variable_of, const std::vector<double>& weight,
                         const std::vector<double>& fixed, const std::vector<double>& mu, std::size_t k) {
    double rss = 0;
    for (const auto& s : spans) {
        double e = s.ticks - mu[k];
        for (auto [p, c] : s.counts)
            e -= double(c) * (variable_of[p] >= 0 ? weight[p] * mu[std::size_t(variable_of[p])] : fixed[p]);
        rss += e * e;
    }
    const double dof = double(spans.size()) - double(k + 1);
    return dof > 0 ? rss / dof : 0;
}

// Diagonal of A^-1 (A symmetric positive definite).
std::vector<double> inverse_diagonal(const Matrix& a) {
    std::vector<double> d(a.size(), 0.0), x;
    for (std::size_t i = 0; i < a.size(); i++) {
        std::vector<double> e(a.size(), 0.0);
        e[i] = 1;
        if (solve_spd(a, e, x)) d[i] = x[i];
    }
    return d;
}

// The paths of a regular mix (issue 31): those whose count in a span
// departs from their share of the span's paths far less than in a mix of
// independent turns (under kRegularDispersion of the binomial variance),
// as in a loop that takes its paths in a fixed order. Their counts then
// differ between spans only by where the span's ends cut the order, so
// the spans tell their costs apart only by what their ends hold, and an
// out-of-order core does not show a path's cost on the clock where its
// blocks are logged (the channels program on a Zen 5 VM: a B lookup's
// miss shows 4 turns later, on an A, presumably once later turns fill the
// core's window, after an unfenced clock read at a span's end; the split
// gave A the whole turn's cost and B none; docs/PATHS.md). The spans
// do time the group's total: so the group is fitted as one variable, the
// sum of its paths' counts times their stamped means, and each path gets
// its stamped mean scaled to that total. Paths without a stamped mean
// stay apart. Empty when fewer than two paths are regular.
constexpr double kRegularDispersion = 0.25;

std::vector<std::uint32_t> regular_group(const std::vector<SpanCounts>& spans, const std::vector<std::uint32_t>& vars,
                                         const std::vector<int>& variable_of, const std::vector<double>& prior_means) {
    const std::size_t k = vars.size();
    std::vector<double> share(k, 0.0), deviation(k, 0.0), binomial(k, 0.0);
    std::vector<double> count(k);
    double all = 0;
    for (const auto& s : spans)
        for (auto [p, c] : s.counts)
            if (variable_of[p] >= 0) share[std::size_t(variable_of[p])] += c, all += c;
    if (all <= 0) return {};
    for (auto& f : share) f /= all;
    for (const auto& s : spans) {
        std::fill(count.begin(), count.end(), 0.0);
        double n = 0;
        for (auto [p, c] : s.counts)
            if (variable_of[p] >= 0) count[std::size_t(variable_of[p])] += c, n += c;
        for (std::size_t i = 0; i < k; i++) {
            const double e = count[i] - n * share[i];
            deviation[i] += e * e;
            binomial[i] += n * share[i] * (1 - share[i]);
        }
    }
    std::vector<std::uint32_t> group;
    for (std::size_t i = 0; i < k; i++)
        if (prior_means[vars[i]] > 0 && binomial[i] > 0 && deviation[i] < kRegularDispersion * binomial[i]) group.push_back(vars[i]);
    if (group.size() < 2) group.clear();
    return group;
}

// The spans' RSS at `mu` less their RSS at `ref`, from the undamped
// normal equations: (mu - ref)'G(mu + ref) - 2 b'(mu - ref).
double rss_change(const Normal& data, const std::vector<double>& mu, const std::vector<double>& ref) {
    double change = 0;
    for (std::size_t i = 0; i < mu.size(); i++) {
        double g_sum = 0;
        for (std::size_t j = 0; j < mu.size(); j++) g_sum += data.g[i][j] * (mu[j] + ref[j]);
        change += (mu[i] - ref[i]) * (g_sum - 2 * data.b[i]);
    }
    return change;
}

// How far variable i goes (`up`, else down) over non-negative fits whose
// RSS exceeds ref's by at most `allowance` (span_fit.h), at most `cap`.
// The extreme of a linear function over a convex set: minimize RSS -/+
// lambda mu_i (an NNLS with b_i moved by lambda / 2); mu_i and RSS both
// grow with lambda, so lambda is bisected to where RSS meets the allowance.
// A tiny ridge keeps a null direction solvable; mu_i then runs along it
// until another path reaches 0 (or the cap: a path beside the intercept).
double profile_bound(const Normal& data, const std::vector<double>& ref, std::size_t i, bool up, double allowance,
                     double cap) {
    Normal push = data;
    for (std::size_t j = 0; j < push.b.size(); j++) push.g[j][j] += 1e-9 * (1 + data.g[j][j]);
    std::vector<double> mu = ref;
    double best = ref[i];
    auto feasible_at = [&](double lambda) {
        push.b[i] = data.b[i] + (up ? lambda : -lambda) / 2;
        nnls_from(push, mu);
        if (rss_change(data, mu, ref) > allowance) return false;
        best = up ? std::max(best, mu[i]) : std::min(best, mu[i]);
        return true;
    };
    double low = 0, high = 2 * std::sqrt(allowance * std::max(data.g[i][i], 1e-300));
    for (int doubling = 0; feasible_at(high); doubling++, high *= 2) {
        if (up ? best >= cap : best <= 0) return up ? cap : 0.0;
        if (doubling == 60) return best;
        low = high;
    }
    for (int step = 0; step < 16; step++) {
        const double middle = (low + high) / 2;
        (feasible_at(middle) ? low : high) = middle;
    }
    return up ? std::min(best, cap) : std::max(best, 0.0);
}

// Undetermined: the range's half width is over z x flag_relative_error
// of the larger of its middle and the stamped mean (as `noisy` judges a
// standard error against the mean; the stamped mean keeps a range from 0
// from judging itself), and over z x 2 sigma / sqrt(G_ii), twice what the
// spans would allow if this path's count varied alone (the width no other
// path inflates; twice for the intercept's share). So a path at 0 whose
// spans pin it near 0 stays determined, and one the spans cannot tell from
// others (a null direction: its range runs until another path reaches 0)
// does not. z = sqrt(allowance).
bool undetermined_rule(double low, double high, double prior, double g_ii, double sigma, const SpanFitOptions& o) {
    const double z = std::sqrt(o.allowance), half = (high - low) / 2;
    const double own = o.flag_relative_error * std::max((low + high) / 2, prior);
    const double alone = g_ii > 0 ? 2 * sigma / std::sqrt(g_ii) : 0;
    return half > z * own && half > z * alone;
}

// A variable held at 0 whose spans push it below 0 by more than its
// noise: the gradient of the (damped) squares at the fit, the bound's
// multiplier, over z sigma sqrt(G_ii). Its spans grow shorter as it runs
// more (SQLite's pcache1Fetch: 0 +- 17 ns, stamped 100 ns), which no cost
// explains: the additive model fails there, the profiled range pinned at
// 0 says nothing, and the stamped mean is the only measure of its cost.
bool contradicted(const Normal& n, const std::vector<double>& mu, std::size_t i, double sigma,
                  const SpanFitOptions& o) {
    if (mu[i] > 0 || !(n.g[i][i] > 0)) return false;
    double push = -n.b[i];
    for (std::size_t j = 0; j < mu.size(); j++) push += n.g[i][j] * mu[j];
    return push > std::sqrt(o.allowance) * sigma * std::sqrt(n.g[i][i]);
}

// Each variable's cap: the most any span it is in could pay it, per unit
// of its count (all else at 0).
std::vector<double> variable_caps(const std::vector<SpanCounts>& spans, const std::vector<int>& variable_of,
                                  const std::vector<double>& weight, std::size_t k) {
    std::vector<double> cap(k, 0.0), x(k, 0.0);
    for (const auto& s : spans) {
        for (auto [p, c] : s.counts)
            if (variable_of[p] >= 0) x[std::size_t(variable_of[p])] += double(c) * weight[p];
        for (std::size_t v = 0; v < k; v++)
            if (x[v] > 0) cap[v] = std::max(cap[v], std::max(s.ticks, 0.0) / x[v]), x[v] = 0;
    }
    return cap;
}

// Each variable's range (span_fit.h). Those the linearized error can speak
// for (free of the bound, not noisy, not damped) get mean +- z x standard
// error; the others are profiled.
void variable_ranges(const Normal& data, const std::vector<double>& mu, const std::vector<double>& se,
                     const std::vector<bool>& profile, const std::vector<double>& cap, double variance,
                     const SpanFitOptions& o, std::vector<double>& low, std::vector<double>& high) {
    const std::size_t k = mu.size() - 1;
    const double z = std::sqrt(o.allowance);
    low.assign(k, 0.0), high.assign(k, 0.0);
    for (std::size_t i = 0; i < k; i++) {
        if (!profile[i]) {
            low[i] = std::max(0.0, mu[i] - z * se[i]), high[i] = mu[i] + z * se[i];
            continue;
        }
        const double allowance = o.allowance * variance;
        high[i] = std::max(mu[i], profile_bound(data, mu, i, true, allowance, std::max(cap[i], mu[i])));
        low[i] = mu[i] > 0 ? std::min(mu[i], profile_bound(data, mu, i, false, allowance, 0)) : 0.0;
    }
}

// A regular group's split by the program's pc samples (SampleSplit), where
// they cover each of its paths: the samples' costs, scaled so that the
// group's occurrences cost in total what their stamped means say (the
// fit's damping pulls the group's one variable toward scale 1, that total).
void split_group(const std::vector<std::uint32_t>& group, const std::vector<std::uint64_t>& occurrences,
                 const std::vector<double>& prior_means, const SampleSplit& split, std::vector<double>& weight, SpanFit& fit) {
    if (group.empty() || split.cost.size() != prior_means.size() || split.samples.size() != prior_means.size()) return;
    double stamped = 0, sampled = 0;
    std::uint64_t fewest = ~std::uint64_t{0};
    for (auto p : group) {
        if (!(split.cost[p] >= 0) || split.samples[p] < kMinSplitSamples) return;
        stamped += double(occurrences[p]) * prior_means[p];
        sampled += double(occurrences[p]) * split.cost[p];
        fewest = std::min(fewest, split.samples[p]);
    }
    if (!(stamped > 0) || !(sampled > 0)) return;
    for (auto p : group) weight[p] = split.cost[p] * stamped / sampled;
    fit.split_by_samples = true;
    fit.split_samples = fewest;
}

// One fit over the given spans.
// `with_ranges`: profile each path's range (span_fit.h); only the final
// fit needs it.
SpanFit fit_spans_once(const std::vector<SpanCounts>& spans, const std::vector<double>& prior_means,
                       const SpanFitOptions& options, const SampleSplit& split, std::size_t interrupted, bool with_ranges) {
    const std::size_t paths = prior_means.size();
    SpanFit fit;
    fit.paths.resize(paths);
    fit.spans = spans.size();
    fit.interrupted = interrupted;
    double all_ticks = 0, all_occurrences = 0;
    for (const auto& s : spans) {
        all_ticks += s.ticks;
        for (auto [p, c] : s.counts) fit.paths[p].span_occurrences += c, all_occurrences += c;
    }
    std::vector<std::uint64_t> occurrences(paths);
    for (std::size_t p = 0; p < paths; p++) occurrences[p] = fit.paths[p].span_occurrences;
    const auto vars = choose_variables(occurrences, options.max_paths);
    if (vars.empty() || spans.size() <= vars.size() + 1) return fit;
    // The prior: the stamped mean, or the spans' average cost per occurrence.
    const double average = all_ticks / all_occurrences;
    std::vector<double> prior(paths), fixed(paths);
    for (std::size_t p = 0; p < paths; p++) fixed[p] = prior[p] = prior_means[p] >= 0 ? prior_means[p] : average;
    std::vector<int> variable_of(paths, -1);
    for (std::size_t i = 0; i < vars.size(); i++) variable_of[vars[i]] = int(i);
    // A regular group shares the variable of its first path: the scale of
    // its stamped means; the variables after it move down to fill the gaps.
    const auto group = regular_group(spans, vars, variable_of, prior_means);
    std::vector<double> weight(paths, 1.0);
    std::vector<bool> grouped(paths, false);
    for (auto p : group) grouped[p] = true, weight[p] = prior_means[p];
    split_group(group, occurrences, prior_means, split, weight, fit);
    std::size_t k = 0;
    for (auto p : vars) {
        if (grouped[p] && p != group.front()) continue;
        variable_of[p] = int(k++);
    }
    for (auto p : group) variable_of[p] = variable_of[group.front()];
    fit.regular = group.size();
    Normal n = normal_equations(spans, variable_of, weight, fixed, k);
    const Normal data = n;  // undamped: the spans' own RSS, which the ranges profile
    for (auto p : vars) {  // damped toward the stamped mean; a group toward its scale 1
        if (grouped[p] && p != group.front()) continue;
        const std::size_t i = std::size_t(variable_of[p]);
        n.g[i][i] += options.damping;
        n.b[i] += options.damping * (grouped[p] ? 1.0 : prior[p]);
    }
    n.g[k][k] += 1e-9 * (1 + n.g[k][k]);
    std::vector<double> mu;
    nnls(n, mu);
    const double variance = residual_variance(spans, variable_of, weight, fixed, mu, k);
    const auto inverse = inverse_diagonal(n.g);
    fit.intercept = mu[k];
    fit.residual = std::sqrt(variance);
    // Per variable: its standard error, whether the prior leans on it, and
    // whether its range must be profiled (span_fit.h).
    std::vector<double> se(k), scale(k), low, high;
    std::vector<bool> damped(k), profile(k);
    for (auto v : vars) {
        const std::size_t i = std::size_t(variable_of[v]);
        se[i] = std::sqrt(variance * inverse[i]);
        scale[i] = grouped[v] ? 1.0 : prior[v];
        // The prior's share of the estimate's precision: near 0 where the
        // spans pin the mean down, near 1 along a direction they cannot see.
        damped[i] = options.damping * inverse[i] > 0.05;
        profile[i] = damped[i] || !(mu[i] > 0) || se[i] > options.flag_relative_error * mu[i];
    }
    if (with_ranges)
        variable_ranges(data, mu, se, profile, variable_caps(spans, variable_of, weight, k), variance, options, low, high);
    for (auto v : vars) {
        SpanFitPath& p = fit.paths[v];
        const std::size_t i = std::size_t(variable_of[v]);
        p.fitted = true;
        p.mean = weight[v] * mu[i];
        p.standard_error = weight[v] * se[i];
        p.noisy = !(p.mean > 0) || p.standard_error > options.flag_relative_error * p.mean;
        p.damped = grouped[v] || damped[i];  // a regular group's split is not the spans' (stamps or pc samples)
        p.regular = grouped[v];
        p.low = p.high = p.mean;
        if (!with_ranges) continue;
        p.low = weight[v] * low[i], p.high = weight[v] * high[i];
        p.undetermined = undetermined_rule(low[i], high[i], scale[i], data.g[i][i], fit.residual, options);
        if (!grouped[v] && contradicted(n, mu, i, fit.residual, options)) {
            p.undetermined = true;
            p.low = 0;
            p.high = std::max(p.high, weight[v] * scale[i]);
        }
        fit.undetermined += p.undetermined;
    }
    // Unfitted paths' means: their fixed costs.
    for (std::size_t p = 0; p < paths; p++)
        if (variable_of[p] < 0) fit.paths[p].mean = fixed[p];
    return fit;
}

// Spans over 8x the median time per block entry: interrupted.
std::vector<SpanCounts> uninterrupted(const std::vector<SpanCounts>& spans, std::size_t& dropped) {
    std::vector<double> rates;
    for (const auto& s : spans) rates.push_back(s.ticks / double(std::max<std::uint32_t>(1, s.blocks)));
    if (rates.empty()) return {};
    std::vector<double> sorted = rates;
    std::nth_element(sorted.begin(), sorted.begin() + std::ptrdiff_t(sorted.size() / 2), sorted.end());
    const double limit = 8 * sorted[sorted.size() / 2];
    std::vector<SpanCounts> kept;
    for (std::size_t i = 0; i < spans.size(); i++) {
        if (rates[i] > limit) dropped++;
        else kept.push_back(spans[i]);
    }
    return kept;
}

}  // namespace

SpanFit fit_span_costs(const std::vector<SpanCounts>& all_spans, const std::vector<double>& prior_means,
                       const SpanFitOptions& options, const SampleSplit& split) {
    SpanFit fit;
    std::vector<SpanCounts> spans = uninterrupted(all_spans, fit.interrupted);
    fit = fit_spans_once(spans, prior_means, options, split, fit.interrupted, false);
    // Leave out the spans the fit explains worst, and fit again, with the
    // ranges (the first fit's residual variance is an outlier's).
    std::vector<SpanCounts> kept;
    if (fit.residual > 0) {
        std::vector<double> abs_residuals;
        auto residual_of = [&](const SpanCounts& s) {
            double e = s.ticks - fit.intercept;
            for (auto [p, c] : s.counts) e -= double(c) * fit.paths[p].mean;
            return e;
        };
        for (const auto& s : spans) abs_residuals.push_back(std::abs(residual_of(s)));
        std::nth_element(abs_residuals.begin(), abs_residuals.begin() + std::ptrdiff_t(abs_residuals.size() / 2),
                         abs_residuals.end());
        const double limit = 6 * 1.4826 * abs_residuals[abs_residuals.size() / 2];
        for (const auto& s : spans)
            if (limit <= 0 || std::abs(residual_of(s)) <= limit) kept.push_back(s);
    }
    else kept = spans;
    const std::size_t outliers = spans.size() - kept.size();
    SpanFit again = fit_spans_once(kept, prior_means, options, split, fit.interrupted, true);
    again.outliers = outliers;
    return again;
}

}  // namespace ecpi::analyze
