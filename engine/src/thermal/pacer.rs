//! The pacer: what one generation's decode loop does about the thermal state, decided before
//! each decode step.
//!
//! - The unthrottled rate is *measured*, not assumed: [`StepBaseline`] keeps a moving average
//!   of the interval between decode steps that ran at full threads with no pacing wait before
//!   them (so the average covers the forward pass, the logits, sampling and streaming, and
//!   follows the step cost as the context grows). It outlives generations, so a reply that
//!   starts hot is paced from its first step.
//! - A rate cap `r` is a target interval `baseline / r` between step starts, on a running
//!   schedule (a late step is made up by a shorter wait after it); the pacer waits out the
//!   rest of each interval. It waits on the governor's condition variable in slices of at most
//!   [`SLICE`], so a cooler state or a cancel takes effect within a slice, not after the wait.
//! - `serious` also asks for fewer compute threads (the caller applies [`StepPlan`]) for every
//!   step that keeps to the schedule on them; a step that is late runs on all threads, so the
//!   rate holds its cap even where fewer threads alone would fall below it.
//! - `critical`: the current token is finished (the pacer is only consulted between steps),
//!   then the loop waits until the state falls back, the user resumes, or the request is
//!   cancelled. Nothing is sampled while paused, so no token is lost or repeated.
//!
//! Until the baseline has [`StepBaseline::READY`] samples, steps run unpaced at full threads:
//! a cap on an unknown rate would be a guess.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{ThermalGovernor, ThermalNotice, ThermalState};

/// Longest single wait, so cancellation stays prompt while paced or paused.
pub const SLICE: Duration = Duration::from_millis(20);

/// A moving average of the unthrottled decode-step interval.
#[derive(Debug, Clone, Default)]
pub struct StepBaseline {
    average: Option<f64>,
    samples: u32,
}

impl StepBaseline {
    /// Samples before the average is trusted.
    pub const READY: u32 = 3;
    /// Weight of a new sample: about the last ten steps count.
    const ALPHA: f64 = 0.2;

    pub fn observe(&mut self, seconds: f64) {
        if !(seconds.is_finite() && seconds > 0.0) {
            return;
        }
        self.average = Some(match self.average {
            None => seconds,
            Some(a) => a + Self::ALPHA * (seconds - a),
        });
        self.samples += 1;
    }

    pub fn ready(&self) -> bool {
        self.samples >= Self::READY
    }

    /// The unthrottled step interval, once ready.
    pub fn step_seconds(&self) -> Option<f64> {
        self.average.filter(|_| self.ready())
    }
}

/// What the next step should run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StepPlan {
    pub reduced_threads: bool,
}

/// One generation's pacing. Notices go to `notify` as the obeyed state changes.
pub struct Pacer<'a> {
    governor: &'a ThermalGovernor,
    baseline: &'a mut StepBaseline,
    notify: Box<dyn FnMut(ThermalNotice) + 'a>,
    obeyed: ThermalState,
    resumes_seen: u64,
    resumed: bool,
    last_start: Option<Instant>,
    last_full_threads: bool,
    /// When the next paced step may start.
    next_due: Option<Instant>,
    paced: Duration,
    paused: Duration,
}

impl<'a> Pacer<'a> {
    pub fn new(
        governor: &'a ThermalGovernor,
        baseline: &'a mut StepBaseline,
        notify: impl FnMut(ThermalNotice) + 'a,
    ) -> Self {
        let (_, resumes) = governor.version();
        Pacer {
            governor,
            baseline,
            notify: Box::new(notify),
            obeyed: ThermalState::Nominal,
            resumes_seen: resumes,
            resumed: false,
            last_start: None,
            last_full_threads: false,
            next_due: None,
            paced: Duration::ZERO,
            paused: Duration::ZERO,
        }
    }

    /// Before the prompt is processed: announce a non-nominal state and pick the threads.
    pub fn before_prefill(&mut self) -> StepPlan {
        self.observe_state();
        StepPlan {
            reduced_threads: self.obeyed.level() >= 2,
        }
    }

    /// Before each decode step: wait as the state requires (returns early on `cancel`).
    pub fn before_step(&mut self, cancel: &AtomicBool) -> StepPlan {
        let config = self.governor.config().clone();
        let mut waited = false;
        loop {
            let (version, _) = self.governor.version();
            let state = self.observe_state();
            if cancel.load(Ordering::Relaxed) {
                return StepPlan::default();
            }
            let level = state.level();
            if level >= 3 && !self.resumed {
                let t = Instant::now();
                self.governor.wait_change(version, SLICE);
                self.paused += t.elapsed();
                waited = true;
                continue;
            }
            let now = Instant::now();
            let rate = config.rate_for_level(level);
            let target = self
                .baseline
                .step_seconds()
                .filter(|_| rate < 1.0)
                .map(|step| Duration::from_secs_f64(step / rate));
            if let (Some(_), Some(due)) = (target, self.next_due)
                && now < due
            {
                self.governor.wait_change(version, (due - now).min(SLICE));
                self.paced += now.elapsed();
                waited = true;
                continue;
            }
            // The unthrottled interval is only measured at nominal (or to calibrate): a
            // step right after a pacing wait runs on cooler caches and parked workers.
            if let Some(prev) = self.last_start
                && self.last_full_threads
                && !waited
                && (level == 0 || !self.baseline.ready())
            {
                self.baseline.observe((now - prev).as_secs_f64());
            }
            self.last_start = Some(now);
            let Some(target) = target else {
                self.next_due = None;
                self.last_full_threads = true;
                return StepPlan::default();
            };
            // Steps are due every `target` on a running schedule, so a late step is made up
            // by a shorter wait next time; at most one interval of lateness is carried over.
            let due = self.next_due.unwrap_or(now);
            let late = now.saturating_duration_since(due);
            let base = if late > target { now } else { due };
            self.next_due = Some(base + target);
            // Fewer threads while that keeps up with the cap; a step that is late (the last
            // one overran the interval on fewer threads) runs on all of them to catch up.
            let reduced = level >= 2 && late <= target / 10;
            self.last_full_threads = !reduced;
            return StepPlan {
                reduced_threads: reduced,
            };
        }
    }

    /// Seconds spent waiting to hold a rate cap, and paused at `critical`.
    pub fn waits(&self) -> (f64, f64) {
        (self.paced.as_secs_f64(), self.paused.as_secs_f64())
    }

    /// Read the governor; announce a change of state, or a resume while critical.
    fn observe_state(&mut self) -> ThermalState {
        let state = self.governor.state();
        let (_, resumes) = self.governor.version();
        let config = self.governor.config();
        if state != self.obeyed {
            if state.level() > 0 || self.obeyed.level() > 0 {
                (self.notify)(ThermalNotice::new(state, self.obeyed, config, false));
            }
            self.obeyed = state;
        }
        if state.level() < 3 {
            self.resumed = false;
            self.resumes_seen = resumes;
        } else if !self.resumed && resumes > self.resumes_seen {
            self.resumed = true;
            self.resumes_seen = resumes;
            (self.notify)(ThermalNotice::new(state, state, config, true));
        }
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_is_a_moving_average_trusted_after_three_samples() {
        let mut b = StepBaseline::default();
        b.observe(0.02);
        b.observe(0.02);
        assert_eq!(b.step_seconds(), None);
        b.observe(0.03);
        let s = b.step_seconds().unwrap();
        assert!((s - 0.022).abs() < 1e-9, "{s}");
        b.observe(f64::NAN);
        b.observe(-1.0);
        assert_eq!(b.step_seconds(), Some(s));
    }
}
