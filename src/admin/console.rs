//! The admin SQL console: `SHOW MYPLEX GROUPS | POOLS | CLIENTS | STATS |
//! USERS | SERVERS | DIGESTS …`, `RESET MYPLEX DIGESTS` (see `super::digests`) and
//! `RELOAD MYPLEX` (re-read the configuration, see `crate::reload`)
//! answered on the MySQL port for users with `admin = true`, as text result
//! sets any MySQL client prints. Answered without a backend or a queue.

use bytes::{BufMut, BytesMut};

use crate::frontend::Shared;
use crate::protocol::lenenc::put_lenenc_bytes;
use crate::protocol::packets::{EOF_HEADER, OkPacket, eof_payload};
use crate::wire::PacketIo;

/// A console command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Thread groups and their scheduler state.
    Groups,
    /// Backend connections per group and credential pool.
    Pools,
    /// Connected clients.
    Clients,
    /// Throughput and latency percentiles.
    Stats,
    /// Per-user figures: clients, backends, share, latency.
    Users,
    /// The servers behind `backend.address`: role, health, last error.
    Servers,
    /// Reload the configuration.
    Reload,
    /// The digest table, ordered and limited.
    Digests(super::digests::Listing),
    /// Empty the digest table.
    ResetDigests,
    /// A console command that cannot be read: answered with a syntax error
    /// naming what is expected.
    Invalid(&'static str),
}

/// Recognizes `SHOW MYPLEX …`.
pub fn parse(sql: &[u8]) -> Option<Command> {
    let text = std::str::from_utf8(sql).ok()?;
    let words: Vec<String> = text
        .trim()
        .trim_end_matches(';')
        .split_ascii_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    match words
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["show", "myplex", "groups"] => Some(Command::Groups),
        ["show", "myplex", "pools"] => Some(Command::Pools),
        ["show", "myplex", "clients"] => Some(Command::Clients),
        ["show", "myplex", "stats"] => Some(Command::Stats),
        ["show", "myplex", "users"] => Some(Command::Users),
        ["show", "myplex", "servers"] => Some(Command::Servers),
        ["reload", "myplex"] | ["reload", "config"] => Some(Command::Reload),
        ["show", "myplex", "digests", rest @ ..] => Some(
            super::digests::parse_listing(rest).map_or_else(Command::Invalid, Command::Digests),
        ),
        ["reset", "myplex", "digests"] => Some(Command::ResetDigests),
        _ => None,
    }
}

/// A text result set.
#[derive(Debug, Default)]
pub struct ResultSet {
    /// Column names.
    pub columns: Vec<&'static str>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
}

/// Builds the result of `cmd`.
pub fn run(cmd: Command, shared: &Shared) -> ResultSet {
    match cmd {
        Command::Groups => groups(shared),
        Command::Pools => pools(shared),
        Command::Clients => clients(shared),
        Command::Stats => stats(shared),
        Command::Users => users(shared),
        Command::Servers => servers(shared),
        Command::Reload => reload(shared),
        Command::Digests(l) => super::digests::show(shared, l),
        Command::ResetDigests => super::digests::reset(shared),
        Command::Invalid(why) => ResultSet {
            columns: vec!["error"],
            rows: vec![vec![why.into()]],
        },
    }
}

/// `RELOAD MYPLEX`: one row, `result` (`reloaded` / `refused` / `failed`)
/// and `detail` (the keys changed, or why nothing was).
fn reload(shared: &Shared) -> ResultSet {
    let (result, detail) = match crate::reload::reload(shared) {
        Ok(r) => ("reloaded", r.to_string()),
        Err(e @ crate::reload::ReloadError::Refused(_)) => ("refused", e.to_string()),
        Err(e) => ("failed", e.to_string()),
    };
    ResultSet {
        columns: vec!["result", "detail"],
        rows: vec![vec![result.into(), detail]],
    }
}

