//! A turn of the conversation: the draft prefilled while the user types, send, regenerate,
//! edit-and-resend, stop. Replies stream over a `tauri::ipc::Channel` tied to the command
//! (ordered, unlike global events), their text in batches ([`crate::text_batch`]); the reply
//! itself runs on the worker thread.

use std::sync::atomic::Ordering;
use std::time::Instant;

use chat::{ConversationManager, Turn, TurnEvent};
use engine::{GenerateParams, ThermalNotice};
use serde::Serialize;
use tauri::State;
use tauri::ipc::Channel;

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
    let (Some(engine), Some(id)) = (state.shared.engine(), state.shared.open()) else {
        return Ok(());
    };
    let parts = state.with_store(|store| Ok(store.prompt_parts(&id)?))?;
    let system = state.settings().system_prompt();
    let history = chat::prompt::chat_messages(system.as_deref(), &parts);
    engine.set_draft(history, text)?;
    Ok(())
}

#[tauri::command]
pub async fn send_message(
    state: State<'_, AppState>,
    text: String,
    on_event: Channel<ChatEvent>,
) -> Result<MessageView> {
    if text.trim().is_empty() {
        return Err(AppError::new("empty_message", "Type a message first."));
    }
    state.shared.set_draft("");
    state
        .worker
        .call(move |w| {
            turn(w, &on_event, |m, params, cancel, on| {
                m.send(&text, params, cancel, on)
            })
        })
        .await
}

#[tauri::command]
pub async fn regenerate(
    state: State<'_, AppState>,
    on_event: Channel<ChatEvent>,
) -> Result<MessageView> {
    state
        .worker
        .call(move |w| {
            turn(w, &on_event, |m, params, cancel, on| {
                m.regenerate(params, cancel, on)
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
            turn(w, &on_event, |m, params, cancel, on| {
                m.edit(memory::MessageId(message_id), &text, params, cancel, on)
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

/// Run one turn on the worker, streaming it to `channel`. A conversation is created first if
/// none is open.
fn turn(
    w: &mut Worker,
    channel: &Channel<ChatEvent>,
    f: impl FnOnce(
        &mut ConversationManager,
        &GenerateParams,
        &std::sync::atomic::AtomicBool,
        &mut dyn FnMut(TurnEvent<'_>),
    ) -> chat::Result<Turn>,
) -> Result<MessageView> {
    let params = w.settings.generate_params();
    let shared = w.shared.clone();
    let manager = w.manager()?;
    if manager.open_conversation().is_none() {
        let id = manager.create(chat::manager::NEW_CONVERSATION_TITLE)?;
        shared.set_open(Some(id));
    }
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
    let result = f(manager, &params, &shared.reply_cancel, &mut |event| {
        let now = Instant::now();
        let event = match event {
            TurnEvent::Text(t) => return send_text(batch.push(t, now)),
            TurnEvent::Tick => return send_text(batch.due(now)),
            TurnEvent::User(m) => ChatEvent::User(m.into()),
            TurnEvent::Summarizing => ChatEvent::Summarizing,
            TurnEvent::Thermal(n) => ChatEvent::Thermal(n.clone()),
        };
        send_text(batch.flush(now));
        send(event);
    });
    send_text(batch.flush(Instant::now()));
    shared.replying.store(false, Ordering::Relaxed);
    // the user may have typed their next message while this reply streamed
    let draft = shared.draft();
    if !draft.trim().is_empty()
        && let Ok(history) = manager.history()
    {
        let _ = manager.engine().set_draft(history, draft);
    }
    match result {
        Ok(turn) => {
            let stats = ReplyStats::new(&turn.generation.stats, turn.generation.stop_reason);
            shared.set_last_reply(stats);
            let mut reply = MessageView::from(&turn.reply);
            reply.stats = Some(ReplyStats::new(
                &turn.generation.stats,
                turn.generation.stop_reason,
            ));
            send(ChatEvent::Done(reply.clone()));
            Ok(reply)
        }
        Err(e) => {
            let e = AppError::from(e);
            send(ChatEvent::Error(e.clone()));
            Err(e)
        }
    }
}
