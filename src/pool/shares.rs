//! What each user holds of a thread group (design §6.2, issue 19): the
//! statements it runs against the in-flight limit ([`Running`]) and the
//! backend connections counted for it ([`Holdings`]), and the two rules that
//! make weights hold where first come, first served let one user take the
//! group from another.
//!
//! **Places taken back.** The fair queue ([`super::fair`]) orders who waits;
//! a user that ran nothing while another filled the limit still waited for
//! one of the other's statements to end before each of its own (measured:
//! a `web` user at 4 × weight waited a queue p50 of ~1 ms for a 1–2 ms
//! statement next to `batch`'s 256 clients, docs/benchmarks.md, "Noisy
//! neighbour"). So when the limit is reached, a user for whom one more
//! statement stays within its weighted part of the limit (among the users
//! running or queued, and only when another one is) runs it at once, past
//! the limit ([`Running::owed`]); the others' completions then free no
//! place until the group is under its limit again. Places taken back this
//! way never exceed the limit itself, so the group runs at most twice its
//! limit, for as long as the lent statements run. Alone, a user never
//! passes the limit.
//!
//! **Backends kept.** Users log in with their own credentials, so a backend
//! serves one user; when the group holds all the backends it may and a
//! lease finds none of its own idle, the scheduler closes an idle one of
//! another user and opens one in its place (an *eviction*: a login and its
//! session setup on the server). Closing any idle backend for any waiter
//! made two active users trade backends back and forth: `web`'s backend,
//! idle for the instant between two of its statements, went to one of
//! `batch`'s hundreds of waiting leases, and `web`'s next statement closed
//! one of `batch`'s to get it back (measured: ~800 logins a second, most
//! of `web`'s queue wait). So an idle backend of an *active* user (a
//! statement running or queued, or one started or ended within
//! [`ACTIVE_FOR`]) is closed for another user only when its owner holds
//! more than its weighted part of the group's backends, and the taker holds
//! none or stays below the owner's load per weight after the move (so the
//! remainder of an uneven split does not bounce between the two). An
//! inactive user's idle backends and those no user took yet (opened by the
//! pool itself) are closed as before: an unused part is lent, never
//! reserved idle. The grace is what makes a user with a few clients active
//! at all: without it, `web`'s 16 clients (8 a group, their own threads
//! short of CPU) left a group with nothing running for instants often
//! enough to keep the trading going (~2,600 logins a group in 30 s). A
//! user's own leases of another flavour or server take its idle backends
//! as before. Pure counting; the scheduler ([`super::scheduler`]) applies
//! it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use tokio::time::{Duration, Instant};

/// How long after its last statement started or ended a user still counts
/// as active for the backends it keeps (a second: many of its statements,
/// few of anyone's queue waits).
pub const ACTIVE_FOR: Duration = Duration::from_secs(1);

/// Admission ids are a group's own counter: used as their own hash (an
/// insert and a remove per statement, no SipHash).
#[derive(Debug, Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Statements each user (tenant index) runs in one group, and how many of
/// them were admitted past the limit as places taken back.
#[derive(Debug, Default)]
pub struct Running {
    /// Admission id → (user, admitted as a place taken back).
    of_id: HashMap<u64, (u32, bool), BuildHasherDefault<IdHasher>>,
    running: Vec<u32>,
    taken_back: usize,
}

impl Running {
    /// Statement `id` of `user` was admitted (`taken_back`: past the limit,
    /// as a place owed to its user).
    pub fn start(&mut self, id: u64, user: u32, taken_back: bool) {
        let i = user as usize;
        if self.running.len() <= i {
            self.running.resize(i + 1, 0);
        }
        self.running[i] += 1;
        self.taken_back += usize::from(taken_back);
        self.of_id.insert(id, (user, taken_back));
    }

    /// Statement `id` ended (or was undone): its user (`None` for an
    /// unknown id, which changes nothing).
    pub fn end(&mut self, id: u64) -> Option<u32> {
        let (u, taken_back) = self.of_id.remove(&id)?;
        if let Some(n) = self.running.get_mut(u as usize) {
            *n = n.saturating_sub(1);
        }
        if taken_back {
            self.taken_back = self.taken_back.saturating_sub(1);
        }
        Some(u)
    }

    /// Statements `user` runs.
    pub fn of(&self, user: u32) -> u32 {
        self.running.get(user as usize).copied().unwrap_or(0)
    }

    /// Statements running that were admitted as places taken back.
    pub fn taken_back(&self) -> usize {
        self.taken_back
    }

    /// User indexes worth looking at (every user that ran here is below).
    pub fn users(&self) -> u32 {
        self.running.len() as u32
    }

