//! `companion generate PROMPT`: stream a reply to stdout (`--json`: one object at the end).

use std::io::Write;

use anyhow::Result;
use clap::Args as ClapArgs;
use engine::{ChatMessage, Prompt};

use crate::options::{ModelOptions, SamplingOptions};
use crate::output::Stream;

#[derive(ClapArgs)]
pub struct Args {
    /// The prompt
    prompt: String,
    /// Continue the text as is, without the chat template
    #[arg(long)]
    raw: bool,
    /// System text folded into the user turn (chat template only)
    #[arg(long)]
    system: Option<String>,
    /// Print one JSON object at the end (ids, text, timings) instead of streaming
    #[arg(long)]
    json: bool,
    /// A picture (PNG, JPEG, GIF, WebP, BMP, PNM) for the model to read, through the vision
    /// projector given with --mmproj; repeat it for several. With the chat template they open
    /// the user turn; with --raw they go where the prompt says `<__media__>` (llama.cpp's
    /// marker), else first
    #[arg(long = "image", value_name = "PATH")]
    images: Vec<std::path::PathBuf>,
    #[command(flatten)]
    sampling: SamplingOptions,
    #[command(flatten)]
    model: ModelOptions,
}

pub fn run(args: Args) -> Result<()> {
    let params = args.sampling.params();
    params.sampling.validate()?;
    // pictures are read before the model loads: a bad one fails at once
    let images = args
        .images
        .iter()
        .map(|path| {
            let bytes = std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            let image = engine::vision::RgbImage::decode(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            Ok(std::sync::Arc::new(image))
        })
        .collect::<Result<Vec<_>>>()?;
    let engine = args.model.spawn()?;
    let prompt = if args.raw {
        Prompt::Text(args.prompt.clone())
    } else {
        let mut messages = Vec::new();
        if let Some(system) = &args.system {
            messages.push(ChatMessage::system(system.clone()));
        }
        messages.push(ChatMessage::user(args.prompt.clone()));
        Prompt::Chat(messages)
    };
    let prompt = if images.is_empty() {
        prompt
    } else {
        Prompt::WithImages {
            prompt: Box::new(prompt),
            images,
        }
    };
    let params_speculation = params.speculation;
    let handle = engine.generate(prompt, params)?;
    let json = args.json;
    let mut stream = Stream::new(Some(handle.cancel.clone()));
    let generation = handle.wait_with_notices(
        |piece| {
            if !json {
                stream.piece(piece);
            }
        },
        |notice| eprintln!("\n[thermal: {}] {}", notice.state, notice.message),
    )?;
    stream.finish()?;
    let mut stdout = std::io::stdout().lock();
    if json {
        let info = engine.info();
        let out = serde_json::json!({
            "ids": generation.ids,
            "text": generation.text,
            "stopReason": generation.stop_reason,
            "timings": {
                "loadSeconds": info.load_seconds,
                "promptTokens": generation.stats.prompt_tokens,
                "prefillSeconds": generation.stats.prefill_seconds,
                "prefillTokensPerSecond": generation.stats.prefill_tokens_per_second,
                "timeToFirstTokenSeconds": generation.stats.time_to_first_token_seconds,
                "generatedTokens": generation.stats.generated_tokens,
                "decodeSeconds": generation.stats.decode_seconds,
                "decodeTokensPerSecond": generation.stats.decode_tokens_per_second,
            },
            "speculation": {
                "requested": params_speculation.as_str(),
                "mode": generation.stats.speculation.as_str(),
                "draftTokens": generation.stats.draft_tokens,
                "acceptedDraftTokens": generation.stats.accepted_draft_tokens,
                "checks": generation.stats.speculative_checks,
            },
            "peakRssBytes": crate::commands::peak_rss_bytes(),
        });
        writeln!(stdout, "{out}")?;
    } else {
        writeln!(stdout)?;
        eprintln!(
            "[{} tokens, {:.1} tok/s, first token after {:.0} ms, load {:.2} s]",
            generation.stats.generated_tokens,
            generation.stats.decode_tokens_per_second,
            generation.stats.time_to_first_token_seconds * 1000.0,
            engine.info().load_seconds
        );
    }
    Ok(())
}
