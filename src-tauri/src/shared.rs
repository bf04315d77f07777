//! What the commands read without waiting for the worker: the load phase, one-time notices,
//! the last reply's figures, the busy and cancel flags, the engine handle (for drafts, thermal
//! state and model facts), the open conversation and the user's latest draft.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use engine::EngineHandle;
use memory::{ConversationId, Reminder};
use serde::Serialize;

use crate::approval::PendingApproval;
use crate::error::AppError;
use crate::views::ReplyStats;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Loading,
    Ready,
    Failed,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppStateView {
    pub phase: Phase,
    pub stage: Option<String>,
    pub error: Option<AppError>,
    pub notices: Vec<String>,
}

#[derive(Debug)]
struct Load {
    phase: Phase,
    stage: Option<String>,
    error: Option<AppError>,
}

pub struct Shared {
    load: Mutex<Load>,
    notices: Mutex<Vec<String>>,
    last_reply: Mutex<Option<ReplyStats>>,
    engine: Mutex<Option<EngineHandle>>,
    open: Mutex<Option<ConversationId>>,
    draft: Mutex<String>,
    /// A job that prefills the newest draft is queued on the worker: drafts typed while the
    /// worker is busy coalesce into that one job.
    pub draft_queued: AtomicBool,
    /// A reply is streaming.
    pub replying: AtomicBool,
    /// Set to stop the reply that is streaming; cleared when the next one starts.
    pub reply_cancel: Arc<AtomicBool>,
    /// A document job is running.
    pub summarizing: AtomicBool,
    pub document_cancel: Arc<AtomicBool>,
    /// Counts engine loads: what holds on to something made for one model (the local API's
    /// completer) sees that another is in use.
    pub engine_generation: AtomicU64,
    /// The agent's write waiting for the user's answer, if one is.
    pub approval: Arc<PendingApproval>,
    /// Reminders that fell due ([`crate::reminders`]) and the window has not shown yet.
    due_reminders: Mutex<Vec<Reminder>>,
    /// A reply was stopped because the app went to the background (iOS): the user hears so
    /// when it comes back.
    pub stopped_in_background: AtomicBool,
    /// What the platform adds to the tools (iOS: bookmarked folders, the Reminders app).
    platform: Mutex<PlatformTools>,
    /// The MCP servers whose tools the agent's turns use.
    pub mcp: Arc<crate::mcp_servers::McpServers>,
}

/// The platform's side of the agent's tools ([`crate::mobile_bridge`]).
#[derive(Clone, Default)]
pub struct PlatformTools {
    /// Resolves folders granted through a security-scoped bookmark.
    pub bookmarks: Option<Arc<dyn chat::tools::BookmarkResolver>>,
    /// Where reminders also go (the Reminders app).
    pub reminders: Option<Arc<dyn chat::tools::PlatformReminders + Send + Sync>>,
}

/// A poisoned lock only means another command panicked mid-update; the data is still the
/// best there is, so take it rather than fail every later command.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            load: Mutex::new(Load {
                phase: Phase::Loading,
                stage: Some("Starting".into()),
                error: None,
            }),
            notices: Mutex::default(),
            last_reply: Mutex::default(),
            engine: Mutex::default(),
            open: Mutex::default(),
            draft: Mutex::default(),
            draft_queued: AtomicBool::new(false),
            replying: AtomicBool::new(false),
            reply_cancel: Arc::new(AtomicBool::new(false)),
            summarizing: AtomicBool::new(false),
            document_cancel: Arc::new(AtomicBool::new(false)),
            engine_generation: AtomicU64::new(0),
            approval: Arc::default(),
            due_reminders: Mutex::default(),
            stopped_in_background: AtomicBool::new(false),
            platform: Mutex::default(),
            mcp: Arc::default(),
        }
    }
}

impl Shared {
    pub fn loading(&self, stage: &str) {
        *lock(&self.load) = Load {
            phase: Phase::Loading,
            stage: Some(stage.to_string()),
            error: None,
        };
    }

    pub fn ready(&self) {
        *lock(&self.load) = Load {
            phase: Phase::Ready,
            stage: None,
            error: None,
        };
    }

    pub fn failed(&self, error: AppError) {
        *lock(&self.load) = Load {
            phase: Phase::Failed,
            stage: None,
            error: Some(error),
        };
    }

    pub fn phase(&self) -> Phase {
        lock(&self.load).phase
    }

    pub fn push_due_reminder(&self, reminder: Reminder) {
        lock(&self.due_reminders).push(reminder);
    }

    /// The reminders that fell due since the window last asked (each is handed over once).
    pub fn take_due_reminders(&self) -> Vec<Reminder> {
        std::mem::take(&mut *lock(&self.due_reminders))
    }

    pub fn set_platform_tools(&self, tools: PlatformTools) {
        *lock(&self.platform) = tools;
    }

    pub fn platform_tools(&self) -> PlatformTools {
        lock(&self.platform).clone()
    }

    pub fn notice(&self, text: String) {
        lock(&self.notices).push(text);
    }

    /// The state, handing over the notices (each is shown once).
    pub fn take_state(&self) -> AppStateView {
        let load = lock(&self.load);
        AppStateView {
            phase: load.phase,
            stage: load.stage.clone(),
            error: load.error.clone(),
            notices: std::mem::take(&mut *lock(&self.notices)),
        }
    }

    pub fn set_engine(&self, engine: Option<EngineHandle>) {
        *lock(&self.engine) = engine;
        self.engine_generation.fetch_add(1, Ordering::Release);
    }

    pub fn engine(&self) -> Option<EngineHandle> {
        lock(&self.engine).clone()
    }

    pub fn set_open(&self, id: Option<ConversationId>) {
        *lock(&self.open) = id;
    }

    pub fn open(&self) -> Option<ConversationId> {
        lock(&self.open).clone()
    }

    pub fn set_draft(&self, text: &str) {
        text.clone_into(&mut lock(&self.draft));
    }

    pub fn draft(&self) -> String {
        lock(&self.draft).clone()
    }

    pub fn set_last_reply(&self, stats: ReplyStats) {
        *lock(&self.last_reply) = Some(stats);
    }

    pub fn last_reply(&self) -> Option<ReplyStats> {
        lock(&self.last_reply).clone()
    }

    pub fn busy(&self) -> bool {
        self.replying.load(Ordering::Relaxed) || self.summarizing.load(Ordering::Relaxed)
    }
}
