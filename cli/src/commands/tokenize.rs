//! `companion tokenize [--bos] TEXT`: the tokenizer alone, built from the GGUF (no weights loaded).

use anyhow::Result;
use clap::Args as ClapArgs;
use engine::GemmaTokenizer;
use engine::gguf::ModelFile;

use crate::output::outln;

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
    // The command is for inspecting prompts as llama.cpp's `parse_special` reads them, so
    // special-token text becomes the token; untrusted text never comes through here.
    let ids = tokenizer.encode_special(&args.text, args.bos)?;
    outln!("{}", serde_json::json!({ "ids": ids }))?;
    Ok(())
}
