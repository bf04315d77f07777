//! Thermal awareness: what the device's thermal state is, and how generation paces itself by
//! it. This module owns the state vocabulary ([`ThermalState`], the four levels of Apple's
//! `ProcessInfo.ThermalState` plus "unknown"), the [`ThermalSource`] trait and its per-OS
//! sources, the [`ThermalGovernor`] that samples a source with hysteresis, and the per-request
//! [`Pacer`] the decode loop obeys.
//!
//! The levels follow Apple's guidance for `thermalState` (fair: defer background work;
//! serious: reduce CPU use; critical: reduce it to the minimum needed to respond to the user),
//! which is also what a Linux thermal zone's trip points mean (active: fans; passive: the
//! kernel throttles; hot/critical: shut down soon).
//!
//! - [`file`]: a word in a file (`COMPANION_THERMAL_FILE`), for tests and for simulating heat;
//! - [`linux`]: `/sys/class/thermal` zones against their trip points;
//! - `apple`: `NSProcessInfo.thermalState` on macOS and iOS (objc2-foundation).

#[cfg(any(target_os = "macos", target_os = "ios"))]
pub mod apple;
mod config;
pub mod file;
mod governor;
pub mod linux;
mod pacer;

use serde::{Deserialize, Serialize};

pub use config::ThermalConfig;
pub use governor::{Hysteresis, ThermalGovernor};
pub use pacer::{Pacer, StepBaseline};

/// How hot the device is, in the OS's own four levels; `Unknown` when it cannot say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThermalState {
    #[default]
    Nominal,
    Fair,
    Serious,
    Critical,
    Unknown,
}

impl ThermalState {
    /// How much pacing the state calls for: unknown paces like nominal, since slowing down on
    /// a device that cannot report its temperature would only cost the user speed.
    pub fn level(self) -> u8 {
        match self {
            ThermalState::Nominal | ThermalState::Unknown => 0,
            ThermalState::Fair => 1,
            ThermalState::Serious => 2,
            ThermalState::Critical => 3,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ThermalState::Nominal => "nominal",
            ThermalState::Fair => "fair",
            ThermalState::Serious => "serious",
            ThermalState::Critical => "critical",
            ThermalState::Unknown => "unknown",
        }
    }

    pub(crate) fn to_u8(self) -> u8 {
        match self {
            ThermalState::Nominal => 0,
            ThermalState::Fair => 1,
            ThermalState::Serious => 2,
            ThermalState::Critical => 3,
            ThermalState::Unknown => 4,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            0 => ThermalState::Nominal,
            1 => ThermalState::Fair,
            2 => ThermalState::Serious,
            3 => ThermalState::Critical,
            _ => ThermalState::Unknown,
        }
    }
}

impl std::fmt::Display for ThermalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ThermalState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "nominal" => Ok(ThermalState::Nominal),
            "fair" => Ok(ThermalState::Fair),
            "serious" => Ok(ThermalState::Serious),
            "critical" => Ok(ThermalState::Critical),
            "unknown" => Ok(ThermalState::Unknown),
            other => Err(format!(
                "unknown thermal state `{other}` (expected nominal, fair, serious, critical or unknown)"
            )),
        }
    }
}

/// Something that can tell the device's thermal state. `read` is called from the governor's
/// thread every sampling interval; it must not block for long and never fails: a source that
/// cannot read reports `Unknown`.
pub trait ThermalSource: Send {
    fn read(&mut self) -> ThermalState;
    /// A short name for logs and `companion doctor` ("file /tmp/t", "linux thermal zones").
    fn describe(&self) -> String;
}

/// A source that always reports one state (`Unknown` on platforms without a source).
#[derive(Debug, Clone)]
pub struct FixedSource(pub ThermalState);

impl ThermalSource for FixedSource {
    fn read(&mut self) -> ThermalState {
        self.0
    }
    fn describe(&self) -> String {
        format!("fixed ({})", self.0)
    }
}

/// The environment variable naming a file whose content (a state word) is the thermal state.
pub const THERMAL_FILE_ENV: &str = "COMPANION_THERMAL_FILE";

