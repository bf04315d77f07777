//! Speculative decoding by prompt lookup on every family fixture: greedy and seeded sampled
//! output are the same, token for token, as without it — through drafts kept and refused, and
//! through the sliding-window rings (32 tokens) wrapping several times, with steps as small as
//! a check — and sampled output keeps the model's distribution (a chi-square test over seeded
//! runs, its power shown).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use engine::{Engine, EngineConfig, GenerateParams, SamplingParams, Speculation};

fn fixtures() -> Vec<PathBuf> {
    let dir = match std::env::var_os("COMPANION_FAMILY_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gemma-family"),
    };
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    out.sort();
    assert!(out.len() >= 14, "the family fixtures are missing");
    out
}

fn fixture(name: &str) -> PathBuf {
    fixtures()
        .into_iter()
        .find(|p| p.to_string_lossy().contains(name))
        .unwrap_or_else(|| panic!("the fixture {name}"))
}

fn load(path: &Path, context: usize, chunk: usize) -> Engine {
    Engine::load(EngineConfig {
        model_path: path.to_path_buf(),
        context,
        prefill_chunk: chunk,
        warm_up: false,
        ..EngineConfig::default()
    })
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `params` without speculation and with untimed lookup (the same checks on every machine,
/// whatever each costs): the two must give the same tokens, stop reason and session. Returns
/// the speculative generation.
fn same_with_and_without(
    engine: &Engine,
    prompt: &[u32],
    params: &GenerateParams,
    what: &str,
) -> engine::Generation {
    let (off, off_tokens) = generate(engine, prompt, params);
    let lookup = GenerateParams {
        speculation: Speculation::LookupUntimed,
        ..params.clone()
    };
    let (on, on_tokens) = generate(engine, prompt, &lookup);
    assert_eq!(on.ids, off.ids, "{what}");
    assert_eq!(on.stop_reason, off.stop_reason, "{what}");
    // the session holds what it would without speculation (no kept draft past the end)
    assert_eq!(on_tokens, off_tokens, "{what}");
    assert!(on.stats.accepted_draft_tokens <= on.stats.draft_tokens);
    on
}

/// A generation in a new session, and the tokens the session holds after it.
fn generate(
    engine: &Engine,
    prompt: &[u32],
    params: &GenerateParams,
) -> (engine::Generation, Vec<u32>) {
    let mut session = engine.new_session().unwrap();
    let g = engine
        .generate(
            &mut session,
            prompt,
            params,
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap();
    (g, session.tokens().to_vec())
}

/// A prompt that repeats itself, so that lookup drafts: ids 2.. of the vocabulary in a
/// pattern the random-weight models tend to continue.
fn repetitive_prompt() -> Vec<u32> {
    let phrase: Vec<u32> = (0..12).map(|i| 100 + (i * 37) % 500).collect();
    let mut prompt = vec![2];
    for _ in 0..6 {
        prompt.extend(&phrase);
    }
    prompt
}

#[test]
fn output_is_the_same_token_for_token_on_every_fixture() {
    let prompt = repetitive_prompt();
    let params = GenerateParams {
        max_tokens: 160,
        sampling: SamplingParams::greedy(),
        ignore_eos: true,
        ..GenerateParams::default()
    };
    let (mut drafted_total, mut refused_total, mut sampled_drafts) = (0, 0, 0);
    for path in fixtures() {
        // a chunk of 9: a check of 8 drafts fills it, the rings hold window + 9 slots
        for chunk in [9, 512] {
            let engine = load(&path, 512, chunk);
            let what = format!("{} (chunk {chunk})", path.display());
            let s = same_with_and_without(&engine, &prompt, &params, &what).stats;
            eprintln!(
                "{what}: {} drafted, {} kept in {} checks",
                s.draft_tokens, s.accepted_draft_tokens, s.speculative_checks
            );
            drafted_total += s.draft_tokens;
            refused_total += s.draft_tokens - s.accepted_draft_tokens;
            // seeded sampling: each emitted token takes the draw a step would have taken
            let sampled = GenerateParams {
                sampling: SamplingParams {
                    temperature: 0.9,
                    seed: 7,
                    ..SamplingParams::default()
                },
                ..params.clone()
            };
            let on = same_with_and_without(&engine, &prompt, &sampled, &format!("{what} sampled"));
            sampled_drafts += on.stats.draft_tokens;
        }
    }
    assert!(
        drafted_total > 500,
        "lookup drafted almost nothing: the test tests nothing"
    );
    assert!(
        refused_total > 50,
        "hardly a draft refused: rollback untested"
    );
    assert!(
        sampled_drafts > 50,
        "sampling hardly drafted ({sampled_drafts})"
    );
}

/// Past 512 cells a decode step's attention splits the cache in two (ggml's
/// `flash_attn_ext` reduce), a batch's does not: the check must run each of its queries as
/// the decode step would. Global-attention layers (Gemma 1, Gemma 4's global layer), 560
/// tokens of prompt, 80 generated.
#[test]
fn greedy_output_is_the_same_past_512_cells() {
    let params = GenerateParams {
        max_tokens: 80,
        sampling: SamplingParams::greedy(),
        ignore_eos: true,
        ..GenerateParams::default()
    };
    let phrase: Vec<u32> = (0..14).map(|i| 100 + (i * 37) % 500).collect();
    let mut prompt = vec![2];
    while prompt.len() < 560 {
        prompt.extend(&phrase);
    }
    let mut drafted = 0;
    for name in ["gemma1-mqa.q8_0", "gemma4-dense.q4_k_m"] {
        let engine = load(&fixture(name), 1024, 512);
        drafted += same_with_and_without(&engine, &prompt, &params, name)
            .stats
            .draft_tokens;
    }
    assert!(drafted > 40, "lookup drafted almost nothing ({drafted})");
}

/// A generation that fills the context ends where it would without speculation: the same
/// tokens, `ContextFull`, and the session holding the same positions (kept drafts hold theirs
/// before they are emitted, and are not counted twice).
#[test]
fn a_full_context_ends_as_without_speculation() {
    let params = GenerateParams {
        max_tokens: 1000,
        sampling: SamplingParams::greedy(),
        ignore_eos: true,
        ..GenerateParams::default()
    };
    let prompt = repetitive_prompt();
    let mut drafted = 0;
    // the fixtures whose drafts are mostly kept, at contexts of every length modulo a check's
    // five tokens: some check's kept drafts reach the very last position
    let kept_often = [
        "gemma2-softcap.q4_k_m",
        "gemma3-gqa.q4_k_m",
        "gemma3-linrope8.q4_k_m",
    ];
    for (name, context) in kept_often
        .iter()
        .flat_map(|n| (96..=105).map(move |c| (*n, c)))
    {
        let engine = load(&fixture(name), context, 9);
        let what = format!("{name} (context {context})");
        let on = same_with_and_without(&engine, &prompt, &params, &what);
        assert_eq!(on.stop_reason, engine::StopReason::ContextFull, "{what}");
        drafted += on.stats.draft_tokens;
    }
    assert!(drafted > 10, "lookup drafted almost nothing ({drafted})");
}

/// A prompt where token [`PIVOT`] is followed once by every id below `vocab`, and which ends
/// with it: whatever the first sampled token is, the bigram (pivot, token) occurs earlier, so
/// lookup drafts the token after it at the very first decode step.
const PIVOT: u32 = 300;

fn every_bigram_prompt(vocab: u32) -> Vec<u32> {
    let mut prompt = vec![2];
    for v in 5..vocab {
        prompt.extend([PIVOT, v]);
    }
    prompt.push(PIVOT);
    prompt
}

/// Counts of the second generated token (the first one a check decides) over `runs` seeds,
/// and the tokens drafted: one session per call, the prompt's prefix reused.
fn second_tokens(
    engine: &Engine,
    prompt: &[u32],
    speculation: Speculation,
    temperature: f32,
    seeds: std::ops::Range<u64>,
) -> (std::collections::BTreeMap<u32, f64>, usize) {
    let mut session = engine.new_session().unwrap();
    let mut counts = std::collections::BTreeMap::new();
    let mut drafted = 0;
    for seed in seeds {
        let params = GenerateParams {
            max_tokens: 2,
            sampling: SamplingParams {
                temperature,
                top_k: 0,
                top_p: 1.0,
                min_p: 0.0,
                seed,
                ..SamplingParams::default()
            },
            ignore_eos: true,
            speculation,
            ..GenerateParams::default()
        };
        let g = engine
            .generate(
                &mut session,
                prompt,
                &params,
                &AtomicBool::new(false),
                &mut |_| {},
            )
            .unwrap();
        drafted += g.stats.draft_tokens;
        *counts.entry(g.ids[1]).or_default() += 1.0;
    }
    (counts, drafted)
}

/// Pearson's chi-square test of homogeneity of two samples of equal size, categories with
/// fewer than 10 expected draws pooled: (statistic, its 0.999 quantile by Wilson–Hilferty).
fn chi_square(
    a: &std::collections::BTreeMap<u32, f64>,
    b: &std::collections::BTreeMap<u32, f64>,
) -> (f64, f64) {
    let mut categories: Vec<(f64, f64)> = Vec::new();
    let mut rare = (0.0, 0.0);
    let keys: std::collections::BTreeSet<u32> = a.keys().chain(b.keys()).copied().collect();
    for k in keys {
        let (x, y) = (
            a.get(&k).copied().unwrap_or(0.0),
            b.get(&k).copied().unwrap_or(0.0),
        );
        if (x + y) / 2.0 < 10.0 {
            rare.0 += x;
            rare.1 += y;
        } else {
            categories.push((x, y));
        }
    }
    if rare.0 + rare.1 > 0.0 {
        categories.push(rare);
    }
    let mut chi2 = 0.0;
    for &(x, y) in &categories {
        let expected = (x + y) / 2.0;
        chi2 += (x - expected).powi(2) / expected + (y - expected).powi(2) / expected;
    }
    let dof = categories.len().saturating_sub(1).max(1) as f64;
    let z = 3.090_232;
    let critical = dof * (1.0 - 2.0 / (9.0 * dof) + z * (2.0 / (9.0 * dof)).sqrt()).powi(3);
    (chi2, critical)
}

/// Sampled output keeps the model's distribution: the second generated token (decided by the
/// check: the draft kept with its probability, or a token drawn from the rest) over 2,000 seeds
/// with lookup against 2,000 without, a chi-square test of homogeneity at α = 0.001. Its power
/// is shown, not claimed: the same test, on the same fixture and prompt, must tell temperature
/// 0.8 from 1.0 (here chi-square 214 against a critical 69; lookup against off: 25 against 65).
#[test]
fn sampled_output_keeps_the_model_s_distribution() {
    let engine = load(&fixture("gemma3-gqa.q8_0"), 2048, 512);
    let prompt = every_bigram_prompt(engine.model().arch().n_vocab as u32);
    let runs = 2000;
    // other seeds for each sample: with the same ones the outputs would be the same (see
    // above), and the test would compare a sample with itself
    let (off, _) = second_tokens(&engine, &prompt, Speculation::Off, 0.8, 0..runs);
    let (on, drafted) = second_tokens(
        &engine,
        &prompt,
        Speculation::LookupUntimed,
        0.8,
        runs..2 * runs,
    );
    assert_eq!(drafted as u64, runs, "every run drafts once");
    let (chi2, critical) = chi_square(&off, &on);
    eprintln!("lookup against off: chi2 {chi2:.1} (critical {critical:.1})");
    assert!(
        chi2 < critical,
        "the distributions differ: chi2 {chi2:.1} > {critical:.1}"
    );
    // the test can fail: a slightly different distribution is rejected
    let (warmer, _) = second_tokens(&engine, &prompt, Speculation::Off, 1.0, 2 * runs..3 * runs);
    let (chi2, critical) = chi_square(&off, &warmer);
    eprintln!("temperature 1.0 against 0.8: chi2 {chi2:.1} (critical {critical:.1})");
    assert!(
        chi2 > critical,
        "the test cannot tell 0.8 from 1.0: it has no power"
    );
}
