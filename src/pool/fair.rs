//! The queue of a thread group, shared between users by weight (design
//! §6.2, issue 19): start-time fair queueing over one lane per user, each
//! lane holding that user's high-priority requests (statements of a
//! transaction in progress) ahead of its low-priority ones.
//!
//! The user is picked first, the priority second: a transaction in progress
//! goes first *within its user's share*. Serving every high request of every
//! user before any low one (two queues, each shared by weight) let a user
//! with hundreds of open transactions take every grant from a user whose
//! statements are all autocommit, whatever the weights (measured:
//! docs/benchmarks.md, "Noisy neighbour").
//!
//! Each lane has a start tag for its next grant: `max(virtual time, the
//! lane's last finish)` when it becomes non-empty, its last finish while it
//! stays backlogged; a grant (or a [`FairQueue::charge`] for one given
//! without queueing) moves the lane's finish `STEP / weight` on. The lane
//! with the smallest tag goes first (on equal tags, one whose next request
//! is high priority), and the virtual time follows the tags served. So under
//! contention a user with weight 4 gets four grants for every one of a user
//! with weight 1; inside a lane high requests go first, each priority in
//! arrival order. A lane that was empty starts at the current virtual time:
//! an idle user keeps no credit, and while it has nothing queued the others
//! take its part (work-conserving — nothing is ever reserved).
//!
//! The lanes' tags sit in a min-heap (stale entries are dropped lazily), so
//! a dispatch is O(log users) and the one-user case allocates nothing per
//! request once the lane exists. When the best lane's next request cannot
//! run (a lease with no backend to be had, or a user at its backend cap),
//! [`FairQueue::select`] scans the lanes for a runnable request (the rare
//! path: the pool is exhausted). Pure data; the scheduler
//! ([`super::scheduler`]) decides what can run.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Tag distance of one request at weight 1 (divisible by every weight up
/// to 1000 closely enough: the remainder is below one part in a thousand).
pub const STEP: u64 = 1 << 20;

/// Where a request sits in its lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    /// In the lane's high-priority part.
    pub high: bool,
    /// Index in that part (0: its oldest).
    pub index: usize,
}

struct Lane<W> {
    /// (light, request), each part in arrival order. A request is *light*
    /// when it can always run (a pinned session's slot request), so the
    /// slow path skips lanes without any.
    high: VecDeque<(bool, W)>,
    low: VecDeque<(bool, W)>,
    /// Start tag of the lane's next grant (meaningful while it is queued).
    head: u64,
    /// Finish tag of the lane's last grant.
    finish: u64,
    /// The user's weight, as of its last request.
    weight: u32,
    /// Light requests queued, both parts.
    light: usize,
}

impl<W> Lane<W> {
    fn len(&self) -> usize {
        self.high.len() + self.low.len()
    }

    fn is_empty(&self) -> bool {
        self.high.is_empty() && self.low.is_empty()
    }

    /// The request this lane serves next, with its priority bit (0 high).
    fn next(&self) -> Option<(u8, &W)> {
        match self.high.front() {
            Some((_, w)) => Some((0, w)),
            None => self.low.front().map(|(_, w)| (1, w)),
        }
    }

    fn part(&self, high: bool) -> &VecDeque<(bool, W)> {
        if high { &self.high } else { &self.low }
    }

    fn part_mut(&mut self, high: bool) -> &mut VecDeque<(bool, W)> {
        if high { &mut self.high } else { &mut self.low }
    }
}

/// The group's queue: per-user lanes served by weighted fair share.
pub struct FairQueue<W> {
    lanes: Vec<Lane<W>>,
    /// (lane tag, priority bit of its next request, lane) of every
    /// non-empty lane, plus stale entries.
    heads: BinaryHeap<Reverse<(u64, u8, u32)>>,
    /// Virtual time: the largest tag served.
    vtime: u64,
    high_len: usize,
    low_len: usize,
}

