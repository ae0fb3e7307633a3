//! One priority queue of a thread group, shared between users by weight
//! (design §6.2): start-time fair queueing over one FIFO lane per user.
//!
//! Each queued request gets a start tag `max(virtual time, the lane's last
//! finish)`; the lane's finish then moves `STEP / weight` on. The request
//! with the smallest tag among the lanes' heads goes first, and the
//! virtual time follows the tags dispatched. So under contention a user
//! with weight 4 gets four grants for every one of a user with weight 1;
//! inside a lane the order is arrival order. A lane that was empty starts
//! at the current virtual time: an idle user keeps no credit, and while it
//! has nothing queued the others take its part (work-conserving — nothing
//! is ever reserved).
//!
//! The lanes' heads sit in a min-heap keyed by tag (stale entries are
//! dropped lazily), so a dispatch is O(log users) and the one-user case
//! allocates nothing per request once the lane exists. When the smallest
//! head cannot run (a lease with no backend to be had, or a user at its
//! backend cap), [`FairQueue::select`] scans the lanes for the runnable
//! request with the smallest tag (the rare path: the pool is exhausted).
//! Pure data; the scheduler ([`super::scheduler`]) decides what can run.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Tag distance of one request at weight 1 (divisible by every weight up
/// to 1000 closely enough: the remainder is below one part in a thousand).
pub const STEP: u64 = 1 << 20;

struct Lane<W> {
    /// (start tag, light, request).
    q: VecDeque<(u64, bool, W)>,
    /// Finish tag of the lane's last request.
    finish: u64,
    /// Requests queued as *light* (they can always run: a pinned session's
    /// slot request), so the slow path skips lanes without any.
    light: usize,
}

/// One priority queue: per-user FIFO lanes served by weighted fair share.
pub struct FairQueue<W> {
    lanes: Vec<Lane<W>>,
    /// (head tag, lane) of every non-empty lane, plus stale entries.
    heads: BinaryHeap<Reverse<(u64, u32)>>,
    /// Virtual time: the largest tag dispatched.
    vtime: u64,
    len: usize,
}

impl<W> Default for FairQueue<W> {
    fn default() -> Self {
        Self {
            lanes: Vec::new(),
            heads: BinaryHeap::new(),
            vtime: 0,
            len: 0,
        }
    }
}

/// Virtual time at which every tag is moved back by the virtual time (so
/// tags never overflow: at 2^20 per request this is ~2^42 requests).
const REBASE: u64 = 1 << 62;

fn step(weight: u32) -> u64 {
    STEP / u64::from(weight.max(1))
}

