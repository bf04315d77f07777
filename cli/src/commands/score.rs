//! `companion score --ids-file F`: teacher-forced log-probs, one object per position.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args as ClapArgs;

use crate::options::ModelOptions;
use crate::output::outln;

#[derive(ClapArgs)]
pub struct Args {
    /// A JSON array of token ids
    #[arg(long, value_name = "FILE")]
    ids_file: PathBuf,
    /// Prefill the first N ids, then score each later position through one decode step (the
    /// path generation takes: on CUDA the fused decode kernels) instead of in one pass
    #[arg(long, value_name = "N")]
    decode_from: Option<usize>,
    #[command(flatten)]
    model: ModelOptions,
}

pub fn run(args: Args) -> Result<()> {
    let text = std::fs::read_to_string(&args.ids_file)
        .with_context(|| format!("cannot read the ids file {}", args.ids_file.display()))?;
    let ids: Vec<u32> = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a JSON array of token ids",
            args.ids_file.display()
        )
    })?;
    if ids.len() < 2 {
        bail!("the ids file must hold at least two token ids");
    }
    let mut model = args.model.clone();
    // Make room for the whole sequence unless the user chose a larger context.
    model.context = model.context.max(ids.len() as u32);
    let engine = model.spawn()?;
    let scored = match args.decode_from {
        Some(from) => engine.score_decoding(ids, from)?,
        None => engine.score(ids)?,
    };
    let out: Vec<serde_json::Value> = scored
        .iter()
        .map(|s| {
            serde_json::json!({
                "pos": s.pos,
                "top": s.top.iter().map(|(id, lp)| serde_json::json!([id, lp])).collect::<Vec<_>>(),
                "logprob": s.logprob,
            })
        })
        .collect();
    outln!("{}", serde_json::Value::Array(out))?;
    Ok(())
}
