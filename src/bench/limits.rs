//! The in-flight limit over time: while a target given with
//! `--myplex-status NAME=URL` runs, `myplex bench run` reads that proxy's
//! admin `/status` about once a second and keeps, per thread group, the
//! in-flight limit and its inputs (in flight, completions/s, latency, phase).
//! This module owns the parsing of `/status` into samples, the tiny HTTP GET
//! that fetches it and the sampling loop; the chart lives in `report`.
//! It never talks to a target's MySQL port.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// One group's scheduler state at one moment.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LimitSample {
    /// Seconds since the run started.
    pub t_s: f64,
    /// Target being measured.
    pub target: String,
    /// Its client count.
    pub clients: usize,
    /// `warmup` or `measure`.
    pub phase: &'static str,
    /// Thread group.
    pub group: u64,
    /// `adaptive` or `fixed`.
    pub mode: String,
    /// The limit in force (adaptive limit, else the fixed cap).
    pub limit: u64,
    /// Statements executing now.
    pub in_flight: u64,
    /// Adaptive: completions/s of the last closed interval.
    pub completions_per_s: Option<f64>,
    /// Adaptive: mean statement latency of the last closed interval, ms.
    pub latency_ms: Option<f64>,
    /// Adaptive: typical latency, ms.
    pub typical_ms: Option<f64>,
    /// Adaptive: statements counted as stalled now.
    pub stalled: Option<u64>,
    /// Adaptive: controller phase (`startup`, `cruise`, …).
    pub controller: Option<String>,
    /// The group's statements/s over the last 10 s.
    pub qps_10s: Option<f64>,
}

/// What `/status` says about one group (no time or target yet).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupState {
    group: u64,
    mode: String,
    limit: u64,
    in_flight: u64,
    completions_per_s: Option<f64>,
    latency_ms: Option<f64>,
    typical_ms: Option<f64>,
    stalled: Option<u64>,
    controller: Option<String>,
    qps_10s: Option<f64>,
}

/// Parses a `/status` body into one state per group.
pub fn parse_status(body: &str) -> Result<Vec<GroupState>, String> {
    let v: serde_json::Value = serde_json::from_str(body).map_err(|e| format!("/status: {e}"))?;
    let groups = v["groups"]
        .as_array()
        .ok_or("/status: no \"groups\" array")?;
    groups
        .iter()
        .map(|g| {
            let s = &g["scheduler"];
            let a = &s["adaptive"];
            let adaptive = a.is_object();
            let limit = if adaptive { &a["limit"] } else { &s["cap"] };
            Ok(GroupState {
                group: g["group"].as_u64().ok_or("/status: group without an id")?,
                mode: s["inflight_mode"].as_str().unwrap_or("fixed").to_string(),
                limit: limit.as_u64().ok_or("/status: group without a limit")?,
                in_flight: s["in_flight"].as_u64().unwrap_or(0),
                completions_per_s: a["completions_per_s"].as_f64(),
                latency_ms: a["latency_ms"].as_f64(),
                typical_ms: a["typical_ms"].as_f64(),
                stalled: a["stalled"].as_u64(),
                controller: a["phase"].as_str().map(str::to_string),
                qps_10s: g["last_10s"]["qps"].as_f64(),
            })
        })
        .collect()
}

/// `http://host:port/path` → (`host:port`, `/path`).
pub fn split_url(url: &str) -> Result<(String, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url:?}: expected http://host:port/path"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/status"),
    };
    if authority.is_empty() || !authority.contains(':') {
        return Err(format!("{url:?}: expected http://host:port/path"));
    }
    Ok((authority.to_string(), path.to_string()))
}

/// Splits an HTTP/1.x response into (status code, body).
pub fn split_response(raw: &[u8]) -> Result<(u16, &[u8]), String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("incomplete HTTP response")?;
    let code = std::str::from_utf8(raw.get(9..12).unwrap_or_default())
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or("bad HTTP status line")?;
    Ok((code, &raw[end + 4..]))
}

/// One GET (the admin server answers and closes).
async fn get(authority: &str, path: &str) -> Result<String, String> {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(authority)
            .await
            .map_err(|e| e.to_string())?;
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.map_err(|e| e.to_string())?;
        Ok::<_, String>(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(2), io)
        .await
        .map_err(|_| "timed out".to_string())??;
    match split_response(&raw)? {
        (200, body) => Ok(String::from_utf8_lossy(body).into_owned()),
        (code, _) => Err(format!("HTTP {code}")),
    }
}

/// A `--myplex-status NAME=URL`.
#[derive(Debug, Clone)]
pub struct StatusSource {
    /// Target name it belongs to.
    pub target: String,
    authority: String,
    path: String,
}

impl StatusSource {
    /// Parses `NAME=http://host:port/status`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (target, url) = s.split_once('=').ok_or_else(|| {
            format!("--myplex-status {s:?}: expected NAME=http://host:port/status")
        })?;
        let (authority, path) = split_url(url)?;
        Ok(Self {
            target: target.to_string(),
            authority,
            path,
        })
    }
}

/// Where a running point is, shared between the runner and the sampler.
#[derive(Debug, Default)]
pub struct PointPhase {
    measuring: std::sync::atomic::AtomicBool,
}

