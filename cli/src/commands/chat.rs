//! `companion chat`: multi-turn chat in the terminal with streamed replies, saved as it goes.
//!
//! Every message is committed to the conversation database (a reply is checkpointed while it
//! streams), `--conversation ID` resumes a saved conversation (from its KV snapshot when
//! valid), and leaving snapshots the session so the next resume is instant. Ctrl-C during a
//! reply stops that reply and the chat goes on; Ctrl-C at the prompt, Ctrl-D or `/exit` leave.
//! With `--allow DIR` each message is a turn with the agent's tools (see [`super::chat_tools`]).
//! `--image FILE` attaches pictures to the first message, `/image FILE` to the next one; the
//! model reads them through its vision projector (`--mmproj`, or the one the library pairs).

use std::collections::VecDeque;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use chat::{ConversationManager, ManagerConfig, Picture, Resume, TurnEvent};
use clap::Args as ClapArgs;
use engine::StopReason;
use memory::{ConversationId, Role};

use crate::output::{Stream, outln};

use crate::options::{McpOptions, ModelOptions, SamplingOptions, StoreOptions};

#[derive(ClapArgs)]
pub struct Args {
    /// The conversation to continue (its id, or the start of it), or `new`
    #[arg(long, default_value = "new", value_name = "ID|new")]
    pub(crate) conversation: String,
    /// System prompt (kept with a new conversation; overrides a resumed one's)
    #[arg(long)]
    pub(crate) system: Option<String>,
    /// Enable the agent's tools on this folder, read only (repeatable)
    #[arg(long = "allow", value_name = "DIR")]
    pub(crate) allow: Vec<std::path::PathBuf>,
    /// Enable the tools on a folder they may also write to, each write asked (repeatable)
    #[arg(long = "allow-write", value_name = "DIR")]
    pub(crate) allow_write: Vec<std::path::PathBuf>,
    /// With tools: approve writes without asking
    #[arg(long)]
    pub(crate) yes: bool,
    /// With tools: tool calls per message
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub(crate) max_steps: usize,
    /// A picture for your first message: PNG, JPEG, WebP or GIF (repeatable; needs the
    /// model's vision projector)
    #[arg(long = "image", value_name = "FILE")]
    pub(crate) images: Vec<std::path::PathBuf>,
    #[command(flatten)]
    pub(crate) sampling: SamplingOptions,
    #[command(flatten)]
    pub(crate) model: ModelOptions,
    #[command(flatten)]
    pub(crate) store: StoreOptions,
    #[command(flatten)]
    pub(crate) mcp: McpOptions,
}

enum Input {
    Line(String),
    End,
}

