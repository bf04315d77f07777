//! `ConversationManager`: one open conversation at a time over the engine (L1, its live KV
//! cache) and the store (L2 summaries, L3 messages and snapshots). It opens a conversation by
//! restoring its KV snapshot when valid, or by re-prefilling from summaries and recent turns;
//! runs a turn (commit the user's message, summarize if the prompt passed its high-water mark,
//! stream the reply with checkpoints, commit it); and snapshots the session on switch and
//! close.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use engine::vision::RgbImage;
use engine::{EngineHandle, Event, GenerateParams, Generation, Prompt, StopReason};
use memory::{
    ConversationId, Message, MessageStatus, NewMessage, PolicyConfig, ReplyRecorder, Role,
    SnapshotKey, Store,
};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::picture::Picture;
use crate::prompt::chat_messages;
use crate::summarizer::EngineSummarizer;

mod tools;

pub use tools::{TOOL_CALLS_KEY, ToolTurn, ToolTurnCall, Tools, calls_of};

/// The title of a conversation until its first message names it.
pub const NEW_CONVERSATION_TITLE: &str = "New conversation";

/// How often the reply loop wakes without a token, to checkpoint and to see a cancel.
const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
pub struct ManagerConfig {
    pub system_prompt: Option<String>,
    /// The L2 policy; its context is the engine session's.
    pub policy: PolicyConfig,
    pub checkpoint_interval: Duration,
}

impl ManagerConfig {
    pub fn for_engine(engine: &EngineHandle) -> Self {
        ManagerConfig {
            system_prompt: None,
            policy: PolicyConfig::for_context(engine.info().context),
            checkpoint_interval: memory::reply::DEFAULT_CHECKPOINT_INTERVAL,
        }
    }
}

/// How a conversation was brought back into the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Resume {
    /// The KV snapshot was valid and restored: nothing to recompute.
    Snapshot { tokens: usize },
    /// No usable snapshot: the prompt (summaries + recent turns) is being prefilled again.
    Reprefill { tokens: usize },
    /// The conversation was held with another model (another sha256): its prompt is being
    /// prefilled again on this one, and the user should hear that replies now come from it.
    OtherModel { tokens: usize },
    /// A conversation with no messages yet.
    Empty,
}

