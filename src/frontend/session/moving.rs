//! A session moving to a new process in an upgrade (issue 20): what an idle
//! session is made of, as a versioned record ([`MovedSession`]); when a
//! session may move ([`Session::why_not_movable`]); sending it
//! ([`Session::move_out`]) and rebuilding it in the new process
//! ([`Session::adopt`]). The socket and the bytes travel through
//! `crate::takeover::moves`.
//!
//! Only what the client relies on and the proxy can rebuild moves: no
//! backend (the new process opens its own), nothing pinned, no transaction.
//! Prepared statements move as their text and the prepare response the
//! client received; the new process prepares them again, lazily, on the
//! backend that first executes them, as after any change of backend.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::statements::ClientStmt;
use super::{End, Session};
use crate::frontend::Shared;
use crate::frontend::handshake::Login;
use crate::prepared::{PrepareState, StmtKey};
use crate::protocol::caps::{Caps, flag};
use crate::protocol::packets::status;
use crate::protocol::session_track::ClientTrackers;
use crate::session_state::TrackedState;
use crate::takeover::moves::Sent;
use crate::wire::PacketIo;

/// The record's format; a new process refuses other versions (the old
/// session then stays where it is).
pub const VERSION: u32 = 1;

/// An idle session as it moves.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MovedSession {
    /// [`VERSION`].
    pub version: u32,
    /// The proxy connection id (`CONNECTION_ID()`): kept.
    pub id: u32,
    /// Login name (a `[[users]]` entry in both processes).
    pub user: String,
    /// The backend account its statements ran as: a new process that logs
    /// the user in as another account refuses the session.
    pub backend_user: String,
    /// May use the admin console.
    pub admin: bool,
    /// Negotiated capabilities.
    pub caps: u64,
    /// The greeting's scramble (a later COM_CHANGE_USER answers it).
    pub nonce: [u8; 20],
    /// Schema, session variables, last insert id, result collation.
    pub state: TrackedState,
    /// Login collation and multi-statements option.
    pub initial: (u16, bool),
    /// Server status flags the client was last sent.
    pub status: u16,
    /// The session's schema was dropped by someone else.
    pub schema_gone: bool,
    /// Prepared statements by client id.
    pub stmts: Vec<MovedStmt>,
    /// Last client statement id issued.
    pub next_stmt: u32,
    /// What statement id 0xFFFFFFFF names.
    pub last_prepared: Option<u32>,
    /// Failed COM_CHANGE_USER attempts.
    pub failed_change_user: u8,
    /// What FOUND_ROWS() returns.
    pub found_rows: u64,
    /// What ROW_COUNT() returns, when known.
    pub row_count: Option<i64>,
    /// The client's own `session_track_*` settings.
    pub own_trackers: Option<ClientTrackers>,
    /// The server's `max_allowed_packet` at login.
    pub login_max_packet: Option<u64>,
    /// The GTID of the session's last write (read-your-writes).
    #[serde(default)]
    pub last_gtid: Option<String>,
    /// It may have written without a GTID being known: its reads stay on
    /// the primary in the new process until a check covers the write.
    #[serde(default)]
    pub write_unknown: bool,
}

/// One prepared statement of a moving session.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MovedStmt {
    /// The client's statement id.
    pub client_id: u32,
    /// Its text.
    pub sql: Vec<u8>,
    /// Schema it was prepared in.
    pub schema: Option<Vec<u8>>,
    /// Session variables it was prepared under.
    pub vars: BTreeMap<String, String>,
    /// Result collation it was prepared under.
    pub results_collation: Option<String>,
    /// Set when the statement is this session's own (see [`PrepareState`]).
    pub private: Option<u64>,
    /// Parameter count.
    pub num_params: u16,
    /// Result column count.
    pub num_columns: u16,
    /// The prepare response the client received.
    pub response: Vec<Vec<u8>>,
    /// Parameter types of the client's last bind.
    pub types: Option<Vec<u8>>,
    /// Columns as the client last saw them.
    pub columns: u64,
    /// Cache-metadata hash of the definitions the client has.
    pub metadata: Option<u64>,
}

