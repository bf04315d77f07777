//! The governor: one thread that reads a [`ThermalSource`] every sampling interval, applies
//! hysteresis, and publishes the state the engine obeys. Readers (the decode loop, background
//! jobs, the app) get it with an atomic load; waiters (a paused or paced decode loop) are
//! woken on every change through a condition variable, so a cooler state takes effect at the
//! very next sample rather than after a sleep runs out.
//!
//! A platform that announces changes (iOS posts `ProcessInfo.thermalStateDidChangeNotification`)
//! hands them to [`ThermalGovernor::report`]: the sampling thread wakes at once and takes the
//! reported state as its next reading, through the same hysteresis, instead of waiting for its
//! next poll.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{ThermalConfig, ThermalNotice, ThermalSource, ThermalState};

/// A hotter reading is obeyed at once; a cooler one only once the current state has been
/// held for `hold` (see [`ThermalConfig::hold_ms`]).
#[derive(Debug, Clone)]
pub struct Hysteresis {
    applied: ThermalState,
    entered: Instant,
    hold: Duration,
}

impl Hysteresis {
    pub fn new(initial: ThermalState, hold: Duration, now: Instant) -> Self {
        Hysteresis {
            applied: initial,
            entered: now,
            hold,
        }
    }

    pub fn applied(&self) -> ThermalState {
        self.applied
    }

    /// Feed one reading; returns the new state when the applied one changes.
    pub fn update(&mut self, reading: ThermalState, now: Instant) -> Option<ThermalState> {
        if reading == self.applied {
            return None;
        }
        let hotter_or_same = reading.level() >= self.applied.level();
        if hotter_or_same || now.duration_since(self.entered) >= self.hold {
            self.applied = reading;
            self.entered = now;
            return Some(reading);
        }
        None
    }
}

struct Inner {
    /// Bumped on every change of state and on every resume: waiters compare it.
    version: u64,
    resumes: u64,
    stop: bool,
    /// A state the platform announced ([`ThermalGovernor::report`]), not yet read.
    reported: Option<ThermalState>,
}

pub(crate) struct Shared {
    state: AtomicU8,
    inner: Mutex<Inner>,
    changed: Condvar,
    subscribers: Mutex<Vec<Sender<ThermalNotice>>>,
    config: ThermalConfig,
    source_name: String,
    background_paused: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The lock guards plain counters: a panic elsewhere cannot leave them inconsistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Samples a thermal source on its own thread; dropping it stops the thread.
pub struct ThermalGovernor {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ThermalGovernor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThermalGovernor")
            .field("state", &self.state())
            .field("source", &self.shared.source_name)
            .finish()
    }
}

impl ThermalGovernor {
    /// Read `source` once (so the state is known from the start) and keep sampling it.
    /// A disabled config reads nothing and stays `Unknown`.
    pub fn start(mut source: Box<dyn ThermalSource>, config: ThermalConfig) -> Self {
        let initial = if config.enabled {
            source.read()
        } else {
            ThermalState::Unknown
        };
        let shared = Arc::new(Shared {
            state: AtomicU8::new(initial.to_u8()),
            inner: Mutex::new(Inner {
                version: 0,
                resumes: 0,
                stop: false,
                reported: None,
            }),
            changed: Condvar::new(),
            subscribers: Mutex::new(Vec::new()),
            source_name: source.describe(),
            background_paused: AtomicBool::new(initial.level() >= 2),
            config,
        });
        tracing::info!(state = %initial, source = %shared.source_name, "thermal governor started");
        let thread = if shared.config.enabled {
            let s = shared.clone();
            std::thread::Builder::new()
                .name("companion-thermal".into())
                .spawn(move || sample_loop(&s, source.as_mut(), initial))
                .map_err(|e| tracing::warn!(error = %e, "cannot start the thermal thread; pacing is off"))
                .ok()
        } else {
            None
        };
        ThermalGovernor { shared, thread }
    }

    /// The state the engine obeys now.
    pub fn state(&self) -> ThermalState {
        ThermalState::from_u8(self.shared.state.load(Ordering::Acquire))
    }

    pub fn config(&self) -> &ThermalConfig {
        &self.shared.config
    }

    pub fn source_name(&self) -> &str {
        &self.shared.source_name
    }

    /// Whether background work (summaries, document jobs) should wait: true from `serious`
    /// up. Such jobs check this between units of work.
    pub fn background_paused(&self) -> bool {
        self.shared.background_paused.load(Ordering::Acquire)
    }

    /// The user asks a reply paused at `critical` to go on (at the `serious` pace).
    pub fn resume(&self) {
        let mut inner = self.shared.lock();
        inner.resumes += 1;
        inner.version += 1;
        drop(inner);
        self.shared.changed.notify_all();
    }

    /// The platform announced a new state (a notification, not a poll): the sampling thread
    /// takes it as its next reading at once. Ignored when pacing is off.
    pub fn report(&self, state: ThermalState) {
        if self.thread.is_none() {
            return;
        }
        self.shared.lock().reported = Some(state);
        self.shared.changed.notify_all();
    }

    /// Notices of every change of state from now on, on a channel of their own (the app's
    /// thermal indicator); a dropped receiver is forgotten at the next change.
    pub fn subscribe(&self) -> Receiver<ThermalNotice> {
        let (tx, rx) = mpsc::channel();
        self.shared
            .subscribers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(tx);
        rx
    }

    /// `(version, resumes)` now, to wait on with [`Self::wait_change`].
    pub(crate) fn version(&self) -> (u64, u64) {
        let inner = self.shared.lock();
        (inner.version, inner.resumes)
    }

