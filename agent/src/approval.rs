//! Asking the user before a tool writes anything. Reading never asks; every write (a note, a
//! reminder, a file) asks first with its exact arguments and a sentence of what it will do —
//! the shape of Jan's and Google AI Edge Gallery's approval dialogs, without a global "allow
//! all". The answer is yes, no, or yes for this conversation, which covers the same tool in
//! the same conversation until the caller forgets it (the app: when the conversation closes).

use std::collections::HashSet;
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

use crate::host::ConversationKey;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalAnswer {
    Yes,
    No,
    YesForConversation,
}

/// What the user is asked to approve.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest<'a> {
    pub conversation: &'a ConversationKey,
    pub tool: &'a str,
    /// Exactly as the call gave them.
    pub arguments: &'a Value,
    /// What will happen, in a sentence (with, for instance, a reminder's time as understood).
    pub action: String,
}

/// The user's side of an approval: a dialog in the app, a prompt in the terminal.
pub trait Approval {
    fn ask(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer;
}

impl<F: Fn(&ApprovalRequest<'_>) -> ApprovalAnswer> Approval for F {
    fn ask(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        self(request)
    }
}

/// Answers no to everything: for callers that cannot ask.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyWrites;

impl Approval for DenyWrites {
    fn ask(&self, _: &ApprovalRequest<'_>) -> ApprovalAnswer {
        ApprovalAnswer::No
    }
}

/// The "yes for this conversation" answers given so far, per conversation and tool.
#[derive(Debug, Default)]
pub struct RememberedApprovals {
    approved: Mutex<HashSet<(ConversationKey, String)>>,
}

impl RememberedApprovals {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn covers(&self, conversation: &ConversationKey, tool: &str) -> bool {
        self.lock()
            .contains(&(conversation.clone(), tool.to_string()))
    }

    pub(crate) fn remember(&self, conversation: &ConversationKey, tool: &str) {
        self.lock().insert((conversation.clone(), tool.to_string()));
    }

    /// Forget what was approved for `conversation` (it closed).
    pub fn forget(&self, conversation: &ConversationKey) {
        self.lock().retain(|(c, _)| c != conversation);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<(ConversationKey, String)>> {
        // a panic while holding the set cannot leave it half-changed: use it as it is
        self.approved.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_are_remembered_per_conversation_and_tool() {
        let r = RememberedApprovals::new();
        let a = Some("a".to_string());
        let b = Some("b".to_string());
        r.remember(&a, "add_note");
        assert!(r.covers(&a, "add_note"));
        assert!(!r.covers(&a, "create_reminder"));
        assert!(!r.covers(&b, "add_note"));
        r.forget(&a);
        assert!(!r.covers(&a, "add_note"));
    }
}
