//! `KILL [CONNECTION | QUERY] n` and COM_PROCESS_KILL, where `n` is the
//! proxy connection id the client was told: the target session is ended, or
//! the query it runs is killed on whichever backend thread runs it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::{End, Session};
use crate::protocol::packets::ErrPacket;

/// A KILL the proxy carries out: connection or query of a proxy session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    /// KILL QUERY (else CONNECTION).
    pub query: bool,
    /// Whose: a proxy connection id, or every session of a user.
    pub target: Target,
}

/// What a KILL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A proxy connection id (what CONNECTION_ID() told the client).
    Id(u64),
    /// `KILL [CONNECTION|QUERY] USER name`: that user's proxy sessions.
    User(Vec<u8>),
}

/// What to do with a query that contains KILL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillPlan {
    /// Carry it out against proxy sessions.
    Run(Kill),
    /// Refuse it: it cannot be mapped to proxy sessions (it would reach
    /// server threads that serve other clients).
    Refuse(&'static str),
}

/// Decides what a query containing KILL statements means. `None` when the
/// query contains no KILL. Every KILL is either mapped to proxy sessions or
/// refused: a server thread id never reaches the server from a client.
pub fn plan(sql: &[u8], analysis: &crate::sql::Analysis) -> Option<KillPlan> {
    use crate::sql::{Effect, KillTarget, Kind};
    let kills: Vec<_> = analysis
        .statements
        .iter()
        .filter(|s| s.kind == Kind::Kill)
        .collect();
    if kills.is_empty() {
        // KILL hidden in dynamic SQL is refused where it is visible (the
        // literal text of PREPARE … FROM '…' / EXECUTE IMMEDIATE '…').
        let dynamic_kill = analysis.statements.iter().any(|s| {
            s.effects.iter().any(|e| match e {
                Effect::DynamicSql { text } => {
                    let inner = crate::sql::analyze(text, crate::sql::LexOptions::default());
                    inner.incomplete || inner.statements.iter().any(|s| s.kind == Kind::Kill)
                }
                _ => false,
            })
        });
        return dynamic_kill.then_some(KillPlan::Refuse(
            "KILL in dynamic SQL (PREPARE / EXECUTE IMMEDIATE) through myplex",
        ));
    }
    if analysis.statements.len() != 1 || analysis.incomplete {
        return Some(KillPlan::Refuse(
            "KILL inside a multi-statement through myplex",
        ));
    }
    let effect = kills[0].effects.iter().find_map(|e| match e {
        Effect::Kill { query, id_kind } => Some((*query, *id_kind)),
        _ => None,
    });
    Some(match effect {
        Some((query, KillTarget::Id(id))) => KillPlan::Run(Kill {
            query,
            target: Target::Id(id),
        }),
        Some((query, KillTarget::User)) => {
            match kill_user_name(sql.get(kills[0].span.clone()).unwrap_or(&[])) {
                Some(u) => KillPlan::Run(Kill {
                    query,
                    target: Target::User(u),
                }),
                None => KillPlan::Refuse("KILL USER with this user name through myplex"),
            }
        }
        Some((_, KillTarget::QueryId(_))) => KillPlan::Refuse(
            "KILL QUERY ID through myplex (server query ids are not mapped; use KILL QUERY with the connection id)",
        ),
        _ => KillPlan::Refuse("KILL with an expression through myplex"),
    })
}

/// [`plan`] for a query's text, lexed with the session's options. Cheap
/// for the common case: text without the letters "kill" is not lexed.
pub fn plan_for(sql: &[u8], state: &crate::session_state::TrackedState) -> Option<KillPlan> {
    if !sql.windows(4).any(|w| w.eq_ignore_ascii_case(b"kill")) {
        return None;
    }
    let opts = crate::session_state::authority::lex_options(state);
    plan(sql, &crate::sql::analyze(sql, opts))
}

/// The user name of `KILL … USER name` (quotes removed, host part
/// ignored: proxy sessions are per user name).
fn kill_user_name(stmt: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(stmt).ok()?;
    let lower = text.to_ascii_lowercase();
    let at = lower
        .match_indices("user")
        .map(|(i, _)| i)
        .filter(|&i| {
            let before = lower[..i].chars().last();
            let after = lower[i + 4..].chars().next();
            before.is_some_and(char::is_whitespace) && after.is_some_and(char::is_whitespace)
        })
        .last()?;
    let rest = text[at + 4..].trim().trim_end_matches(';').trim();
    let name = match rest.chars().next()? {
        q @ ('\'' | '"' | '`') => {
            let end = rest[1..].find(q)?;
            &rest[1..1 + end]
        }
        _ => rest.split(['@', ' ']).next()?,
    };
    (!name.is_empty()).then(|| name.as_bytes().to_vec())
}

/// ER_NOT_SUPPORTED_YET with the server's wording.
pub fn refused(what: &str) -> ErrPacket {
    ErrPacket::new(
        1235,
        "42000",
        format!("This version of MariaDB doesn't yet support '{what}'"),
    )
}

fn unknown_thread(id: u64) -> ErrPacket {
    ErrPacket::new(1094, "HY000", format!("Unknown thread id: {id}"))
}