fn groups(shared: &Shared) -> ResultSet {
    let mut rs = ResultSet {
        columns: vec![
            "group",
            "in_flight",
            "cap",
            "stall_extra",
            "stalled",
            "completions_s",
            "latency_ms",
            "baseline_ms",
            "phase",
            "queue_high",
            "queue_low",
            "dispatched",
            "stalls",
            "kickups",
            "oldest_wait_ms",
            "backends",
            "backends_base",
            "backends_elastic",
            "backends_ceiling",
        ],
        rows: Vec::new(),
    };
    for g in &shared.pool.groups {
        let s = g.snapshot();
        let a = s.adaptive;
        let oldest = g.oldest_wait().map_or(0, |d| d.as_millis());
        rs.rows.push(vec![
            g.id.to_string(),
            s.in_flight.to_string(),
            s.cap.to_string(),
            s.extra.to_string(),
            a.map_or(0, |a| a.stalled).to_string(),
            a.map_or(String::new(), |a| format!("{:.1}", a.completions_per_s)),
            a.map_or(String::new(), |a| format!("{:.2}", a.latency_ms)),
            a.map_or(String::new(), |a| format!("{:.2}", a.baseline_ms)),
            a.map_or("fixed", |a| a.phase.as_str()).to_string(),
            s.high.to_string(),
            s.low.to_string(),
            s.counters.dispatched.to_string(),
            s.counters.stalls.to_string(),
            s.counters.kickups.to_string(),
            oldest.to_string(),
            s.owned.to_string(),
            s.max_owned.to_string(),
            s.elastic.to_string(),
            s.ceiling.to_string(),
        ]);
    }
    rs
}

fn pools(shared: &Shared) -> ResultSet {
    let mut rs = ResultSet {
        columns: vec![
            "group",
            "backend",
            "backend_users",
            "owned",
            "max",
            "idle",
            "busy",
            "pinned",
            "evictions",
        ],
        rows: Vec::new(),
    };
    let users = shared.pool.backend_users();
    for g in &shared.pool.groups {
        let s = g.snapshot();
        let (idle, busy, pinned) = super::backend_states(&s);
        rs.rows.push(vec![
            g.id.to_string(),
            shared.config.load().backend.address.clone(),
            users.join(","),
            s.owned.to_string(),
            s.max_owned.to_string(),
            idle.to_string(),
            busy.to_string(),
            pinned.to_string(),
            s.counters.evictions.to_string(),
        ]);
    }
    rs
}

/// `SHOW MYPLEX SERVERS`: one row per server in `backend.address`.
fn servers(shared: &Shared) -> ResultSet {
    let mut rs = ResultSet {
        columns: vec![
            "server",
            "role",
            "up",
            "read_only",
            "failures",
            "backends",
            "last_checked_s",
            "last_error",
            "gtid",
            "replication",
            "lag_s",
            "reads",
        ],
        rows: Vec::new(),
    };
    let r = shared.pool.servers.report();
    let owned: usize = shared.pool.groups.iter().map(|g| g.snapshot().owned).sum();
    let replicas = shared.pool.servers.replica_backends();
    let on_replicas: usize = replicas.iter().sum();
    let opt = |v: Option<String>| v.unwrap_or_default();
    for (i, s) in r.servers.into_iter().enumerate() {
        let backends = match s.role {
            "primary" => owned.saturating_sub(on_replicas),
            _ => replicas.get(i).copied().unwrap_or(0),
        };
        let reads = s.reads;
        rs.rows.push(vec![
            s.address,
            s.role.into(),
            u8::from(s.up).to_string(),
            opt(s.read_only.map(|v| u8::from(v).to_string())),
            s.failures.to_string(),
            backends.to_string(),
            opt(s.checked_s_ago.map(|t| format!("{t:.1}"))),
            opt(s.last_error),
            opt(s.replication.as_ref().and_then(|x| x.gtid.clone())),
            replication_state(s.replication.as_ref()),
            opt(s
                .replication
                .as_ref()
                .and_then(|x| x.replica.as_ref())
                .and_then(|x| x.lag_s)
                .map(|v| v.to_string())),
            reads.to_string(),
        ]);
    }
    rs
}

/// A server's replication in one word or phrase: `running from host:port`,
/// `stopped (io No, sql Yes: error)`, `none` (not a replica), `unreadable:
/// why`, or empty when not read (one server).
fn replication_state(r: Option<&crate::pool::servers::Replication>) -> String {
    let Some(r) = r else {
        return String::new();
    };
    if let Some(why) = &r.unreadable {
        return format!("unreadable: {why}");
    }
    match &r.replica {
        None => "none".into(),
        Some(x) if x.running() => format!("running from {}", x.source),
        Some(x) => {
            let error = x
                .last_error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            format!(
                "stopped from {} (io {}, sql {}{error})",
                x.source, x.io_running, x.sql_running
            )
        }
    }
}