/// What the caller of [`ConversationManager::send`] hears, in order: `User`, maybe
/// `Summarizing`, then the reply's `Text` with `Thermal` and `Tick` among it.
pub enum TurnEvent<'a> {
    /// The user's message is committed (the app shows it with its position).
    User(&'a Message),
    /// Older turns are being summarized before the reply (it may take a few seconds).
    Summarizing,
    /// A piece of the reply (whole UTF-8 characters).
    Text(&'a str),
    /// The thermal state changed and the engine changed its pace.
    Thermal(&'a engine::ThermalNotice),
    /// Nothing arrived for a moment: a chance to look at input (e.g. to resume a pause).
    Tick,
    /// A step of a turn with tools ([`ConversationManager::send_with_tools`]): a call
    /// started, waits for the user's approval, progressed or finished, or the run ended. Its
    /// text comes as `Text`.
    Tool(&'a crate::agent_loop::AgentEvent),
}

/// What a turn produced.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    pub user: Message,
    pub reply: Message,
    pub generation: Generation,
    /// Summaries written before this reply.
    pub summaries_made: usize,
    /// Estimated prompt tokens after summarizing.
    pub prompt_tokens: usize,
}

pub struct ConversationManager {
    engine: EngineHandle,
    store: Store,
    config: ManagerConfig,
    open: Option<ConversationId>,
    snapshot_key: Option<SnapshotKey>,
    /// The pictures of the open conversation's prompt, decoded, by sha256: every turn
    /// renders the prompt again, and a photo takes longer to decode than the turn to render.
    pictures: std::sync::Mutex<HashMap<String, Arc<RgbImage>>>,
}

/// Pictures kept decoded at most (a conversation rarely holds more in its recent turns).
const DECODED_PICTURES: usize = 16;

impl ConversationManager {
    pub fn new(engine: EngineHandle, store: Store, config: ManagerConfig) -> Self {
        ConversationManager {
            engine,
            store,
            config,
            open: None,
            snapshot_key: None,
            pictures: Default::default(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn engine(&self) -> &EngineHandle {
        &self.engine
    }

    pub fn config(&self) -> &ManagerConfig {
        &self.config
    }

    pub fn set_system_prompt(&mut self, system_prompt: Option<String>) {
        self.config.system_prompt = system_prompt;
    }

    pub fn open_conversation(&self) -> Option<&ConversationId> {
        self.open.as_ref()
    }

    /// What this engine's snapshots are tied to: the model's sha256 and the format version.
    pub fn snapshot_key(&mut self) -> Result<SnapshotKey> {
        if let Some(k) = &self.snapshot_key {
            return Ok(k.clone());
        }
        let key = SnapshotKey {
            model_sha256: self.engine.model_sha256()?,
            format_version: engine::snapshot::FORMAT_VERSION as i64,
        };
        let dropped = self.store.invalidate_snapshots(&key)?;
        if dropped > 0 {
            tracing::info!(dropped, "snapshots of another model or format dropped");
        }
        self.snapshot_key = Some(key.clone());
        Ok(key)
    }

    /// Start a new conversation and open it.
    pub fn create(&mut self, title: &str) -> Result<ConversationId> {
        let model = self.model_label();
        let settings = serde_json::json!({ "systemPrompt": self.config.system_prompt });
        let c = self
            .store
            .create_conversation(title, Some(&model), &settings)?;
        self.open(&c.id)?;
        Ok(c.id)
    }

    fn model_label(&self) -> String {
        let info = self.engine.info();
        info.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .or_else(|| info.name.clone())
            .unwrap_or_default()
    }

    /// Open a conversation: the one open before is snapshotted first; this one resumes from its
    /// snapshot when valid, else its prompt is prefilled again in the background.
    pub fn open(&mut self, id: &ConversationId) -> Result<Resume> {
        self.store.conversation(id)?;
        if self.open.as_ref().is_some_and(|o| o != id) {
            self.save_snapshot()?;
        }
        self.open = Some(id.clone());
        let key = self.snapshot_key()?;
        let recorded = self.store.conversation_model_sha256(id)?;
        let other_model = recorded.is_some_and(|sha| sha != key.model_sha256);
        if let Some(bytes) = self.store.load_snapshot(id, &key)? {
            match self.engine.restore(bytes) {
                Ok(()) => {
                    let tokens = self.engine.session_tokens()?.len();
                    return Ok(Resume::Snapshot { tokens });
                }
                Err(e) => {
                    tracing::warn!(code = e.code(), error = %e, "snapshot refused; prefilling again");
                    self.store.delete_snapshot(id)?;
                }
            }
        }
        self.engine.reset_session()?;
        let history = self.history()?;
        if history.is_empty() {
            return Ok(Resume::Empty);
        }
        let tokens = self.engine.prompt_tokens(&Prompt::Chat(history.clone()))?;
        // the engine prefills this while nothing else is asked of it; a send reuses it
        self.engine.prefill_history(history)?;
        Ok(if other_model {
            Resume::OtherModel { tokens }
        } else {
            Resume::Reprefill { tokens }
        })
    }

    /// The open conversation's prompt so far (system text, summaries, recent messages).
    pub fn history(&self) -> Result<Vec<engine::ChatMessage>> {
        let id = self.open.as_ref().ok_or(Error::NoConversation)?;
        let parts = self.store.prompt_parts(id)?;
        let mut messages = chat_messages(self.config.system_prompt.as_deref(), &parts);
        // the messages come last, one chat message each
        // a model without a projector reads none of them
        if self.engine.info().projector.is_none() {
            return Ok(messages);
        }
        let first = messages.len() - parts.messages.len();
        for (stored, message) in parts.messages.iter().zip(&mut messages[first..]) {
            if !stored.images.is_empty() {
                message.images = self.pictures_of(stored);
            }
        }
        Ok(messages)
    }

    /// The pictures of a stored message, as the model reads them. A picture that cannot be
    /// read (its file damaged or gone) is left out with a warning: the conversation goes on
    /// with its text.
    fn pictures_of(&self, message: &Message) -> Vec<Arc<RgbImage>> {
        let mut decoded = self.pictures.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for image in &message.images {
            if let Some(picture) = decoded.get(&image.sha256) {
                out.push(picture.clone());
                continue;
            }
            let picture = self
                .store
                .image_bytes(image)
                .map_err(Error::from)
                .and_then(Picture::decode);
            match picture {
                Ok(picture) => {
                    if decoded.len() >= DECODED_PICTURES {
                        decoded.clear();
                    }
                    decoded.insert(image.sha256.clone(), picture.image().clone());
                    out.push(picture.image().clone());
                }
                Err(e) => {
                    tracing::warn!(code = e.code(), error = %e, "a picture of the conversation is left out");
                }
            }
        }
        out
    }

    /// The pictures of a stored message as they were given (to send them again).
    /// One that can no longer be read (its file damaged or gone) is left out with a warning,
    /// as the prompt leaves it out: the message is sent again with the others.
    fn given_pictures(&self, message: &Message) -> Vec<Picture> {
        message
            .images
            .iter()
            .filter_map(|image| {
                let picture = self
                    .store
                    .image_bytes(image)
                    .map_err(Error::from)
                    .and_then(Picture::decode);
                picture
                    .map_err(|e| {
                        tracing::warn!(code = e.code(), error = %e, "a picture of the message is left out");
                    })
                    .ok()
            })
            .collect()
    }

    /// The user is typing `draft`: prefill it after the conversation's prompt.
    pub fn set_draft(&self, draft: &str) -> Result<()> {
        let history = self.history()?;
        self.engine.set_draft(history, draft.to_string())?;
        Ok(())
    }

    fn count_tokens(&self, text: &str) -> Result<usize> {
        Ok(self.engine.tokenizer().encode(text, false)?.len())
    }

    /// One turn: commit `text` as the user's message, summarize older turns if the prompt
    /// passed its high-water mark, then stream the reply to `on_text`, checkpointing it, and
    /// commit it. Setting `cancel` stops the reply; what was generated is kept as `stopped`.
    /// `on_event` hears the reply's pieces and thermal notices.
    pub fn send(
        &mut self,
        text: &str,
        params: &GenerateParams,
        cancel: &AtomicBool,
        on_event: &mut dyn FnMut(TurnEvent<'_>),
    ) -> Result<Turn> {
        self.send_with_pictures(text, &[], params, cancel, on_event)
    }

    /// [`Self::send`] with pictures: they are kept with the message (in the store's picture
    /// folder, by sha256) and open its turn in the prompt, read by the model's vision
    /// projector. Refused before anything is committed when the model has no projector.
    pub fn send_with_pictures(
        &mut self,
        text: &str,
        pictures: &[Picture],
        params: &GenerateParams,
        cancel: &AtomicBool,
        on_event: &mut dyn FnMut(TurnEvent<'_>),
    ) -> Result<Turn> {
        let (id, user, summaries_made, prompt_tokens) =
            self.begin_turn(text, pictures, on_event)?;
        let messages = self.history()?;
        let handle = self
            .engine
            .generate(Prompt::Chat(messages), params.clone())?;
        let mut reply =
            ReplyRecorder::begin(&self.store, &id)?.with_interval(self.config.checkpoint_interval);
        let outcome = self.stream(&handle, &mut reply, cancel, on_event);
        if outcome.is_err() {
            // e.g. the disk filled up mid-reply: stop generating what cannot be saved
            handle.cancel();
        }
        match outcome {
            Ok(generation) => {
                let status = match generation.stop_reason {
                    StopReason::Cancelled | StopReason::ContextFull => MessageStatus::Stopped,
                    _ => MessageStatus::Complete,
                };
                let timings = serde_json::to_value(&generation.stats).ok();
                let reply = reply.finish(
                    &self.store,
                    status,
                    Some(generation.ids.len() as i64),
                    timings.as_ref(),
                )?;
                Ok(Turn {
                    user,
                    reply,
                    generation,
                    summaries_made,
                    prompt_tokens,
                })
            }
            Err(e) => {
                let _ = reply.finish(&self.store, MessageStatus::Error, None, None);
                Err(e)
            }
        }
    }

    /// The start of every turn: hold the conversation with this model, commit `text` as the
    /// user's message (naming a new conversation after it), and summarize older turns if the
    /// prompt passed its high-water mark. A message that cannot be answered is taken back.
    fn begin_turn(
        &mut self,
        text: &str,
        pictures: &[Picture],
        on_event: &mut dyn FnMut(TurnEvent<'_>),
    ) -> Result<(ConversationId, Message, usize, usize)> {
        let id = self.open.clone().ok_or(Error::NoConversation)?;
        let per_picture = match self.engine.info().projector {
            Some(projector) => projector.tokens_per_image,
            None if pictures.is_empty() => 0,
            None => {
                return Err(Error::NoProjector {
                    model: self.model_label(),
                });
            }
        };
        // from this turn on the conversation is held with this model (a read, not a synced
        // write, on every turn after the first)
        let model_sha256 = self.snapshot_key()?.model_sha256;
        if self.store.conversation_model_sha256(&id)?.as_deref() != Some(model_sha256.as_str()) {
            self.store
                .set_conversation_model_sha256(&id, &model_sha256)?;
        }
        let images = pictures
            .iter()
            .map(|p| self.store.save_image(p.bytes(), p.media_type()))
            .collect::<memory::Result<Vec<_>>>()?;
        for (image, picture) in images.iter().zip(pictures) {
            self.pictures
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(image.sha256.clone(), picture.image().clone());
        }
        // a picture's rows and its two markers
        let tokens = self.count_tokens(text)? + pictures.len() * (per_picture + 2);
        let user = self.store.append_message(
            &id,
            &NewMessage::complete(Role::User, text, Some(tokens as i64)).with_images(images),
        )?;
        if user.seq == 0 && self.store.conversation(&id)?.title == NEW_CONVERSATION_TITLE {
            self.store.rename_conversation(&id, &title_from(text))?;
        }
        on_event(TurnEvent::User(&user));
        let mut announced = false;
        let mut on_summarize = || {
            if !announced {
                announced = true;
                on_event(TurnEvent::Summarizing);
            }
        };
        let (summaries_made, prompt_tokens) = match self.compact_with(&id, &mut on_summarize) {
            Ok(outcome) => (outcome.summaries_made, outcome.prompt_tokens),
            Err(e) => {
                // the message cannot be answered: take it back rather than leave it unanswered
                self.store.truncate_messages(&id, user.seq)?;
                return Err(e);
            }
        };
        Ok((id, user, summaries_made, prompt_tokens))
    }

    fn stream(
        &self,
        handle: &engine::GenerationHandle,
        reply: &mut ReplyRecorder,
        cancel: &AtomicBool,
        on_event: &mut dyn FnMut(TurnEvent<'_>),
    ) -> Result<Generation> {
        loop {
            if cancel.load(Ordering::Relaxed) {
                handle.cancel();
            }
            match handle.events.recv_timeout(POLL) {
                Ok(Event::Started { .. }) => {}
                Ok(Event::Text(piece)) => {
                    on_event(TurnEvent::Text(&piece));
                    reply.push(&self.store, &piece)?;
                }
                Ok(Event::Thermal(notice)) => on_event(TurnEvent::Thermal(&notice)),
                Ok(Event::Done(generation)) => return Ok(*generation),
                Ok(Event::Error { code, message }) => {
                    return Err(engine::Error::Request { code, message }.into());
                }
                Err(RecvTimeoutError::Timeout) => {
                    on_event(TurnEvent::Tick);
                    reply.tick(&self.store)?;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(engine::Error::EngineStopped.into());
                }
            }
        }
    }

    /// Answer the last user message again: its reply (and anything after) is dropped, then
    /// the message is sent anew.
    pub fn regenerate(
        &mut self,
        params: &GenerateParams,
        cancel: &AtomicBool,
        on_event: &mut dyn FnMut(TurnEvent<'_>),
    ) -> Result<Turn> {
        let (text, pictures) = self.take_back_last_message_with_pictures()?;
        self.send_with_pictures(&text, &pictures, params, cancel, on_event)
    }

    /// Replace the user message `message` of the open conversation with `text` (its pictures
    /// kept), dropping everything after it, and answer it.
    pub fn edit(
        &mut self,
        message: memory::MessageId,
        text: &str,
        params: &GenerateParams,
        cancel: &AtomicBool,
        on_event: &mut dyn FnMut(TurnEvent<'_>),
    ) -> Result<Turn> {
        let pictures = self.given_pictures(&self.store.message(message)?);
        self.check_reads_pictures(&pictures)?;
        self.take_back_from(message)?;
        self.send_with_pictures(text, &pictures, params, cancel, on_event)
    }

    /// The first half of a regenerate: drop the last user message and everything after it,
    /// and give its text back (to send again, with or without tools).
    pub fn take_back_last_message(&mut self) -> Result<String> {
        Ok(self.take_back_last_message_with_pictures()?.0)
    }

    /// [`Self::take_back_last_message`], with the message's pictures (read before the
    /// message goes, since its pictures may go with it).
    pub fn take_back_last_message_with_pictures(&mut self) -> Result<(String, Vec<Picture>)> {
        let id = self.open.clone().ok_or(Error::NoConversation)?;
        let last_user = self
            .store
            .messages(&id)?
            .into_iter()
            .rev()
            .find(|m| m.role == Role::User)
            .ok_or(Error::NothingToRegenerate)?;
        let pictures = self.given_pictures(&last_user);
        self.check_reads_pictures(&pictures)?;
        self.store.truncate_messages(&id, last_user.seq)?;
        Ok((last_user.text, pictures))
    }

    /// Pictures for a model without a projector are refused ([`Error::NoProjector`]). A
    /// message with pictures sent again is checked before it is taken back (else the refusal
    /// would come after the message and its reply went); a caller that must not commit
    /// anything before the send (the app creates the conversation first) checks here too.
    pub fn check_reads_pictures(&self, pictures: &[Picture]) -> Result<()> {
        if !pictures.is_empty() && self.engine.info().projector.is_none() {
            return Err(Error::NoProjector {
                model: self.model_label(),
            });
        }
        Ok(())
    }

    /// The first half of an edit: drop the user message `message` of the open conversation and
    /// everything after it.
    pub fn take_back_from(&mut self, message: memory::MessageId) -> Result<()> {
        let id = self.open.clone().ok_or(Error::NoConversation)?;
        let old = self.store.message(message)?;
        if old.conversation_id != id || old.role != Role::User {
            return Err(Error::NotEditable);
        }
        self.store.truncate_messages(&id, old.seq)?;
        Ok(())
    }

    /// Summarize until the open conversation's prompt fits its high-water mark.
    pub fn compact(&mut self, id: &ConversationId) -> Result<memory::CompactionOutcome> {
        self.compact_with(id, &mut || {})
    }

    /// [`Self::compact`], calling `on_summarize` before each summary is made.
    fn compact_with(
        &mut self,
        id: &ConversationId,
        on_summarize: &mut dyn FnMut(),
    ) -> Result<memory::CompactionOutcome> {
        // the system prompt as `system_text` writes it when no summary is in force
        let system_prompt = self.config.system_prompt.as_deref().map(str::trim);
        let system_tokens = match system_prompt.filter(|s| !s.is_empty()) {
            Some(s) => self.count_tokens(s)?,
            None => 0,
        } + 4; // <bos> and the summary header's line
        let mut summarizer = Announced {
            inner: EngineSummarizer::new(&self.engine, self.config.policy.context_tokens),
            before: on_summarize,
        };
        let outcome =
            self.store
                .compact(id, &self.config.policy, system_tokens, &mut summarizer)?;
        if let Some(tokens) = outcome.overflow {
            return Err(Error::MessageTooLong {
                tokens,
                context: self.config.policy.context_tokens,
            });
        }
        Ok(outcome)
    }

    /// Snapshot the open conversation's KV cache into the store (on switch and close).
    pub fn save_snapshot(&mut self) -> Result<bool> {
        let Some(id) = self.open.clone() else {
            return Ok(false);
        };
        let tokens = self.engine.session_tokens()?.len();
        if tokens == 0 {
            return Ok(false);
        }
        let key = self.snapshot_key()?;
        let bytes = self.engine.snapshot()?;
        match self.store.save_snapshot(&id, &key, tokens as i64, &bytes) {
            Ok(kept) => Ok(kept),
            // a snapshot is a cache: failing to write one (a full disk) loses nothing
            Err(e) => {
                tracing::warn!(code = e.code(), error = %e, "snapshot not saved");
                Ok(false)
            }
        }
    }

    /// Memory is short (see `engine::memory_guard::relief`): the engine drops the draft's
    /// prefill, its scratch sessions and, when the device needs it, lowers the context; the
    /// summaries policy follows the new context, so the next turn's prompt fits it.
    pub fn relieve_memory(&mut self, available: Option<u64>) -> Result<engine::MemoryRelief> {
        let history = if self.open.is_some() {
            self.history()?
        } else {
            Vec::new()
        };
        let relief = self.engine.relieve_memory(history, available)?;
        self.config.policy.context_tokens = relief.context_after;
        Ok(relief)
    }

    /// Snapshot and close the open conversation.
    pub fn close(&mut self) -> Result<()> {
        self.save_snapshot()?;
        self.open = None;
        Ok(())
    }
}

/// A summarizer that says when it starts each summary.
struct Announced<'a, 'b> {
    inner: EngineSummarizer<'a>,
    before: &'b mut dyn FnMut(),
}

impl memory::Summarizer for Announced<'_, '_> {
    fn summarize(
        &mut self,
        request: &memory::SummaryRequest,
    ) -> Result<memory::SummaryText, Box<dyn std::error::Error + Send + Sync>> {
        (self.before)();
        self.inner.summarize(request)
    }
}

/// A title from the first message: its first line, at most 60 characters, cut at a word.
pub fn title_from(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= 60 {
        return if line.is_empty() {
            NEW_CONVERSATION_TITLE.into()
        } else {
            line.to_string()
        };
    }
    let cut: String = line.chars().take(60).collect();
    let cut = match cut.rfind(' ') {
        Some(at) if at > 30 => &cut[..at],
        _ => &cut[..],
    };
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::title_from;

    #[test]
    fn titles_come_from_the_first_line_cut_at_a_word() {
        assert_eq!(title_from("\n  Hello there\nsecond"), "Hello there");
        let long = "Explain how the sliding window attention of Gemma three works in detail please";
        assert_eq!(
            title_from(long),
            "Explain how the sliding window attention of Gemma three…"
        );
        assert_eq!(title_from("   "), "New conversation");
        assert_eq!(title_from(&"长".repeat(70)).chars().count(), 61);
    }
}
