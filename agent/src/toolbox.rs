//! The toolbox: one call of one tool, start to end — find the tool, check its arguments
//! against its schema, ask the user before a write (showing the exact arguments), run it
//! inside the sandbox and the caps, and record the call in the audit log whatever happened.
//! Logs carry the tool, the outcome, the error code and the time taken; never arguments, file
//! contents or user text at the default level.

use std::time::Instant;

use serde_json::{Value, json};

use crate::approval::{Approval, ApprovalAnswer, ApprovalRequest, RememberedApprovals};
use crate::error::{Error, Result};
use crate::external::{ExternalTool, ExternalTools};
use crate::host::{AuditEntry, CallOutcome, ConversationKey, FileSummarizer, ToolHost};
use crate::limits::{Limits, TurnBudget};
use crate::sandbox::Sandbox;
use crate::tool::{Tool, ToolCall, ToolOutput, ToolProgress};

/// What the tools work with. Built by the caller for as long as it needs (a turn, a command);
/// what outlives it — the grants, the host, the remembered approvals — is borrowed.
pub struct Toolbox<'a> {
    pub sandbox: &'a Sandbox,
    pub host: &'a dyn ToolHost,
    /// `None` where no model is at hand: summarize_file then says so.
    pub summarizer: Option<&'a dyn FileSummarizer>,
    pub approval: &'a dyn Approval,
    pub remembered: &'a RememberedApprovals,
    pub limits: Limits,
    /// Other programs' tools (MCP servers), beside the built-in ones; `None`: only ours.
    pub external: Option<&'a dyn ExternalTools>,
}

/// One call's circumstances.
pub struct CallContext<'c> {
    pub conversation: ConversationKey,
    /// Shared by every call of the turn; the caller resets it at each user message.
    pub budget: &'c TurnBudget,
    /// Progress of long tools (summarize_file).
    pub progress: &'c mut dyn FnMut(ToolProgress),
    /// Set when the user stopped the turn: another program's call ends at once (the built-in
    /// tools are bounded by their caps, summarize_file by its job's own flag).
    pub cancel: Option<&'c std::sync::atomic::AtomicBool>,
}

