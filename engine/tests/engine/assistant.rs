//! Gemma 4's multi-token-prediction assistant against llama.cpp b11434, on random-weight
//! assistants for the family's Gemma 4 fixtures (`tests/fixtures/gemma4-assistant/`, made by
//! its `make_assistant.py`; llama.cpp's drafts recorded by `llama-mtp-drafts`): teacher-forced,
//! each step of each chain at the family fixtures' tolerances — top-1 agreement on the steps
//! whose reference top-2 are at least 0.1 apart, mean |Δ log-prob| of the reference's top
//! token. And `mtp` speculation gives the same tokens as none, through the sliding window's
//! wrap. Files the project did not make are refused in one sentence.
//!
//! `COMPANION_ASSISTANT_FIXTURES=DIR` checks another folder made the same way (its targets
//! are looked for there, then in the family fixtures' folder).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use engine::{BackendChoice, Engine, EngineConfig, GenerateParams, SamplingParams, Speculation};
use serde::Deserialize;
use sha2::Digest;

#[derive(Deserialize)]
struct Reference {
    target: String,
    target_sha256: String,
    assistant: String,
    n_draft: usize,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    ids: Vec<u32>,
    n_prompt: usize,
    steps: Vec<Position>,
}

#[derive(Deserialize)]
struct Position {
    pos: usize,
    last: u32,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
struct Step {
    draft: u32,
    top: Vec<(u32, f32)>,
}

fn dir() -> PathBuf {
    match std::env::var_os("COMPANION_ASSISTANT_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gemma4-assistant")
        }
    }
}

fn family_dir() -> PathBuf {
    match std::env::var_os("COMPANION_FAMILY_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gemma-family"),
    }
}

