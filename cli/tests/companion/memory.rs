//! The memory guard's estimate against what the process really uses: peak RSS (`VmHWM`, as
//! `generate --json` reports it) of `companion generate` with its context filled by the
//! prompt, at 512, 2048 and 8192 tokens. A guard that estimates low lets a phone run out of
//! memory, so the estimate must never be below the peak, and at most 5% above it (0.5-1.6%
//! above here, the least at 8192).
//! Filling 8192 tokens is a long prefill: this file takes about a minute on two cores.

use std::process::Command;

use crate::support;

/// English prose of 47 tokens per repetition.
const TEXT: &str = "The lighthouse keeper kept a careful log of every ship that passed the point, the weather at dawn and dusk, and the state of the great lamp. In winter the storms came in from the west and the sea rose over the rocks. ";

fn json(args: &[&str]) -> serde_json::Value {
    support::json(&support::companion(args))
}

#[cfg(target_os = "linux")]
#[test]
fn the_estimate_is_at_or_a_little_above_peak_rss_with_the_context_full() {
    for context in [512usize, 2048, 8192] {
        let c = context.to_string();
        let doctor = json(&["doctor", "--json", "--context", &c]);
        let estimate = doctor["model"]["estimate"]["totalBytes"]
            .as_u64()
            .expect("an estimate");
        let prompt = TEXT.repeat((context - 16) / 47);
        let run = json(&[
            "generate",
            "--raw",
            "--json",
            "--temperature",
            "0",
            "--max-tokens",
            "8",
            "--context",
            &c,
            &prompt,
        ]);
        let tokens = run["timings"]["promptTokens"].as_u64().unwrap() as usize;
        assert!(
            tokens * 10 >= context * 9,
            "the prompt fills only {tokens} of {context}"
        );
        let peak = run["peakRssBytes"].as_u64().expect("peak RSS on Linux");
        let ratio = estimate as f64 / peak as f64;
        eprintln!(
            "context {context}: estimate {:.1} MB, peak RSS {:.1} MB ({tokens} tokens), ratio {ratio:.3}",
            estimate as f64 / 1e6,
            peak as f64 / 1e6
        );
        assert!(
            (1.0..=1.05).contains(&ratio),
            "context {context}: estimate/peak = {ratio:.3} (must be 1.00 to 1.05)"
        );
    }
}

#[test]
fn a_small_simulated_memory_lowers_the_context_and_says_so() {
    let o = Command::new(env!("CARGO_BIN_EXE_companion"))
        .args([
            "generate",
            "--raw",
            "--temperature",
            "0",
            "--max-tokens",
            "2",
            "--context",
            "8192",
            "Hi",
        ])
        .env("COMPANION_AVAILABLE_MEMORY", "380M")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("notice: only") && err.contains("lowered from 8192 to"),
        "{err}"
    );

    let o = Command::new(env!("CARGO_BIN_EXE_companion"))
        .args(["generate", "--raw", "Hi"])
        .env("COMPANION_AVAILABLE_MEMORY", "100M")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.starts_with("error [insufficient_memory]: not enough memory"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn doctor_reports_memory_backend_and_the_gemma_sizes() {
    let v = json(&["doctor", "--json"]);
    assert_eq!(v["backend"], "cpu");
    assert!(v["totalMemoryBytes"].as_u64().unwrap_or(0) > 0 || !cfg!(target_os = "linux"));
    assert_eq!(v["model"]["recommendedContext"], 4096, "{v}");
    // the default model is pretrained only (no finetune, "-it" or chat template in the file)
    assert_eq!(v["model"]["tuning"], "base", "{v}");
    assert!(
        v["model"]["tuningNotice"]
            .as_str()
            .is_some_and(|n| n.contains("continues the text")),
        "{v}"
    );
    let names: Vec<&str> = v["gemmaSizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3);
    assert!(names[0].contains("270M") && names[1].contains("1B") && names[2].contains("4B"));

    let small = Command::new(env!("CARGO_BIN_EXE_companion"))
        .args(["doctor", "--json", "--context", "8192"])
        .env("COMPANION_AVAILABLE_MEMORY", "380M")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&small.stdout).unwrap();
    assert_eq!(v["availableSimulated"], true);
    let recommended = v["model"]["recommendedContext"].as_u64().unwrap();
    assert!(
        (512..8192).contains(&(recommended as usize)),
        "{recommended}"
    );
    assert_eq!(v["gemmaSizes"][2]["fits"], false);
}
