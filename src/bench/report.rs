//! Bench output: the console table, CSV, JSON and a self-contained HTML
//! report with TPS-vs-clients and p95-vs-clients charts (inline SVG, no
//! scripts or network needed to view it), and, when the run sampled a
//! proxy's `/status`, a chart of each group's in-flight limit over time.

use std::fmt::Write as _;

use super::limits::LimitSample;
use super::runner::PointResult;

/// Everything a run produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// Workload name.
    pub workload: String,
    /// Tables × rows.
    pub tables: String,
    /// Warm-up and measured seconds.
    pub warmup_s: u64,
    /// Measured seconds per point.
    pub duration_s: u64,
    /// Machine description.
    pub machine: String,
    /// When the run started (UTC, RFC 3339-ish).
    pub started: String,
    /// Points in run order.
    pub points: Vec<PointResult>,
    /// In-flight limit samples (`--myplex-status`); absent when not asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<LimitSample>,
}

fn errors_text(p: &PointResult) -> String {
    let mut parts: Vec<String> = p.errors.iter().map(|(c, n)| format!("{n}x{c}")).collect();
    if p.abandoned > 0 {
        parts.push(format!("{} abandoned", p.abandoned));
    }
    if parts.is_empty() {
        return "0".into();
    }
    parts.join(" ")
}

/// The load generator's CPU per transaction, µs (`-` when unknown).
fn cpu_text(p: &PointResult) -> String {
    p.client_cpu_us_per_trx
        .map_or_else(|| "-".into(), |us| format!("{us:.1}"))
}

/// Purge debt the point added per transaction (`-` when unknown).
fn debt_text(p: &PointResult) -> String {
    p.purge_debt
        .per_transaction(p.transactions)
        .map_or_else(|| "-".into(), |d| format!("{d:+.2}"))
}

/// Header of the console table.
pub fn table_header() -> String {
    format!(
        "{:<10} {:>7} {:>10} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}  errors",
        "target",
        "clients",
        "tps",
        "cpu us/trx",
        "qps",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
        "reconn",
        "debt/trx"
    )
}

/// One row of the console table.
pub fn table_row(p: &PointResult) -> String {
    format!(
        "{:<10} {:>7} {:>10.1} {:>10} {:>11.1} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>8} {:>9}  {}",
        p.target,
        p.clients,
        p.tps,
        cpu_text(p),
        p.qps,
        p.p50_ms,
        p.p95_ms,
        p.p99_ms,
        p.max_ms,
        p.reconnects,
        debt_text(p),
        errors_text(p)
    )
}

