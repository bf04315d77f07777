//! Which instruction sets this CPU (and its OS) can run, detected once. A kernel table is only
//! ever built for an instruction set detected here at run time (`is_x86_feature_detected!`,
//! which also checks that the OS saves the wider registers), never from compile-time flags.
//!
//! `COMPANION_CPU_KERNELS=portable` (or the name of any narrower set than the CPU has) forces
//! a narrower table: to compare paths on one machine, or to work around a CPU bug. A name the
//! CPU cannot run is ignored with a warning; the widest available set is used otherwise.

use serde::Serialize;

/// The kernel sets, narrowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Isa {
    /// Plain Rust loops, every CPU.
    Portable,
    /// x86-64 with AVX2, FMA and F16C (ggml's `__AVX2__` paths).
    Avx2,
    /// AVX2 plus AVX-512 F, BW, VL and VNNI (`vpdpbusd`).
    Avx512,
}

impl Isa {
    pub fn as_str(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "portable" | "scalar" | "none" => Some(Isa::Portable),
            "avx2" => Some(Isa::Avx2),
            "avx512" | "avx512vnni" => Some(Isa::Avx512),
            _ => None,
        }
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every kernel set this CPU can run, narrowest first (always starting with `Portable`).
pub fn available() -> Vec<Isa> {
    let mut sets = vec![Isa::Portable];
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            sets.push(Isa::Avx2);
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512vnni")
            {
                sets.push(Isa::Avx512);
            }
        }
    }
    sets
}

/// The set to use: the widest available, or the one `COMPANION_CPU_KERNELS` names if this CPU
/// can run it.
pub fn chosen() -> Isa {
    let sets = available();
    let widest = *sets.last().unwrap_or(&Isa::Portable);
    match std::env::var("COMPANION_CPU_KERNELS") {
        Ok(name) if !name.is_empty() => match Isa::parse(&name) {
            Some(isa) if sets.contains(&isa) => isa,
            _ => {
                tracing::warn!(
                    requested = %name,
                    using = %widest,
                    "COMPANION_CPU_KERNELS names a kernel set this CPU cannot run"
                );
                widest
            }
        },
        _ => widest,
    }
}