/// Why a session does not move now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotMovable {
    /// Not now: it holds something (a transaction, a pin, a backend, a
    /// command half read); it may move at a later boundary.
    Now(&'static str),
    /// Never: it ends at a transaction boundary, as a drain ends it.
    Ever(&'static str),
}

impl Session {
    /// `None` when this session can move now.
    pub(super) fn why_not_movable(&self) -> Option<NotMovable> {
        use NotMovable::{Ever, Now};
        let stream = &self.client.stream;
        if stream.is_tls() {
            return Some(Ever("TLS (its keys live in this process)"));
        }
        if stream.tcp().is_none() {
            return Some(Ever("not a TCP client"));
        }
        if self.client.is_compressed() {
            return Some(Ever("compressed protocol"));
        }
        if self.shared.server_users.is_some()
            && self.shared.users.load().find(&self.user.name).is_none()
        {
            return Some(Ever("a user looked up in the server"));
        }
        if !self.kills.is_empty() {
            return Some(Ever("prepared KILL statements"));
        }
        if self.login_roles_epoch != self.shared.pool.roles_epoch() {
            return Some(Ever("its login role is an earlier default"));
        }
        if self.pins.any() || self.pending_begin || self.probe_role_later {
            return Some(Now("pinned"));
        }
        if self.status & status::IN_TRANS != 0 || !self.inv.is_empty() {
            return Some(Now("in a transaction"));
        }
        if self.backend.is_some() {
            return Some(Now("holds a backend"));
        }
        if self.client.buffered() > 0 || !self.client.wbuf.is_empty() {
            return Some(Now("a command is half read"));
        }
        if self.stmts.values().any(|s| !s.movable()) {
            return Some(Now("a cursor or long data"));
        }
        None
    }

    /// The record of this (movable) session.
    fn moved_record(&self) -> MovedSession {
        let backend_user = self
            .shared
            .pool
            .params(self.pool)
            .map(|p| p.user)
            .unwrap_or_default();
        let stmts = self
            .stmts
            .iter()
            .map(|(&client_id, s)| {
                let e = &s.entry;
                let (columns, metadata) = s.seen();
                MovedStmt {
                    client_id,
                    sql: e.key.sql.clone(),
                    schema: e.key.schema.clone(),
                    vars: e.key.state.vars.clone(),
                    results_collation: e.key.state.results_collation.clone(),
                    private: e.key.state.private,
                    num_params: e.num_params,
                    num_columns: e.num_columns,
                    response: e.response.clone(),
                    types: s.types.as_deref().map(<[u8]>::to_vec),
                    columns,
                    metadata,
                }
            })
            .collect();
        MovedSession {
            version: VERSION,
            id: self.id,
            user: self.user.name.clone(),
            backend_user,
            admin: self.user.admin,
            caps: self.caps.0,
            nonce: self.nonce,
            state: self.state.clone(),
            initial: self.initial,
            status: self.status,
            schema_gone: self.schema_gone,
            stmts,
            next_stmt: self.next_stmt,
            last_prepared: self.last_prepared,
            failed_change_user: self.failed_change_user,
            found_rows: self.found_rows,
            row_count: self.row_count,
            own_trackers: self.own_trackers.as_deref().cloned(),
            login_max_packet: self.login_max_packet,
            last_gtid: self.writes.gtid.clone(),
            write_unknown: self.writes.unknown.is_some(),
        }
    }

    /// Tries to hand this idle session to the new process. `Ok`: it moved
    /// (the session ends here without touching the socket); `Err(Some)`:
    /// it stays, and why (whether to try again later); `Err(None)`: the
    /// move was lost half-way and the session must end here.
    pub(super) async fn move_out(&mut self) -> Result<(), Option<NotMovable>> {
        let mover = self.shared.mover.clone();
        if !mover.available() {
            return Err(Some(NotMovable::Ever("no successor takes sessions")));
        }
        if let Some(why) = self.why_not_movable() {
            return Err(Some(why));
        }
        let Some(client) = self.client.stream.tcp() else {
            return Err(Some(NotMovable::Ever("not a TCP client")));
        };
        let Ok(fd) = client.as_fd().try_clone_to_owned() else {
            return Err(Some(NotMovable::Ever("socket not duplicable")));
        };
        let record = match serde_json::to_vec(&self.moved_record()) {
            Ok(r) => r,
            Err(_) => return Err(Some(NotMovable::Ever("record not serialisable"))),
        };
        if record.len() > crate::takeover::moves::MAX_RECORD {
            return Err(Some(NotMovable::Ever(
                "its prepared statements are too large to move",
            )));
        }
        // One session at a time; a client that speaks meanwhile is served
        // first (it tries again after that command).
        let spoke = async {
            let _ = client.readable().await;
        };
        let Some(_turn) = mover.turn(spoke).await else {
            return Err(Some(NotMovable::Now("the client spoke")));
        };
        if self
            .handle
            .killed
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err(Some(NotMovable::Ever("killed")));
        }
        let metrics = &self.shared.metrics;
        match mover.send(fd, record).await {
            Sent::Moved => {
                metrics.session_moved("out", "moved");
                Ok(())
            }
            Sent::Refused(why) => {
                metrics.session_moved("out", "refused");
                tracing::info!(client.id = self.id, reason = %why, "the new process refused this session; it ends at a transaction boundary here");
                Err(Some(NotMovable::Ever("refused")))
            }
            Sent::Unavailable => Err(Some(NotMovable::Ever("no successor takes sessions"))),
            Sent::Lost(e) => {
                metrics.session_moved("out", "lost");
                tracing::warn!(client.id = self.id, error = %e, "moving a session failed half-way; it ends here");
                Err(None)
            }
        }
    }

    /// Rebuilds a session sent by the old process, on `io` (its client
    /// socket, registered on this runtime). Checks that this process can
    /// serve it as the old one did; the caller reserves the client's
    /// places (connection counts, the user's limit).
    pub fn adopt(
        shared: Arc<Shared>,
        rec: MovedSession,
        io: PacketIo,
        user_slot: crate::pool::tenants::ClientSlot,
    ) -> Result<Session, String> {
        if rec.version != VERSION {
            return Err(format!(
                "record version {} (this process reads {VERSION})",
                rec.version
            ));
        }
        if rec.caps & u64::from(flag::COMPRESS) != 0 {
            return Err("compressed protocol".into());
        }
        let users = shared.users.load_full();
        let Some((_, user)) = users.find(&rec.user) else {
            return Err(format!("no user {} here", rec.user));
        };
        if !user.enabled || user.admin != rec.admin {
            return Err(format!("user {} is configured differently here", rec.user));
        }
        let caps = Caps(rec.caps);
        let tls = shared.tls.load().is_some();
        let offer =
            crate::protocol::caps::greeting_offer(shared.pool.server_info().capabilities, tls);
        if rec.caps & !offer != 0 {
            return Err("capabilities this process does not offer".into());
        }
        if shared.config.load().frontend.require_tls {
            return Err("this process requires TLS".into());
        }
        let pool = shared.pool.key(user.pool, caps.flavour());
        let backend_user = shared.pool.params(pool).map(|p| p.user).unwrap_or_default();
        if backend_user != rec.backend_user {
            return Err(format!(
                "user {} logs in as {backend_user} here, as {} there",
                rec.user, rec.backend_user
            ));
        }
        let taken = shared
            .sessions
            .lock()
            .map(|m| m.contains_key(&rec.id))
            .unwrap_or(true);
        if taken || rec.id == 0 {
            return Err(format!("connection id {} is taken here", rec.id));
        }
        let login = Login {
            io,
            user: Arc::new(user.clone()),
            caps,
            collation: rec.initial.0,
            pool,
            schema: None,
            ok_seq: 0,
            nonce: rec.nonce,
        };
        let ip = login
            .io
            .stream
            .peer()
            .map(|p| p.address_key())
            .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        let (mut s, _, _) = Session::new(shared.clone(), login, user_slot, rec.id, ip);
        s.initial = rec.initial;
        s.state = rec.state;
        s.status = rec.status & !status::IN_TRANS;
        s.schema_gone = rec.schema_gone;
        s.next_stmt = rec.next_stmt;
        s.last_prepared = rec.last_prepared;
        s.failed_change_user = rec.failed_change_user;
        s.found_rows = rec.found_rows;
        s.row_count = rec.row_count;
        s.own_trackers = rec.own_trackers.map(Box::new);
        s.login_max_packet = rec.login_max_packet;
        s.writes.gtid = rec.last_gtid;
        if rec.write_unknown {
            s.writes.unknown_since_now(&shared);
        }
        let mut registry = shared
            .registry
            .lock()
            .map_err(|_| "statement registry poisoned".to_string())?;
        for m in rec.stmts {
            let key = StmtKey {
                pool,
                schema: m.schema,
                state: PrepareState {
                    vars: m.vars,
                    results_collation: m.results_collation,
                    private: m.private,
                },
                sql: m.sql,
            };
            let entry = registry.insert(key, m.num_params, m.num_columns, m.response);
            let types = m.types.map(Arc::from);
            s.stmts.insert(
                m.client_id,
                ClientStmt::restored(entry, types, (m.columns, m.metadata)),
            );
        }
        drop(registry);
        Ok(s)
    }

    /// Serves a session rebuilt by [`Session::adopt`]: its client is
    /// between commands.
    pub async fn resume(&mut self) -> Result<(), End> {
        self.serve_from(false).await
    }
}