/// CSV with one line per point (columns only ever added at the end).
pub fn csv(r: &Report) -> String {
    let mut s = String::from(
        "target,clients,seconds,transactions,tps,qps,p50_ms,p95_ms,p99_ms,max_ms,errors,reconnects,connect_failures,client_cpu_us_per_trx,purge_debt_start,purge_debt_end,purge_wait_s,abandoned\n",
    );
    for p in &r.points {
        let _ = writeln!(
            s,
            "{},{},{:.3},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{},{:.1},{}",
            p.target,
            p.clients,
            p.seconds,
            p.transactions,
            p.tps,
            p.qps,
            p.p50_ms,
            p.p95_ms,
            p.p99_ms,
            p.max_ms,
            p.error_count(),
            p.reconnects,
            p.connect_failures,
            p.client_cpu_us_per_trx
                .map_or_else(String::new, |us| format!("{us:.1}")),
            opt(p.purge_debt.start),
            opt(p.purge_debt.end),
            p.purge_wait_s,
            p.abandoned
        );
    }
    s
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// JSON of the whole report.
pub fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An SVG line chart of `value` against clients (log x axis), one line per target.
fn chart(r: &Report, title: &str, unit: &str, value: impl Fn(&PointResult) -> f64) -> String {
    let (w, h, l, rt, t, b) = (720.0, 360.0, 70.0, 150.0, 40.0, 50.0);
    let mut targets: Vec<&str> = Vec::new();
    for p in &r.points {
        if !targets.contains(&p.target.as_str()) {
            targets.push(&p.target);
        }
    }
    let clients: Vec<f64> = r.points.iter().map(|p| p.clients as f64).collect();
    let (xmin, xmax) = clients
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), c| (a.min(*c), b.max(*c)));
    let ymax = r.points.iter().map(&value).fold(0.0f64, f64::max).max(1e-9) * 1.1;
    let lx = |c: f64| {
        let (a, z) = (xmin.max(1.0).ln(), xmax.max(1.0).ln());
        if z - a < 1e-9 {
            l + (w - l - rt) / 2.0
        } else {
            l + (c.max(1.0).ln() - a) / (z - a) * (w - l - rt)
        }
    };
    let ly = |v: f64| t + (1.0 - v / ymax) * (h - t - b);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\
         <text x=\"{}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>",
        l,
        esc(title)
    );
    // Axes and grid.
    let _ = write!(
        s,
        "<line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/><line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{}\" stroke=\"#333\"/>",
        h - b,
        w - rt,
        h - b,
        h - b
    );
    for i in 0..=4 {
        let v = ymax * f64::from(i) / 4.0;
        let y = ly(v);
        let _ = write!(
            s,
            "<line x1=\"{l}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{:.0}</text>",
            w - rt,
            l - 6.0,
            y + 4.0,
            v
        );
    }
    let mut xs: Vec<usize> = r.points.iter().map(|p| p.clients).collect();
    xs.sort_unstable();
    xs.dedup();
    for c in &xs {
        let x = lx(*c as f64);
        let _ = write!(
            s,
            "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{c}</text>",
            h - b + 18.0
        );
    }
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">clients</text><text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">{}</text>",
        l + (w - l - rt) / 2.0,
        h - 10.0,
        t + (h - t - b) / 2.0,
        t + (h - t - b) / 2.0,
        esc(unit)
    );
    for (i, name) in targets.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts: Vec<(f64, f64)> = r
            .points
            .iter()
            .filter(|p| p.target == *name)
            .map(|p| (lx(p.clients as f64), ly(value(p))))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" ")
        );
        for (x, y) in &pts {
            let _ = write!(
                s,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"{color}\"/>"
            );
        }
        let ly0 = t + 10.0 + i as f64 * 18.0;
        let _ = write!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            w - rt + 15.0,
            ly0 - 10.0,
            w - rt + 32.0,
            ly0,
            esc(name)
        );
    }
    s.push_str("</svg>");
    s
}

/// The TPS chart alone (also written next to the report).
pub fn tps_svg(r: &Report) -> String {
    chart(r, "Throughput", "transactions / s", |p| p.tps)
}

/// The p95 chart alone.
pub fn p95_svg(r: &Report) -> String {
    chart(r, "95th percentile latency", "ms", |p| p.p95_ms)
}

/// Per sampled target, a chart of each group's limit (solid) and in-flight
/// statements (dotted) against seconds since the run started; each client
/// count's stretch is shaded and labelled. Empty when nothing was sampled.
pub fn limits_svg(r: &Report) -> String {
    let mut names: Vec<&str> = Vec::new();
    for x in &r.limits {
        if !names.contains(&x.target.as_str()) {
            names.push(&x.target);
        }
    }
    names
        .iter()
        .map(|n| limit_chart(n, r.limits.iter().filter(|x| x.target == *n).collect()))
        .collect()
}

