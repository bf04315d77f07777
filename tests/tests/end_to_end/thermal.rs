//! Thermal pacing on the real model, driven through the file source: under `fair` and
//! `serious` the engine paces decode and says so, back at `nominal` it goes on at full speed,
//! and `critical` pauses and resumes — by cooling, by the user, or ends by cancel — with exactly
//! the tokens of an unpaced run.
//!
//! These tests assert order and behaviour, never a wall-clock figure (a busy machine must not
//! fail them): how closely the rate holds its cap and how fast full speed returns are measured
//! by `companion bench --pacing`. The tests of this file still run one at a time (a shared
//! lock) so that the rates they print are those of one generation.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use companion_tests::model_path;
use engine::{
    Engine, EngineConfig, EngineHandle, Event, GenerateParams, Generation, Prompt, SamplingParams,
    StopReason, ThermalConfig, ThermalNotice, ThermalState,
};

static SERIAL: Mutex<()> = Mutex::new(());

const SAMPLE_MS: u64 = 100;

fn thermal_config(file: &Path) -> ThermalConfig {
    ThermalConfig {
        sample_interval_ms: SAMPLE_MS,
        // shorter than every phase below, so each change is obeyed at its first sample
        hold_ms: 200,
        file: Some(file.to_path_buf()),
        ..ThermalConfig::default()
    }
}

fn spawn(file: &Path) -> EngineHandle {
    EngineHandle::spawn(EngineConfig {
        model_path: model_path(),
        context: 2048,
        thermal: thermal_config(file),
        ..EngineConfig::default()
    })
    .expect("engine")
}

/// One test's engine and thermal file, holding the lock that keeps timing tests apart.
struct Rig {
    _serial: std::sync::MutexGuard<'static, ()>,
    _dir: tempfile::TempDir,
    file: std::path::PathBuf,
    engine: EngineHandle,
}

impl Rig {
    fn new(initial: &str) -> Self {
        let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("thermal");
        set(&file, initial);
        let engine = spawn(&file);
        Rig {
            _serial: serial,
            _dir: dir,
            file,
            engine,
        }
    }
}

fn set(file: &Path, state: &str) -> Instant {
    std::fs::write(file, state).expect("write the thermal file");
    Instant::now()
}

fn greedy(max_tokens: usize) -> GenerateParams {
    GenerateParams {
        max_tokens,
        sampling: SamplingParams::greedy(),
        ignore_eos: true,
        ..GenerateParams::default()
    }
}

/// Counting: every token is ASCII, so every token arrives as one `Text` event and event times
/// are token times (checked against the final token count).
fn prompt(engine: &EngineHandle) -> Vec<u32> {
    engine
        .tokenizer()
        .encode("1, 2, 3, 4, 5, 6, 7, 8,", true)
        .unwrap()
}

/// Everything one generation streamed, with arrival times.
#[derive(Default)]
struct Trace {
    tokens: Vec<Instant>,
    notices: Vec<(Instant, usize, ThermalNotice)>,
    done: Option<Generation>,
}

impl Trace {
    /// Take one event; returns false once the generation has ended.
    fn take(&mut self, event: Event) -> bool {
        let now = Instant::now();
        match event {
            Event::Text(_) => self.tokens.push(now),
            Event::Thermal(n) => self.notices.push((now, self.tokens.len(), n)),
            Event::Done(g) => {
                assert_eq!(g.ids.len(), self.tokens.len(), "one text event per token");
                self.done = Some(*g);
                return false;
            }
            Event::Error { message, .. } => panic!("{message}"),
            Event::Started { .. } => {}
        }
        true
    }

    /// Index of the first token after the notice that switched to `state`.
    fn notice_at(&self, state: ThermalState) -> usize {
        self.notices
            .iter()
            .find(|(_, _, n)| n.state == state)
            .map(|&(_, i, _)| i)
            .unwrap_or_else(|| panic!("no {state} notice"))
    }