fn clients(shared: &Shared) -> ResultSet {
    let mut rs = ResultSet {
        columns: vec![
            "id",
            "user",
            "group",
            "state",
            "pinned_by",
            "backend_thread",
        ],
        rows: Vec::new(),
    };
    let Ok(sessions) = shared.sessions.lock() else {
        return rs;
    };
    let mut ids: Vec<_> = sessions.keys().copied().collect();
    ids.sort_unstable();
    for id in ids {
        let Some(h) = sessions.get(&id) else { continue };
        let thread = h.backend_thread.load(std::sync::atomic::Ordering::Relaxed);
        let pins = crate::session_state::Pins::from_bits(
            h.pins.load(std::sync::atomic::Ordering::Relaxed),
        );
        rs.rows.push(vec![
            id.to_string(),
            h.user.lock().map(|u| u.clone()).unwrap_or_default(),
            (id as usize % shared.pool.groups.len().max(1)).to_string(),
            if thread != 0 { "executing" } else { "idle" }.into(),
            pins.primary().map_or("", |r| r.label()).into(),
            thread.to_string(),
        ]);
    }
    rs
}

/// `SHOW MYPLEX USERS`: one row per `[[users]]` entry, and one for all
/// server users; latency and rates over the last 10 s, share over the last
/// second.
fn users(shared: &Shared) -> ResultSet {
    let mut rs = ResultSet {
        columns: vec![
            "user",
            "weight",
            "share_weight",
            "share_used",
            "clients",
            "max_clients",
            "backends",
            "max_backends",
            "statements",
            "qps",
            "tps",
            "stmt_p50_ms",
            "stmt_p95_ms",
            "stmt_p99_ms",
            "wait_p95_ms",
            "queue_timeouts",
        ],
        rows: Vec::new(),
    };
    for f in shared.pool.tenants.figures() {
        rs.rows.push(vec![
            f.user,
            f.weight.to_string(),
            format!("{:.3}", f.share_weight),
            format!("{:.3}", f.share_used),
            f.clients.to_string(),
            f.max_clients.to_string(),
            f.backends.to_string(),
            f.max_backends.to_string(),
            f.statements.to_string(),
            format!("{:.3}", f.latency.rate),
            f.tps.to_string(),
            format!("{:.3}", f.latency.p50_ms),
            format!("{:.3}", f.latency.p95_ms),
            format!("{:.3}", f.latency.p99_ms),
            format!("{:.3}", f.queue_wait.p95_ms),
            f.queue_timeouts.to_string(),
        ]);
    }
    rs
}

fn stats(shared: &Shared) -> ResultSet {
    let st = super::status::status(shared);
    let json = serde_json::to_value(&st).unwrap_or_default();
    let mut rs = ResultSet {
        columns: vec![
            "scope",
            "window",
            "tps",
            "qps",
            "stmt_p50_ms",
            "stmt_p95_ms",
            "stmt_p99_ms",
            "stmt_max_ms",
            "txn_p95_ms",
            "wait_p95_ms",
        ],
        rows: Vec::new(),
    };
    let mut push = |scope: String, w: &str, v: &serde_json::Value| {
        let f = |path: &[&str]| {
            let mut x = v;
            for p in path {
                x = &x[*p];
            }
            format!("{:.3}", x.as_f64().unwrap_or(0.0))
        };
        rs.rows.push(vec![
            scope,
            w.into(),
            f(&["tps"]),
            f(&["qps"]),
            f(&["statement", "p50_ms"]),
            f(&["statement", "p95_ms"]),
            f(&["statement", "p99_ms"]),
            f(&["statement", "max_ms"]),
            f(&["transaction", "p95_ms"]),
            f(&["queue_wait", "p95_ms"]),
        ]);
    };
    push("all".into(), "10s", &json["last_10s"]);
    push("all".into(), "60s", &json["last_60s"]);
    if let Some(groups) = json["groups"].as_array() {
        for g in groups {
            let id = g["group"].as_u64().unwrap_or(0);
            push(format!("group {id}"), "10s", &g["last_10s"]);
            push(format!("group {id}"), "60s", &g["last_60s"]);
        }
    }
    rs
}

/// Column types the console and the locally answered admin statements use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// VAR_STRING in utf8mb4.
    Text,
    /// LONGLONG (binary collation); `unsigned` sets the UNSIGNED flag.
    Integer { unsigned: bool },
    /// DOUBLE with this many decimals.
    Double { decimals: u8 },
}

