//! A turn of the conversation: the draft prefilled while the user types, send, regenerate,
//! edit-and-resend, stop. Replies stream over a `tauri::ipc::Channel` tied to the command
//! (ordered, unlike global events), their text in batches ([`crate::text_batch`]); the reply
//! itself runs on the worker thread. A conversation with its Tools switch on is answered by
//! the agent loop ([`tool_turn`]): its calls stream as `Tool` events between the text.

use std::sync::atomic::Ordering;
use std::time::Instant;

use agent::{Limits, ToolCall, Toolbox};
use chat::agent_loop::{AgentEvent, CallGrammar, EngineModel, ScriptedCalls, call_format};
use chat::tools::{JobSummarizer, StoreHost};
use chat::{DocumentParams, Tools, TurnEvent};
use engine::{GenerateParams, SessionId, ThermalNotice};
use memory::Store;
use serde::Serialize;
use tauri::State;
use tauri::ipc::Channel;

use crate::approval::AppApproval;
use crate::error::{AppError, Result};
use crate::state::AppState;
use crate::text_batch::TextBatch;
use crate::views::{MessageView, ReplyStats};
use crate::worker::Worker;

/// What a streaming turn sends, in order: `User`, maybe `Summarizing`, `Text`* and
/// `Thermal`*, then `Done` or `Error`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", content = "data", rename_all = "camelCase")]
pub enum ChatEvent {
    User(MessageView),
    Summarizing,
    Text(String),
    Thermal(ThermalNotice),
    /// A step of a turn with tools: a call started, waits for approval, progressed,
    /// finished; or the run ended (and why).
    Tool(AgentEvent),
    Done(MessageView),
    Error(AppError),
}

/// The user is typing: prefill `text` after the open conversation's prompt. Returns at once;
/// the engine drops a draft as soon as a newer one arrives. Nothing is prefilled while a reply
/// streams (the prompt is about to change): the worker applies the latest draft after it.
#[tauri::command]
pub async fn set_draft(state: State<'_, AppState>, text: String) -> Result<()> {
    state.shared.set_draft(&text);
    if state.shared.replying.load(Ordering::Relaxed) || text.trim().is_empty() {
        return Ok(());
    }
    if !state.shared.draft_queued.swap(true, Ordering::AcqRel) {
        state.worker.spawn(apply_latest_draft)?;
    }
    Ok(())
}

/// On the worker: prefill the newest draft through the conversation manager, which builds the
/// prompt the reply will have (`ConversationManager::set_draft`: the same system prompt,
/// summaries and messages as `send`), so the draft's tokens are the ones send reuses.
pub(crate) fn apply_latest_draft(w: &mut Worker) {
    w.shared.draft_queued.store(false, Ordering::Release);
    let draft = w.shared.draft();
    if draft.trim().is_empty() || w.shared.replying.load(Ordering::Relaxed) {
        return;
    }
    if let Ok(manager) = w.manager()
        && manager.open_conversation().is_some()
        && let Err(e) = manager.set_draft(&draft)
    {
        // a draft is only a head start: the reply does without it
        tracing::debug!(code = e.code(), "the draft was not prefilled: {e}");
    }
}

/// Send `text` in the open conversation (one is created if none is open). `tools`, when
/// given, is the conversation's Tools switch as the user left it: it is kept with the
/// conversation, and with it on the agent loop answers. `pictures`: the pictures attached to
/// the message, as data URLs (or bare base64); they are checked before anything is committed,
/// and refused when the model reads no pictures (`no_projector`) or with tools on.
#[tauri::command]
pub async fn send_message(
    state: State<'_, AppState>,
    text: String,
    tools: Option<bool>,
    pictures: Option<Vec<String>>,
    on_event: Channel<ChatEvent>,
) -> Result<MessageView> {
    if text.trim().is_empty() {
        return Err(AppError::new("empty_message", "Type a message first."));
    }
    let pictures = pictures.unwrap_or_default();
    let pictures = if pictures.is_empty() {
        Vec::new()
    } else {
        // a photo takes a while to decode: not on the command's async thread
        tauri::async_runtime::spawn_blocking(move || {
            crate::commands::pictures::decode_pictures(&pictures)
        })
        .await
        .map_err(|e| {
            AppError::new(
                "bad_picture",
                format!("The pictures could not be read ({e}); attach them again."),
            )
        })??
    };
    state.shared.set_draft("");
    state
        .worker
        .call(move |w| {
            if !pictures.is_empty() {
                refuse_pictures_unread(w, &pictures, tools)?;
            }
            let id = ensure_open(w)?;
            let store = w.manager()?.store();
            let mut settings = store.conversation(&id)?.settings;
            if let Some(enabled) = tools
                && crate::commands::agent::tools_enabled(&settings) != enabled
            {
                crate::commands::agent::set_tools(&mut settings, enabled);
                store.set_settings(&id, &settings)?;
            }
            if tools_on(w)? {
                turn(w, &on_event, |w, params, on| {
                    tool_turn(w, ToolInput::Send(text), params, on)
                })
            } else {
                turn(w, &on_event, |w, params, on| {
                    let cancel = w.shared.reply_cancel.clone();
                    Ok(w.manager()?
                        .send_with_pictures(&text, &pictures, params, &cancel, on)?
                        .into())
                })
            }
        })
        .await
}

