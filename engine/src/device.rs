//! Backend choice: CPU everywhere, CUDA and Metal when built with the matching cargo feature.
//! An unavailable backend falls back to the CPU with a one-line notice instead of failing,
//! except the emulated Metal device (a test device: asking for it in a build without it is an
//! error, since the CPU would not test what was asked).

use candle_core::Device;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    #[default]
    Cpu,
    Cuda,
    Metal,
    /// Metal's decode kernels on the emulated Metal device (the `metal-emulated` feature: a
    /// test device; the rest of the model runs on the CPU)
    #[serde(rename = "metal-emulated")]
    MetalEmulated,
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
            "metal-emulated" => Ok(DeviceChoice::MetalEmulated),
            other => Err(format!(
                "unknown device `{other}` (expected cpu, cuda, metal or metal-emulated)"
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
            DeviceChoice::MetalEmulated => "metal-emulated",
        })
    }
}

/// The device to run on, and a notice when the requested one was not available.
pub fn select_device(choice: DeviceChoice) -> (Device, DeviceChoice, Option<String>) {
    match choice {
        DeviceChoice::Cpu => (Device::Cpu, DeviceChoice::Cpu, None),
        DeviceChoice::Cuda => cuda(),
        DeviceChoice::Metal => metal(),
        // the emulated device is the CPU's memory; `Engine::load` puts the decode on it (and
        // refuses a build without it)
        DeviceChoice::MetalEmulated => (Device::Cpu, DeviceChoice::MetalEmulated, None),
    }
}

#[cfg(feature = "cuda")]
fn cuda() -> (Device, DeviceChoice, Option<String>) {
    let device = match Device::new_cuda(0) {
        Ok(d) => d,
        Err(e) => {
            return (
                Device::Cpu,
                DeviceChoice::Cpu,
                Some(format!("CUDA is not available ({e}); running on the CPU")),
            );
        }
    };
    // candle's kernels are built for one architecture (see build.rs): on another GPU its
    // first matmul would fail with the driver's "no kernel image is available"
    let built_for = env!("COMPANION_CANDLE_CUDA_ARCH");
    let capability = match &device {
        Device::Cuda(d) => d.cuda_stream().context().compute_capability().ok(),
        _ => None,
    };
    if let Some((major, minor)) = capability
        && cuda_build_runs_on(built_for, major, minor) == Some(false)
    {
        return (
            Device::Cpu,
            DeviceChoice::Cpu,
            Some(format!(
                "this build's CUDA kernels are for {built_for} and this GPU is compute \
                 capability {major}.{minor}: rebuild with CUDA_COMPUTE_CAP={major}{minor}; \
                 running on the CPU"
            )),
        );
    }
    (device, DeviceChoice::Cuda, None)
}

/// Whether candle's CUDA kernels, built by cudaforge for `arch` (`sm_90a`, `sm_86`), run on a
/// GPU of compute capability `major.minor`; `None` when `arch` is not one we can read.
/// candle-kernels builds PTX for `arch` and a static library holding only `arch`'s machine
/// code, so the library decides: machine code runs on the same major version at the same or a
/// later minor one, code for an `a` ("architecture-specific") target only on that exact
/// version, and code for an `f` ("family") target on its major version from that minor on
/// (CUDA C Programming Guide, "Binary Compatibility" and "Feature Availability").
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn cuda_build_runs_on(arch: &str, major: i32, minor: i32) -> Option<bool> {
    let arch = arch.strip_prefix("sm_")?;
    let (digits, exact) = match arch.strip_suffix('a') {
        Some(d) => (d, true),
        None => (arch.strip_suffix('f').unwrap_or(arch), false),
    };
    let base: i32 = digits.parse().ok()?;
    let (b_major, b_minor) = (base / 10, base % 10);
    Some(if exact {
        (major, minor) == (b_major, b_minor)
    } else {
        major == b_major && minor >= b_minor
    })
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

#[cfg(test)]
mod tests {
    use super::cuda_build_runs_on;

    #[test]
    fn candle_cuda_builds_run_where_their_machine_code_does() {
        // what scripts/build-cuda makes by default: Hopper only
        assert_eq!(cuda_build_runs_on("sm_90a", 9, 0), Some(true));
        assert_eq!(cuda_build_runs_on("sm_90a", 8, 6), Some(false));
        assert_eq!(cuda_build_runs_on("sm_90a", 10, 0), Some(false));
        // plain targets: the same major version, this minor or later
        assert_eq!(cuda_build_runs_on("sm_86", 8, 6), Some(true));
        assert_eq!(cuda_build_runs_on("sm_86", 8, 9), Some(true));
        assert_eq!(cuda_build_runs_on("sm_86", 8, 0), Some(false));
        assert_eq!(cuda_build_runs_on("sm_80", 9, 0), Some(false));
        // family targets
        assert_eq!(cuda_build_runs_on("sm_121f", 12, 1), Some(true));
        assert_eq!(cuda_build_runs_on("sm_121f", 12, 0), Some(false));
        assert_eq!(cuda_build_runs_on("sm_121f", 11, 1), Some(false));
        // a build whose architecture was not found says nothing
        assert_eq!(cuda_build_runs_on("unknown", 9, 0), None);
        assert_eq!(cuda_build_runs_on("sm_9x", 9, 0), None);
    }
}
