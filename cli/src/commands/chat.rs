//! `companion chat`: multi-turn chat in the terminal with streamed replies.
//!
//! Ctrl-C during a reply stops that reply (the engine checks the cancel flag every decode
//! step) and the chat goes on; Ctrl-C at the prompt, Ctrl-D or `/exit` leaves. The engine
//! keeps the conversation's KV cache between turns, so each turn only processes new tokens.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use engine::{ChatMessage, EngineHandle, Event, Generation, GenerationHandle, Prompt, StopReason};

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
    let lines = stdin_lines();
    let mut typed_ahead: VecDeque<String> = VecDeque::new();
    loop {
        eprint!("> ");
        let Some(line) = typed_ahead.pop_front().or_else(|| lines.recv().ok()) else {
            eprintln!();
            return Ok(());
        };
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
        let result = stream_reply(&engine, handle, &lines, &mut typed_ahead);
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

/// Lines of stdin, read on their own thread; the channel closes at end of input.
fn stdin_lines() -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Stream one reply to stdout and its thermal notices to stderr. While it is paused at
/// `critical`, a line (Enter) resumes it; lines typed otherwise are kept for later.
fn stream_reply(
    engine: &EngineHandle,
    handle: GenerationHandle,
    lines: &Receiver<String>,
    typed_ahead: &mut VecDeque<String>,
) -> engine::Result<Generation> {
    let mut stdout = std::io::stdout();
    let mut paused = false;
    loop {
        match handle.events.recv_timeout(Duration::from_millis(50)) {
            Ok(Event::Text(piece)) => {
                let _ = stdout.write_all(piece.as_bytes());
                let _ = stdout.flush();
            }
            Ok(Event::Thermal(n)) => {
                paused = n.rate_percent == 0;
                eprintln!("\n[thermal: {}] {}", n.state, n.message);
                if paused {
                    eprintln!("(press Enter to go on anyway, Ctrl-C to stop)");
                }
            }
            Ok(Event::Started { .. }) => {}
            Ok(Event::Done(g)) => return Ok(g),
            Ok(Event::Error { code, message }) => {
                return Err(engine::Error::Request { code, message });
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Err(engine::Error::EngineStopped),
        }
        while let Ok(line) = lines.try_recv() {
            if paused && line.trim().is_empty() {
                engine.resume();
                paused = false;
            } else {
                typed_ahead.push_back(line);
            }
        }
    }
}