/// The one line that refuses pictures in a turn with tools (the agent loop sends text only).
pub fn pictures_with_tools() -> AppError {
    AppError::new(
        "pictures_with_tools",
        "Pictures and tools together are not supported yet; turn Tools off for this message, or send it without its pictures.",
    )
}

/// Before anything is committed (no conversation created, no switch saved): pictures need a
/// model that reads them and a turn without tools. `tools`: the switch as sent, else the open
/// conversation's.
fn refuse_pictures_unread(
    w: &mut Worker,
    pictures: &[chat::Picture],
    tools: Option<bool>,
) -> Result<()> {
    w.manager()?.check_reads_pictures(pictures)?;
    if tools.map_or_else(|| tools_on(w), Ok)? {
        return Err(pictures_with_tools());
    }
    Ok(())
}

/// A turn with tools sends text only: regenerating or editing a message that has pictures
/// with tools on would drop them, so it is refused before the message is taken back.
fn refuse_tools_for_pictures(w: &mut Worker, message: Option<memory::MessageId>) -> Result<()> {
    let manager = w.manager()?;
    let store = manager.store();
    let has_pictures = match message {
        // a message that is not there is refused as the edit itself refuses it
        Some(id) => store.message(id).is_ok_and(|m| !m.images.is_empty()),
        None => {
            let Some(open) = manager.open_conversation() else {
                return Ok(());
            };
            store
                .messages(open)?
                .iter()
                .rev()
                .find(|m| m.role == memory::Role::User)
                .is_some_and(|m| !m.images.is_empty())
        }
    };
    if has_pictures {
        return Err(pictures_with_tools());
    }
    Ok(())
}

#[tauri::command]
pub async fn regenerate(
    state: State<'_, AppState>,
    on_event: Channel<ChatEvent>,
) -> Result<MessageView> {
    state
        .worker
        .call(move |w| {
            if tools_on(w)? {
                refuse_tools_for_pictures(w, None)?;
                return turn(w, &on_event, |w, params, on| {
                    tool_turn(w, ToolInput::Regenerate, params, on)
                });
            }
            turn(w, &on_event, |w, params, on| {
                let cancel = w.shared.reply_cancel.clone();
                Ok(w.manager()?.regenerate(params, &cancel, on)?.into())
            })
        })
        .await
}

#[tauri::command]
pub async fn edit_message(
    state: State<'_, AppState>,
    message_id: i64,
    text: String,
    on_event: Channel<ChatEvent>,
) -> Result<MessageView> {
    if text.trim().is_empty() {
        return Err(AppError::new(
            "empty_message",
            "A message cannot be empty; type something or cancel the edit.",
        ));
    }
    state
        .worker
        .call(move |w| {
            let id = memory::MessageId(message_id);
            if tools_on(w)? {
                refuse_tools_for_pictures(w, Some(id))?;
                return turn(w, &on_event, |w, params, on| {
                    tool_turn(w, ToolInput::Edit(id, text), params, on)
                });
            }
            turn(w, &on_event, |w, params, on| {
                let cancel = w.shared.reply_cancel.clone();
                Ok(w.manager()?.edit(id, &text, params, &cancel, on)?.into())
            })
        })
        .await
}

/// Stop the reply that is streaming; what it said so far is kept, marked as stopped.
#[tauri::command]
pub fn stop_reply(state: State<'_, AppState>) {
    state.shared.reply_cancel.store(true, Ordering::Relaxed);
}