impl Toolbox<'_> {
    pub fn tools(&self) -> Vec<Tool> {
        let mut tools = crate::tools::declarations(&self.limits);
        tools.extend(self.external_tools().into_iter().map(|t| t.tool));
        tools
    }

    fn external_tools(&self) -> Vec<ExternalTool> {
        self.external.map(|e| e.tools()).unwrap_or_default()
    }

    pub fn tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    /// Run `call`. Every outcome — done, failed, declined, even an unknown tool — is
    /// recorded through the host's audit log before this returns.
    pub fn call(&self, call: &ToolCall, cx: &mut CallContext<'_>) -> Result<ToolOutput> {
        let started = Instant::now();
        let started_at = now_ms();
        let result = self.run(call, cx);
        let (outcome, error_code) = match &result {
            Ok(_) => (CallOutcome::Ok, None),
            Err(e @ Error::Denied { .. }) => (CallOutcome::Denied, Some(e.code().to_string())),
            Err(e) => (CallOutcome::Error, Some(e.code().to_string())),
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        tracing::info!(
            tool = %call.name,
            outcome = ?outcome,
            code = error_code.as_deref().unwrap_or(""),
            duration_ms,
            "tool call"
        );
        tracing::trace!(tool = %call.name, arguments = %call.arguments, "tool call arguments");
        let entry = AuditEntry {
            conversation: cx.conversation.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            outcome,
            error_code,
            duration_ms,
            started_at,
        };
        if let Err(e) = self.host.record_call(&entry) {
            tracing::warn!(code = %e.code, "the tool call could not be recorded in the audit log");
        }
        result
    }

    fn run(&self, call: &ToolCall, cx: &mut CallContext<'_>) -> Result<ToolOutput> {
        if let (Some(external), Some(tool)) = (
            self.external,
            self.external_tools()
                .into_iter()
                .find(|t| t.tool.name == call.name),
        ) {
            return self.run_external(external, &tool, call, cx);
        }
        let tool = self
            .tool(&call.name)
            .ok_or_else(|| Error::UnknownTool(call.name.clone()))?;
        crate::schema::validate(&tool.parameters, &call.arguments)
            .map_err(|problem| Error::invalid(&tool.name, problem))?;
        if tool.writes {
            self.approve(&tool, call, &cx.conversation)?;
        }
        crate::tools::run(self, &tool.name, &call.arguments, cx)
    }

    /// Another program's tool: asked first unless pre-approved, its output cut to the
    /// tool-result budget. Its arguments are not checked against our schema subset (a
    /// server's schema may use more of JSON Schema): the call grammar built them from the
    /// server's schema, and the server checks them again.
    fn run_external(
        &self,
        external: &dyn ExternalTools,
        tool: &ExternalTool,
        call: &ToolCall,
        cx: &CallContext<'_>,
    ) -> Result<ToolOutput> {
        let conversation = &cx.conversation;
        if !call.arguments.is_object() {
            return Err(Error::invalid(
                &call.name,
                "the arguments must be an object",
            ));
        }
        if !tool.pre_approved {
            let action = format!("call {} on the MCP server \"{}\"", call.name, tool.server);
            self.ask(&tool.tool, call, conversation, action, &tool.approval_key)?;
        }
        let out = external.call(&call.name, &call.arguments, cx.cancel)?;
        let (text, truncated) = cut_to(&out.text, self.limits.read_max_bytes);
        let mut text = if truncated {
            format!(
                "{text}\n[cut: the result was {} long; only the first {} are shown]",
                crate::tools::human_bytes(out.text.len() as u64),
                crate::tools::human_bytes(self.limits.read_max_bytes as u64)
            )
        } else {
            text.to_string()
        };
        if out.is_error {
            text = format!("{} reported an error: {text}", call.name);
        }
        Ok(ToolOutput::new(text, out.data, truncated))
    }

    /// Ask before a write, unless the user already said yes for this tool in this
    /// conversation.
    fn approve(&self, tool: &Tool, call: &ToolCall, conversation: &ConversationKey) -> Result<()> {
        let action = crate::tools::describe_write(&tool.name, &call.arguments)?;
        self.ask(tool, call, conversation, action, &tool.name)
    }

    /// Ask about `call`; "yes for this conversation" is remembered under `remember_as`.
    fn ask(
        &self,
        tool: &Tool,
        call: &ToolCall,
        conversation: &ConversationKey,
        action: String,
        remember_as: &str,
    ) -> Result<()> {
        if self.remembered.covers(conversation, remember_as) {
            return Ok(());
        }
        let request = ApprovalRequest {
            conversation,
            tool: &tool.name,
            arguments: &call.arguments,
            action,
        };
        match self.approval.ask(&request) {
            ApprovalAnswer::Yes => Ok(()),
            ApprovalAnswer::YesForConversation => {
                self.remembered.remember(conversation, remember_as);
                Ok(())
            }
            ApprovalAnswer::No => Err(Error::Denied {
                tool: tool.name.to_string(),
            }),
        }
    }
}

/// `text` cut to at most `max` bytes at a character boundary; whether anything was cut.
fn cut_to(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// A failed call as the model (and a UI card) should see it: the error's sentence as plain
/// text, and its code.
pub fn error_output(tool: &str, error: &Error) -> ToolOutput {
    ToolOutput::new(
        format!("{tool} failed: {error}"),
        json!({"error": {"code": error.code(), "message": error.to_string()}}),
        false,
    )
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Data for an output that lists things, with what was left out.
pub(crate) fn with_notices(mut data: Value, notices: &[String]) -> Value {
    if !notices.is_empty()
        && let Some(map) = data.as_object_mut()
    {
        map.insert("notices".into(), json!(notices));
    }
    data
}
