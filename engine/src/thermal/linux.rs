//! Linux: the hottest thermal zone against its own trip points (the kernel's sysfs thermal
//! interface, `Documentation/driver-api/thermal/sysfs-api.rst`). Temperatures are in
//! millidegrees Celsius. A trip point's type says what the platform does there: `active`
//! turns on fans, `passive` makes the kernel throttle the CPU, `hot` and `critical` come just
//! before an emergency shutdown. We move a level *before* the kernel acts, so that pacing,
//! not throttling, keeps the device cool:
//!
//! | level    | reached at                                               |
//! | -------- | -------------------------------------------------------- |
//! | fair     | an `active` trip, or 10 °C below a `passive` trip         |
//! | serious  | a `passive` trip, or 10 °C below a `hot`/`critical` trip  |
//! | critical | a `hot` or `critical` trip                               |
//!
//! A zone stays at a level until it is `hyst` below that level's threshold (the trip's own
//! `trip_point_N_hyst`, else 3 °C), as the kernel's own governors do. No zone with trip
//! points (a VM, a container without sysfs): `unknown`.

use std::path::{Path, PathBuf};

use super::{ThermalSource, ThermalState};

pub const SYS_THERMAL: &str = "/sys/class/thermal";

/// Degrees below a throttling trip point at which we already slow down, in millidegrees.
const EARLY_MC: i64 = 10_000;
/// Hysteresis when a trip point does not state its own, in millidegrees.
const DEFAULT_HYST_MC: i64 = 3_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TripKind {
    Active,
    Passive,
    Hot,
    Critical,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trip {
    pub kind: TripKind,
    pub temp_mc: i64,
    pub hyst_mc: i64,
}

impl Trip {
    /// The (level, threshold) pairs this trip point defines.
    fn thresholds(&self) -> [(u8, i64); 2] {
        let t = self.temp_mc;
        match self.kind {
            TripKind::Active => [(1, t), (1, t)],
            TripKind::Passive => [(2, t), (1, t - EARLY_MC)],
            TripKind::Hot | TripKind::Critical => [(3, t), (2, t - EARLY_MC)],
        }
    }
}

fn level_state(level: u8) -> ThermalState {
    match level {
        0 => ThermalState::Nominal,
        1 => ThermalState::Fair,
        2 => ThermalState::Serious,
        _ => ThermalState::Critical,
    }
}

/// The level of one zone at `temp_mc`, given the level it had before (for hysteresis).
pub fn zone_level(temp_mc: i64, trips: &[Trip], previous: u8) -> u8 {
    let mut raw = 0;
    let mut held = 0;
    for trip in trips {
        let hyst = if trip.hyst_mc > 0 {
            trip.hyst_mc
        } else {
            DEFAULT_HYST_MC
        };
        for (level, threshold) in trip.thresholds() {
            if temp_mc >= threshold {
                raw = raw.max(level);
            }
            if temp_mc >= threshold - hyst {
                held = held.max(level);
            }
        }
    }
    raw.max(held.min(previous))
}

#[derive(Debug)]
pub struct LinuxSource {
    root: PathBuf,
    /// Each zone's last level, by zone directory.
    levels: std::collections::HashMap<PathBuf, u8>,
}

impl LinuxSource {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LinuxSource {
            root: root.into(),
            levels: Default::default(),
        }
    }
}

fn read_i64(path: &Path) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn read_trips(zone: &Path) -> Vec<Trip> {
    let mut trips = Vec::new();
    for n in 0.. {
        let temp = zone.join(format!("trip_point_{n}_temp"));
        if !temp.exists() {
            break;
        }
        let kind = match std::fs::read_to_string(zone.join(format!("trip_point_{n}_type")))
            .unwrap_or_default()
            .trim()
        {
            "active" => TripKind::Active,
            "passive" => TripKind::Passive,
            "hot" => TripKind::Hot,
            "critical" => TripKind::Critical,
            _ => continue,
        };
        // disabled trip points read as 0 or negative
        let Some(temp_mc) = read_i64(&temp).filter(|&t| t > 0) else {
            continue;
        };
        let hyst_mc = read_i64(&zone.join(format!("trip_point_{n}_hyst"))).unwrap_or(0);
        trips.push(Trip {
            kind,
            temp_mc,
            hyst_mc,
        });
    }
    trips
}

impl ThermalSource for LinuxSource {
    fn read(&mut self) -> ThermalState {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return ThermalState::Unknown;
        };
        let mut worst: Option<u8> = None;
        for entry in entries.flatten() {
            let zone = entry.path();
            let is_zone = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("thermal_zone"));
            if !is_zone {
                continue;
            }
            let Some(temp) = read_i64(&zone.join("temp")) else {
                continue;
            };
            let trips = read_trips(&zone);
            if trips.is_empty() {
                continue;
            }
            let previous = self.levels.get(&zone).copied().unwrap_or(0);
            let level = zone_level(temp, &trips, previous);
            self.levels.insert(zone, level);
            worst = Some(worst.unwrap_or(0).max(level));
        }
        worst.map_or(ThermalState::Unknown, level_state)
    }

    fn describe(&self) -> String {
        format!("linux thermal zones ({})", self.root.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trip(kind: TripKind, c: i64) -> Trip {
        Trip {
            kind,
            temp_mc: c * 1000,
            hyst_mc: 0,
        }
    }

    #[test]
    fn levels_rise_at_trip_points_and_fall_with_hysteresis() {
        let trips = [trip(TripKind::Passive, 90), trip(TripKind::Critical, 105)];
        assert_eq!(zone_level(60_000, &trips, 0), 0);
        assert_eq!(zone_level(80_000, &trips, 0), 1);
        assert_eq!(zone_level(90_000, &trips, 1), 2);
        assert_eq!(zone_level(105_000, &trips, 2), 3);
        // 1 °C below the passive trip: still serious, being within the 3 °C hysteresis
        assert_eq!(zone_level(89_000, &trips, 2), 2);
        // 4 °C below: down to fair; coming from below, 89 °C was only ever fair
        assert_eq!(zone_level(86_000, &trips, 2), 1);
        assert_eq!(zone_level(89_000, &trips, 1), 1);
    }

    #[test]
    fn reads_the_hottest_zone_and_unknown_without_trips() {
        let dir = std::env::temp_dir().join(format!("companion-sysfs-{}", std::process::id()));
        let z0 = dir.join("thermal_zone0");
        let z1 = dir.join("thermal_zone1");
        std::fs::create_dir_all(&z0).unwrap();
        std::fs::create_dir_all(&z1).unwrap();
        let mut source = LinuxSource::new(&dir);
        std::fs::write(z0.join("temp"), "50000\n").unwrap();
        assert_eq!(source.read(), ThermalState::Unknown, "no trip points yet");
        std::fs::write(z0.join("trip_point_0_temp"), "105000\n").unwrap();
        std::fs::write(z0.join("trip_point_0_type"), "critical\n").unwrap();
        assert_eq!(source.read(), ThermalState::Nominal);
        std::fs::write(z1.join("temp"), "71000\n").unwrap();
        std::fs::write(z1.join("trip_point_0_temp"), "70000\n").unwrap();
        std::fs::write(z1.join("trip_point_0_type"), "active\n").unwrap();
        assert_eq!(source.read(), ThermalState::Fair);
        std::fs::write(z0.join("temp"), "96000\n").unwrap();
        assert_eq!(source.read(), ThermalState::Serious);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
