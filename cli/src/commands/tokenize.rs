//! `companion tokenize [--bos] TEXT`: the tokenizer alone, built from the GGUF (no weights loaded).

use anyhow::Result;
use clap::Args as ClapArgs;
use engine::GemmaTokenizer;
use engine::gguf::ModelFile;

#[derive(ClapArgs)]
pub struct Args {
    /// Prepend <bos>
    #[arg(long)]
    bos: bool,
    /// Text to tokenize (special-token text such as <start_of_turn> is recognized)
    text: String,
    /// Path to a Gemma GGUF file [default: $COMPANION_MODEL, else the fetched default model]
    #[arg(long, value_name = "PATH")]
    model: Option<std::path::PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    let path = args.model.unwrap_or_else(engine::default_model_path);
    let file = ModelFile::open(&path)?;
    let tokenizer = GemmaTokenizer::from_gguf(&file)?;
    let ids = tokenizer.encode(&args.text, args.bos)?;
    println!("{}", serde_json::json!({ "ids": ids }));
    Ok(())
}