/// A reply paused because the device is critically hot goes on, at the hot pace: the user
/// chose to.
#[tauri::command]
pub fn resume_reply(state: State<'_, AppState>) {
    if let Some(engine) = state.shared.engine() {
        engine.resume();
    }
}

/// For automated tests only: a JSON list with, per turn with tools, the list of calls
/// (`{"name", "arguments"}`) that turn makes in place of the model's choice — a small base
/// model cannot choose reliably. Each call is still fed token by token through the call
/// grammar and run for real; the model writes everything else. Set by whoever starts the
/// app, never by the webview.
pub const SCRIPTED_CALLS_ENV: &str = "COMPANION_E2E_SCRIPTED_CALLS";

pub fn scripted_turns_from_env() -> std::collections::VecDeque<Vec<ToolCall>> {
    let Ok(json) = std::env::var(SCRIPTED_CALLS_ENV) else {
        return Default::default();
    };
    match serde_json::from_str::<Vec<Vec<ToolCall>>>(&json) {
        Ok(turns) => {
            tracing::warn!(
                turns = turns.len(),
                "scripted tool calls in use ({SCRIPTED_CALLS_ENV}): for tests only"
            );
            turns.into()
        }
        Err(e) => {
            tracing::warn!(error = %e, "{SCRIPTED_CALLS_ENV} is not a list of call lists; ignored");
            Default::default()
        }
    }
}

/// Whether the open conversation has its Tools switch on (none open: no).
fn tools_on(w: &mut Worker) -> Result<bool> {
    let manager = w.manager()?;
    let Some(id) = manager.open_conversation().cloned() else {
        return Ok(false);
    };
    let settings = manager.store().conversation(&id)?.settings;
    Ok(crate::commands::agent::tools_enabled(&settings))
}

/// The open conversation, created first if none is open.
fn ensure_open(w: &mut Worker) -> Result<memory::ConversationId> {
    let shared = w.shared.clone();
    let manager = w.manager()?;
    if let Some(id) = manager.open_conversation() {
        return Ok(id.clone());
    }
    let id = manager.create(chat::manager::NEW_CONVERSATION_TITLE)?;
    shared.set_open(Some(id.clone()));
    Ok(id)
}

/// What a turn gives back to [`turn`]: the reply, and its generation's stats when it was one
/// generation (a turn with tools is several).
pub struct TurnReply {
    reply: memory::Message,
    stats: Option<ReplyStats>,
}

impl From<chat::Turn> for TurnReply {
    fn from(t: chat::Turn) -> Self {
        TurnReply {
            stats: Some(ReplyStats::new(
                &t.generation.stats,
                t.generation.stop_reason,
            )),
            reply: t.reply,
        }
    }
}

/// What a turn with tools answers.
enum ToolInput {
    Send(String),
    /// The last user message again, its reply dropped.
    Regenerate,
    /// This user message replaced by the text, everything after it dropped.
    Edit(memory::MessageId, String),
}

