//! macOS and iOS: `NSProcessInfo.processInfo.thermalState` (Foundation; macOS 10.10.3+,
//! iOS 11+) through objc2-foundation, whose `processInfo` and `thermalState` are safe to call
//! from any thread (Apple: "NSProcessInfo is thread-safe in macOS 10.7 and later"). The OS
//! already smooths this state, so it is used as it is.

use objc2_foundation::{NSProcessInfo, NSProcessInfoThermalState};

use super::{ThermalSource, ThermalState};

#[derive(Debug, Clone, Copy, Default)]
pub struct AppleSource;

impl ThermalSource for AppleSource {
    fn read(&mut self) -> ThermalState {
        let state = NSProcessInfo::processInfo().thermalState();
        match state {
            NSProcessInfoThermalState::Nominal => ThermalState::Nominal,
            NSProcessInfoThermalState::Fair => ThermalState::Fair,
            NSProcessInfoThermalState::Serious => ThermalState::Serious,
            NSProcessInfoThermalState::Critical => ThermalState::Critical,
            _ => ThermalState::Unknown,
        }
    }

    fn describe(&self) -> String {
        "NSProcessInfo.thermalState".into()
    }
}
