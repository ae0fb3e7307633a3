//! COM_CHANGE_USER: full re-authentication against the configured users or
//! the server's (`frontend::users`, with auth switch when needed), then a
//! clean session: the old backend connection is reset (what it held ends
//! before the answer) and let go, statements, pins and session state are
//! dropped, and the new user's credential pool is used from then on.
//!
//! A failed attempt leaves the connection as the server does: the session
//! is reset all the same (the server resets it before authenticating, so
//! the character set is the server's default), but the user and the schema
//! stay; the error comes after the server's one-second delay, and a fourth
//! attempt after three failures is refused with "Unknown command" without
//! looking at it.

use std::time::Duration;

use super::{End, Session};
use crate::frontend::handshake::HandshakeError;
use crate::frontend::users;
use crate::protocol::caps::flag;
use crate::protocol::collations::LoginCollation;
use crate::protocol::errors;
use crate::protocol::lenenc::Reader;
use crate::protocol::packets::ErrPacket;
use crate::session_state::TrackedState;

/// What the server waits before answering a failed attempt.
const FAILURE_DELAY: Duration = Duration::from_secs(1);
/// Failed attempts after which the server refuses further ones.
const MAX_FAILURES: u8 = 3;
use crate::wire::packet_io::Packet;

/// The fields of a COM_CHANGE_USER request.
#[derive(Debug, PartialEq, Eq)]
pub struct ChangeUser<'a> {
    /// Login name.
    pub user: &'a [u8],
    /// Auth response.
    pub auth: &'a [u8],
    /// Schema (empty for none).
    pub schema: &'a [u8],
    /// Collation, when sent.
    pub collation: Option<u16>,
    /// Auth plugin, with CLIENT_PLUGIN_AUTH.
    pub plugin: Option<&'a [u8]>,
}

/// Parses a COM_CHANGE_USER payload under the client's base capabilities;
/// `None` when it is cut off before the auth response.
pub fn parse(payload: &[u8], caps: u32) -> Option<ChangeUser<'_>> {
    let mut r = Reader::new(payload);
    r.u8()?;
    let user = r.null_str()?;
    let auth = if caps & flag::SECURE_CONNECTION != 0 {
        let n = r.u8()?;
        r.bytes(usize::from(n))?
    } else {
        r.null_str()?
    };
    let schema = r.null_str().unwrap_or_default();
    let collation = if r.is_empty() { None } else { r.u16() };
    let plugin = if caps & flag::PLUGIN_AUTH != 0 && !r.is_empty() {
        r.null_str()
    } else {
        None
    };
    Some(ChangeUser {
        user,
        auth,
        schema,
        collation,
        plugin,
    })
}

impl Session {
    /// Handles COM_CHANGE_USER.
    pub(super) async fn change_user(&mut self, pkt: &Packet) -> Result<bool, End> {
        let mut seq = pkt.last_seq.wrapping_add(1);
        // Whatever the outcome, what the session parked is not the next
        // login's to take back as it is.
        self.start_over_parked().await;
        if self.failed_change_user >= MAX_FAILURES {
            return self
                .change_user_failed(seq, errors::server_unknown_command(), None)
                .await;
        }
        let Some(req) = parse(&pkt.payload, self.caps.base()) else {
            return self
                .change_user_failed(seq, errors::server_unknown_command(), None)
                .await;
        };
        // The server reads the collation before authenticating: one that
        // cannot be a client character set (ucs2, utf16, utf32) fails the
        // attempt with its 1231, one it does not know gives its defaults.
        let server = self.shared.pool.server_info();
        // `known`: a collation the server switches to (and restores at a
        // later COM_RESET_CONNECTION, even when this attempt fails).
        let (requested, known) = match (req.collation, &server.collations) {
            (Some(c), Some(table)) => match table.login(c, u16::from(server.collation)) {
                Ok(LoginCollation::Known(id)) => (Some(id), Some(id)),
                Ok(l) => (Some(l.id()), None),
                Err(e) => return self.change_user_failed(seq, e, None).await,
            },
            (c, _) => (c, c),
        };
        let name = String::from_utf8_lossy(req.user).into_owned();
        let peer = self.client.stream.peer();
        let shared = self.shared.clone();
        // The client answered the greeting's challenge, issued for the
        // greeting's plugin.
        let attempt = users::Attempt {
            name: &name,
            peer,
            client_plugin: req.plugin.unwrap_or(b"mysql_native_password"),
            challenged: shared.config.load().frontend.default_auth_plugin,
            nonce: &self.nonce,
            response: req.auth.to_vec(),
        };
        let user =
            match users::authenticate_user(&shared, &mut self.client, &mut seq, attempt).await {
                Ok(Ok(u)) => u,
                Ok(Err(e)) => return self.change_user_failed(seq, e, known).await,
                Err(HandshakeError::Wire(e)) => return Err(End::Client(e)),
                Err(HandshakeError::Refused(r)) => return Err(End::Fatal(r)),
            };
        // A clean session for the new user: the old backend's transaction,
        // locks, variables and temporary tables end before the answer.
        self.let_go_reset().await;
        self.drop_statements();
        self.pins.clear_state();
        self.inv.clear();
        self.own_trackers = None;
        // Kept to go back to when the new schema does not exist.
        let before = (
            self.pool,
            self.user.clone(),
            self.handle
                .user
                .lock()
                .map(|u| u.clone())
                .unwrap_or_default(),
            self.state.schema.clone(),
        );
        self.switch_user(self.shared.pool.rekey(self.pool, user.pool), user, name);
        let collation = match requested {
            Some(c) if !TrackedState::for_collation(c).vars.is_empty() => c,
            _ => self.initial.0,
        };
        // What a later COM_RESET_CONNECTION restores: a collation the
        // server knows (an unknown one leaves the previous one).
        if let Some(c) = known.filter(|c| !TrackedState::for_collation(*c).vars.is_empty()) {
            self.initial = (c, self.initial.1);
        }
        // The server keeps the multi-statements option across a change of
        // user.
        let multi = self.state.multi_statements;
        self.state = super::initial_state((collation, multi));
        self.status = self.shared.pool.session_status();
        self.pending_begin = false;
        self.found_rows = 0;
        self.row_count_now = Some(0);
        self.tickets = shared.config.load().pool.high_prio_tickets;
        if !req.schema.is_empty() {
            self.state.schema = Some(req.schema.to_vec());
            if let Err(e) = self.verify_schema().await {
                // The server checks the schema as part of the
                // authentication: the attempt fails, the previous user and
                // schema stay.
                let (pool, user, name, schema) = before;
                self.switch_user(pool, user, name);
                self.state.schema = schema;
                return self.change_user_failed(seq, e, known).await;
            }
        }
        // The server never forgets failed attempts on a connection. Its OK
        // reports the schema named, as at login, to a client that tracks it.
        self.send_login_ok(seq).await?;
        Ok(false)
    }

