//! The thread-group scheduler: `GroupState` request/complete cycles with
//! empty queues and with 1,000 waiters queued, `Group::acquire` +
//! `SlotGuard::finish` on a current-thread runtime (immediate grants and
//! hand-offs through the queue), and `priority()`.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tokio::sync::oneshot;
use tokio::time::Instant;

use myplex::config::HighPrioMode;
use myplex::pool::group::Group;
use myplex::pool::scheduler::{
    Admission, Grant, GroupState, Limits, Need, Pooled, Priority, priority,
};
use myplex::pool::tenants::{Tenant, TenantLimits};

/// Waiters kept queued in the contended cases.
const WAITERS: usize = 1_000;

/// A stand-in backend connection.
#[derive(Debug)]
struct Conn(usize);

impl Pooled for Conn {
    fn pool(&self) -> usize {
        self.0
    }
    fn parked_for(&self) -> Option<u64> {
        None
    }
}

const LEASE: Need = Need::Lease {
    pool: 0,
    parked: None,
};

fn state(cap: usize, max_owned: usize) -> GroupState<Conn> {
    GroupState::new(Limits {
        cap,
        adaptive: false,
        stall_cap: Duration::from_millis(500),
        max_owned,
        kickup: Duration::from_secs(3600),
    })
}

fn now_grant(a: Admission<Conn>) -> Grant<Conn> {
    match a {
        Admission::Now(g, _) => g,
        Admission::Queued(..) => panic!("expected an immediate grant"),
    }
}

fn queued(a: Admission<Conn>) -> oneshot::Receiver<Grant<Conn>> {
    match a {
        Admission::Queued(_, rx) => rx,
        Admission::Now(..) => panic!("expected to queue"),
    }
}

fn uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("group_state/uncontended");
    g.throughput(Throughput::Elements(1));
    let now = Instant::now();

    // A pinned session: only an execution slot.
    let mut st = state(4, 4);
    g.bench_function("slot_request_complete", |b| {
        b.iter(|| {
            let grant = now_grant(st.request(Need::Slot, Priority::Low, now));
            black_box(&grant);
            st.complete(0, None, now);
        })
    });

    // A transaction-pooled statement: slot + the idle backend, returned after.
    let mut st = state(4, 4);
    assert!(matches!(
        now_grant(st.request(LEASE, Priority::Low, now)),
        Grant::Open
    ));
    st.complete(0, Some(Conn(0)), now);
    g.bench_function("lease_request_complete", |b| {
        b.iter(|| {
            let Grant::Backend(conn) = now_grant(st.request(LEASE, Priority::Low, now)) else {
                panic!("expected the idle backend");
            };
            st.complete(0, Some(black_box(conn)), now);
        })
    });
    g.finish();
}

/// Steady state with [`WAITERS`] queued and the in-flight cap reached: each
/// cycle enqueues one request at the back, and one completion dispatches the
/// request at the front.
fn contended(c: &mut Criterion) {
    let mut g = c.benchmark_group("group_state/contended_1000_waiters");
    g.throughput(Throughput::Elements(1));
    let now = Instant::now();

    // Slot waiters: the first queued one is runnable, so scans stop early.
    for (name, prio) in [("slot_low", Priority::Low), ("slot_high", Priority::High)] {
        let mut st = state(4, 4);
        for _ in 0..4 {
            now_grant(st.request(Need::Slot, Priority::Low, now));
        }
        let mut rxs: VecDeque<_> = (0..WAITERS)
            .map(|_| queued(st.request(Need::Slot, prio, now)))
            .collect();
        g.bench_function(name, |b| {
            b.iter(|| {
                rxs.push_back(queued(st.request(Need::Slot, prio, now)));
                st.complete(0, None, now);
                let mut rx = rxs.pop_front().unwrap();
                black_box(rx.try_recv().unwrap());
            })
        });
        let s = st.snapshot();
        assert_eq!((s.in_flight, s.low + s.high), (4, WAITERS));
    }

    // The same with the waiters spread over four users of weights 1–4
    // (weighted fair share: the heap of lane heads picks the next one).
    let users: Vec<_> = (1..=4)
        .map(|w| {
            Tenant::new(
                w,
                "u",
                TenantLimits {
                    weight: w,
                    ..TenantLimits::default()
                },
            )
        })
        .collect();
    let mut st = state(4, 4);
    for _ in 0..4 {
        now_grant(st.request(Need::Slot, Priority::Low, now));
    }
    let mut rxs: Vec<VecDeque<_>> = (0..4).map(|_| VecDeque::new()).collect();
    for i in 0..WAITERS {
        let u = i % 4;
        rxs[u].push_back(queued(st.request_for(
            Need::Slot,
            Priority::Low,
            &users[u],
            now,
        )));
    }
    g.bench_function("slot_low_4_weighted_users", |b| {
        b.iter(|| {
            st.complete(0, None, now);
            // The grant went to some user's oldest waiter, who comes back
            // at the end of its lane (a steady backlog per user).
            for (u, q) in rxs.iter_mut().enumerate() {
                if let Some(rx) = q.front_mut()
                    && rx.try_recv().is_ok()
                {
                    q.pop_front();
                    q.push_back(queued(st.request_for(
                        Need::Slot,
                        Priority::Low,
                        &users[u],
                        now,
                    )));
                    break;
                }
            }
        })
    });
    let s = st.snapshot();
    assert_eq!(s.in_flight, 4);

    // Lease waiters while every backend is busy: none is runnable, so each
    // request scans the whole queue before joining it; a returned backend
    // goes to the oldest.
    let mut st = state(4, 4);
    let mut busy: VecDeque<Conn> = VecDeque::new();
    for _ in 0..4 {
        assert!(matches!(
            now_grant(st.request(LEASE, Priority::Low, now)),
            Grant::Open
        ));
        busy.push_back(Conn(0));
    }
    let mut rxs: VecDeque<_> = (0..WAITERS)
        .map(|_| queued(st.request(LEASE, Priority::Low, now)))
        .collect();
    g.bench_function("lease_all_backends_busy", |b| {
        b.iter(|| {
            rxs.push_back(queued(st.request(LEASE, Priority::Low, now)));
            st.complete(0, busy.pop_front(), now);
            let mut rx = rxs.pop_front().unwrap();
            let Ok(Grant::Backend(conn)) = rx.try_recv() else {
                panic!("the oldest waiter gets the returned backend");
            };
            busy.push_back(conn);
        })
    });
    let s = st.snapshot();
    assert_eq!((s.in_flight, s.low, s.owned), (4, WAITERS, 4));

    // High-priority requests arriving behind 1,000 low ones.
    let mut st = state(4, 4);
    for _ in 0..4 {
        now_grant(st.request(Need::Slot, Priority::Low, now));
    }
    let low: Vec<_> = (0..WAITERS)
        .map(|_| queued(st.request(Need::Slot, Priority::Low, now)))
        .collect();
    g.bench_function("slot_high_behind_low", |b| {
        b.iter(|| {
            let mut rx = queued(st.request(Need::Slot, Priority::High, now));
            st.complete(0, None, now);
            black_box(rx.try_recv().unwrap());
        })
    });
    assert_eq!(st.snapshot().low, WAITERS);
    drop(low);
    g.finish();
}