    /// Tokens per second over tokens `from..to`.
    fn rate(&self, from: usize, to: usize) -> f64 {
        assert!(to > from + 4, "too few tokens to measure ({from}..{to})");
        let span = self.tokens[to - 1] - self.tokens[from];
        (to - 1 - from) as f64 / span.as_secs_f64()
    }
}

/// Run `generation`, calling `drive(trace, elapsed)` every 5 ms; returns the full trace.
fn record(
    handle: engine::GenerationHandle,
    mut drive: impl FnMut(&Trace, &engine::GenerationHandle),
) -> Trace {
    let mut trace = Trace::default();
    loop {
        match handle.events.recv_timeout(Duration::from_millis(5)) {
            Ok(event) => {
                if !trace.take(event) {
                    return trace;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(e) => panic!("the engine stopped: {e}"),
        }
        drive(&trace, &handle);
    }
}

#[test]
fn decode_rate_holds_its_cap_and_full_speed_returns() {
    let rig = Rig::new("nominal");
    let (file, engine) = (&rig.file, &rig.engine);
    let ids = prompt(engine);
    let handle = engine.generate(Prompt::Ids(ids), greedy(2000)).unwrap();

    // nominal for 40 tokens, fair 2 s, serious 2 s, nominal 1 s, then stop
    let mut phase = 0;
    let mut since = Instant::now();
    let mut back_at_nominal = None;
    let trace = record(handle, |trace, handle| {
        let elapsed = since.elapsed();
        match phase {
            0 if trace.tokens.len() >= 40 => since = set(file, "fair"),
            1 if elapsed >= Duration::from_secs(2) => since = set(file, "serious"),
            2 if elapsed >= Duration::from_secs(2) => {
                since = set(file, "nominal");
                back_at_nominal = Some(since);
            }
            3 if elapsed >= Duration::from_secs(1) => handle.cancel(),
            _ => return,
        }
        phase += 1;
    });
    let g = trace.done.as_ref().unwrap();
    assert_eq!(g.stop_reason, StopReason::Cancelled);

    let fair = trace.notice_at(ThermalState::Fair);
    let serious = trace.notice_at(ThermalState::Serious);
    let nominal = trace.notice_at(ThermalState::Nominal);
    // what the engine did, in the order the file said it
    let states: Vec<_> = trace
        .notices
        .iter()
        .map(|(_, _, n)| (n.state, n.rate_percent))
        .collect();
    assert_eq!(
        states,
        [
            (ThermalState::Fair, 70),
            (ThermalState::Serious, 40),
            (ThermalState::Nominal, 100)
        ]
    );
    assert!(fair < serious && serious < nominal && nominal < trace.tokens.len());
    // the steady-state rates, for the reader (the band is `companion bench --pacing`'s)
    eprintln!(
        "unthrottled {:.1} tok/s; fair {:.1} (cap 70%); serious {:.1} (cap 40%); back at nominal {:.1}",
        trace.rate(8, fair),
        trace.rate(fair + 2, serious),
        trace.rate(serious + 2, nominal),
        trace.rate(nominal + 2, trace.tokens.len()),
    );
    let written = back_at_nominal.unwrap();
    eprintln!(
        "first token after the file said nominal: {:.0} ms",
        (trace.tokens[nominal] - written).as_secs_f64() * 1e3
    );
    // the caps were held by waiting, and the waiting was counted
    assert!(g.stats.paced_seconds > 0.0, "{:?}", g.stats);
    assert_eq!(g.stats.paused_seconds, 0.0, "{:?}", g.stats);
}

#[test]
fn critical_pauses_and_resumes_without_losing_or_repeating_a_token() {
    let rig = Rig::new("nominal");
    let (file, engine) = (&rig.file, &rig.engine);
    let ids = prompt(engine);
    const N: usize = 90;

    // the same tokens with no pacing at all
    let reference = {
        let e = Engine::load(EngineConfig {
            model_path: model_path(),
            context: 2048,
            warm_up: false,
            ..EngineConfig::default()
        })
        .unwrap();
        let mut s = e.new_session().unwrap();
        e.generate(
            &mut s,
            &ids,
            &greedy(N),
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap()
        .ids
    };

    // critical at token 15 until it cools (0.6 s); critical again at token 40 until the user
    // resumes (0.6 s); then to the end
    let mut phase = 0;
    let mut since = Instant::now();
    let handle = engine
        .generate(Prompt::Ids(ids.clone()), greedy(N))
        .unwrap();
    let mut gaps = Vec::new();
    let trace = record(handle, |trace, _| {
        let n = trace.tokens.len();
        match phase {
            0 if n >= 15 => since = set(file, "critical"),
            1 if since.elapsed() >= Duration::from_millis(600) => {
                gaps.push(n);
                since = set(file, "nominal");
            }
            2 if n >= 40 => since = set(file, "critical"),
            3 if since.elapsed() >= Duration::from_millis(600) => {
                gaps.push(n);
                engine.resume();
            }
            _ => return,
        }
        phase += 1;
    });
    let g = trace.done.as_ref().unwrap();
    assert_eq!(g.stop_reason, StopReason::MaxTokens);
    assert_eq!(g.ids, reference, "pausing lost or repeated a token");
    // the token in progress when critical was seen was finished, then nothing until the end
    // of the pause
    let paused_at: Vec<usize> = trace
        .notices
        .iter()
        .filter(|(_, _, n)| n.rate_percent == 0)
        .map(|&(_, i, _)| i)
        .collect();
    assert_eq!(paused_at.len(), 2);
    assert_eq!(gaps, paused_at, "tokens arrived while paused");
    let states: Vec<_> = trace
        .notices
        .iter()
        .map(|(_, _, n)| (n.state, n.rate_percent))
        .collect();
    assert_eq!(
        states,
        [
            (ThermalState::Critical, 0),
            (ThermalState::Nominal, 100),
            (ThermalState::Critical, 0),
            (ThermalState::Critical, 40),
        ],
        "notices: {:?}",
        trace
            .notices
            .iter()
            .map(|(_, _, n)| &n.message)
            .collect::<Vec<_>>()
    );
    // two pauses, each held until the file cooled or the user resumed
    assert!(g.stats.paused_seconds > 0.0, "{:?}", g.stats);
    std::fs::write(file, "nominal").unwrap();
}

#[test]
fn cancel_ends_a_paused_reply_at_once() {
    let rig = Rig::new("critical");
    let engine = &rig.engine;
    assert_eq!(engine.thermal_state(), ThermalState::Critical);
    assert!(engine.background_paused());
    let handle = engine
        .generate(Prompt::Ids(prompt(engine)), greedy(50))
        .unwrap();
    let mut cancelled_at = None;
    let trace = record(handle, |trace, handle| {
        // The critical notice comes before the prompt is processed, and the pause only after
        // the prompt's token: cancel once that token is out, i.e. while the reply is paused (a
        // cancel during a slow prefill would end the reply before it had any token).
        let paused = trace.notices.iter().any(|(_, _, n)| n.rate_percent == 0);
        if paused && !trace.tokens.is_empty() && cancelled_at.is_none() {
            std::thread::sleep(Duration::from_millis(300));
            handle.cancel();
            cancelled_at = Some(Instant::now());
        }
    });
    let g = trace.done.as_ref().unwrap();
    eprintln!(
        "cancel ended the paused reply after {:?}",
        cancelled_at.unwrap().elapsed()
    );
    assert_eq!(g.stop_reason, StopReason::Cancelled);
    // the first token comes from the prompt; nothing was decoded while critical
    assert_eq!(g.ids.len(), 1);
    assert!(g.stats.paused_seconds > 0.0, "{:?}", g.stats);
}
