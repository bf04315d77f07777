//! `companion chat`: multi-turn chat in the terminal with streamed replies.
//!
//! Ctrl-C during a reply stops that reply (the engine checks the cancel flag every decode
//! step) and the chat goes on; Ctrl-C at the prompt, Ctrl-D or `/exit` leaves. The engine
//! keeps the conversation's KV cache between turns, so each turn only processes new tokens.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use engine::{ChatMessage, Prompt, StopReason};

use crate::options::{ModelOptions, SamplingOptions};

#[derive(ClapArgs)]
pub struct Args {
    /// System text folded into the first user turn
    #[arg(long)]
    system: Option<String>,
    #[command(flatten)]
    sampling: SamplingOptions,
    #[command(flatten)]
    model: ModelOptions,
}

pub fn run(args: Args) -> Result<()> {
    let params = args.sampling.params();
    params.sampling.validate()?;
    eprintln!("loading {} …", args.model.model_path().display());
    let engine = args.model.spawn()?;
    let info = engine.info();
    eprintln!(
        "{} ({}, {}) ready in {:.2} s on {}. Type a message; /reset starts over, /exit or Ctrl-D quits, Ctrl-C stops a reply.",
        info.name.as_deref().unwrap_or("model"),
        info.architecture,
        info.quantization,
        info.load_seconds,
        info.device
    );

    // The flag of the reply in progress, if any; Ctrl-C sets it, or exits at the prompt.
    let current: Arc<Mutex<Option<Arc<AtomicBool>>>> = Arc::new(Mutex::new(None));
    {
        let current = current.clone();
        ctrlc::set_handler(move || {
            let guard = current.lock().unwrap_or_else(|p| p.into_inner());
            match guard.as_ref() {
                Some(flag) => flag.store(true, Ordering::Relaxed),
                None => {
                    eprintln!();
                    std::process::exit(130);
                }
            }
        })
        .context("cannot install the Ctrl-C handler")?;
    }

    let mut messages: Vec<ChatMessage> = Vec::new();
    if let Some(system) = &args.system {
        messages.push(ChatMessage::system(system.clone()));
    }
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    let mut line = String::new();
    loop {
        eprint!("> ");
        line.clear();
        if stdin.lock().read_line(&mut line)? == 0 {
            eprintln!();
            return Ok(());
        }
        let text = line.trim();
        match text {
            "" => continue,
            "/exit" | "/quit" => return Ok(()),
            "/reset" => {
                messages.retain(|m| m.role == engine::Role::System);
                engine.reset_session()?;
                eprintln!("(conversation cleared)");
                continue;
            }
            _ => {}
        }
        messages.push(ChatMessage::user(text));
        let handle = engine.generate(Prompt::Chat(messages.clone()), params.clone())?;
        *current.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle.cancel.clone());
        let result = handle.wait(|piece| {
            let _ = stdout.write_all(piece.as_bytes());
            let _ = stdout.flush();
        });
        *current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        println!();
        match result {
            Ok(g) => {
                if g.stop_reason == StopReason::Cancelled {
                    eprintln!("(stopped)");
                } else if g.stop_reason == StopReason::ContextFull {
                    eprintln!("(the context is full: /reset to start a new conversation)");
                }
                messages.push(ChatMessage::assistant(g.text));
            }
            Err(e) => {
                // The turn failed (e.g. the conversation outgrew the context): drop it, keep chatting.
                messages.pop();
                eprintln!("error: {e}");
            }
        }
    }
}