impl<W> Default for FairQueue<W> {
    fn default() -> Self {
        Self {
            lanes: Vec::new(),
            heads: BinaryHeap::new(),
            vtime: 0,
            high_len: 0,
            low_len: 0,
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
        self.high_len + self.low_len
    }

    /// High-priority requests queued.
    pub fn len_high(&self) -> usize {
        self.high_len
    }

    /// Low-priority requests queued.
    pub fn len_low(&self) -> usize {
        self.low_len
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lane(&mut self, lane: u32) -> &mut Lane<W> {
        let i = lane as usize;
        if self.lanes.len() <= i {
            self.lanes.resize_with(i + 1, || Lane {
                high: VecDeque::new(),
                low: VecDeque::new(),
                head: 0,
                finish: 0,
                weight: 1,
                light: 0,
            });
        }
        &mut self.lanes[i]
    }

    /// Puts `lane`'s current tag and next request's priority on the heap.
    fn push_head(&mut self, lane: u32) {
        if let Some(l) = self.lanes.get(lane as usize)
            && let Some((prio, _)) = l.next()
        {
            self.heads.push(Reverse((l.head, prio, lane)));
        }
    }

    /// Lanes the queue has seen (an upper bound on the users' indexes).
    pub fn lanes(&self) -> u32 {
        self.lanes.len() as u32
    }

    /// The next request of the lane with the smallest tag among those
    /// `lane_ok(lane, weight)` accepts whose next request `runnable`
    /// accepts (the share's own order, restricted to some users).
    pub fn select_among(
        &self,
        lane_ok: impl Fn(u32, u32) -> bool,
        runnable: impl Fn(&W) -> bool,
    ) -> Option<(u32, Pos)> {
        let mut best: Option<(u64, u8, u32)> = None;
        for (li, l) in self.lanes.iter().enumerate() {
            let Some((prio, next)) = l.next() else {
                continue;
            };
            let key = (l.head, prio, li as u32);
            if best.is_none_or(|b| key < b) && lane_ok(li as u32, l.weight) && runnable(next) {
                best = Some(key);
            }
        }
        best.map(|(_, prio, lane)| {
            (
                lane,
                Pos {
                    high: prio == 0,
                    index: 0,
                },
            )
        })
    }

    /// True when `lane` has requests queued.
    pub fn lane_queued(&self, lane: u32) -> bool {
        self.lanes.get(lane as usize).is_some_and(|l| !l.is_empty())
    }

    /// `lane`'s weight as of its last request (1 for a lane never seen).
    pub fn lane_weight(&self, lane: u32) -> u32 {
        self.lanes.get(lane as usize).map_or(1, |l| l.weight)
    }

    /// Queues `w` at the tail of `lane`'s `high` or low part; `light` when
    /// it can always run (the selection's `runnable` must accept every
    /// light request).
    pub fn push(&mut self, lane: u32, weight: u32, high: bool, light: bool, w: W) {
        let vtime = self.vtime;
        let l = self.lane(lane);
        l.weight = weight;
        let was_empty = l.is_empty();
        let head_was_low = l.high.is_empty();
        if was_empty {
            l.head = vtime.max(l.finish);
        }
        l.part_mut(high).push_back((light, w));
        l.light += usize::from(light);
        if high {
            self.high_len += 1;
        } else {
            self.low_len += 1;
        }
        if was_empty || (high && head_was_low) {
            self.push_head(lane);
        }
    }

    /// Counts a request of `lane` granted without queueing (it used part of
    /// the user's share all the same).
    pub fn charge(&mut self, lane: u32, weight: u32) {
        let vtime = self.vtime;
        let l = self.lane(lane);
        l.weight = weight;
        let start = if l.is_empty() {
            vtime.max(l.finish)
        } else {
            l.head
        };
        l.finish = start + step(weight);
        if !l.is_empty() {
            l.head = l.finish;
            self.push_head(lane);
            self.compact();
        }
        self.advance(start);
    }

    /// `lane` was served: its finish moves on, and so does its tag.
    fn serve(&mut self, lane: u32) {
        let Some(l) = self.lanes.get_mut(lane as usize) else {
            return;
        };
        let start = l.head;
        l.finish = start + step(l.weight);
        if !l.is_empty() {
            l.head = l.finish;
            self.push_head(lane);
        }
        self.advance(start);
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
            l.head = l.head.saturating_sub(base);
        }
        self.vtime = 0;
        self.rebuild();
    }

    fn rebuild(&mut self) {
        self.heads.clear();
        for li in 0..self.lanes.len() {
            self.push_head(li as u32);
        }
    }

    /// The lane and position of the request to serve next among those
    /// `runnable` accepts: the lane with the smallest tag, its high part
    /// first. `None` when none can run.
    pub fn select(&mut self, runnable: impl Fn(&W) -> bool) -> Option<(u32, Pos)> {
        // Fast path: the smallest tag, dropping stale heap entries.
        while let Some(&Reverse((tag, prio, lane))) = self.heads.peek() {
            let current = self
                .lanes
                .get(lane as usize)
                .and_then(|l| l.next().filter(|(p, _)| l.head == tag && *p == prio));
            match current {
                Some((_, w)) => {
                    if runnable(w) {
                        let pos = Pos {
                            high: prio == 0,
                            index: 0,
                        };
                        return Some((lane, pos));
                    }
                    break;
                }
                None => {
                    self.heads.pop();
                }
            }
        }
        if self.heads.is_empty() {
            return None;
        }
        // The best lane's next request cannot run: the best runnable request
        // anywhere (a lane whose next request cannot run is searched only
        // for light ones).
        let mut best: Option<(u64, u8, u32, Pos)> = None;
        for (li, l) in self.lanes.iter().enumerate() {
            let Some((prio, next)) = l.next() else {
                continue;
            };
            let found = if runnable(next) {
                Some(Pos {
                    high: prio == 0,
                    index: 0,
                })
            } else if l.light > 0 {
                [true, false].into_iter().find_map(|high| {
                    l.part(high)
                        .iter()
                        .position(|(light, w)| *light || runnable(w))
                        .map(|index| Pos { high, index })
                })
            } else {
                None
            };
            if let Some(pos) = found {
                let key = (l.head, u8::from(!pos.high), li as u32);
                if best.is_none_or(|(t, p, b, _)| key < (t, p, b)) {
                    best = Some((key.0, key.1, key.2, pos));
                }
            }
        }
        best.map(|(_, _, lane, pos)| (lane, pos))
    }

    /// True when another user waits whose lane's tag is before the one
    /// `lane`'s next grant would get: a grant to `lane` now, outside the
    /// queue, would go ahead of a share that is owed. Only lanes whose next
    /// request `runnable` accepts (or that hold a
    /// light one) count: a user that cannot run now is owed nothing now.
    pub fn owes_others(&self, lane: u32, runnable: impl Fn(&W) -> bool) -> bool {
        if self.is_empty() {
            return false;
        }
        let mine = match self.lanes.get(lane as usize) {
            Some(l) if !l.is_empty() => l.head,
            Some(l) => self.vtime.max(l.finish),
            None => self.vtime,
        };
        self.lanes.iter().enumerate().any(|(i, l)| {
            i != lane as usize
                && l.head < mine
                && (l.light > 0 || l.next().is_some_and(|(_, w)| runnable(w)))
        })
    }

    /// True when some queued request is one `runnable` accepts, in as many
    /// steps as there are lanes: a lane's requests share its user, so one
    /// whose next request cannot run holds only light ones that can.
    pub fn any_runnable(&self, runnable: impl Fn(&W) -> bool) -> bool {
        self.lanes
            .iter()
            .any(|l| l.light > 0 || l.next().is_some_and(|(_, w)| runnable(w)))
    }

    /// True when some lane holds a request that is not light and whose
    /// user `user_ok` accepts (judged on the lane's next request: one user
    /// a lane).
    pub fn any_heavy(&self, user_ok: impl Fn(&W) -> bool) -> bool {
        self.lanes
            .iter()
            .any(|l| l.len() > l.light && l.next().is_some_and(|(_, w)| user_ok(w)))
    }

    /// The request at `pos` of `lane`.
    pub fn get(&self, lane: u32, pos: Pos) -> Option<&W> {
        self.lanes
            .get(lane as usize)
            .and_then(|l| l.part(pos.high).get(pos.index))
            .map(|(_, w)| w)
    }

    /// Removes the request at `pos` of `lane` (the lane's tag is kept).
    fn remove_at(&mut self, lane: u32, pos: Pos) -> Option<(bool, W)> {
        let l = self.lanes.get_mut(lane as usize)?;
        let (light, w) = l.part_mut(pos.high).remove(pos.index)?;
        l.light -= usize::from(light);
        // The last high request gone: the lane's next one is low now.
        let next_turned_low = pos.high && l.high.is_empty() && !l.low.is_empty();
        if pos.high {
            self.high_len -= 1;
        } else {
            self.low_len -= 1;
        }
        if next_turned_low {
            self.push_head(lane);
        }
        self.compact();
        Some((light, w))
    }

    /// Takes the request at `pos` of `lane` to serve it (the lane's turn is
    /// used; the virtual time moves to its tag).
    pub fn take(&mut self, lane: u32, pos: Pos) -> Option<W> {
        let (_, w) = self.remove_at(lane, pos)?;
        self.serve(lane);
        Some(w)
    }

    /// Removes the first request `pred` accepts (a cancel), without
    /// counting it as served.
    pub fn remove_where(&mut self, pred: impl Fn(&W) -> bool) -> Option<W> {
        let (lane, pos) = self.lanes.iter().enumerate().find_map(|(li, l)| {
            [true, false].into_iter().find_map(|high| {
                l.part(high)
                    .iter()
                    .position(|(_, w)| pred(w))
                    .map(|index| (li as u32, Pos { high, index }))
            })
        })?;
        self.remove_at(lane, pos).map(|(_, w)| w)
    }

    /// The oldest request of one priority by `key` among the lanes (each
    /// part's first is its oldest), with its lane.
    fn min_first<K: Ord>(&self, high: bool, key: impl Fn(&W) -> K) -> Option<u32> {
        self.lanes
            .iter()
            .enumerate()
            .filter_map(|(li, l)| l.part(high).front().map(|(_, w)| (li as u32, key(w))))
            .min_by(|a, b| a.1.cmp(&b.1))
            .map(|(lane, _)| lane)
    }

    /// Removes the request of priority `high` with the smallest `key` among
    /// the lanes' oldest if `pred` accepts it (a request admitted out of
    /// turn: overdue, or a stall's extra slot), with its lane and
    /// lightness. Its user is charged for it as for any grant.
    pub fn pop_min_first_if<K: Ord>(
        &mut self,
        high: bool,
        key: impl Fn(&W) -> K,
        pred: impl Fn(&W) -> bool,
    ) -> Option<(u32, bool, W)> {
        let lane = self.min_first(high, key)?;
        if !pred(self.get(lane, Pos { high, index: 0 })?) {
            return None;
        }
        let (light, w) = self.remove_at(lane, Pos { high, index: 0 })?;
        self.serve(lane);
        Some((lane, light, w))
    }

    /// Moves the oldest low-priority request by `key` to the tail of its
    /// lane's high part if `pred` accepts it (kickup). True when one moved.
    pub fn kick_up_oldest_if<K: Ord>(
        &mut self,
        key: impl Fn(&W) -> K,
        pred: impl Fn(&W) -> bool,
    ) -> bool {
        let Some(lane) = self.min_first(false, key) else {
            return false;
        };
        let Some(l) = self.lanes.get_mut(lane as usize) else {
            return false;
        };
        if !l.low.front().is_some_and(|(_, w)| pred(w)) {
            return false;
        }
        let Some(item) = l.low.pop_front() else {
            return false;
        };
        let head_was_low = l.high.is_empty();
        l.high.push_back(item);
        self.low_len -= 1;
        self.high_len += 1;
        if head_was_low {
            self.push_head(lane);
        }
        true
    }

    /// Every queued request (lane by lane, high part first, each in arrival
    /// order).
    pub fn iter(&self) -> impl Iterator<Item = &W> {
        self.lanes
            .iter()
            .flat_map(|l| l.high.iter().chain(l.low.iter()).map(|(_, w)| w))
    }

    /// Rebuilds the heap when stale entries pile up (cancels without
    /// dispatches): it stays within a few times the lane count.
    fn compact(&mut self) {
        if self.heads.len() > 2 * self.lanes.len() + 16 {
            self.rebuild();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves every queued request, in order.
    fn drain<W>(q: &mut FairQueue<W>) -> Vec<W> {
        let mut out = Vec::new();
        while let Some((l, p)) = q.select(|_| true) {
            out.extend(q.take(l, p));
        }
        out
    }

    /// Serves `n` requests with every lane backlogged; grants per lane.
    fn serve(weights: &[u32], n: usize) -> Vec<usize> {
        let mut q = FairQueue::default();
        for (lane, w) in weights.iter().enumerate() {
            for i in 0..n {
                q.push(lane as u32, *w, false, false, (lane, i));
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
            q.push(0, 1, false, false, (0, i));
            q.push(1, 2, false, false, (1, i));
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
            q.push(0, 1, false, false, i);
        }
        assert_eq!(q.remove_where(|w| *w == 0), Some(0));
        assert_eq!(q.remove_where(|w| *w == 2), Some(2));
        let out = drain(&mut q);
        assert_eq!(out, vec![1, 3, 4]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_lane_that_was_idle_keeps_no_credit() {
        let mut q = FairQueue::default();
        // Lane 0 alone for a while: it takes everything.
        for i in 0..10 {
            q.push(0, 1, false, false, (0, i));
        }
        for _ in 0..10 {
            let (l, p) = q.select(|_| true).expect("queued");
            q.take(l, p);
        }
        // Lane 1 arrives: it does not get ten grants in a row to catch up.
        for i in 0..10 {
            q.push(0, 1, false, false, (0, 10 + i));
            q.push(1, 1, false, false, (1, i));
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
        q.push(0, 1, false, false, "lease-a");
        q.push(1, 1, false, false, "lease-b");
        q.push(1, 1, false, true, "slot-b");
        q.push(0, 1, false, true, "slot-a");
        let (l, p) = q.select(|w| w.starts_with("slot")).expect("a slot");
        // Both slots have the second tag of their lane: the tie goes to
        // the lower lane.
        assert_eq!(q.take(l, p), Some("slot-a"));
        let (l, p) = q.select(|w| w.starts_with("slot")).expect("a slot");
        assert_eq!(q.take(l, p), Some("slot-b"));
        assert_eq!(q.select(|w| w.starts_with("slot")), None);
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn high_requests_go_first_inside_a_lane() {
        let mut q = FairQueue::default();
        q.push(0, 1, false, false, "low-a");
        q.push(0, 1, false, false, "low-b");
        q.push(0, 1, true, false, "high-c");
        q.push(0, 1, true, false, "high-d");
        assert_eq!((q.len_high(), q.len_low()), (2, 2));
        let out = drain(&mut q);
        assert_eq!(out, vec!["high-c", "high-d", "low-a", "low-b"]);
    }

    #[test]
    fn one_users_transactions_do_not_go_before_anothers_share() {
        // Lane 0 has only transactions in progress (high), lane 1 only
        // autocommit statements (low): the users alternate by weight, the
        // priority does not decide between them.
        for (weights, want) in [([1, 1], [20, 20]), ([1, 4], [8, 32])] {
            let mut q = FairQueue::default();
            for i in 0..40 {
                q.push(0, weights[0], true, false, (0, i));
                q.push(1, weights[1], false, false, (1, i));
            }
            let mut got = [0; 2];
            for _ in 0..40 {
                let (l, p) = q.select(|_| true).expect("backlogged");
                got[q.take(l, p).expect("present").0] += 1;
            }
            assert_eq!(got, want, "weights {weights:?}");
        }
    }

    #[test]
    fn grants_made_without_queueing_count_against_the_share() {
        // Lane 0's transactions continue without queueing (charged); lane 1
        // waits: it is served before lane 0's next queued request.
        let mut q = FairQueue::default();
        q.push(0, 1, false, false, "begin-0");
        q.push(1, 1, false, false, "select-1");
        for _ in 0..3 {
            q.charge(0, 1);
        }
        let (l, p) = q.select(|_| true).expect("queued");
        assert_eq!(q.take(l, p), Some("select-1"));
    }

    #[test]
    fn kickup_moves_the_oldest_low_request_to_its_lanes_high_tail() {
        let mut q = FairQueue::default();
        q.push(0, 1, false, false, (0, 5));
        q.push(1, 1, false, false, (1, 1));
        q.push(1, 1, true, false, (1, 9));
        assert!(q.kick_up_oldest_if(|w| w.1, |w| w.1 < 3));
        assert!(
            !q.kick_up_oldest_if(|w| w.1, |w| w.1 < 3),
            "only one was old"
        );
        assert_eq!((q.len_high(), q.len_low()), (2, 1));
        let order: Vec<_> = q.iter().copied().collect();
        assert_eq!(order, vec![(0, 5), (1, 9), (1, 1)]);
    }

    #[test]
    fn a_lane_ahead_of_its_share_owes_the_others() {
        let mut q: FairQueue<u32> = FairQueue::default();
        assert!(!q.owes_others(0, |_| true), "nothing waits");
        q.push(1, 1, false, false, 10);
        assert!(!q.owes_others(0, |_| true), "lane 0 has used nothing: even");
        q.charge(0, 1);
        assert!(
            q.owes_others(0, |_| true),
            "lane 0 took a grant ahead of lane 1's"
        );
        assert!(!q.owes_others(1, |_| true), "a lane does not owe itself");
        // Lane 1 served: even again.
        let (l, p) = q.select(|_| true).expect("queued");
        q.take(l, p);
        q.push(1, 1, false, false, 11);
        assert!(!q.owes_others(0, |_| true));
        // Lane 0 ahead again, but lane 1's request cannot run now: owed
        // nothing until it can (a light one always can).
        q.charge(0, 1);
        assert!(q.owes_others(0, |_| true));
        assert!(!q.owes_others(0, |w| *w != 11));
        q.push(1, 1, false, true, 12);
        assert!(q.owes_others(0, |w| *w != 11));
    }
}