    /// Sum of the weights of the active users among the first `users`
    /// (running a statement, or `queued(u)`).
    pub fn active_weight(
        &self,
        users: u32,
        queued: impl Fn(u32) -> bool,
        weight_of: impl Fn(u32) -> u32,
    ) -> u64 {
        (0..users.max(self.users()))
            .filter(|&u| self.of(u) > 0 || queued(u))
            .map(|u| u64::from(weight_of(u).max(1)))
            .sum()
    }

    /// True when one more statement of `user` (weight `weight`) stays
    /// within its part of `limit`, given `total`, the active users' weights
    /// summed with `user` among them, and another user is active (whole
    /// places only: at a limit of 1 nobody is owed one), and the places
    /// taken back so far are fewer than the limit.
    pub fn owed(&self, user: u32, weight: u32, limit: usize, total: u64) -> bool {
        let w = u64::from(weight.max(1));
        total > w
            && self.taken_back < limit
            && u64::from(self.of(user) + 1) * total <= limit as u64 * w
    }
}

/// Backends counted for each user (tenant index) in one group, and when
/// each user last started or ended a statement there.
#[derive(Debug, Default)]
pub struct Holdings {
    owned: Vec<u32>,
    seen: Vec<Option<Instant>>,
}

impl Holdings {
    /// One more backend counts for `user` (`None`: no user's).
    pub fn own(&mut self, user: Option<u32>) {
        let Some(u) = user else { return };
        let i = u as usize;
        if self.owned.len() <= i {
            self.owned.resize(i + 1, 0);
        }
        self.owned[i] += 1;
    }

    /// One backend of `user` closed, or passed to another user.
    pub fn disown(&mut self, user: Option<u32>) {
        if let Some(n) = user.and_then(|u| self.owned.get_mut(u as usize)) {
            *n = n.saturating_sub(1);
        }
    }

    /// Backends counted for `user`.
    pub fn of(&self, user: u32) -> u32 {
        self.owned.get(user as usize).copied().unwrap_or(0)
    }

    /// User indexes worth looking at (every user holding one is below).
    pub fn users(&self) -> u32 {
        self.owned.len().max(self.seen.len()) as u32
    }

    /// A statement of `user` started or ended at `now`.
    pub fn touch(&mut self, user: u32, now: Instant) {
        let i = user as usize;
        if self.seen.len() <= i {
            self.seen.resize(i + 1, None);
        }
        self.seen[i] = Some(now);
    }

    fn recent(&self, user: u32, now: Instant) -> bool {
        self.seen
            .get(user as usize)
            .copied()
            .flatten()
            .is_some_and(|t| now.saturating_duration_since(t) < ACTIVE_FOR)
    }

    /// Which idle backends other users may close now (see the module doc).
    /// `total`: backends the group owns (any user's or none's); `users`:
    /// user indexes to look at (at least every queued one); `active(u)`:
    /// `u` runs or queues a statement; `weight(u)`: its weight; `asker`: a
    /// user asking now (active, at its weight).
    pub fn protection(
        &self,
        now: Instant,
        total: usize,
        users: u32,
        active: impl Fn(u32) -> bool,
        weight: impl Fn(u32) -> u32,
        asker: Option<(u32, u32)>,
    ) -> Protected {
        let n = users.max(self.users()).max(asker.map_or(0, |(a, _)| a + 1));
        let mut p = Protected::default();
        let mut sum = 0u64;
        for u in 0..n {
            let asking = asker.filter(|(a, _)| *a == u);
            let w = asking.map_or_else(|| weight(u), |(_, w)| w).max(1);
            let on = asking.is_some() || active(u) || self.recent(u, now);
            if on {
                sum += u64::from(w);
            }
            p.active.push(on);
            p.weight.push(w);
            p.owned.push(self.of(u));
        }
        p.over = (0..n as usize)
            .map(|u| u64::from(p.owned[u]) * sum > total as u64 * u64::from(p.weight[u]))
            .collect();
        p
    }
}

/// Which users' idle backends other users may close ([`Holdings::protection`]).
#[derive(Debug, Default)]
pub struct Protected {
    active: Vec<bool>,
    over: Vec<bool>,
    owned: Vec<u32>,
    weight: Vec<u32>,
}