/// A column definition (protocol 4.1) named `name`.
pub fn column_def_typed(name: &str, ty: ColumnType) -> BytesMut {
    // Flags: UNSIGNED 0x20, BINARY 0x80, NUM 0x8000.
    let (collation, length, code, flags, decimals): (u16, u32, u8, u16, u8) = match ty {
        ColumnType::Text => (45, 1024, 0xFD, 0, 0), // utf8mb4_general_ci, VAR_STRING
        ColumnType::Integer { unsigned } => {
            (63, 21, 0x08, 0x8080 | if unsigned { 0x20 } else { 0 }, 0)
        }
        ColumnType::Double { decimals } => (63, 22, 0x05, 0x8080, decimals),
    };
    let mut b = BytesMut::with_capacity(32 + name.len());
    put_lenenc_bytes(&mut b, b"def");
    put_lenenc_bytes(&mut b, b"");
    put_lenenc_bytes(&mut b, b"");
    put_lenenc_bytes(&mut b, b"");
    put_lenenc_bytes(&mut b, name.as_bytes());
    put_lenenc_bytes(&mut b, name.as_bytes());
    b.put_u8(0x0c);
    b.put_u16_le(collation);
    b.put_u32_le(length);
    b.put_u8(code);
    b.put_u16_le(flags);
    b.put_u8(decimals);
    b.put_u16_le(0);
    b
}

/// Writes `rs` as a text result set for a client with these capabilities.
pub fn write(
    io: &mut PacketIo,
    seq: u8,
    rs: &ResultSet,
    caps: crate::protocol::caps::Caps,
    status: u16,
) {
    let defs: Vec<BytesMut> = rs
        .columns
        .iter()
        .map(|c| column_def_typed(c, ColumnType::Text))
        .collect();
    let rows = rs
        .rows
        .iter()
        .map(|r| r.iter().map(|c| Some(c.as_bytes())).collect::<Vec<_>>());
    write_rows(io, seq, &defs, rows, caps, status);
}

/// Writes a text result set: `defs` (column definitions), then `rows`
/// (`None` is NULL), framed for a client with `caps`.
pub fn write_rows<'a>(
    io: &mut PacketIo,
    mut seq: u8,
    defs: &[BytesMut],
    rows: impl IntoIterator<Item = Vec<Option<&'a [u8]>>>,
    caps: crate::protocol::caps::Caps,
    status: u16,
) {
    let deprecate_eof = caps.deprecate_eof();
    let mut b = BytesMut::new();
    crate::frontend::metadata_cache::put_column_count(&mut b, defs.len() as u64, caps);
    seq = io.write_packet(seq, &b);
    for def in defs {
        seq = io.write_packet(seq, &crate::protocol::caps::column_def_for(def, caps));
    }
    if !deprecate_eof {
        b.clear();
        eof_payload(&mut b, 0, status);
        seq = io.write_packet(seq, &b);
    }
    for row in rows {
        b.clear();
        for cell in row {
            match cell {
                Some(c) => put_lenenc_bytes(&mut b, c),
                None => b.put_u8(0xFB),
            }
        }
        seq = io.write_packet(seq, &b);
    }
    b.clear();
    if deprecate_eof {
        OkPacket {
            header: EOF_HEADER,
            status,
            ..Default::default()
        }
        .write(&mut b, false);
    } else {
        eof_payload(&mut b, 0, status);
    }
    io.write_packet(seq, &b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands() {
        assert_eq!(parse(b"SHOW MYPLEX GROUPS"), Some(Command::Groups));
        assert_eq!(parse(b"  show  myplex\tstats ;"), Some(Command::Stats));
        assert_eq!(parse(b"SHOW MYPLEX"), None);
        assert_eq!(parse(b"show myplex users;"), Some(Command::Users));
        assert_eq!(parse(b"reload myplex;"), Some(Command::Reload));
        assert_eq!(parse(b"SHOW DATABASES"), None);
        assert_eq!(
            parse(b"show myplex digests order by COUNT desc limit 3;"),
            Some(Command::Digests(super::super::digests::Listing {
                order: 4,
                desc: true,
                limit: Some(3)
            }))
        );
        assert!(matches!(
            parse(b"SHOW MYPLEX DIGESTS ORDER BY nothing"),
            Some(Command::Invalid(_))
        ));
        assert_eq!(parse(b"RESET MYPLEX DIGESTS"), Some(Command::ResetDigests));
    }
}