/// The source to use: `config.file`, else `$COMPANION_THERMAL_FILE`, else the OS's own.
pub fn source_for(config: &ThermalConfig) -> Box<dyn ThermalSource> {
    let from_env = std::env::var_os(THERMAL_FILE_ENV)
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from);
    if let Some(path) = config.file.clone().or(from_env) {
        return Box::new(file::FileSource::new(path));
    }
    os_source()
}

#[cfg(any(target_os = "macos", target_os = "ios"))]
fn os_source() -> Box<dyn ThermalSource> {
    Box::new(apple::AppleSource)
}

#[cfg(target_os = "linux")]
fn os_source() -> Box<dyn ThermalSource> {
    Box::new(linux::LinuxSource::new(linux::SYS_THERMAL))
}

#[cfg(not(any(target_os = "macos", target_os = "ios", target_os = "linux")))]
fn os_source() -> Box<dyn ThermalSource> {
    Box::new(FixedSource(ThermalState::Unknown))
}

/// What the app and the CLI are told when the state the engine obeys changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThermalNotice {
    pub state: ThermalState,
    pub previous: ThermalState,
    /// The decode rate allowed, in percent of the unthrottled rate (0: paused).
    pub rate_percent: u32,
    pub fewer_threads: bool,
    pub background_paused: bool,
    /// One plain sentence for the user.
    pub message: String,
}

impl ThermalNotice {
    /// The notice for obeying `state` (after `previous`) under `config`; `resumed`: the user
    /// asked to go on while critical.
    pub fn new(
        state: ThermalState,
        previous: ThermalState,
        config: &ThermalConfig,
        resumed: bool,
    ) -> Self {
        let pct = |r: f64| (r * 100.0).round() as u32;
        let (rate_percent, message) = match state {
            ThermalState::Nominal if previous.level() > 0 => {
                (100, "The device has cooled down — back to full speed.".to_string())
            }
            ThermalState::Nominal => (100, "The device is cool — running at full speed.".into()),
            ThermalState::Unknown => (
                100,
                "The device's temperature cannot be read — running at full speed.".into(),
            ),
            ThermalState::Fair => (
                pct(config.fair_rate),
                format!(
                    "The device is warm — slowing replies to {}% speed to keep it cool.",
                    pct(config.fair_rate)
                ),
            ),
            ThermalState::Serious => (
                pct(config.serious_rate),
                format!(
                    "The device is hot — slowing replies to {}% speed, using fewer cores and pausing background work.",
                    pct(config.serious_rate)
                ),
            ),
            ThermalState::Critical if resumed => (
                pct(config.serious_rate),
                format!(
                    "The device is still very hot — continuing at {}% speed as you asked.",
                    pct(config.serious_rate)
                ),
            ),
            ThermalState::Critical => (
                0,
                "The device is too hot — the reply is paused until it cools down. Resume to go on anyway, or stop the reply."
                    .into(),
            ),
        };
        ThermalNotice {
            state,
            previous,
            rate_percent,
            fewer_threads: state.level() >= 2,
            background_paused: state.level() >= 2,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_from_words_and_order_by_level() {
        assert_eq!(
            " Fair\n".parse::<ThermalState>().unwrap(),
            ThermalState::Fair
        );
        assert!("warm".parse::<ThermalState>().is_err());
        assert!(ThermalState::Critical.level() > ThermalState::Serious.level());
        assert_eq!(ThermalState::Unknown.level(), ThermalState::Nominal.level());
        for s in [
            ThermalState::Nominal,
            ThermalState::Fair,
            ThermalState::Serious,
            ThermalState::Critical,
            ThermalState::Unknown,
        ] {
            assert_eq!(ThermalState::from_u8(s.to_u8()), s);
        }
    }

    #[test]
    fn notices_say_what_the_engine_does() {
        let c = ThermalConfig::default();
        let n = ThermalNotice::new(ThermalState::Fair, ThermalState::Nominal, &c, false);
        assert_eq!(n.rate_percent, 70);
        assert!(n.message.contains("70%"), "{}", n.message);
        let n = ThermalNotice::new(ThermalState::Critical, ThermalState::Serious, &c, false);
        assert_eq!(n.rate_percent, 0);
        assert!(n.background_paused && n.fewer_threads);
        let n = ThermalNotice::new(ThermalState::Nominal, ThermalState::Serious, &c, false);
        assert!(n.message.contains("cooled down"));
    }
}