impl Session {
    /// Runs a KILL for this client.
    pub(super) async fn kill(&mut self, seq: u8, k: Kill) -> Result<bool, End> {
        let targets: Vec<(u32, super::SessionHandle)> = match &k.target {
            Target::Id(id) => {
                let t = u32::try_from(*id)
                    .ok()
                    .and_then(|i| Some((i, self.shared.sessions.lock().ok()?.get(&i).cloned()?)));
                match t {
                    Some(t) => vec![t],
                    None => {
                        self.send_err(seq, &unknown_thread(*id)).await?;
                        return Ok(false);
                    }
                }
            }
            Target::User(u) => {
                let name = String::from_utf8_lossy(u).into_owned();
                let mut v: Vec<_> = self
                    .shared
                    .sessions
                    .lock()
                    .map(|m| {
                        m.iter()
                            .filter(|(_, h)| h.user.lock().is_ok_and(|n| *n == name))
                            .map(|(i, h)| (*i, h.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                v.sort_by_key(|(i, _)| *i);
                v
            }
        };
        let me = self.user.name.clone();
        let admin = self.user.admin;
        let mut kill_self = false;
        for (id, target) in targets {
            let owner = target.user.lock().map(|u| u.clone()).unwrap_or_default();
            if owner != me && !admin {
                let e = ErrPacket::new(1095, "HY000", format!("You are not owner of thread {id}"));
                self.send_err(seq, &e).await?;
                return Ok(false);
            }
            if !k.query && id == self.id {
                kill_self = true;
                continue;
            }
            if id != self.id {
                self.interrupt(&target).await;
            }
            if !k.query {
                target.killed.store(true, Ordering::Relaxed);
                target.wake.notify_one();
            }
        }
        if kill_self {
            let e = ErrPacket::new(1927, "70100", "Connection was killed");
            self.send_err(seq, &e).await?;
            return Err(End::Killed);
        }
        self.send_ok(seq).await?;
        Ok(false)
    }

    /// Kills the statement `target` runs right now, and only that one: the
    /// server's query id is read while the target is seen to still run the
    /// same statement on the same backend thread, and `KILL QUERY ID` ends
    /// exactly that query — never the next client's on a reused backend.
    async fn interrupt(&self, target: &super::SessionHandle) {
        let thread = target.backend_thread.load(Ordering::Acquire);
        let stmt = target.statement.load(Ordering::Acquire);
        if thread == 0 {
            return;
        }
        let pool = target.pool.load(Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(5);
        // Within the backend budget: an idle pooled connection, or one
        // opened in free room (see `crate::pool::helper`).
        let Some(mut h) = self.shared.pool.helper(pool, deadline).await else {
            self.shared.metrics.kill_helper("none", "failed");
            tracing::warn!(
                thread,
                "no backend connection free to interrupt a statement within 5 s"
            );
            return;
        };
        let source = h.source.label();
        let q = format!("SELECT QUERY_ID FROM information_schema.PROCESSLIST WHERE ID = {thread}");
        let qid = match h.conn.query_row(&q).await {
            Ok(row) => row
                .and_then(|r| r.into_iter().next().flatten())
                .and_then(|c| c.parse::<u64>().ok()),
            Err(_) => {
                self.shared.metrics.kill_helper(source, "failed");
                h.finish(false);
                return;
            }
        };
        let same = target.backend_thread.load(Ordering::Acquire) == thread
            && target.statement.load(Ordering::Acquire) == stmt;
        let Some(qid) = qid.filter(|_| same) else {
            // Nothing to kill any more: the helper is clean.
            h.finish(true);
            return;
        };
        let sent = h.conn.exec(&format!("KILL QUERY ID {qid}")).await;
        if let Err(e) = &sent {
            tracing::debug!(error = %e, "kill query on backend failed");
        }
        self.shared
            .metrics
            .kill_helper(source, if sent.is_ok() { "sent" } else { "failed" });
        h.finish(sent.is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_every_kill_form() {
        let opts = crate::sql::LexOptions::default();
        let plan_of = |q: &str| plan(q.as_bytes(), &crate::sql::analyze(q.as_bytes(), opts));
        assert_eq!(
            plan_of("KILL 12"),
            Some(KillPlan::Run(Kill {
                query: false,
                target: Target::Id(12)
            }))
        );
        assert_eq!(
            plan_of("kill query 7;"),
            Some(KillPlan::Run(Kill {
                query: true,
                target: Target::Id(7)
            }))
        );
        assert_eq!(
            plan_of("/* c */ KILL HARD CONNECTION 3"),
            Some(KillPlan::Run(Kill {
                query: false,
                target: Target::Id(3)
            }))
        );
        assert_eq!(
            plan_of("KILL USER app"),
            Some(KillPlan::Run(Kill {
                query: false,
                target: Target::User(b"app".to_vec())
            }))
        );
        assert!(matches!(
            plan_of("KILL QUERY ID 3"),
            Some(KillPlan::Refuse(_))
        ));
        assert!(matches!(
            plan_of("KILL 11; SELECT 1"),
            Some(KillPlan::Refuse(_))
        ));
        assert!(matches!(
            plan_of("SELECT 1; KILL 11"),
            Some(KillPlan::Refuse(_))
        ));
        assert!(matches!(
            plan_of("KILL (SELECT 1)"),
            Some(KillPlan::Refuse(_))
        ));
        assert!(matches!(
            plan_of("PREPARE s FROM 'KILL 5'"),
            Some(KillPlan::Refuse(_))
        ));
        assert!(matches!(
            plan_of("EXECUTE IMMEDIATE 'kill 5'"),
            Some(KillPlan::Refuse(_))
        ));
        assert_eq!(plan_of("SELECT 'KILL 5'"), None);
        assert_eq!(plan_of("SELECT * FROM killers"), None);
    }
}
