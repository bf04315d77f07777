//! `companion bench`: how fast and how lean the engine is on the chosen device — load to
//! ready, time to first token, prefill of a 512-token prompt, decode of 128 tokens, peak RSS,
//! KV bytes per token, and the typing scenario (a 200-token message arriving as 20 draft
//! updates at typing pace, then send: the time from send to the first streamed token).
//!
//! Prefill and decode follow llama-bench's pp512/tg128: a cold cache for prefill, a fixed
//! number of decode steps that does not stop at `<eos>`. Each is repeated and the median
//! reported. Measuring starts once the background move of the weights onto huge pages is done
//! (Linux; its time is reported as `hugePagesSettleSeconds`). `scripts/bench-vs-llamacpp` runs this next to llama.cpp and prints the ratios.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args as ClapArgs;
use engine::{ChatMessage, EngineHandle, GenerateParams, Generation, Prompt, SamplingParams};
use serde_json::json;

use crate::options::{ModelOptions, SpeculationOption};

#[derive(ClapArgs)]
pub struct Args {
    /// Print one JSON object instead of a table
    #[arg(long)]
    json: bool,
    /// Prompt tokens for the prefill measurement
    #[arg(long, default_value_t = 512, value_name = "N")]
    prefill_tokens: usize,
    /// Decode steps for the decode measurement
    #[arg(long, default_value_t = 128, value_name = "N")]
    decode_tokens: usize,
    /// Repetitions of each measurement; the median is reported
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    reps: u32,
    /// Also measure thermal pacing: the decode rate under a simulated `fair` and `serious`
    /// state against its cap, and how soon full speed returns (about 10 s more)
    #[arg(long)]
    pacing: bool,
    /// Also print where the time goes: each backend operation's share of a decode token and
    /// of a prefill chunk (on a GPU: the host's cost of dispatching it)
    #[arg(long)]
    profile: bool,
    /// The decode measurement's speculation (llama-bench's tg128 has none: compare with off)
    #[command(flatten)]
    speculation: SpeculationOption,
    #[command(flatten)]
    model: ModelOptions,
}

/// English prose for prompts: ordinary text tokenizes like ordinary use.
const TEXT: &str = "The lighthouse keeper kept a careful log of every ship that passed the \
point, the weather at dawn and dusk, and the state of the great lamp. In winter the storms \
came in from the west and the sea rose over the rocks, and he climbed the spiral stairs \
every few hours to clean the salt from the glass. His daughter, who had grown up on the \
island, knew the names of the birds that nested on the cliffs and the tides that uncovered \
the old wreck in the bay. When the supply boat was late she read to him from the books \
the last keeper had left behind: histories of navigation, a treatise on optics, and a \
collection of letters from sailors to their families. ";

/// The longest wait for the background huge-page move before measuring.
const SETTLE_LIMIT: Duration = Duration::from_secs(20);