fn limit_chart(target: &str, xs: Vec<&LimitSample>) -> String {
    let (w, h, l, rt, t, b) = (720.0, 320.0, 60.0, 120.0, 56.0, 44.0);
    let (t0, t1) = xs.iter().fold((f64::MAX, f64::MIN), |(a, z), x| {
        (a.min(x.t_s), z.max(x.t_s))
    });
    let ymax = xs
        .iter()
        .map(|x| x.limit.max(x.in_flight) as f64)
        .fold(1.0f64, f64::max)
        * 1.1;
    let lx = |v: f64| l + (v - t0) / (t1 - t0).max(1e-9) * (w - l - rt);
    let ly = |v: f64| t + (1.0 - v / ymax) * (h - t - b);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\
         <text x=\"{l}\" y=\"20\" font-size=\"15\" font-weight=\"bold\">In-flight limit per group — {}</text>\
         <line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/><line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{}\" stroke=\"#333\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">seconds since the run started (other targets ran in the gaps)</text>",
        esc(target),
        h - b,
        w - rt,
        h - b,
        h - b,
        l + (w - l - rt) / 2.0,
        h - 8.0
    );
    // One stretch per point (consecutive samples of one client count).
    let mut stretches: Vec<(usize, f64, f64)> = Vec::new();
    for x in &xs {
        match stretches.last_mut() {
            Some((c, _, end)) if *c == x.clients => *end = x.t_s,
            _ => stretches.push((x.clients, x.t_s, x.t_s)),
        }
    }
    for (c, a, z) in &stretches {
        let (xa, xz) = (lx(*a), lx(*z));
        let _ = write!(
            s,
            "<rect x=\"{xa:.1}\" y=\"{t}\" width=\"{:.1}\" height=\"{}\" fill=\"#f0f0f0\"/>\
             <text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\">{c} clients</text>",
            (xz - xa).max(1.0),
            h - t - b,
            (xa + xz) / 2.0,
            t - 6.0
        );
    }
    for i in 0..=4 {
        let v = ymax * f64::from(i) / 4.0;
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}</text>",
            l - 6.0,
            ly(v) + 4.0
        );
    }
    for v in [t0, (t0 + t1) / 2.0, t1] {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{v:.0}</text>",
            lx(v),
            h - b + 16.0
        );
    }
    let mut groups: Vec<u64> = xs.iter().map(|x| x.group).collect();
    groups.sort_unstable();
    groups.dedup();
    for (i, g) in groups.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        for (c, a, z) in &stretches {
            let mine = || {
                xs.iter()
                    .filter(|x| x.group == *g && x.clients == *c && x.t_s >= *a && x.t_s <= *z)
            };
            let line = |v: &dyn Fn(&LimitSample) -> u64| {
                mine()
                    .map(|x| format!("{:.1},{:.1}", lx(x.t_s), ly(v(x) as f64)))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let _ = write!(
                s,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\
                 <polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1\" stroke-dasharray=\"2,3\" points=\"{}\"/>",
                line(&|x| x.limit),
                line(&|x| x.in_flight)
            );
        }
        let y = t + 10.0 + i as f64 * 18.0;
        let _ = write!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{color}\"/><text x=\"{}\" y=\"{y}\">group {g}</text>",
            w - rt + 12.0,
            y - 10.0,
            w - rt + 28.0
        );
    }
    let y = t + 10.0 + groups.len() as f64 * 18.0 + 8.0;
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{y}\" font-size=\"11\">solid: limit</text><text x=\"{}\" y=\"{}\" font-size=\"11\">dotted: in flight</text></svg>",
        w - rt + 12.0,
        w - rt + 12.0,
        y + 14.0
    );
    s
}

