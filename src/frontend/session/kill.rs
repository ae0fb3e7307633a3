//! `KILL [CONNECTION | QUERY] n` and COM_PROCESS_KILL, where `n` is the
//! proxy connection id the client was told: the target session is ended, or
//! the query it runs is killed on whichever backend thread runs it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::{End, Session};
use crate::protocol::packets::ErrPacket;

/// A parsed KILL statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kill {
    /// KILL QUERY (else CONNECTION).
    pub query: bool,
    /// Proxy connection id.
    pub id: u64,
}

/// Parses `KILL [HARD|SOFT] [CONNECTION|QUERY] n`.
pub fn parse(sql: &[u8]) -> Option<Kill> {
    let start = sql.iter().position(|c| !c.is_ascii_whitespace())?;
    if !sql[start..].get(..4)?.eq_ignore_ascii_case(b"kill") {
        return None;
    }
    let text = std::str::from_utf8(sql).ok()?;
    let text = text.trim().trim_end_matches(';').trim();
    let mut words = text.split_ascii_whitespace().peekable();
    if !words.next()?.eq_ignore_ascii_case("kill") {
        return None;
    }
    if words
        .peek()
        .is_some_and(|w| w.eq_ignore_ascii_case("hard") || w.eq_ignore_ascii_case("soft"))
    {
        words.next();
    }
    let mut query = false;
    if let Some(w) = words.peek() {
        if w.eq_ignore_ascii_case("query") {
            query = true;
            words.next();
        } else if w.eq_ignore_ascii_case("connection") {
            words.next();
        }
    }
    let id = words.next()?.parse().ok()?;
    words.next().is_none().then_some(Kill { query, id })
}

fn unknown_thread(id: u64) -> ErrPacket {
    ErrPacket::new(1094, "HY000", format!("Unknown thread id: {id}"))
}

impl Session {
    /// Runs a KILL for this client.
    pub(super) async fn kill(&mut self, seq: u8, k: Kill) -> Result<bool, End> {
        let target = u32::try_from(k.id)
            .ok()
            .and_then(|id| self.shared.sessions.lock().ok()?.get(&id).cloned());
        let Some(target) = target else {
            self.send_err(seq, &unknown_thread(k.id)).await?;
            return Ok(false);
        };
        let me = self.shared.users[self.user].name.clone();
        let owner = target.user.lock().map(|u| u.clone()).unwrap_or_default();
        if owner != me && !self.shared.users[self.user].admin {
            let e = ErrPacket::new(
                1095,
                "HY000",
                format!("You are not owner of thread {}", k.id),
            );
            self.send_err(seq, &e).await?;
            return Ok(false);
        }
        if !k.query && k.id == u64::from(self.id) {
            let e = ErrPacket::new(1927, "70100", "Connection was killed");
            self.send_err(seq, &e).await?;
            return Err(End::Killed);
        }
        // Interrupt whatever the target runs right now.
        let thread = target.backend_thread.load(Ordering::Relaxed);
        if thread != 0 {
            let pool = target.pool.load(Ordering::Relaxed);
            let deadline = Instant::now() + Duration::from_secs(5);
            match self.shared.pool.dial(pool, deadline).await {
                Ok(mut c) => {
                    if let Err(e) = c.exec(&format!("KILL QUERY {thread}")).await {
                        tracing::debug!(error = %e, "kill query on backend failed");
                    }
                }
                Err(e) => {
                    let e = crate::protocol::errors::backend_unavailable(&e.to_string());
                    self.send_err(seq, &e).await?;
                    return Ok(false);
                }
            }
        }
        if !k.query {
            target.killed.store(true, Ordering::Relaxed);
            target.wake.notify_one();
        }
        self.send_ok(seq).await?;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kill_forms() {
        assert_eq!(
            parse(b"KILL 12"),
            Some(Kill {
                query: false,
                id: 12
            })
        );
        assert_eq!(parse(b"kill query 7;"), Some(Kill { query: true, id: 7 }));
        assert_eq!(
            parse(b"KILL HARD CONNECTION 3"),
            Some(Kill {
                query: false,
                id: 3
            })
        );
        assert_eq!(parse(b"KILL QUERY ID 3"), None);
        assert_eq!(parse(b"KILL USER app"), None);
        assert_eq!(parse(b"killer 1"), None);
    }
}