pub fn run(args: Args) -> Result<()> {
    let reps = args.reps as usize;
    if args.prefill_tokens < 2 || args.decode_tokens < 1 {
        bail!("--prefill-tokens must be at least 2 and --decode-tokens at least 1");
    }
    let pacing_file = args
        .pacing
        .then(crate::commands::bench_pacing::PacingFile::new)
        .transpose()?;
    let mut config = args.model.engine_config();
    if let Some(file) = &pacing_file {
        config.thermal = crate::commands::bench_pacing::thermal_config(file, config.thermal);
    }
    let t0 = Instant::now();
    let engine = args.model.spawn_with(config)?;
    let load_seconds = t0.elapsed().as_secs_f64();
    // The steady state: on Linux the weights the CPU multiplies move onto huge pages in the
    // background after loading (prompt passes hold the move back), so the measurements wait
    // for it, as llama-bench measures after a warm-up run. The wait is reported.
    let settle = Instant::now();
    while engine::gguf::huge_page_moves_pending() && settle.elapsed() < SETTLE_LIMIT {
        std::thread::sleep(Duration::from_millis(5));
    }
    let settle_seconds = settle.elapsed().as_secs_f64();
    let info = engine.info().clone();
    if args.prefill_tokens + 1 > info.context || args.decode_tokens + 16 > info.context {
        bail!(
            "the context ({}) is too small for --prefill-tokens {} and --decode-tokens {}",
            info.context,
            args.prefill_tokens,
            args.decode_tokens
        );
    }
    let greedy = |max_tokens: usize, ignore_eos: bool| GenerateParams {
        max_tokens,
        sampling: SamplingParams::greedy(),
        ignore_eos,
        ..GenerateParams::default()
    };

    // time to first token: a short chat message on a cold cache
    let ttft = median((0..reps).map(|_| {
        engine.reset_session()?;
        let chat = Prompt::Chat(vec![ChatMessage::user("Write one sentence about the sea.")]);
        Ok(run_one(&engine, chat, greedy(1, true))?
            .stats
            .time_to_first_token_seconds)
    }))?;

    let prompt = prompt_ids(&engine, args.prefill_tokens)?;
    let mut prefill_ops = 0;
    let mut prefill_profile = Vec::new();
    let prefill = median((0..reps).map(|_| {
        engine.reset_session()?;
        let g = run_one(&engine, Prompt::Ids(prompt.clone()), greedy(1, true))?;
        prefill_ops = g.stats.prefill_ops;
        prefill_profile = g.stats.prefill_profile;
        Ok(g.stats.prompt_tokens as f64 / g.stats.prefill_seconds)
    }))?;
    let chunk = args.model.engine_config().prefill_chunk.max(1);
    let prefill_chunks = args.prefill_tokens.div_ceil(chunk) as u64;

    let start = prompt_ids(&engine, 8)?;
    let mut decode_ops = 0.0;
    let mut decode_profile = (Vec::new(), 1);
    let speculation = args.speculation.speculate;
    let mut drafts = (0, 0, 0);
    let mut speculation_mode = speculation;
    let decode = median((0..reps).map(|_| {
        engine.reset_session()?;
        // the first token comes from the prefill; the next `decode_tokens` are decode steps
        let g = run_one(
            &engine,
            Prompt::Ids(start.clone()),
            GenerateParams {
                speculation,
                ..greedy(args.decode_tokens + 1, true)
            },
        )?;
        let steps = g.stats.generated_tokens.saturating_sub(1).max(1);
        decode_ops = g.stats.decode_ops as f64 / steps as f64;
        decode_profile = (g.stats.decode_profile, steps);
        speculation_mode = g.stats.speculation;
        drafts = (
            g.stats.draft_tokens,
            g.stats.accepted_draft_tokens,
            g.stats.speculative_checks,
        );
        Ok(g.stats.decode_tokens_per_second)
    }))?;

    let typing = typing_scenario(&engine, reps)?;
    let pacing = match &pacing_file {
        Some(file) => Some(crate::commands::bench_pacing::measure(
            &engine,
            file,
            start.clone(),
        )?),
        None => None,
    };
    let peak_rss = crate::commands::peak_rss_bytes();

    let profiles = args.profile.then(|| {
        [
            Profile::new("decode token", decode_profile.0, decode_profile.1 as u64),
            Profile::new("prefill chunk", prefill_profile, prefill_chunks),
        ]
    });
    let mut out = json!({
        "device": info.device,
        "threads": engine::device::configured_threads(),
        "context": info.context,
        "model": info.path,
        "loadSeconds": load_seconds,
        "hugePagesSettleSeconds": settle_seconds,
        "timeToFirstTokenSeconds": ttft,
        "prefillTokens": args.prefill_tokens,
        "prefillTokensPerSecond": prefill,
        "decodeTokens": args.decode_tokens,
        "decodeTokensPerSecond": decode,
        // the last decode repetition's speculation (the same in each: greedy, same prompt)
        "speculation": speculation_mode.as_str(),
        "draftTokens": drafts.0,
        "acceptedDraftTokens": drafts.1,
        "speculativeChecks": drafts.2,
        // operations dispatched to the backend (kernel launches on the fused CUDA decode)
        "opsPerDecodeToken": decode_ops,
        "opsPerPrefillChunk": prefill_ops as f64 / prefill_chunks as f64,
        "prefillChunk": chunk,
        "peakRssBytes": peak_rss,
        "kvBytesPerToken": info.kv_bytes_per_token,
        "typing": typing.to_json(),
        "pacing": pacing,
    });
    if let Some([decode, prefill]) = &profiles {
        out["decodeProfile"] = decode.to_json();
        out["prefillProfile"] = prefill.to_json();
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{out}")?;
        return Ok(());
    }
    writeln!(
        stdout,
        "device            {:?}, {} threads, context {}",
        info.device,
        engine::device::configured_threads(),
        info.context
    )?;
    writeln!(stdout, "load to ready     {:.3} s", load_seconds)?;
    writeln!(
        stdout,
        "huge pages        {:.3} s more in the background (measured after)",
        settle_seconds
    )?;
    writeln!(
        stdout,
        "first token       {:.1} ms (short chat message, cold cache)",
        ttft * 1e3
    )?;
    writeln!(
        stdout,
        "prefill           {:.1} tok/s ({} tokens)",
        prefill, args.prefill_tokens
    )?;
    writeln!(
        stdout,
        "decode            {:.1} tok/s ({} tokens; speculation {}: {} of {} drafted tokens kept in {} checks)",
        decode,
        args.decode_tokens,
        speculation_mode.as_str(),
        drafts.1,
        drafts.0,
        drafts.2
    )?;
    writeln!(
        stdout,
        "ops dispatched    {:.0} per decode token, {:.0} per prefill chunk of {} tokens",
        decode_ops,
        prefill_ops as f64 / prefill_chunks as f64,
        chunk
    )?;
    match peak_rss {
        Some(b) => writeln!(stdout, "peak RSS          {:.1} MB", b as f64 / 1e6)?,
        None => writeln!(stdout, "peak RSS          unknown on this system")?,
    }
    writeln!(
        stdout,
        "KV cache          {} bytes/token",
        info.kv_bytes_per_token
    )?;
    typing.print(&mut stdout)?;
    if let Some(p) = &pacing {
        crate::commands::bench_pacing::print(&mut stdout, p)?;
    }
    for p in profiles.iter().flatten() {
        p.print(&mut stdout)?;
    }
    Ok(())
}