/// The self-contained HTML report.
pub fn html(r: &Report) -> String {
    let mut rows = String::new();
    for p in &r.points {
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{:.1}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&p.target),
            p.clients,
            p.tps,
            cpu_text(p),
            p.qps,
            p.p50_ms,
            p.p95_ms,
            p.p99_ms,
            p.max_ms,
            esc(&errors_text(p)),
            p.reconnects,
            debt_text(p)
        );
    }
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>myplex bench: {wl}</title>\
         <style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}th{{background:#f4f4f4}}</style></head><body>\
         <h1>myplex bench — {wl}</h1><p>{tables}; warm-up {wu} s, measured {du} s per point; started {st}.<br>{machine}</p>\
         {tps}{p95}{limits}<h2>Points</h2><table><tr><th>target</th><th>clients</th><th>TPS</th><th title=\"CPU time of the load generator itself per transaction\">bench CPU µs/trx</th><th>QPS</th><th>p50 ms</th>\
         <th>p95 ms</th><th>p99 ms</th><th>max ms</th><th>errors</th><th>reconnects</th><th title=\"InnoDB purge debt (history list) added per transaction in the window: work the server deferred\">purge debt/trx</th></tr>{rows}</table></body></html>\n",
        wl = esc(&r.workload),
        tables = esc(&r.tables),
        wu = r.warmup_s,
        du = r.duration_s,
        st = esc(&r.started),
        machine = esc(&r.machine),
        tps = tps_svg(r),
        p95 = p95_svg(r),
        limits = limits_svg(r),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn point(target: &str, clients: usize, tps: f64) -> PointResult {
        PointResult {
            target: target.into(),
            clients,
            seconds: 10.0,
            transactions: (tps * 10.0) as u64,
            tps,
            qps: tps * 20.0,
            p50_ms: 1.0,
            p95_ms: 2.0,
            p99_ms: 3.0,
            max_ms: 4.0,
            errors: BTreeMap::from([(1213, 2)]),
            reconnects: 0,
            connect_failures: 0,
            abandoned: 0,
            client_cpu_us_per_trx: Some(250.0),
            purge_debt: crate::bench::purge::Window {
                start: Some(100),
                end: Some(100 + (tps * 10.0) as u64),
            },
            purge_wait_s: 0.0,
        }
    }

    #[test]
    fn outputs_are_consistent() {
        let r = Report {
            workload: "oltp_read_write".into(),
            tables: "2 × 1000".into(),
            warmup_s: 1,
            duration_s: 10,
            machine: "test <machine>".into(),
            started: "now".into(),
            points: vec![
                point("direct", 8, 100.0),
                point("myplex", 8, 90.0),
                point("direct", 64, 200.0),
            ],
            limits: Vec::new(),
        };
        let c = csv(&r);
        assert_eq!(c.lines().count(), 4);
        assert!(c.contains("myplex,8,10.000,900,90.000"));
        assert!(c.lines().next().is_some_and(|h| {
            h.ends_with(
                ",client_cpu_us_per_trx,purge_debt_start,purge_debt_end,purge_wait_s,abandoned",
            )
        }));
        assert!(
            c.lines()
                .nth(1)
                .is_some_and(|l| l.ends_with(",0,0,250.0,100,1100,0.0,0")),
            "{c}"
        );
        let mut stuck = r.points[0].clone();
        stuck.abandoned = 3;
        assert!(
            table_row(&stuck).ends_with("2x1213 3 abandoned"),
            "{}",
            table_row(&stuck)
        );
        // 1,000 transactions of debt added over 1,000 measured.
        assert!(table_row(&r.points[0]).contains(" +1.00 "));
        assert!(table_header().contains("cpu us/trx"));
        assert!(table_row(&r.points[0]).contains(" 250.0 "));
        let h = html(&r);
        assert!(h.contains("purge debt/trx") && h.contains("<td>+1.00</td>"));
        assert!(h.contains("<svg") && h.contains("polyline"));
        assert!(h.contains("<td>100.0</td><td>250.0</td>"), "next to TPS");
        assert!(h.contains("test &lt;machine&gt;"), "escaped");
        assert!(!h.contains("<script"), "self-contained, no scripts");
        assert!(table_row(&r.points[0]).contains("2x1213"));
        let j: serde_json::Value = serde_json::from_str(&json(&r)).expect("json");
        assert_eq!(j["points"][2]["clients"], 64);
        assert_eq!(j["points"][2]["client_cpu_us_per_trx"], 250.0);
        assert!(j.get("limits").is_none(), "no limits unless sampled");
        assert!(
            !h.contains("In-flight limit"),
            "no limit chart unless sampled"
        );
    }

    fn sample(t_s: f64, clients: usize, group: u64, limit: u64) -> LimitSample {
        LimitSample {
            t_s,
            target: "myplex".into(),
            clients,
            phase: "measure",
            group,
            mode: "adaptive".into(),
            limit,
            in_flight: 1,
            completions_per_s: Some(100.0),
            latency_ms: Some(1.0),
            typical_ms: Some(1.0),
            stalled: Some(0),
            controller: Some("cruise".into()),
            qps_10s: None,
        }
    }

    #[test]
    fn limit_chart_marks_points_and_groups() {
        let mut limits = Vec::new();
        for (i, t) in [1.0, 2.0, 3.0].iter().enumerate() {
            limits.push(sample(*t, 8, 0, 4 + i as u64));
            limits.push(sample(*t, 8, 1, 4));
        }
        for t in [20.0, 21.0] {
            limits.push(sample(t, 64, 0, 12));
            limits.push(sample(t, 64, 1, 9));
        }
        let r = Report {
            workload: "w".into(),
            tables: "t".into(),
            warmup_s: 0,
            duration_s: 1,
            machine: "m".into(),
            started: "s".into(),
            points: vec![point("myplex", 8, 1.0), point("myplex", 64, 1.0)],
            limits,
        };
        let svg = limits_svg(&r);
        assert_eq!(
            svg.matches("<svg").count(),
            1,
            "one chart per sampled target"
        );
        assert!(svg.contains("8 clients") && svg.contains("64 clients"));
        assert!(svg.contains("group 0") && svg.contains("group 1"));
        // 2 groups × 2 points × (limit + in-flight) lines: broken between points.
        assert_eq!(svg.matches("<polyline").count(), 8);
        assert!(html(&r).contains("In-flight limit per group"));
        let j: serde_json::Value = serde_json::from_str(&json(&r)).expect("json");
        assert_eq!(j["limits"].as_array().map(Vec::len), Some(10));
        assert_eq!(j["limits"][0]["limit"], 4);
    }
}