impl PointPhase {
    /// Marks the measured window as started.
    pub fn measuring(&self) {
        self.measuring
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the measured window has started.
    pub fn is_measuring(&self) -> bool {
        self.measuring.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn name(&self) -> &'static str {
        if self.is_measuring() {
            "measure"
        } else {
            "warmup"
        }
    }
}

/// Samples `src` once a second into `out` until the task is aborted.
/// Failed reads are counted in `failures`, not fatal: the bench goes on.
pub async fn sample(
    src: StatusSource,
    clients: usize,
    origin: Instant,
    phase: Arc<PointPhase>,
    out: Arc<Mutex<Vec<LimitSample>>>,
    failures: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let t_s = origin.elapsed().as_secs_f64();
        let states = match get(&src.authority, &src.path).await {
            Ok(body) => parse_status(&body),
            Err(e) => Err(e),
        };
        let Ok(states) = states else {
            failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            continue;
        };
        let Ok(mut out) = out.lock() else { return };
        out.extend(states.into_iter().map(|g| LimitSample {
            t_s,
            target: src.target.clone(),
            clients,
            phase: phase.name(),
            group: g.group,
            mode: g.mode,
            limit: g.limit,
            in_flight: g.in_flight,
            completions_per_s: g.completions_per_s,
            latency_ms: g.latency_ms,
            typical_ms: g.typical_ms,
            stalled: g.stalled,
            controller: g.controller,
            qps_10s: g.qps_10s,
        }));
    }
}

/// The series as CSV (empty fields where the proxy did not say).
pub fn csv(samples: &[LimitSample]) -> String {
    use std::fmt::Write as _;
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
    let mut s = String::from(
        "t_s,target,clients,phase,group,mode,limit,in_flight,completions_per_s,latency_ms,typical_ms,stalled,controller,qps_10s\n",
    );
    for x in samples {
        let _ = writeln!(
            s,
            "{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            x.t_s,
            x.target,
            x.clients,
            x.phase,
            x.group,
            x.mode,
            x.limit,
            x.in_flight,
            opt(x.completions_per_s),
            opt(x.latency_ms),
            opt(x.typical_ms),
            x.stalled.map(|v| v.to_string()).unwrap_or_default(),
            x.controller.as_deref().unwrap_or_default(),
            opt(x.qps_10s),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADAPTIVE: &str = r#"{"clients": 3, "groups": [
      {"group": 0, "last_10s": {"qps": 120.5},
       "scheduler": {"in_flight": 3, "cap": 16, "inflight_mode": "adaptive",
         "adaptive": {"limit": 6, "completions_per_s": 950.0, "latency_ms": 2.5,
           "baseline_ms": 1.0, "typical_ms": 2.0, "stalled": 1, "stalled_total": 4,
           "stall_after_ms": 16.0, "shifts": 0, "phase": "cruise"}}},
      {"group": 1, "last_10s": {"qps": 0.0},
       "scheduler": {"in_flight": 0, "cap": 4, "inflight_mode": "fixed", "adaptive": null}}]}"#;

    #[test]
    fn parses_adaptive_and_fixed_groups() {
        let g = parse_status(ADAPTIVE).expect("parse");
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].group, g[0].limit, g[0].in_flight), (0, 6, 3));
        assert_eq!(g[0].mode, "adaptive");
        assert_eq!(g[0].completions_per_s, Some(950.0));
        assert_eq!(g[0].stalled, Some(1));
        assert_eq!(g[0].controller.as_deref(), Some("cruise"));
        assert_eq!(g[0].qps_10s, Some(120.5));
        // Fixed: the limit is the cap, the adaptive inputs are absent.
        assert_eq!((g[1].limit, g[1].mode.as_str()), (4, "fixed"));
        assert_eq!(g[1].latency_ms, None);
    }

    #[test]
    fn rejects_what_is_not_a_status_report() {
        assert!(parse_status("not json").is_err());
        assert!(parse_status("{\"clients\": 1}").is_err());
        assert!(parse_status(r#"{"groups":[{"group":0,"scheduler":{}}]}"#).is_err());
    }

    #[test]
    fn urls_and_responses() {
        assert_eq!(
            split_url("http://127.0.0.1:9090/status").expect("url"),
            ("127.0.0.1:9090".into(), "/status".into())
        );
        assert_eq!(
            split_url("http://h:1").expect("url").1,
            "/status",
            "path defaults to /status"
        );
        assert!(split_url("https://h:1/status").is_err());
        assert!(split_url("http://host/status").is_err(), "port required");
        assert!(StatusSource::parse("http://h:1/status").is_err(), "no name");
        assert_eq!(
            StatusSource::parse("myplex=http://h:1/s")
                .expect("src")
                .target,
            "myplex"
        );
        let (code, body) =
            split_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").expect("resp");
        assert_eq!((code, body), (200, &b"{}"[..]));
        assert_eq!(
            split_response(b"HTTP/1.1 404 x\r\n\r\n").expect("404").0,
            404
        );
        assert!(split_response(b"HTTP/1.1 200 OK\r\n").is_err());
    }

    #[test]
    fn csv_has_one_line_per_sample_and_blank_unknowns() {
        let mk = |group, mode: &str, c| LimitSample {
            t_s: 1.5,
            target: "myplex".into(),
            clients: 8,
            phase: "measure",
            group,
            mode: mode.into(),
            limit: 5,
            in_flight: 2,
            completions_per_s: c,
            latency_ms: None,
            typical_ms: None,
            stalled: None,
            controller: None,
            qps_10s: None,
        };
        let s = csv(&[mk(0, "adaptive", Some(10.0)), mk(1, "fixed", None)]);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[1],
            "1.500,myplex,8,measure,0,adaptive,5,2,10.000,,,,,"
        );
        assert_eq!(
            lines[0].split(',').count(),
            lines[2].split(',').count(),
            "{s}"
        );
    }
}