fn group_acquire(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("group/acquire_finish");
    g.throughput(Throughput::Elements(1));

    // Room available: granted at once, freed at once.
    let group = Group::new(
        0,
        Limits {
            cap: 4,
            adaptive: false,
            stall_cap: Duration::from_millis(500),
            max_owned: 4,
            kickup: Duration::from_secs(3600),
        },
    );
    let user = Tenant::new(1, "bench", TenantLimits::default());
    g.bench_function("uncontended", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let deadline = Instant::now() + Duration::from_secs(60);
                let start = std::time::Instant::now();
                for _ in 0..iters {
                    let a = group
                        .acquire(Need::Slot, Priority::Low, &user, deadline)
                        .await
                        .unwrap();
                    a.slot.finish(None);
                }
                start.elapsed()
            })
        })
    });

    // Cap 1, four tasks: every admission but the first waits in the queue
    // and is woken by the previous holder's finish (oneshot + timer).
    const TASKS: u64 = 4;
    let group = Group::new(
        0,
        Limits {
            cap: 1,
            adaptive: false,
            stall_cap: Duration::from_millis(500),
            max_owned: 4,
            kickup: Duration::from_secs(3600),
        },
    );
    g.bench_function("handoff_cap1_4_tasks", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let deadline = Instant::now() + Duration::from_secs(600);
                let per_task = iters.div_ceil(TASKS);
                let start = std::time::Instant::now();
                let tasks: Vec<_> = (0..TASKS)
                    .map(|_| {
                        let group: Arc<Group> = group.clone();
                        let user = user.clone();
                        tokio::spawn(async move {
                            for _ in 0..per_task {
                                let a = group
                                    .acquire(Need::Slot, Priority::Low, &user, deadline)
                                    .await
                                    .unwrap();
                                tokio::task::yield_now().await;
                                a.slot.finish(None);
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
                // Normalise to `iters` admissions.
                start
                    .elapsed()
                    .mul_f64(iters as f64 / (per_task * TASKS) as f64)
            })
        })
    });
    assert_eq!(group.snapshot().in_flight, 0);
    g.finish();
}

fn priority_fn(c: &mut Criterion) {
    let mut g = c.benchmark_group("priority");
    for (name, mode) in [
        ("transactions", HighPrioMode::Transactions),
        ("statements", HighPrioMode::Statements),
        ("none", HighPrioMode::None),
    ] {
        let mut tickets = 5u32;
        let mut i = 0u32;
        g.bench_function(name, |b| {
            b.iter(|| {
                // Alternate lock holders and free sessions; tickets run out
                // and refill.
                i = i.wrapping_add(1);
                let holds_lock = !i.is_multiple_of(8);
                black_box(priority(
                    black_box(mode),
                    black_box(holds_lock),
                    &mut tickets,
                    black_box(5),
                ))
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .without_plots();
    targets = uncontended, contended, group_acquire, priority_fn
}
criterion_main!(benches);