fn sha256(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every `X.llamacpp.json` with its assistant and target files.
fn references() -> Vec<(PathBuf, PathBuf, Reference)> {
    let dir = dir();
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".llamacpp.json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let r: Reference = serde_json::from_str(&text).expect("reference JSON");
        let target = [dir.join(&r.target), family_dir().join(&r.target)]
            .into_iter()
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{}: its target {} is missing", path.display(), r.target));
        assert_eq!(
            sha256(&target),
            r.target_sha256,
            "{} is not the target {} was recorded with",
            target.display(),
            path.display()
        );
        out.push((dir.join(&r.assistant), target, r));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(
        out.len() >= 2,
        "expected the assistant fixtures in {}",
        dir.display()
    );
    out
}

fn load(target: &Path, assistant: Option<&Path>) -> engine::Result<Engine> {
    Engine::load(EngineConfig {
        model_path: target.to_path_buf(),
        assistant_path: assistant.map(Path::to_path_buf),
        context: 512,
        prefill_chunk: 512,
        warm_up: false,
        backend: BackendChoice::Host,
        ..EngineConfig::default()
    })
}

#[test]
fn drafts_agree_with_llamacpp_teacher_forced() {
    let mut report = crate::AgreementReport::default();
    for (assistant, target, reference) in references() {
        let engine = load(&target, Some(&assistant))
            .unwrap_or_else(|e| panic!("{}: {e}", assistant.display()));
        let (mut agree, mut decided, mut sum, mut steps) = (0usize, 0usize, 0f64, 0usize);
        for case in &reference.cases {
            let from = case.n_prompt;
            // each step after the first is fed llama.cpp's draft of the step before
            let feed = |pos: usize, s: usize| Some(case.steps[pos - from].steps[s].draft);
            let ours = engine
                .score_assistant(&case.ids, from, reference.n_draft, &feed)
                .expect("assistant scoring");
            assert_eq!(ours.len(), case.steps.len());
            for (mine, theirs) in ours.iter().zip(&case.steps) {
                assert_eq!(mine.pos, theirs.pos);
                assert_eq!(case.ids[mine.pos], theirs.last);
                for (m, t) in mine.steps.iter().zip(&theirs.steps) {
                    let reference_top = t.top[0].0;
                    let our_logprob = m
                        .top
                        .iter()
                        .find(|(id, _)| *id == reference_top)
                        .map(|p| p.1)
                        // outside our top five: at most our fifth's
                        .unwrap_or(m.top[4].1);
                    sum += (our_logprob - t.top[0].1).abs() as f64;
                    steps += 1;
                    if t.top[0].1 - t.top[1].1 >= 0.1 {
                        decided += 1;
                        agree += usize::from(m.top[0].0 == reference_top);
                    }
                }
            }
        }
        let name = assistant
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // the family's limits for the target (its README): the assistant's numbers inherit
        // the target's hidden state and cache
        let limits = if name.contains("ple-shared") {
            (0.85, 0.2)
        } else {
            (0.90, 0.1)
        };
        report.add(&name, (agree, decided, sum / steps as f64), limits);
    }
    report.finish("assistant drafts against llama.cpp, teacher-forced");
}

#[test]
fn mtp_speculation_gives_the_same_tokens_as_none() {
    for (assistant, target, _) in references() {
        let engine = load(&target, Some(&assistant)).unwrap();
        // past the 32-token window several times
        let prompt: Vec<u32> = std::iter::once(2)
            .chain((0..20).map(|i| 300 + i * 7))
            .collect();
        for sampling in [
            SamplingParams::greedy(),
            SamplingParams {
                seed: 7,
                ..SamplingParams::default()
            },
        ] {
            let params = GenerateParams {
                max_tokens: 150,
                sampling,
                ignore_eos: true,
                speculation: Speculation::Off,
                ..GenerateParams::default()
            };
            let run = |speculation| {
                let mut session = engine.new_session().unwrap();
                let g = engine
                    .generate(
                        &mut session,
                        &prompt,
                        &GenerateParams {
                            speculation,
                            ..params.clone()
                        },
                        &AtomicBool::new(false),
                        &mut |_| {},
                    )
                    .unwrap();
                (g, session.tokens().to_vec())
            };
            let (off, off_tokens) = run(Speculation::Off);
            let (mtp, mtp_tokens) = run(Speculation::MtpUntimed);
            let what = format!("{}", assistant.display());
            assert_eq!(mtp.ids, off.ids, "{what}");
            assert_eq!(mtp_tokens, off_tokens, "{what}");
            assert!(
                mtp.stats.speculative_checks > 0,
                "{what}: the assistant never drafted"
            );
            assert_eq!(off.stats.speculative_checks, 0);
        }
    }
}

/// The error of a call that must fail, as the user reads it: one line.
fn refusal<T>(result: engine::Result<T>) -> String {
    match result {
        Ok(_) => panic!("accepted"),
        Err(e) => {
            let e = e.to_string();
            assert!(!e.contains('\n'), "one sentence: {e}");
            e
        }
    }
}

#[test]
fn assistants_that_do_not_fit_are_refused_in_one_sentence() {
    let refs = references();
    let (assistant, _, _) = &refs[0];
    // a Gemma 3 model
    let gemma3 = family_dir().join("gemma3-gqa.q8_0.gguf");
    let e = refusal(load(&gemma3, Some(assistant)));
    assert!(e.contains("drafts for Gemma 4 models"), "{e}");
    // the assistant loaded as a model
    let e = refusal(load(assistant, None));
    assert!(e.contains("multi-token-prediction assistant"), "{e}");
    // a model file given as the assistant
    let dense = family_dir().join("gemma4-dense.q8_0.gguf");
    let e = refusal(load(&dense, Some(&dense)));
    assert!(e.contains("not a Gemma 4 assistant"), "{e}");
    // an assistant for a model of another width: the E-series fixture's for gemma4-bpe
    // (vocabulary 640, not 600)
    let ple = refs
        .iter()
        .find(|r| r.0.to_string_lossy().contains("ple-shared"));
    if let Some((ple_assistant, _, _)) = ple {
        let bpe = family_dir().join("gemma4-bpe.q8_0.gguf");
        let e = refusal(load(&bpe, Some(ple_assistant)));
        assert!(e.contains("vocabulary"), "{e}");
    }
    // `mtp` without an assistant
    let engine = load(&dense, None).unwrap();
    let mut session = engine.new_session().unwrap();
    let e = refusal(engine.generate(
        &mut session,
        &[2, 300],
        &GenerateParams {
            speculation: Speculation::Mtp,
            ..GenerateParams::default()
        },
        &AtomicBool::new(false),
        &mut |_| {},
    ));
    assert!(e.contains("--assistant"), "{e}");
}
