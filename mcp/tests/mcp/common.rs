use std::path::{Path, PathBuf};

use agent::{
    Approval, ApprovalAnswer, ApprovalRequest, CallContext, ConversationKey, Limits,
    RememberedApprovals, Sandbox, ToolCall, ToolOutput, Toolbox, TurnBudget,
};
use mcp::McpConfig;
use serde_json::Value;

pub fn hostile_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile_server.py")
}

/// Where scripts/setup-mcp-servers installed the pinned reference servers.
pub fn reference_servers() -> PathBuf {
    let dir = std::env::var_os("COMPANION_MCP_SERVERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"));
            cache.join("companion/mcp-servers")
        });
    let module = dir.join("node_modules/@modelcontextprotocol");
    assert!(
        module.join("server-everything/dist/index.js").exists()
            && module.join("server-filesystem/dist/index.js").exists(),
        "the reference MCP servers are not installed in {}: run scripts/setup-mcp-servers \
         (scripts/test does)",
        dir.display()
    );
    module
}

pub fn config(json: Value) -> McpConfig {
    McpConfig::parse(&json.to_string()).expect("a valid configuration")
}

/// Records every approval request and answers with `answer`.
pub struct Asker {
    pub answer: ApprovalAnswer,
    pub asked: std::sync::Mutex<Vec<(String, Value, String)>>,
}

impl Asker {
    pub fn new(answer: ApprovalAnswer) -> Self {
        Asker {
            answer,
            asked: Default::default(),
        }
    }

    pub fn asked(&self) -> Vec<(String, Value, String)> {
        self.asked.lock().unwrap().clone()
    }
}

impl Approval for Asker {
    fn ask(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        self.asked.lock().unwrap().push((
            request.tool.to_string(),
            request.arguments.clone(),
            request.action.clone(),
        ));
        self.answer
    }
}

/// A host that keeps the audit log in memory (the real one is SQLite, in `chat`).
#[derive(Default)]
pub struct Audit {
    pub entries: std::sync::Mutex<Vec<agent::AuditEntry>>,
}

fn not_here<T>() -> Result<T, agent::HostError> {
    Err(agent::HostError::new("unavailable", "not in this test"))
}

impl agent::ToolHost for Audit {
    fn search_conversations(
        &self,
        _: &str,
        _: usize,
    ) -> Result<Vec<agent::ConversationHit>, agent::HostError> {
        not_here()
    }
    fn add_note(
        &self,
        _: &ConversationKey,
        _: &str,
        _: &str,
    ) -> Result<agent::NoteView, agent::HostError> {
        not_here()
    }
    fn list_notes(&self, _: usize) -> Result<(Vec<agent::NoteView>, usize), agent::HostError> {
        not_here()
    }
    fn search_notes(&self, _: &str, _: usize) -> Result<Vec<agent::NoteMatch>, agent::HostError> {
        not_here()
    }
    fn create_reminder(
        &self,
        _: &ConversationKey,
        _: &str,
        _: i64,
    ) -> Result<agent::ReminderView, agent::HostError> {
        not_here()
    }
    fn list_reminders(
        &self,
        _: bool,
        _: usize,
    ) -> Result<Vec<agent::ReminderView>, agent::HostError> {
        not_here()
    }
    fn record_call(&self, entry: &agent::AuditEntry) -> Result<(), agent::HostError> {
        self.entries.lock().unwrap().push(entry.clone());
        Ok(())
    }
}

/// One call through a toolbox holding `external`, as the agent loop makes it.
pub fn call_through_toolbox(
    external: &dyn agent::ExternalTools,
    approval: &dyn Approval,
    remembered: &RememberedApprovals,
    audit: &Audit,
    name: &str,
    arguments: Value,
) -> agent::Result<ToolOutput> {
    let sandbox = Sandbox::new(&[], &[]).unwrap();
    let toolbox = Toolbox {
        sandbox: &sandbox,
        host: audit,
        summarizer: None,
        approval,
        remembered,
        limits: Limits::default(),
        external: Some(external),
    };
    let budget = TurnBudget::for_limits(&toolbox.limits);
    let mut progress = |_| {};
    let mut cx = CallContext {
        conversation: Some("c1".to_string()),
        budget: &budget,
        progress: &mut progress,
        cancel: None,
    };
    toolbox.call(&ToolCall::new(name, arguments), &mut cx)
}
