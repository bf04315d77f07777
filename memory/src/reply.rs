//! Recording a reply while it streams: the text is checkpointed to the database at least once
//! per interval (default 250 ms) so that a crash or a kill loses at most the last moment of
//! the reply — and never anything committed before it.

use std::time::{Duration, Instant};

use crate::error::Result;
use crate::store::Store;
use crate::types::{ConversationId, Message, MessageId, MessageStatus};

pub const DEFAULT_CHECKPOINT_INTERVAL: Duration = Duration::from_millis(250);

pub struct ReplyRecorder {
    id: MessageId,
    text: String,
    saved_len: usize,
    last_save: Instant,
    interval: Duration,
}

impl ReplyRecorder {
    /// Insert the reply as an empty `streaming` message.
    pub fn begin(store: &Store, conversation: &ConversationId) -> Result<Self> {
        Ok(ReplyRecorder {
            id: store.begin_reply(conversation)?,
            text: String::new(),
            saved_len: 0,
            last_save: Instant::now(),
            interval: DEFAULT_CHECKPOINT_INTERVAL,
        })
    }

    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    pub fn id(&self) -> MessageId {
        self.id
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Add a streamed piece; checkpoints when the interval has passed.
    pub fn push(&mut self, store: &Store, piece: &str) -> Result<()> {
        self.text.push_str(piece);
        self.tick(store)
    }

    /// Checkpoint unsaved text once the interval has passed. Call it when no piece arrives
    /// for a while (e.g. on a receive timeout), so a pause cannot hold text back.
    pub fn tick(&mut self, store: &Store) -> Result<()> {
        if self.text.len() != self.saved_len && self.last_save.elapsed() >= self.interval {
            store.checkpoint_reply(self.id, &self.text)?;
            self.saved_len = self.text.len();
            self.last_save = Instant::now();
        }
        Ok(())
    }

    /// Commit the final text and status.
    pub fn finish(
        self,
        store: &Store,
        status: MessageStatus,
        token_count: Option<i64>,
        timings: Option<&serde_json::Value>,
    ) -> Result<Message> {
        store.finish_reply(self.id, &self.text, status, token_count, timings)
    }
}