/// Where one unit of work (a decode token, a prefill chunk) spends its time, per backend
/// operation (`engine::backend::profile`), from one measured repetition.
struct Profile {
    unit: &'static str,
    lines: Vec<engine::backend::OpTime>,
    units: u64,
}

impl Profile {
    fn new(unit: &'static str, lines: Vec<engine::backend::OpTime>, units: u64) -> Self {
        Profile {
            unit,
            lines,
            units: units.max(1),
        }
    }

    fn total(&self) -> f64 {
        self.lines.iter().map(|l| l.seconds).sum()
    }

    fn to_json(&self) -> serde_json::Value {
        let total = self.total();
        serde_json::Value::Array(
            self.lines
                .iter()
                .map(|l| {
                    json!({
                        "op": l.op,
                        "calls": l.calls as f64 / self.units as f64,
                        "ms": l.seconds * 1e3 / self.units as f64,
                        "share": if total > 0.0 { l.seconds / total } else { 0.0 },
                    })
                })
                .collect(),
        )
    }

    fn print(&self, out: &mut impl Write) -> Result<()> {
        let total = self.total();
        writeln!(
            out,
            "per {}: {:.3} ms in backend operations",
            self.unit,
            total * 1e3 / self.units as f64
        )?;
        for l in &self.lines {
            writeln!(
                out,
                "  {:>8.3} ms {:>5.1}% {:>7.1}×  {}",
                l.seconds * 1e3 / self.units as f64,
                if total > 0.0 {
                    100.0 * l.seconds / total
                } else {
                    0.0
                },
                l.calls as f64 / self.units as f64,
                l.op
            )?;
        }
        Ok(())
    }
}

/// Generate and wait; an engine error becomes this command's error.
fn run_one(engine: &EngineHandle, prompt: Prompt, params: GenerateParams) -> Result<Generation> {
    Ok(engine.generate(prompt, params)?.wait(|_| {})?)
}