    /// Wait until the state changes or the user resumes after `seen`, or `timeout` passes.
    pub(crate) fn wait_change(&self, seen: u64, timeout: Duration) {
        let inner = self.shared.lock();
        if inner.version != seen || inner.stop {
            return;
        }
        let _ = self
            .shared
            .changed
            .wait_timeout_while(inner, timeout, |i| i.version == seen && !i.stop);
    }
}

impl Drop for ThermalGovernor {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.changed.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn sample_loop(shared: &Shared, source: &mut dyn ThermalSource, initial: ThermalState) {
    let interval = shared.config.sample_interval();
    let mut hysteresis = Hysteresis::new(initial, shared.config.hold(), Instant::now());
    let mut next = Instant::now() + interval;
    loop {
        let reported;
        {
            let inner = shared.lock();
            let wait = next.saturating_duration_since(Instant::now());
            let (mut inner, _) = shared
                .changed
                .wait_timeout_while(inner, wait, |i| {
                    !i.stop && i.reported.is_none() && Instant::now() < next
                })
                .unwrap_or_else(|p| p.into_inner());
            if inner.stop {
                return;
            }
            reported = inner.reported.take();
        }
        let now = Instant::now();
        let reading = match reported {
            Some(state) => state,
            None => {
                // Fixed-rate sampling: a slow read does not push later samples back.
                next += interval;
                if next < now {
                    next = now + interval;
                }
                source.read()
            }
        };
        let previous = hysteresis.applied();
        if let Some(state) = hysteresis.update(reading, now) {
            publish(shared, previous, state);
        }
    }
}

fn publish(shared: &Shared, previous: ThermalState, state: ThermalState) {
    tracing::info!(from = %previous, to = %state, "thermal state changed");
    shared.state.store(state.to_u8(), Ordering::Release);
    shared
        .background_paused
        .store(state.level() >= 2, Ordering::Release);
    shared.lock().version += 1;
    shared.changed.notify_all();
    let notice = ThermalNotice::new(state, previous, &shared.config, false);
    shared
        .subscribers
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|tx| tx.send(notice.clone()).is_ok());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hotter_is_obeyed_at_once_cooler_after_the_hold() {
        let t0 = Instant::now();
        let hold = Duration::from_secs(4);
        let mut h = Hysteresis::new(ThermalState::Nominal, hold, t0);
        assert_eq!(h.update(ThermalState::Fair, t0), Some(ThermalState::Fair));
        assert_eq!(
            h.update(ThermalState::Serious, t0 + Duration::from_secs(1)),
            Some(ThermalState::Serious)
        );
        // a cooler reading inside the hold is ignored …
        assert_eq!(
            h.update(ThermalState::Nominal, t0 + Duration::from_secs(3)),
            None
        );
        // … and obeyed once the hold has passed since the state was entered
        assert_eq!(
            h.update(ThermalState::Nominal, t0 + Duration::from_secs(5)),
            Some(ThermalState::Nominal)
        );
        // unknown is the same level as nominal: no hold
        assert_eq!(
            h.update(ThermalState::Unknown, t0 + Duration::from_secs(5)),
            Some(ThermalState::Unknown)
        );
    }

    #[test]
    fn a_reported_state_is_applied_without_waiting_for_the_next_poll() {
        struct Fixed;
        impl ThermalSource for Fixed {
            fn read(&mut self) -> ThermalState {
                ThermalState::Nominal
            }
            fn describe(&self) -> String {
                "fixed".into()
            }
        }
        // a poll an hour away: only the report can change the state within the test
        let config = ThermalConfig {
            sample_interval_ms: 3_600_000,
            hold_ms: 0,
            ..ThermalConfig::default()
        };
        let g = ThermalGovernor::start(Box::new(Fixed), config);
        let rx = g.subscribe();
        g.report(ThermalState::Critical);
        let notice = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(notice.state, ThermalState::Critical);
        assert_eq!(g.state(), ThermalState::Critical);
        assert!(g.background_paused());
        g.report(ThermalState::Fair);
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)).unwrap().state,
            ThermalState::Fair
        );

        // with pacing off there is no thread and a report changes nothing
        let off = ThermalGovernor::start(
            Box::new(Fixed),
            ThermalConfig {
                enabled: false,
                ..ThermalConfig::default()
            },
        );
        off.report(ThermalState::Critical);
        assert_eq!(off.state(), ThermalState::Unknown);
    }

    #[test]
    fn governor_publishes_changes_to_subscribers() {
        struct Script(Arc<Mutex<ThermalState>>);
        impl ThermalSource for Script {
            fn read(&mut self) -> ThermalState {
                *self.0.lock().unwrap()
            }
            fn describe(&self) -> String {
                "script".into()
            }
        }
        let state = Arc::new(Mutex::new(ThermalState::Nominal));
        let config = ThermalConfig {
            sample_interval_ms: 5,
            hold_ms: 0,
            ..ThermalConfig::default()
        };
        let g = ThermalGovernor::start(Box::new(Script(state.clone())), config);
        let rx = g.subscribe();
        assert_eq!(g.state(), ThermalState::Nominal);
        *state.lock().unwrap() = ThermalState::Serious;
        let notice = rx.recv_timeout(Duration::from_secs(2)).unwrap();
        assert_eq!(
            (notice.previous, notice.state),
            (ThermalState::Nominal, ThermalState::Serious)
        );
        assert_eq!(g.state(), ThermalState::Serious);
        assert!(g.background_paused());
    }
}