pub fn run(args: Args) -> Result<()> {
    if !args.allow.is_empty() || !args.allow_write.is_empty() || args.mcp.mcp_config.is_some() {
        if !args.images.is_empty() {
            anyhow::bail!(
                "pictures and tools in one chat are not supported yet: leave out --image or the tools"
            );
        }
        return super::chat_tools::run(args);
    }
    // read before the model loads: a picture that cannot be read is said at once
    let mut pictures = args
        .images
        .iter()
        .map(|path| Picture::read(path))
        .collect::<chat::Result<Vec<_>>>()?;
    let model_path = args.model.model_path();
    if !pictures.is_empty() && args.model.projector_path(&model_path).is_none() {
        anyhow::bail!(chat::Error::NoProjector {
            model: model_path
                .file_name()
                .map_or_else(|| "the model".into(), |n| n.to_string_lossy().into_owned()),
        });
    }
    let params = args.sampling.params();
    params.sampling.validate()?;
    let store = args.store.open()?;
    let (existing, stored_system) = conversation_to_continue(&args, &store)?;

    eprintln!("loading {} …", args.model.model_path().display());
    let engine = args.model.spawn()?;
    crate::options::say_if_base_model(&engine);
    let info = engine.info();
    eprintln!(
        "{} ({}, {}) ready in {:.2} s on {}. /new starts a new conversation, /image FILE attaches a picture, /exit or Ctrl-D quits, Ctrl-C stops a reply.",
        info.name.as_deref().unwrap_or("model"),
        info.architecture,
        info.quantization,
        info.load_seconds,
        info.device
    );

    let mut config = ManagerConfig::for_engine(&engine);
    config.system_prompt = args.system.clone().or(stored_system);
    let mut manager = ConversationManager::new(engine, store, config);
    let mut id = match existing {
        Some(id) => {
            resume(&mut manager, &id)?;
            id
        }
        None => start(&mut manager)?,
    };

    // Lines arrive on a thread so that Ctrl-C at the prompt can end the chat cleanly (with a
    // snapshot) instead of killing the process.
    let (tx, rx) = mpsc::channel::<Input>();
    let current: Arc<Mutex<Option<Arc<AtomicBool>>>> = Arc::new(Mutex::new(None));
    {
        let current = current.clone();
        let tx = tx.clone();
        ctrlc::set_handler(move || {
            let guard = current.lock().unwrap_or_else(|p| p.into_inner());
            match guard.as_ref() {
                Some(flag) => flag.store(true, Ordering::Relaxed),
                None => {
                    let _ = tx.send(Input::End);
                }
            }
        })
        .context("cannot install the Ctrl-C handler")?;
    }
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line {
                Ok(l) => {
                    if tx.send(Input::Line(l)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(Input::End);
    });

    let mut typed_ahead: VecDeque<Input> = VecDeque::new();
    loop {
        eprint!("> ");
        let next = match typed_ahead.pop_front() {
            Some(input) => Ok(input),
            None => rx.recv(),
        };
        let text = match next {
            Ok(Input::Line(l)) => l.trim().to_string(),
            Ok(Input::End) | Err(_) => {
                eprintln!();
                break;
            }
        };
        match text.as_str() {
            "" => continue,
            "/exit" | "/quit" => break,
            "/new" | "/reset" => {
                manager.close()?;
                id = start(&mut manager)?;
                continue;
            }
            _ => {}
        }
        if let Some(path) = text.strip_prefix("/image ") {
            attach(&manager, path.trim(), &mut pictures);
            continue;
        }
        let cancel = Arc::new(AtomicBool::new(false));
        *current.lock().unwrap_or_else(|p| p.into_inner()) = Some(cancel.clone());
        // while a reply is paused at `critical`, Enter resumes it; other lines wait their turn
        let mut paused = false;
        let engine = manager.engine().clone();
        // the reply's reader may leave (`companion chat < questions | head`): the reply stops
        // there and is kept as stopped, and the chat ends as at /exit
        let mut stream = Stream::new(Some(cancel.clone()));
        let given = std::mem::take(&mut pictures);
        let result =
            manager.send_with_pictures(&text, &given, &params, &cancel, &mut |event| match event {
                TurnEvent::Text(piece) => stream.piece(piece),
                // a plain turn has no tool steps
                TurnEvent::User(_) | TurnEvent::Tool(_) => {}
                TurnEvent::Summarizing => eprint!("(summarizing older turns…) "),
                TurnEvent::Thermal(n) => {
                    paused = n.rate_percent == 0;
                    eprintln!("\n[thermal: {}] {}", n.state, n.message);
                    if paused {
                        eprintln!("(press Enter to go on anyway, Ctrl-C to stop)");
                    }
                }
                TurnEvent::Tick => {
                    while let Ok(input) = rx.try_recv() {
                        match input {
                            Input::Line(l) if paused && l.trim().is_empty() => {
                                engine.resume();
                                paused = false;
                            }
                            other => typed_ahead.push_back(other),
                        }
                    }
                }
            });
        *current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        if matches!(result, Err(chat::Error::MessageTooLong { .. })) && pictures.is_empty() {
            // the message was taken back: its pictures wait for the next one
            pictures = given;
        }
        if let Err(closed) = stream.finish().and_then(|()| outln!()) {
            if let Err(e) = result {
                crate::log::report(e.code(), &e.to_string());
            }
            manager.close()?;
            eprintln!("saved as conversation {id}");
            return Err(closed.into());
        }
        match result {
            Ok(turn) => {
                if turn.summaries_made > 0 {
                    eprintln!(
                        "(summarized older turns to keep within the context: {} summaries written, prompt now about {} tokens)",
                        turn.summaries_made, turn.prompt_tokens
                    );
                }
                match turn.generation.stop_reason {
                    StopReason::Cancelled => eprintln!("(stopped)"),
                    StopReason::ContextFull => {
                        eprintln!("(the reply filled the context; it was kept as it is)")
                    }
                    _ => {}
                }
            }
            // the turn failed (the message was too long, …): say so and keep chatting
            Err(e) => crate::log::report(e.code(), &e.to_string()),
        }
    }
    manager.close()?;
    eprintln!("saved as conversation {id}");
    Ok(())
}

/// The saved conversation `--conversation` names (none for `new`), and the system prompt kept
/// with it.
pub(super) fn conversation_to_continue(
    args: &Args,
    store: &memory::Store,
) -> Result<(Option<ConversationId>, Option<String>)> {
    let existing = match args.conversation.as_str() {
        "new" => None,
        id => Some(store.resolve_conversation(id)?),
    };
    let stored_system = existing
        .as_ref()
        .map(|id| store.conversation(id))
        .transpose()?
        .and_then(|c| c.settings.get("systemPrompt")?.as_str().map(str::to_string));
    Ok((existing, stored_system))
}

/// `/image FILE`: a picture for the next message, or why not.
fn attach(manager: &ConversationManager, path: &str, pictures: &mut Vec<Picture>) {
    if manager.engine().info().projector.is_none() {
        eprintln!(
            "this model reads no pictures: load its vision projector with --mmproj, or import it beside the model (companion models import)"
        );
        return;
    }
    match Picture::read(std::path::Path::new(path)) {
        Ok(picture) => {
            eprintln!(
                "(picture of {} × {} attached to your next message)",
                picture.image().width,
                picture.image().height
            );
            pictures.push(picture);
        }
        Err(e) => crate::log::report(e.code(), &e.to_string()),
    }
}

fn start(manager: &mut ConversationManager) -> Result<ConversationId> {
    let id = manager.create(chat::manager::NEW_CONVERSATION_TITLE)?;
    eprintln!("new conversation {id}");
    Ok(id)
}

/// Open a saved conversation and show where it left off.
fn resume(manager: &mut ConversationManager, id: &ConversationId) -> Result<()> {
    let conversation = manager.store().conversation(id)?;
    let messages = manager.store().messages(id)?;
    let how = manager.open(id)?;
    eprintln!(
        "“{}” — {} messages; {}",
        conversation.title,
        messages.len(),
        match how {
            Resume::Snapshot { tokens } => format!("resumed from its snapshot ({tokens} tokens)"),
            Resume::Reprefill { tokens } => format!("reading back {tokens} tokens"),
            Resume::OtherModel { tokens } =>
                format!("it was held with another model; reading back {tokens} tokens on this one"),
            Resume::Empty => "no messages yet".into(),
        }
    );
    for m in messages.iter().rev().take(4).rev() {
        let who = if m.role == Role::User {
            "you"
        } else {
            "companion"
        };
        eprintln!("[{who}] {}", m.text.trim());
    }
    Ok(())
}
