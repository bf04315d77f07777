//! Backend choice: CPU everywhere, CUDA and Metal when built with the matching cargo feature.
//! An unavailable backend falls back to the CPU with a one-line notice instead of failing.

use candle_core::Device;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    #[default]
    Cpu,
    Cuda,
    Metal,
}

impl DeviceChoice {
    /// The device the app starts on: Metal on the Mac and the iPhone (every one has an Apple
    /// GPU; a build or device without it falls back to the CPU with a notice), the CPU
    /// elsewhere.
    pub fn platform_default() -> Self {
        if cfg!(any(target_os = "macos", target_os = "ios")) {
            DeviceChoice::Metal
        } else {
            DeviceChoice::Cpu
        }
    }
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" => Ok(DeviceChoice::Cuda),
            "metal" => Ok(DeviceChoice::Metal),
            other => Err(format!(
                "unknown device `{other}` (expected cpu, cuda or metal)"
            )),
        }
    }
}

impl std::fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeviceChoice::Cpu => "cpu",
            DeviceChoice::Cuda => "cuda",
            DeviceChoice::Metal => "metal",
        })
    }
}

/// The device to run on, and a notice when the requested one was not available.
pub fn select_device(choice: DeviceChoice) -> (Device, DeviceChoice, Option<String>) {
    match choice {
        DeviceChoice::Cpu => (Device::Cpu, DeviceChoice::Cpu, None),
        DeviceChoice::Cuda => cuda(),
        DeviceChoice::Metal => metal(),
    }
}

#[cfg(feature = "cuda")]
fn cuda() -> (Device, DeviceChoice, Option<String>) {
    match Device::new_cuda(0) {
        Ok(d) => (d, DeviceChoice::Cuda, None),
        Err(e) => (
            Device::Cpu,
            DeviceChoice::Cpu,
            Some(format!("CUDA is not available ({e}); running on the CPU")),
        ),
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda() -> (Device, DeviceChoice, Option<String>) {
    (
        Device::Cpu,
        DeviceChoice::Cpu,
        Some(
            "this build has no CUDA support (build with --features cuda); running on the CPU"
                .into(),
        ),
    )
}

#[cfg(feature = "metal")]
fn metal() -> (Device, DeviceChoice, Option<String>) {
    match Device::new_metal(0) {
        Ok(d) => (d, DeviceChoice::Metal, None),
        Err(e) => (
            Device::Cpu,
            DeviceChoice::Cpu,
            Some(format!("Metal is not available ({e}); running on the CPU")),
        ),
    }
}

#[cfg(not(feature = "metal"))]
fn metal() -> (Device, DeviceChoice, Option<String>) {
    (
        Device::Cpu,
        DeviceChoice::Cpu,
        Some("this build has no Metal support (build with --features metal on a Mac); running on the CPU".into()),
    )
}

/// Physical CPU cores (not hyper-threads), the default thread count: matmul threads sharing
/// one core's vector units slow each other down.
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    #[cfg(target_os = "linux")]
    {
        if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
            let mut cores = std::collections::HashSet::new();
            let mut phys = None;
            for line in info.lines() {
                let mut parts = line.splitn(2, ':');
                let key = parts.next().unwrap_or("").trim();
                let val = parts.next().unwrap_or("").trim().to_string();
                match key {
                    "physical id" => phys = Some(val),
                    "core id" => {
                        cores.insert((phys.clone(), val));
                    }
                    _ => {}
                }
            }
            if !cores.is_empty() {
                return cores.len().min(logical).max(1);
            }
        }
    }
    logical
}

/// Set the number of compute threads. Must be called before the first tensor operation
/// (candle sizes its pools once); later calls have no effect.
pub fn set_threads(n: usize) {
    let n = n.max(1).to_string();
    // SAFETY: called during start-up, before the engine or any other thread reads the
    // environment; candle reads these variables once when it builds its pools.
    unsafe {
        std::env::set_var("CANDLE_NUM_THREADS", &n);
        std::env::set_var("RAYON_NUM_THREADS", &n);
    }
}

/// The number of compute threads in use (the global rayon pool that runs our kernels).
pub fn configured_threads() -> usize {
    rayon::current_num_threads()
}
