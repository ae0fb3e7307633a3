//! Parked backends: a connection its session let go of while it still held
//! that session's leftovers (what the session-state authority's verdict
//! says must be cleaned before another client sees it: a diagnostics area,
//! state stored code may have made, an unread LAST_INSERT_ID()).
//!
//! Owns making such a connection shareable, and when. Instead of cleaning
//! it at once (a reset, off the client's path), the session parks it: it
//! goes back to the idle stack tagged with the session's owner token
//! (`BackendConn::parked_for`). The session's next lease takes it back as
//! it is (`scheduler::GroupState::pick_idle`) — as on the server, where the
//! session keeps its own connection, and without a cleanup's round trip.
//! Anyone else is granted it only after the verdict's cleanup
//! ([`Group::acquire`](super::group::Group::acquire) runs [`clean`] before
//! the grant leaves the group), pool-internal uses never see it
//! (`Group::take_idle_where` skips it), and one whose session did not come
//! back within [`PARK_HOLD`] is cleaned in the background ([`sweep`]).
//!
//! A connection is parked only when its verdict is a cleanup (never one
//! the authority closes) and no transaction is open on it: a parked
//! connection holds no row locks.

use std::sync::Arc;
use std::time::Duration;

use super::group::{Group, Leased};
use crate::backend::BackendConn;
use crate::session_state::TrackedState;
use crate::session_state::authority::{Release, release};

/// How long a parked connection waits for its session before the pool
/// cleans it for anyone (a session between two statements comes back
/// within milliseconds; one that went quiet leaves a clean connection).
pub const PARK_HOLD: Duration = Duration::from_secs(1);

/// True when a connection with this verdict and status may be parked.
pub fn parkable(c: &BackendConn) -> bool {
    use crate::protocol::packets::status::IN_TRANS;
    matches!(
        release(c.marks, c.status),
        Release::Reset | Release::ClearDiagnostics
    ) && c.status & IN_TRANS == 0
}

/// Runs the authority's cleanup on `b`: clears its diagnostics area (by
/// counting its user variables, which reads a table; any left: a reset),
/// or resets it. True when it is shareable now; false when it must be
/// closed (the server did not answer, or the verdict is to close).
pub async fn clean(b: &mut BackendConn) -> bool {
    let ok = match release(b.marks, b.status) {
        Release::Share => true,
        Release::ClearDiagnostics => match count_user_variables(b).await {
            Some(0) => true,
            Some(_) => b.reset(&baseline()).await.is_ok(),
            None => false,
        },
        Release::Reset => b.reset(&baseline()).await.is_ok(),
        Release::Close => false,
    };
    if ok {
        b.parked_for = None;
    }
    ok && release(b.marks, b.status) == Release::Share
}

/// The expression counting the session's user variables with a value
/// (reads a table: it clears the diagnostics area).
pub const USER_VARIABLES_COUNT: &str =
    "(SELECT COUNT(*) FROM information_schema.USER_VARIABLES WHERE VARIABLE_VALUE IS NOT NULL)";

/// How many user variables with a value the backend's session holds. The
/// count reads a table, which clears the diagnostics area (the mark goes).
/// `None` when the server did not answer it.
pub async fn count_user_variables(b: &mut BackendConn) -> Option<usize> {
    let n = b
        .query_row(format!("SELECT {USER_VARIABLES_COUNT}"))
        .await
        .ok()
        .flatten()
        .and_then(|row| row.first().cloned().flatten())
        .and_then(|c| c.parse::<usize>().ok());
    if n.is_some() {
        b.marks.diagnostics = false;
    }
    n
}

/// The tracked state of a connection right after COM_RESET_CONNECTION.
pub fn baseline() -> TrackedState {
    TrackedState::for_collation(u16::from(crate::backend::connect::BACKEND_COLLATION))
}

/// How long a cleanup off any client's path may take before the
/// connection is closed instead.
const CLEAN_TIMEOUT: Duration = Duration::from_secs(5);

/// Cleans `b` and returns it idle, or closes it (the server closed it,
/// did not answer within [`CLEAN_TIMEOUT`], or refused the cleanup).
async fn clean_or_close(mut b: Leased) {
    if b.io.idle_is_healthy()
        && tokio::time::timeout(CLEAN_TIMEOUT, clean(&mut b))
            .await
            .unwrap_or(false)
    {
        b.return_idle();
    } else {
        tracing::debug!(
            backend = b.id.0,
            "closing a parked backend that failed cleanup"
        );
    }
}

/// Cleans the connections of `group` parked longer than [`PARK_HOLD`]
/// (their session went quiet or ended), in the background.
pub fn sweep(group: &Arc<Group>) {
    let now = tokio::time::Instant::now();
    for b in group.take_parked_where(|c| now.saturating_duration_since(c.last_used) >= PARK_HOLD) {
        tokio::spawn(clean_or_close(b));
    }
}

/// Cleans the connections session `owner` parked in `group` that are still
/// idle there, in the background (the session ends).
pub fn unpark_now(group: &Arc<Group>, owner: u64) {
    for b in group.take_parked_where(|c| c.parked_for == Some(owner)) {
        tokio::spawn(clean_or_close(b));
    }
}

/// As [`unpark_now`], finished before it returns: the session starts over
/// (COM_RESET_CONNECTION, COM_CHANGE_USER) and its client, once answered,
/// must find nothing of the old session on any backend (a lock a view
/// took is free).
pub async fn unpark_own(group: &Arc<Group>, owner: u64) {
    for b in group.take_parked_where(|c| c.parked_for == Some(owner)) {
        clean_or_close(b).await;
    }
}

/// A new owner token: unique in the process (never reused, unlike
/// connection ids), so a parked connection can only go back to the session
/// that parked it. A session takes a new one when it starts over (a reset
/// or another login on the same connection).
pub fn owner_token() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