    /// Makes `user` (of pool key `pool`, logged in as `name`) the session's
    /// user, also for what other sessions see of it (KILL USER).
    fn switch_user(&mut self, pool: usize, user: std::sync::Arc<super::super::User>, name: String) {
        let configured = self.shared.users.load().find(&user.name).is_some();
        let tenant = self.shared.pool.tenants.for_user(&user.name, configured);
        if tenant.index != self.user_slot.tenant().index {
            // The count moves with the session (not refused: the server's
            // change of user has no connection limit of its own here).
            self.user_slot = tenant.enter_always();
        }
        self.pool = pool;
        self.user = user;
        self.login_roles_epoch = self.shared.pool.roles_epoch();
        self.handle
            .pool
            .store(self.pool, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut u) = self.handle.user.lock() {
            *u = name;
        }
    }

    /// A refused COM_CHANGE_USER, as the server leaves it: the session was
    /// reset before the attempt (`THD::change_user`), so the character set
    /// is the server's default and the session's variables are gone; the
    /// user and the schema stay. `read` is the collation the server read
    /// from the request before refusing it (it becomes the one a later
    /// COM_RESET_CONNECTION restores). The error follows the server's
    /// delay and the connection stays usable.
    async fn change_user_failed(
        &mut self,
        seq: u8,
        e: ErrPacket,
        read: Option<u16>,
    ) -> Result<bool, End> {
        self.failed_change_user = self.failed_change_user.saturating_add(1);
        // The server resets the session before it authenticates.
        self.let_go_reset().await;
        self.drop_statements();
        self.pins.clear_state();
        self.inv.clear();
        self.own_trackers = None;
        let schema = self.state.schema.take();
        let multi = self.state.multi_statements;
        let server_default = u16::from(self.shared.pool.server_info().collation);
        self.state = super::initial_state((server_default, multi));
        self.pending_begin = false;
        self.state.schema = schema;
        if let Some(c) = read.filter(|c| !TrackedState::for_collation(*c).vars.is_empty()) {
            self.initial = (c, self.initial.1);
        }
        self.status = self.shared.pool.session_status();
        self.found_rows = 0;
        tokio::time::sleep(FAILURE_DELAY).await;
        self.send_err(seq, &e).await?;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_change_user() {
        let mut p = vec![0x11];
        p.extend_from_slice(b"bob\0");
        p.push(3);
        p.extend_from_slice(&[1, 2, 3]);
        p.extend_from_slice(b"db\0");
        p.extend_from_slice(&45u16.to_le_bytes());
        p.extend_from_slice(b"mysql_native_password\0");
        let caps = flag::SECURE_CONNECTION | flag::PLUGIN_AUTH;
        let c = parse(&p, caps).expect("parse");
        assert_eq!(c.user, b"bob");
        assert_eq!(c.auth, &[1, 2, 3]);
        assert_eq!(c.schema, b"db");
        assert_eq!(c.collation, Some(45));
        assert_eq!(c.plugin, Some(&b"mysql_native_password"[..]));
        assert!(parse(&p[..6], caps).is_none());
    }
}
