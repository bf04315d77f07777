//! The thermal levels' settings: how often to sample, how long to hold a hotter state, and
//! how fast to decode at each level. Plain numbers (milliseconds, fractions) so that the app
//! can send them over IPC and a user can set them from the CLI.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ThermalConfig {
    /// Off: never sample, never pace.
    pub enabled: bool,
    /// How often the governor reads the source.
    pub sample_interval_ms: u64,
    /// Hysteresis: a hotter state is obeyed at once, but kept at least this long before a
    /// cooler reading is obeyed, so a reading that jitters around a boundary cannot make the
    /// pace flap faster than this.
    pub hold_ms: u64,
    /// Decode rate under `fair`, as a fraction of the measured unthrottled rate.
    pub fair_rate: f64,
    /// Decode rate under `serious` (and under `critical` once the user resumed).
    pub serious_rate: f64,
    /// Compute threads under `serious`, as a fraction of the configured ones (at least one).
    pub serious_threads: f64,
    /// Read the state from this file instead of the OS (see [`super::file`]); unset:
    /// `$COMPANION_THERMAL_FILE`, else the OS.
    pub file: Option<PathBuf>,
}

impl Default for ThermalConfig {
    fn default() -> Self {
        ThermalConfig {
            enabled: true,
            sample_interval_ms: 2000,
            hold_ms: 4000,
            fair_rate: 0.7,
            serious_rate: 0.4,
            serious_threads: 0.5,
            file: None,
        }
    }
}

impl ThermalConfig {
    pub fn sample_interval(&self) -> Duration {
        Duration::from_millis(self.sample_interval_ms.max(1))
    }

    pub fn hold(&self) -> Duration {
        Duration::from_millis(self.hold_ms)
    }

    /// The decode rate fraction `level` allows (1.0 at nominal; 0.0 is never returned: a
    /// pause is decided by the pacer, not by a rate).
    pub fn rate_for_level(&self, level: u8) -> f64 {
        match level {
            0 => 1.0,
            1 => self.fair_rate,
            _ => self.serious_rate,
        }
    }

    /// Threads to use under `serious` out of `full`.
    pub fn reduced_threads(&self, full: usize) -> usize {
        ((full as f64 * self.serious_threads).floor() as usize).clamp(1, full.max(1))
    }

    pub fn validate(&self) -> Result<()> {
        let frac = |name: &str, v: f64| {
            if v > 0.0 && v <= 1.0 {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!(
                    "thermal {name} must be a fraction in (0, 1], not {v}"
                )))
            }
        };
        frac("fair rate", self.fair_rate)?;
        frac("serious rate", self.serious_rate)?;
        frac("serious threads", self.serious_threads)?;
        if self.sample_interval_ms == 0 {
            return Err(Error::InvalidArgument(
                "the thermal sampling interval must be at least 1 ms".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_issue_and_validate() {
        let c = ThermalConfig::default();
        c.validate().unwrap();
        assert_eq!(c.rate_for_level(1), 0.7);
        assert_eq!(c.rate_for_level(2), 0.4);
        assert_eq!(c.reduced_threads(8), 4);
        assert_eq!(c.reduced_threads(1), 1);
        let bad = ThermalConfig {
            fair_rate: 1.5,
            ..c
        };
        assert!(bad.validate().is_err());
    }
}
