//! `companion bench --pacing`: how closely thermal pacing holds its caps, measured on a real
//! generation with the state simulated through the file source (`COMPANION_THERMAL_FILE`'s
//! mechanism). One long decode runs at `nominal`, then `fair`, `serious` and `nominal` again;
//! the steady-state rate of each phase is compared with its cap (a fraction of the unthrottled
//! rate), and the time from the file saying `nominal` to the next token is the recovery.
//! The test suite checks the order of these events; the figures are this benchmark's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use engine::{EngineHandle, Event, GenerateParams, Prompt, SamplingParams, ThermalState};
use serde_json::json;

/// The thermal file the engine is spawned with, removed when dropped.
pub struct PacingFile(PathBuf);

impl PacingFile {
    pub fn new() -> Result<Self> {
        let path = std::env::temp_dir().join(format!("companion-pacing-{}", std::process::id()));
        std::fs::write(&path, "nominal").context("cannot write the simulated thermal state")?;
        Ok(PacingFile(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    fn set(&self, state: &str) -> Result<Instant> {
        std::fs::write(&self.0, state).context("cannot write the simulated thermal state")?;
        Ok(Instant::now())
    }
}

impl Drop for PacingFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Sampling for the benchmark: fast enough that each phase is obeyed at once.
pub fn thermal_config(file: &PacingFile, mut base: engine::ThermalConfig) -> engine::ThermalConfig {
    base.file = Some(file.path().to_path_buf());
    base.sample_interval_ms = 100;
    base.hold_ms = 200;
    base
}

/// Nominal for 40 tokens, then each state for `PHASE`, then stop.
const PHASE: Duration = Duration::from_secs(3);

pub fn measure(
    engine: &EngineHandle,
    file: &PacingFile,
    prompt: Vec<u32>,
) -> Result<serde_json::Value> {
    let config = engine.thermal().config().clone();
    engine.reset_session()?;
    let params = GenerateParams {
        max_tokens: 100_000,
        sampling: SamplingParams::greedy(),
        ignore_eos: true,
        ..GenerateParams::default()
    };
    let handle = engine.generate(Prompt::Ids(prompt), params)?;
    let mut tokens: Vec<Instant> = Vec::new();
    let mut notices: Vec<(ThermalState, usize)> = Vec::new();
    let mut phase = 0;
    let mut since = Instant::now();
    let mut nominal_written = None;
    loop {
        match handle.events.recv_timeout(Duration::from_millis(5)) {
            Ok(Event::Text(_)) => tokens.push(Instant::now()),
            Ok(Event::Thermal(n)) => notices.push((n.state, tokens.len())),
            Ok(Event::Done(_)) => break,
            Ok(Event::Error { message, .. }) => bail!("the pacing run failed: {message}"),
            Ok(Event::Started { .. }) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(_) => bail!("the engine stopped during the pacing run"),
        }
        let elapsed = since.elapsed();
        match phase {
            0 if tokens.len() >= 40 => since = file.set("fair")?,
            1 if elapsed >= PHASE => since = file.set("serious")?,
            2 if elapsed >= PHASE => {
                since = file.set("nominal")?;
                nominal_written = Some(since);
            }
            3 if elapsed >= PHASE => handle.cancel(),
            _ => continue,
        }
        phase += 1;
    }
    let at = |state| {
        notices
            .iter()
            .find(|(s, _)| *s == state)
            .map(|&(_, i)| i)
            .with_context(|| format!("no {state} notice came"))
    };
    let (fair, serious, nominal) = (
        at(ThermalState::Fair)?,
        at(ThermalState::Serious)?,
        at(ThermalState::Nominal)?,
    );
    let rate = |from: usize, to: usize| -> f64 {
        if to <= from + 1 {
            return 0.0;
        }
        (to - 1 - from) as f64 / (tokens[to - 1] - tokens[from]).as_secs_f64()
    };
    // steady states: skip the first tokens and two after each change
    let full = rate(8, fair);
    let fair_rate = rate(fair + 2, serious);
    let serious_rate = rate(serious + 2, nominal);
    let after = rate(nominal + 2, tokens.len());
    let recovery = nominal_written
        .zip(tokens.get(nominal))
        .map(|(w, &t)| t.saturating_duration_since(w).as_secs_f64());
    let phase_json = |rate: f64, fraction: f64| {
        let cap = full * fraction;
        json!({ "tokensPerSecond": rate, "capTokensPerSecond": cap, "ratio": rate / cap })
    };
    Ok(json!({
        "unthrottledTokensPerSecond": full,
        "fair": phase_json(fair_rate, config.fair_rate),
        "serious": phase_json(serious_rate, config.serious_rate),
        "backAtNominalTokensPerSecond": after,
        "recoverySeconds": recovery,
        "sampleIntervalSeconds": config.sample_interval_ms as f64 / 1000.0,
    }))
}

pub fn print(out: &mut impl std::io::Write, p: &serde_json::Value) -> Result<()> {
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    writeln!(
        out,
        "pacing            unthrottled {:.1} tok/s; fair {:.1} (cap {:.1}, ×{:.2}); serious {:.1} (cap {:.1}, ×{:.2}); back at nominal {:.1}; recovery {:.0} ms",
        f(&p["unthrottledTokensPerSecond"]),
        f(&p["fair"]["tokensPerSecond"]),
        f(&p["fair"]["capTokensPerSecond"]),
        f(&p["fair"]["ratio"]),
        f(&p["serious"]["tokensPerSecond"]),
        f(&p["serious"]["capTokensPerSecond"]),
        f(&p["serious"]["ratio"]),
        f(&p["backAtNominalTokensPerSecond"]),
        f(&p["recoverySeconds"]) * 1e3,
    )?;
    Ok(())
}