impl Protected {
    /// True when an idle backend counted for `owner` may be closed for a
    /// lease of user `taker`: the same user's, no user's, an inactive
    /// user's, or one of a user over its part when the taker holds none or
    /// stays below the owner's load per weight after the move.
    pub fn may_close(&self, owner: Option<u32>, taker: u32) -> bool {
        let Some(o) = owner.map(|o| o as usize) else {
            return true;
        };
        if o == taker as usize || !self.active.get(o).copied().unwrap_or(false) {
            return true;
        }
        if !self.over.get(o).copied().unwrap_or(false) {
            return false;
        }
        let t = taker as usize;
        let held = u64::from(self.owned.get(t).copied().unwrap_or(0));
        let w_t = u64::from(self.weight.get(t).copied().unwrap_or(1));
        held == 0 || (held + 1) * u64::from(self.weight[o]) < u64::from(self.owned[o]) * w_t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Holdings of `owned[u]` backends per user.
    fn holdings(owned: &[u32]) -> Holdings {
        let mut h = Holdings::default();
        for (u, &n) in owned.iter().enumerate() {
            for _ in 0..n {
                h.own(Some(u as u32));
            }
        }
        h
    }

    fn running(per_user: &[u32]) -> Running {
        let mut r = Running::default();
        let mut id = 0;
        for (u, &n) in per_user.iter().enumerate() {
            for _ in 0..n {
                r.start(id, u as u32, false);
                id += 1;
            }
        }
        r
    }

    /// `r.owed` with the active weights as the scheduler sums them.
    fn owed(r: &Running, user: u32, w: impl Fn(u32) -> u32 + Copy, limit: usize) -> bool {
        let total = r.active_weight(8, |u| u == user, w);
        r.owed(user, w(user), limit, total)
    }

    #[test]
    fn a_user_under_its_part_of_the_limit_is_owed_a_place() {
        // batch (2) runs 8 of a limit of 8; web (1) runs 2.
        let mut r = running(&[0, 2, 8]);
        let one = |_| 1;
        assert!(owed(&r, 1, one, 8), "a third of a part of 4");
        assert!(!owed(&r, 2, one, 8), "batch is over its part");
        r.start(100, 1, true);
        assert!(owed(&r, 1, one, 8), "the fourth of 4");
        r.start(101, 1, true);
        assert!(!owed(&r, 1, one, 8), "a fifth of 4");
        // Weight 4 for web: a part of 6.4, whole places: 6.
        let w = |u: u32| if u == 1 { 4 } else { 1 };
        r.start(102, 1, true);
        assert!(owed(&r, 1, w, 8), "the sixth of 6.4");
        r.start(103, 1, true);
        assert!(!owed(&r, 1, w, 8), "a seventh of 6.4");
        assert_eq!(r.taken_back(), 4);
        // Ends give the places back; unknown ids change nothing.
        for id in 100..104 {
            assert_eq!(r.end(id), Some(1));
        }
        assert_eq!(r.end(999), None);
        assert_eq!((r.of(1), r.of(2), r.taken_back()), (2, 8, 0));
    }

    #[test]
    fn alone_a_user_is_owed_nothing_past_the_limit() {
        let r = running(&[0, 1]);
        assert!(!owed(&r, 1, |_| 1, 8), "nobody lent it");
        // A user that only queues is active too.
        let total = r.active_weight(3, |u| u == 2, |_| 1) + 1;
        assert!(r.owed(1, 1, 8, total));
        // Three users at weights 1, 2, 1, limit 8: parts 2, 4, 2.
        let r = running(&[0, 3, 3, 2]);
        let w = |u: u32| if u == 2 { 2 } else { 1 };
        assert!(!owed(&r, 1, w, 8), "a fourth of 2");
        assert!(owed(&r, 2, w, 8), "the fourth of 4");
        assert!(!owed(&r, 3, w, 8), "a third of 2");
        // At a limit of 1 a half place is no place.
        let r = running(&[0, 0, 1]);
        assert!(!owed(&r, 1, |_| 1, 1));
    }

    #[test]
    fn places_taken_back_never_exceed_the_limit() {
        // Four users arriving one after another each find a part owed:
        // 4 of 8, then 2 of the next part, … capped at 8 in all.
        let mut r = running(&[0, 8]);
        let mut id = 100;
        for user in 2..6u32 {
            while owed(&r, user, |_| 1, 8) {
                r.start(id, user, true);
                id += 1;
            }
        }
        assert_eq!(r.taken_back(), 8);
    }

    #[test]
    fn own_and_disown_count_per_user_and_ignore_no_user() {
        let mut h = Holdings::default();
        h.own(Some(2));
        h.own(Some(2));
        h.own(None);
        assert_eq!((h.of(0), h.of(2), h.of(9)), (0, 2, 0));
        h.disown(Some(2));
        h.disown(None);
        h.disown(Some(7));
        assert_eq!(h.of(2), 1);
        h.disown(Some(2));
        h.disown(Some(2));
        assert_eq!(h.of(2), 0, "never below zero");
    }

    /// Protection with `active` users and weights `w`, no asker.
    fn protection(h: &Holdings, total: usize, active: &[u32], w: fn(u32) -> u32) -> Protected {
        h.protection(Instant::now(), total, 4, |u| active.contains(&u), w, None)
    }

    #[test]
    fn an_active_user_within_its_part_keeps_its_idle_backends() {
        // 16 backends: web (1) holds 5, batch (2) 11; equal parts of 8.
        let h = holdings(&[0, 5, 11]);
        let p = protection(&h, 16, &[1, 2], |_| 1);
        assert!(!p.may_close(Some(1), 2), "web within its part keeps it");
        assert!(p.may_close(Some(2), 1), "batch over its part lends");
        assert!(p.may_close(Some(1), 1), "a user's own lease takes its own");
        assert!(p.may_close(None, 2), "no user's backend is anyone's");
    }

    #[test]
    fn weights_set_the_parts() {
        let h = holdings(&[0, 12, 4]);
        let w4 = |u: u32| if u == 1 { 4 } else { 1 };
        // web at 4:1 holds 12 of 16 (part 12.8): kept; batch 4 (part 3.2):
        // over, and web at 12 + 1 stays below batch's 4 per weight × 4.
        let p = protection(&h, 16, &[1, 2], w4);
        assert!(!p.may_close(Some(1), 2));
        assert!(p.may_close(Some(2), 1));
        // Equal weights: web over 8, batch within.
        let p = protection(&h, 16, &[1, 2], |_| 1);
        assert!(p.may_close(Some(1), 2));
        assert!(!p.may_close(Some(2), 1));
    }

    #[test]
    fn the_remainder_of_an_uneven_split_does_not_bounce() {
        // 3 backends, equal weights: 2 and 1. The one holding 2 is over its
        // 1.5, but the other taking one would only swap the two.
        let h = holdings(&[0, 2, 1]);
        let p = protection(&h, 3, &[1, 2], |_| 1);
        assert!(!p.may_close(Some(1), 2));
        assert!(!p.may_close(Some(2), 1));
        // At 4:1 over 16, 13 and 3 is where it rests: web takes the 13th
        // from batch's 4, batch takes none back.
        let w4 = |u: u32| if u == 1 { 4 } else { 1 };
        let h = holdings(&[0, 12, 4]);
        assert!(protection(&h, 16, &[1, 2], w4).may_close(Some(2), 1));
        let h = holdings(&[0, 13, 3]);
        let p = protection(&h, 16, &[1, 2], w4);
        assert!(!p.may_close(Some(2), 1) && !p.may_close(Some(1), 2));
        // A taker holding nothing always gets one from a user over its part.
        let h = holdings(&[0, 0, 1]);
        let p = h.protection(Instant::now(), 1, 3, |u| u == 2, |_| 1, Some((1, 1)));
        assert!(p.may_close(Some(2), 1));
    }

    #[test]
    fn an_inactive_user_keeps_nothing_a_recent_one_keeps_its_part() {
        let mut h = holdings(&[0, 3, 13]);
        let p = protection(&h, 16, &[2], |_| 1);
        assert!(p.may_close(Some(1), 2), "web ran nothing lately: lent");
        let t = Instant::now();
        h.touch(1, t);
        let at = |d| h.protection(t + d, 16, 4, |u| u == 2, |_| 1, None);
        assert!(
            !at(ACTIVE_FOR / 2).may_close(Some(1), 2),
            "between statements"
        );
        assert!(at(ACTIVE_FOR).may_close(Some(1), 2), "quiet since: lent");
    }

    #[test]
    fn the_asker_counts_among_the_active_users_whatever_its_index() {
        // batch alone holds all 16, busy: alone its part is everything.
        let h = holdings(&[0, 0, 16]);
        let p = protection(&h, 16, &[2], |_| 1);
        assert!(!p.may_close(Some(2), 1));
        // web asks (no backend here, index past every holder's): batch is
        // over half.
        let p = h.protection(Instant::now(), 16, 3, |u| u == 2, |_| 1, Some((7, 1)));
        assert!(p.may_close(Some(2), 7));
        // A queued user with an index past every holder's counts when the
        // caller names it among the users to look at.
        let p = h.protection(Instant::now(), 16, 8, |u| u == 2 || u == 7, |_| 1, None);
        assert!(p.may_close(Some(2), 7));
    }

    #[test]
    fn three_users_by_weight() {
        // Weights 1, 2, 1 over 12 backends: parts 3, 6, 3.
        let h = holdings(&[0, 4, 6, 2]);
        let w = |u: u32| if u == 2 { 2 } else { 1 };
        let p = protection(&h, 12, &[1, 2, 3], w);
        assert!(p.may_close(Some(1), 3), "4 of a part of 3, taker at 2");
        assert!(!p.may_close(Some(2), 1), "6 of 6: within");
        assert!(!p.may_close(Some(3), 1), "2 of 3: within");
    }
}