impl<W> FairQueue<W> {
    /// Requests queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn lane(&mut self, lane: u32) -> &mut Lane<W> {
        let i = lane as usize;
        if self.lanes.len() <= i {
            self.lanes.resize_with(i + 1, || Lane {
                q: VecDeque::new(),
                finish: 0,
                light: 0,
            });
        }
        &mut self.lanes[i]
    }

    /// The next start tag of `lane`, advancing its finish.
    fn next_tag(&mut self, lane: u32, weight: u32) -> u64 {
        let vtime = self.vtime;
        let l = self.lane(lane);
        let start = vtime.max(l.finish);
        l.finish = start + step(weight);
        start
    }

    /// Queues `w` at the tail of `lane`; `light` when it can always run
    /// (the selection's `runnable` must accept every light request).
    pub fn push(&mut self, lane: u32, weight: u32, light: bool, w: W) {
        let tag = self.next_tag(lane, weight);
        let l = self.lane(lane);
        if l.q.is_empty() {
            self.heads.push(Reverse((tag, lane)));
        }
        let l = self.lane(lane);
        l.q.push_back((tag, light, w));
        l.light += usize::from(light);
        self.len += 1;
    }

    /// Counts a request of `lane` granted without queueing (it used part of
    /// the share all the same).
    pub fn charge(&mut self, lane: u32, weight: u32) {
        let tag = self.next_tag(lane, weight);
        self.advance(tag);
    }

    /// Moves the virtual time to `tag` (if later); far along, moves every
    /// tag back by it (their order is kept).
    fn advance(&mut self, tag: u64) {
        self.vtime = self.vtime.max(tag);
        if self.vtime < REBASE {
            return;
        }
        let base = self.vtime;
        for l in &mut self.lanes {
            l.finish = l.finish.saturating_sub(base);
            for (t, _, _) in l.q.iter_mut() {
                *t = t.saturating_sub(base);
            }
        }
        self.vtime = 0;
        self.heads.clear();
        for (li, l) in self.lanes.iter().enumerate() {
            if let Some((tag, _, _)) = l.q.front() {
                self.heads.push(Reverse((*tag, li as u32)));
            }
        }
    }

    /// The lane and position of the request to serve next among those
    /// `runnable` accepts: the smallest tag. `None` when none can run.
    pub fn select(&mut self, runnable: impl Fn(&W) -> bool) -> Option<(u32, usize)> {
        // Fast path: the smallest head, dropping stale heap entries.
        while let Some(&Reverse((tag, lane))) = self.heads.peek() {
            match self.lanes.get(lane as usize).and_then(|l| l.q.front()) {
                Some((t, _, w)) if *t == tag => {
                    if runnable(w) {
                        return Some((lane, 0));
                    }
                    break;
                }
                _ => {
                    self.heads.pop();
                }
            }
        }
        if self.heads.is_empty() {
            return None;
        }
        // The smallest head cannot run: the best runnable request anywhere
        // (a lane whose head cannot run is searched only for light ones).
        let mut best: Option<(u64, u32, usize)> = None;
        for (li, l) in self.lanes.iter().enumerate() {
            let Some((_, _, head)) = l.q.front() else {
                continue;
            };
            let found = if runnable(head) {
                Some(0)
            } else if l.light > 0 {
                l.q.iter().position(|(_, light, w)| *light || runnable(w))
            } else {
                None
            };
            if let Some(pos) = found {
                let tag = l.q[pos].0;
                if best.is_none_or(|(t, _, _)| tag < t) {
                    best = Some((tag, li as u32, pos));
                }
            }
        }
        best.map(|(_, lane, pos)| (lane, pos))
    }

    /// True when some queued request is one `runnable` accepts, in as many
    /// steps as there are lanes: a lane's requests share its user, so one
    /// whose head cannot run holds only light ones that can.
    pub fn any_runnable(&self, runnable: impl Fn(&W) -> bool) -> bool {
        self.lanes
            .iter()
            .any(|l| l.light > 0 || l.q.front().is_some_and(|(_, _, head)| runnable(head)))
    }

    /// True when some lane holds a request that is not light and whose
    /// user `user_ok` accepts (judged on the lane's head: one user a lane).
    pub fn any_heavy(&self, user_ok: impl Fn(&W) -> bool) -> bool {
        self.lanes
            .iter()
            .any(|l| l.q.len() > l.light && l.q.front().is_some_and(|(_, _, head)| user_ok(head)))
    }

    /// The request at `pos` of `lane`.
    pub fn get(&self, lane: u32, pos: usize) -> Option<&W> {
        self.lanes
            .get(lane as usize)
            .and_then(|l| l.q.get(pos))
            .map(|(_, _, w)| w)
    }

    fn remove_at(&mut self, lane: u32, pos: usize) -> Option<(u64, W)> {
        let l = self.lanes.get_mut(lane as usize)?;
        let (tag, light, w) = l.q.remove(pos)?;
        l.light -= usize::from(light);
        let out = (tag, w);
        if pos == 0
            && let Some((tag, _, _)) = l.q.front()
        {
            self.heads.push(Reverse((*tag, lane)));
        }
        self.len -= 1;
        self.compact();
        Some(out)
    }

    /// Takes the request at `pos` of `lane` to serve it (the virtual time
    /// moves to its tag).
    pub fn take(&mut self, lane: u32, pos: usize) -> Option<W> {
        let (tag, w) = self.remove_at(lane, pos)?;
        self.advance(tag);
        Some(w)
    }

    /// Removes the first request `pred` accepts (a cancel), without
    /// counting it as served.
    pub fn remove_where(&mut self, pred: impl Fn(&W) -> bool) -> Option<W> {
        let (lane, pos) = self.lanes.iter().enumerate().find_map(|(li, l)| {
            l.q.iter()
                .position(|(_, _, w)| pred(w))
                .map(|pos| (li as u32, pos))
        })?;
        self.remove_at(lane, pos).map(|(_, w)| w)
    }

    /// Removes the lane head with the smallest `key` if `pred` accepts it
    /// (kickup: the oldest low-priority request; each lane's head is its
    /// oldest).
    pub fn pop_min_head_if<K: Ord>(
        &mut self,
        key: impl Fn(&W) -> K,
        pred: impl Fn(&W) -> bool,
    ) -> Option<(u32, bool, W)> {
        let (lane, _) = self
            .lanes
            .iter()
            .enumerate()
            .filter_map(|(li, l)| l.q.front().map(|(_, _, w)| (li as u32, key(w))))
            .min_by(|a, b| a.1.cmp(&b.1))?;
        let w = self.get(lane, 0)?;
        if !pred(w) {
            return None;
        }
        let light = self.lanes.get(lane as usize)?.q.front()?.1;
        self.remove_at(lane, 0).map(|(_, w)| (lane, light, w))
    }

    /// Every queued request (lane by lane, each in arrival order).
    pub fn iter(&self) -> impl Iterator<Item = &W> {
        self.lanes
            .iter()
            .flat_map(|l| l.q.iter().map(|(_, _, w)| w))
    }

    /// Rebuilds the heap when stale entries pile up (cancels of heads
    /// without dispatches): it stays within a few times the lane count.
    fn compact(&mut self) {
        if self.heads.len() <= 2 * self.lanes.len() + 16 {
            return;
        }
        self.heads.clear();
        for (li, l) in self.lanes.iter().enumerate() {
            if let Some((tag, _, _)) = l.q.front() {
                self.heads.push(Reverse((*tag, li as u32)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `n` requests with every lane backlogged; grants per lane.
    fn serve(weights: &[u32], n: usize) -> Vec<usize> {
        let mut q = FairQueue::default();
        for (lane, w) in weights.iter().enumerate() {
            for i in 0..n {
                q.push(lane as u32, *w, false, (lane, i));
            }
        }
        let mut got = vec![0; weights.len()];
        for _ in 0..n {
            let (lane, pos) = q.select(|_| true).expect("backlogged");
            let (l, _) = q.take(lane, pos).expect("present");
            got[l] += 1;
        }
        got
    }

    #[test]
    fn backlogged_lanes_share_by_weight() {
        assert_eq!(serve(&[1, 1], 100), vec![50, 50]);
        assert_eq!(serve(&[4, 1], 100), vec![80, 20]);
        assert_eq!(serve(&[1, 2, 3], 120), vec![20, 40, 60]);
    }

    #[test]
    fn tags_are_moved_back_before_they_could_overflow() {
        let mut q = FairQueue {
            vtime: REBASE - 3 * STEP,
            ..FairQueue::default()
        };
        for i in 0..6 {
            q.push(0, 1, false, (0, i));
            q.push(1, 2, false, (1, i));
        }
        let mut order = Vec::new();
        for _ in 0..12 {
            let (l, p) = q.select(|_| true).expect("queued");
            order.push(q.take(l, p).expect("present"));
        }
        assert!(q.vtime < REBASE / 2, "rebased: {}", q.vtime);
        // Same order as without the rebase: lane 1 twice as often, FIFO.
        let lane1: Vec<_> = order
            .iter()
            .filter(|(l, _)| *l == 1)
            .map(|(_, i)| *i)
            .collect();
        assert_eq!(lane1, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(order.iter().take(6).filter(|(l, _)| *l == 1).count(), 4);
    }

    #[test]
    fn fifo_inside_a_lane_and_cancel_keeps_order() {
        let mut q = FairQueue::default();
        for i in 0..5 {
            q.push(0, 1, false, i);
        }
        assert_eq!(q.remove_where(|w| *w == 0), Some(0));
        assert_eq!(q.remove_where(|w| *w == 2), Some(2));
        let mut out = Vec::new();
        while let Some((l, p)) = q.select(|_| true) {
            out.extend(q.take(l, p));
        }
        assert_eq!(out, vec![1, 3, 4]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_lane_that_was_idle_keeps_no_credit() {
        let mut q = FairQueue::default();
        // Lane 0 alone for a while: it takes everything.
        for i in 0..10 {
            q.push(0, 1, false, (0, i));
        }
        for _ in 0..10 {
            let (l, p) = q.select(|_| true).expect("queued");
            q.take(l, p);
        }
        // Lane 1 arrives: it does not get ten grants in a row to catch up.
        for i in 0..10 {
            q.push(0, 1, false, (0, 10 + i));
            q.push(1, 1, false, (1, i));
        }
        let mut first = Vec::new();
        for _ in 0..4 {
            let (l, p) = q.select(|_| true).expect("queued");
            first.push(q.take(l, p).expect("present").0);
        }
        first.sort_unstable();
        assert_eq!(first, vec![0, 0, 1, 1]);
    }

    #[test]
    fn an_unrunnable_head_yields_to_the_best_runnable() {
        let mut q = FairQueue::default();
        q.push(0, 1, false, "lease-a");
        q.push(1, 1, false, "lease-b");
        q.push(1, 1, true, "slot-b");
        q.push(0, 1, true, "slot-a");
        let (l, p) = q.select(|w| w.starts_with("slot")).expect("a slot");
        // Both slots have the second tag of their lane: the tie goes to
        // the lower lane.
        assert_eq!(q.take(l, p), Some("slot-a"));
        let (l, p) = q.select(|w| w.starts_with("slot")).expect("a slot");
        assert_eq!(q.take(l, p), Some("slot-b"));
        assert_eq!(q.select(|w| w.starts_with("slot")), None);
        assert_eq!(q.len(), 2);
    }
}
