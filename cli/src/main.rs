//! `companion`: the headless command line for Companion's engine.
//!
//! Every failure ends in one line on stderr, `error [code]: message`, and a non-zero exit
//! status, never a panic; the log (see [`log`]) has the code, and a panic's backtrace.

mod output;

mod commands;
mod log;
mod options;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "companion", version, about = "Companion: an offline assistant on Gemma", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the token ids of TEXT as {"ids":[...]}.
    Tokenize(commands::tokenize::Args),
    /// Teacher-forced scoring of a JSON array of token ids: top-5 and log-prob per position.
    Score(commands::score::Args),
    /// Generate a reply to PROMPT, streamed to stdout.
    Generate(commands::generate::Args),
    /// Chat in the terminal, saved as you go; Ctrl-C stops the current reply.
    Chat(commands::chat::Args),
    /// List, show, search, export, import, rename, pin and delete saved conversations.
    Conversations(commands::conversations::Args),
    /// The model library: list, import (checked and hashed), remove, use (self-checked), verify.
    Models(commands::models::Args),
    /// What this device can run: memory, backend, thermal state, and which models fit.
    Doctor(commands::doctor::Args),
    /// Summarize a document (.txt, .md, .html, .pdf) of any length; resumable, saved.
    Summarize(commands::summarize::Args),
    /// Measure load, first token, prefill, decode, memory and the typing scenario.
    Bench(commands::bench::Args),
    /// List the agent's tools, or run one directly on granted folders (no model needed).
    Tools(commands::tools::Args),
    /// Run the agent on the model: it may call the tools on the granted folders (writes ask first).
    Agent(commands::agent::Args),
    /// Sync conversations, notes and reminders with your other devices through a folder.
    Sync(commands::sync::Args),
    /// Serve the local API (OpenAI-compatible) on 127.0.0.1 for your other programs; token-protected.
    Serve(commands::serve::Args),
}

impl Command {
    /// The database the command works on: its log goes beside it.
    fn database(&self) -> PathBuf {
        let given = match self {
            Command::Chat(a) => a.store.db.clone(),
            Command::Conversations(a) => a.store.db.clone(),
            Command::Models(a) => a.store.db.clone(),
            Command::Summarize(a) => a.store.db.clone(),
            Command::Tools(a) => a.db(),
            Command::Agent(a) => a.store.db.clone(),
            Command::Serve(a) => a.store.db.clone(),
            Command::Sync(a) => a.db(),
            _ => None,
        };
        given.unwrap_or_else(memory::default_database_path)
    }
}

fn main() -> ExitCode {
    // A bug must still end in one line, not a backtrace (that goes to the log: the log's own
    // hook, installed below, runs before this one).
    std::panic::set_hook(Box::new(|info| {
        let message = logging::panic::payload_text(info.payload());
        eprintln!("error [panic]: internal error: {message}");
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let code = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
                _ => 2,
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let database = cli.command.database();
    log::install(&database);
    options::set_library_database(database);
    let result = match cli.command {
        Command::Tokenize(a) => commands::tokenize::run(a),
        Command::Score(a) => commands::score::run(a),
        Command::Generate(a) => commands::generate::run(a),
        Command::Chat(a) => commands::chat::run(a),
        Command::Conversations(a) => commands::conversations::run(a),
        Command::Models(a) => commands::models::run(a),
        Command::Summarize(a) => commands::summarize::run(a),
        Command::Bench(a) => commands::bench::run(a),
        Command::Doctor(a) => commands::doctor::run(a),
        Command::Tools(a) => commands::tools::run(a),
        Command::Agent(a) => commands::agent::run(a),
        Command::Serve(a) => commands::serve::run(a),
        Command::Sync(a) => commands::sync::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `companion … | head -1`: the reader has what it wanted; nothing went wrong
        Err(e) if output::reader_left(&e) => ExitCode::SUCCESS,
        Err(e) => {
            log::report(&log::error_code(&e), &one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line.
pub(crate) fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ").replace('\n', " ")
}
