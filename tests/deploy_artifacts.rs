//! The shipped Grafana dashboard and Prometheus config refer only to metrics
//! that exist in the catalogue.

#[test]
fn dashboard_uses_only_catalogued_metrics() {
    let text = include_str!("../deploy/grafana/myplex-dashboard.json");
    let v: serde_json::Value = serde_json::from_str(text).expect("dashboard is JSON");
    let mut exprs = 0;
    for panel in v["panels"].as_array().expect("panels") {
        for t in panel["targets"].as_array().expect("targets") {
            let expr = t["expr"].as_str().expect("expr");
            exprs += 1;
            let mut found = false;
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("myplex_") {
                    found = true;
                    let base = word
                        .trim_end_matches("_bucket")
                        .trim_end_matches("_sum")
                        .trim_end_matches("_count");
                    assert!(
                        myplex::metrics::names::ALL.contains(&base),
                        "dashboard uses unknown metric {word}"
                    );
                }
            }
            assert!(found, "panel query without a myplex metric: {expr}");
        }
    }
    assert!(exprs >= 14);
    let prom = include_str!("../deploy/prometheus/prometheus.yml");
    assert!(prom.contains("metrics_path: /metrics"));
    assert!(
        prom.contains("127.0.0.1:6034"),
        "scrapes the default admin_listen"
    );
}