/// The client socket of a moved session, ready for this process.
pub fn moved_socket(fd: OwnedFd) -> std::io::Result<std::net::TcpStream> {
    let s = std::net::TcpStream::from(fd);
    s.set_nonblocking(true)?;
    // A socket that is not TCP fails here.
    s.peer_addr()?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_round_trips_and_refuses_unknown_fields() {
        let mut state = TrackedState::for_collation(45);
        state.schema = Some(b"shop".to_vec());
        state.vars.insert("sql_mode".into(), "ANSI".into());
        state.last_insert_id = 7;
        let rec = MovedSession {
            version: VERSION,
            id: 42,
            user: "app".into(),
            backend_user: "app".into(),
            admin: false,
            caps: 0x1234,
            nonce: [7; 20],
            state: state.clone(),
            initial: (45, true),
            status: 2,
            schema_gone: false,
            stmts: vec![MovedStmt {
                client_id: 3,
                sql: b"SELECT ?".to_vec(),
                schema: Some(b"shop".to_vec()),
                vars: BTreeMap::new(),
                results_collation: None,
                private: None,
                num_params: 1,
                num_columns: 1,
                response: vec![vec![0, 1, 2]],
                types: Some(vec![8, 0]),
                columns: 1,
                metadata: None,
            }],
            next_stmt: 3,
            last_prepared: Some(3),
            failed_change_user: 0,
            found_rows: 5,
            row_count: Some(-1),
            own_trackers: None,
            login_max_packet: Some(1 << 20),
            last_gtid: Some("0-1-9".into()),
            write_unknown: true,
        };
        let bytes = serde_json::to_vec(&rec).expect("serialise");
        let back: MovedSession = serde_json::from_slice(&bytes).expect("parse");
        assert_eq!(back.state, state);
        assert_eq!(back.stmts[0].types.as_deref(), Some(&[8u8, 0][..]));
        assert_eq!(back.row_count, Some(-1));
        let mut v: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        v["surprise"] = serde_json::Value::Bool(true);
        assert!(serde_json::from_value::<MovedSession>(v).is_err());
    }
}