/// `<bos>` and then `n - 1` tokens of English prose.
fn prompt_ids(engine: &EngineHandle, n: usize) -> Result<Vec<u32>> {
    let tokenizer = engine.tokenizer();
    let text = tokenizer.encode(TEXT, false)?;
    let mut ids = vec![tokenizer.bos_id()];
    ids.extend(text.iter().cycle().take(n - 1));
    Ok(ids)
}

fn median(values: impl Iterator<Item = Result<f64>>) -> Result<f64> {
    let mut v: Vec<f64> = values.collect::<Result<_>>()?;
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().context("no measurement")
}

/// The typing scenario's result.
struct Typing {
    message_tokens: usize,
    updates: usize,
    interval: Duration,
    send_to_first_token: f64,
    decode_step: f64,
}

impl Typing {
    fn to_json(&self) -> serde_json::Value {
        json!({
            "messageTokens": self.message_tokens,
            "updates": self.updates,
            "updateIntervalSeconds": self.interval.as_secs_f64(),
            "sendToFirstTokenSeconds": self.send_to_first_token,
            "decodeStepSeconds": self.decode_step,
        })
    }

    fn print(&self, out: &mut impl Write) -> Result<()> {
        writeln!(
            out,
            "typing            send → first token {:.1} ms = {:.2} decode steps ({} tokens typed as {} drafts, {} ms apart)",
            self.send_to_first_token * 1e3,
            self.send_to_first_token / self.decode_step,
            self.message_tokens,
            self.updates,
            self.interval.as_millis()
        )?;
        Ok(())
    }
}

const TYPING_TOKENS: usize = 200;
const TYPING_UPDATES: usize = 20;
/// One draft update every 250 ms: faster than anyone types 10 tokens, so the engine has less
/// idle time between updates than with a real typist — the stricter case.
const TYPING_INTERVAL: Duration = Duration::from_millis(250);

/// A 200-token user message delivered as 20 growing drafts, then sent; returns the time from
/// `send` to the first streamed text, next to the time of one decode step.
fn typing_scenario(engine: &EngineHandle, reps: usize) -> Result<Typing> {
    let tokenizer = engine.tokenizer();
    let words = tokenizer.encode(TEXT, false)?;
    let ids: Vec<u32> = words.iter().cycle().take(TYPING_TOKENS).copied().collect();
    let message = tokenizer.decode(&ids)?;
    let chars: Vec<(usize, char)> = message.char_indices().collect();
    let drafts: Vec<&str> = (1..=TYPING_UPDATES)
        .map(|u| {
            let end = chars.len() * u / TYPING_UPDATES;
            chars
                .get(end)
                .map_or(message.as_str(), |&(at, _)| &message[..at])
        })
        .collect();
    let history = vec![ChatMessage::system("You are a helpful assistant.")];
    let params = GenerateParams {
        max_tokens: 16,
        sampling: SamplingParams::greedy(),
        ignore_eos: true,
        ..GenerateParams::default()
    };
    let mut send_times = Vec::new();
    let mut step_times = Vec::new();
    for _ in 0..reps {
        engine.reset_session()?;
        for draft in &drafts {
            engine.set_draft(history.clone(), draft.to_string())?;
            std::thread::sleep(TYPING_INTERVAL);
        }
        let sent = Instant::now();
        let handle = engine.send(history.clone(), message.clone(), params.clone())?;
        let mut first = None;
        let generation = handle.wait(|_| {
            first.get_or_insert_with(|| sent.elapsed().as_secs_f64());
        })?;
        send_times.push(first.context("the reply produced no text")?);
        step_times.push(
            1.0 / generation
                .stats
                .decode_tokens_per_second
                .max(f64::MIN_POSITIVE),
        );
    }
    Ok(Typing {
        message_tokens: ids.len(),
        updates: TYPING_UPDATES,
        interval: TYPING_INTERVAL,
        send_to_first_token: median(send_times.into_iter().map(Ok))?,
        decode_step: median(step_times.into_iter().map(Ok))?,
    })
}