/// A turn with tools on the worker: the tools read the granted folders (the grants as the
/// store keeps them now) and the store through a connection of their own, writes wait for
/// the user's answer ([`AppApproval`]), and stopping the reply stops the loop. Everything
/// that can fail is set up before a regenerate or edit takes its messages back.
fn tool_turn(
    w: &mut Worker,
    input: ToolInput,
    params: &GenerateParams,
    on_event: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<TurnReply> {
    if w.tool_store.is_none() {
        w.tool_store = Some(Store::open(&w.database)?.store);
    }
    let Worker {
        manager,
        grammar,
        tool_store,
        remembered,
        scripted_turns,
        shared,
        ..
    } = w;
    let tool_store = tool_store.as_ref().expect("opened above");
    let platform = shared.platform_tools();
    let (sandbox, unavailable) =
        chat::tools::sandbox_with(tool_store, &[], platform.bookmarks.as_deref())
            .map_err(|e| AppError::new(e.code(), crate::error::sentence(&e.to_string())))?;
    for grant in unavailable {
        tracing::info!(reason = %grant.reason, "a granted folder is not available");
        tracing::debug!(path = %grant.path, "the folder not available");
    }
    let manager = manager.as_mut().ok_or_else(AppError::not_ready)?;
    let engine = manager.engine().clone();
    if grammar.is_none() {
        *grammar = Some(CallGrammar::new(engine.tokenizer())?);
    }
    let grammar = grammar.as_ref().expect("built above");
    let host = StoreHost {
        store: tool_store,
        platform_reminders: platform
            .reminders
            .as_deref()
            .map(|r| r as &dyn chat::tools::PlatformReminders),
    };
    let summarizer = JobSummarizer {
        engine: &engine,
        store: tool_store,
        params: DocumentParams {
            context: engine.info().context,
            ..DocumentParams::default()
        },
        cancel: &shared.reply_cancel,
    };
    let approval = AppApproval {
        pending: shared.approval.clone(),
        cancel: shared.reply_cancel.clone(),
    };
    // held for the turn: a new configuration saved meanwhile takes effect at the next one
    let servers = shared.mcp.hub();
    let toolbox = Toolbox {
        sandbox: &sandbox,
        host: &host,
        summarizer: Some(&summarizer),
        approval: &approval,
        remembered,
        limits: Limits::default(),
        external: servers.as_deref().map(|h| h as &dyn agent::ExternalTools),
    };
    let engine_model = EngineModel {
        engine: engine.clone(),
        session: SessionId::MAIN,
    };
    let mut scripted;
    let mut plain;
    let model: &mut dyn chat::agent_loop::AgentModel = match scripted_turns.pop_front() {
        Some(script) => {
            let format = call_format(engine.tokenizer());
            scripted = ScriptedCalls::new(engine_model, format, toolbox.tools(), script);
            &mut scripted
        }
        None => {
            plain = engine_model;
            &mut plain
        }
    };
    let tools = Tools {
        model,
        toolbox: &toolbox,
        grammar,
        max_steps: chat::agent_loop::AgentParams::default().max_steps,
    };
    let cancel = shared.reply_cancel.clone();
    let text = match input {
        ToolInput::Send(text) => text,
        ToolInput::Regenerate => manager.take_back_last_message()?,
        ToolInput::Edit(id, text) => {
            manager.take_back_from(id)?;
            text
        }
    };
    let turn = manager.send_with_tools(&text, params, tools, &cancel, on_event)?;
    Ok(TurnReply {
        reply: turn.reply,
        stats: None,
    })
}

/// Run one turn on the worker, streaming it to `channel`. A conversation is created first if
/// none is open.
fn turn(
    w: &mut Worker,
    channel: &Channel<ChatEvent>,
    f: impl FnOnce(&mut Worker, &GenerateParams, &mut dyn FnMut(TurnEvent<'_>)) -> Result<TurnReply>,
) -> Result<MessageView> {
    let params = w.settings.generate_params();
    let shared = w.shared.clone();
    ensure_open(w)?;
    shared.reply_cancel.store(false, Ordering::Relaxed);
    shared.replying.store(true, Ordering::Relaxed);
    // the webview may have gone (window closed): the reply is saved all the same
    let send = |event: ChatEvent| {
        let _ = channel.send(event);
    };
    let send_text = |text: Option<String>| {
        if let Some(text) = text {
            send(ChatEvent::Text(text));
        }
    };
    let mut batch = TextBatch::default();
    let result = f(w, &params, &mut |event| {
        let now = Instant::now();
        let event = match event {
            TurnEvent::Text(t) => return send_text(batch.push(t, now)),
            TurnEvent::Tick => return send_text(batch.due(now)),
            TurnEvent::User(m) => ChatEvent::User(m.into()),
            TurnEvent::Summarizing => ChatEvent::Summarizing,
            TurnEvent::Thermal(n) => ChatEvent::Thermal(n.clone()),
            TurnEvent::Tool(e) => ChatEvent::Tool(e.clone()),
        };
        send_text(batch.flush(now));
        send(event);
    });
    send_text(batch.flush(Instant::now()));
    shared.replying.store(false, Ordering::Relaxed);
    // the user may have typed their next message while this reply streamed
    apply_latest_draft(w);
    match result {
        Ok(TurnReply { reply, stats }) => {
            if let Some(stats) = &stats {
                shared.set_last_reply(stats.clone());
            }
            let mut reply = MessageView::from(&reply);
            reply.stats = stats;
            send(ChatEvent::Done(reply.clone()));
            Ok(reply)
        }
        Err(e) => {
            send(ChatEvent::Error(e.clone()));
            Err(e)
        }
    }
}
