//! Which instruction sets this CPU (and its OS) can run, detected once. A kernel table is only
//! ever built for an instruction set detected here at run time (`is_x86_feature_detected!`,
//! which also checks that the OS saves the wider registers; `is_aarch64_feature_detected!`,
//! which asks the OS — `HWCAP` on Linux, `sysctl hw.optional` on macOS), never from
//! compile-time flags.
//!
//! `COMPANION_CPU_KERNELS=portable` (or the name of any narrower set than the CPU has:
//! `avx2`, or `neon` / `dotprod` on aarch64) forces a narrower table: to compare paths on one
//! machine, or to work around a CPU bug. A name the CPU cannot run is ignored with a warning;
//! the widest available set is used otherwise.

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
    /// aarch64 Advanced SIMD only (ggml's `__ARM_NEON` paths without dotprod).
    Neon,
    /// NEON plus the dot product extension (`sdot`, ggml's `__ARM_FEATURE_DOTPROD`).
    Dotprod,
    /// Dotprod plus the int8 matrix multiply extension (`smmla`, `__ARM_FEATURE_MATMUL_INT8`).
    I8mm,
}

impl Isa {
    pub fn as_str(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Neon => "neon",
            Isa::Dotprod => "dotprod",
            Isa::I8mm => "i8mm",
        }
    }

    /// The instruction-set family: tables of one family compute the same results bit for
    /// bit (each wider one only adds instructions); across families the float sums differ.
    pub fn family(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 | Isa::Avx512 => "x86-64",
            Isa::Neon | Isa::Dotprod | Isa::I8mm => "aarch64",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "portable" | "scalar" | "none" => Some(Isa::Portable),
            "avx2" => Some(Isa::Avx2),
            "avx512" | "avx512vnni" => Some(Isa::Avx512),
            "neon" | "asimd" => Some(Isa::Neon),
            "dotprod" => Some(Isa::Dotprod),
            "i8mm" => Some(Isa::I8mm),
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
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("neon") {
            sets.push(Isa::Neon);
            if std::arch::is_aarch64_feature_detected!("dotprod") {
                sets.push(Isa::Dotprod);
                if std::arch::is_aarch64_feature_detected!("i8mm") {
                    sets.push(Isa::I8mm);
                }
            }
        }
    }
    sets
}

/// The set to use: the widest available, or the one `COMPANION_CPU_KERNELS` names if this CPU
/// can run it.
pub fn chosen() -> Isa {
    let requested = std::env::var("COMPANION_CPU_KERNELS").ok();
    choose(&available(), requested.as_deref())
}

/// [`chosen`] for the sets `sets` (narrowest first) and the name `requested`.
fn choose(sets: &[Isa], requested: Option<&str>) -> Isa {
    let widest = *sets.last().unwrap_or(&Isa::Portable);
    match requested {
        Some(name) if !name.is_empty() => match Isa::parse(name) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_narrower_set_can_be_forced_and_an_unavailable_one_is_ignored() {
        let arm = [Isa::Portable, Isa::Neon, Isa::Dotprod, Isa::I8mm];
        assert_eq!(choose(&arm, None), Isa::I8mm);
        assert_eq!(choose(&arm, Some("")), Isa::I8mm);
        assert_eq!(choose(&arm, Some("neon")), Isa::Neon);
        assert_eq!(choose(&arm, Some(" DotProd ")), Isa::Dotprod);
        assert_eq!(choose(&arm, Some("portable")), Isa::Portable);
        assert_eq!(choose(&arm, Some("avx2")), Isa::I8mm);
        let a57 = [Isa::Portable, Isa::Neon];
        assert_eq!(choose(&a57, Some("i8mm")), Isa::Neon);
        let x86 = [Isa::Portable, Isa::Avx2];
        assert_eq!(choose(&x86, Some("avx512")), Isa::Avx2);
        assert_eq!(choose(&x86, Some("neon")), Isa::Avx2);
    }

    #[test]
    fn every_set_has_a_name_that_parses_back() {
        for isa in [
            Isa::Portable,
            Isa::Avx2,
            Isa::Avx512,
            Isa::Neon,
            Isa::Dotprod,
            Isa::I8mm,
        ] {
            assert_eq!(Isa::parse(isa.as_str()), Some(isa));
        }
    }

    #[test]
    fn this_cpu_has_its_family_s_baseline() {
        let sets = available();
        // scripts/test-aarch64 reads this line to check what each emulated CPU offered
        eprintln!("kernel sets on this CPU: {sets:?}");
        assert_eq!(sets[0], Isa::Portable);
        #[cfg(target_arch = "aarch64")]
        assert!(sets.contains(&Isa::Neon), "every aarch64 CPU has NEON");
        // narrowest first, each set at most once
        assert!(sets.windows(2).all(|w| w[0] < w[1]));
    }
}
