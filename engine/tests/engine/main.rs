//! The engine's public behaviour on the random-weight Gemma family fixtures, one test binary; a
//! module per concern: `cargo test -p companion-engine --test engine -- MODULE::`.

mod assistant;
mod gemma_family;
mod profile;
mod snapshot_seed;
mod speculation;

/// Agreement with llama.cpp against the family fixtures' limits (their README): one line per
/// file, printed, and a failure naming every file below its limits.
#[derive(Default)]
pub struct AgreementReport {
    lines: Vec<String>,
    failures: Vec<String>,
}

impl AgreementReport {
    /// `agree` of `decided` top-1 choices (steps whose reference top-2 are ≥ 0.1 apart) and
    /// the mean |Δ log-prob| of the reference's token, against `min_rate` and `max_mean`.
    pub fn add(
        &mut self,
        name: &str,
        (agree, decided, mean): (usize, usize, f64),
        (min_rate, max_mean): (f64, f64),
    ) {
        let rate = agree as f64 / decided as f64;
        let line = format!(
            "{name:<40} top-1 {agree}/{decided} ({:.1}%), mean |Δ logprob| {mean:.4}",
            rate * 100.0
        );
        if rate < min_rate || mean > max_mean {
            self.failures.push(format!(
                "{line}  (needs ≥ {:.0}%, ≤ {max_mean})",
                min_rate * 100.0
            ));
        }
        self.lines.push(line);
    }

    pub fn finish(self, title: &str) {
        eprintln!("{title}:\n{}", self.lines.join("\n"));
        assert!(
            self.failures.is_empty(),
            "below the limits:\n{}",
            self.failures.join("\n")
        );
    }
}
