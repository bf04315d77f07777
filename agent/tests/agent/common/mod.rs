//! What the agent's tests share: a fake host (notes, reminders and the audit log in memory),
//! a folder tree to grant, and a one-call helper.
#![allow(dead_code)]

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use agent::{
    Approval, AuditEntry, CallContext, ConversationHit, ConversationKey, DenyWrites, HostError,
    Limits, NoteMatch, NoteView, RememberedApprovals, ReminderView, Sandbox, ToolCall, ToolHost,
    ToolOutput, Toolbox, TurnBudget,
};
use serde_json::Value;

#[derive(Default)]
pub struct FakeHost {
    pub notes: RefCell<Vec<NoteView>>,
    pub reminders: RefCell<Vec<ReminderView>>,
    pub audit: RefCell<Vec<AuditEntry>>,
}

impl ToolHost for FakeHost {
    fn search_conversations(
        &self,
        query: &str,
        _: usize,
    ) -> Result<Vec<ConversationHit>, HostError> {
        Ok(if query.contains("kyoto") {
            vec![ConversationHit {
                conversation_id: "c1".into(),
                title: "Trip to Kyoto".into(),
                role: Some("assistant".into()),
                snippet: "The maple leaves at Tofukuji".into(),
            }]
        } else {
            Vec::new()
        })
    }
    fn add_note(
        &self,
        _: &ConversationKey,
        title: &str,
        text: &str,
    ) -> Result<NoteView, HostError> {
        let mut notes = self.notes.borrow_mut();
        let note = NoteView {
            id: notes.len() as i64 + 1,
            title: title.into(),
            text: text.into(),
            updated_at: 0,
        };
        notes.push(note.clone());
        Ok(note)
    }
    fn list_notes(&self, limit: usize) -> Result<(Vec<NoteView>, usize), HostError> {
        let notes = self.notes.borrow();
        Ok((
            notes.iter().rev().take(limit).cloned().collect(),
            notes.len(),
        ))
    }
    fn search_notes(&self, query: &str, _: usize) -> Result<Vec<NoteMatch>, HostError> {
        Ok(self
            .notes
            .borrow()
            .iter()
            .filter(|n| n.text.contains(query))
            .map(|n| NoteMatch {
                note: n.clone(),
                snippet: n.text.clone(),
            })
            .collect())
    }
    fn create_reminder(
        &self,
        _: &ConversationKey,
        text: &str,
        due_at: i64,
    ) -> Result<ReminderView, HostError> {
        let mut r = self.reminders.borrow_mut();
        let reminder = ReminderView {
            id: r.len() as i64 + 1,
            text: text.into(),
            due_at,
            done: false,
        };
        r.push(reminder.clone());
        Ok(reminder)
    }
    fn list_reminders(&self, _: bool, _: usize) -> Result<Vec<ReminderView>, HostError> {
        Ok(self.reminders.borrow().clone())
    }
    fn record_call(&self, entry: &AuditEntry) -> Result<(), HostError> {
        self.audit.borrow_mut().push(entry.clone());
        Ok(())
    }
}

/// A temporary tree: `root/grant` (granted) with a few files, and `root/outside` with a
/// secret that no test may ever see in a result.
pub struct Tree {
    pub tmp: tempfile::TempDir,
}

pub const SECRET: &str = "SECRET-OUTSIDE-THE-GRANT";

impl Tree {
    pub fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let grant = tmp.path().join("grant");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(grant.join("garden")).unwrap();
        std::fs::create_dir_all(grant.join("recipes")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        std::fs::write(
            grant.join("garden/tomatoes.txt"),
            "Growing tomatoes\n\nPlant the tomatoes in May.\nBasil grows well beside them.\n",
        )
        .unwrap();
        std::fs::write(
            grant.join("garden/roses.md"),
            "# Roses\nPrune roses in March.\n",
        )
        .unwrap();
        std::fs::write(
            grant.join("recipes/soup.html"),
            "<html><body><h1>Tomato soup</h1><p>Simmer the tomatoes with basil.</p><script>var x='hidden script';</script></body></html>",
        )
        .unwrap();
        Tree { tmp }
    }

    pub fn grant(&self) -> PathBuf {
        self.tmp.path().join("grant")
    }

    pub fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }
}

/// One toolbox over `sandbox` and `host`.
pub struct Rig<'a> {
    pub toolbox: Toolbox<'a>,
    pub budget: TurnBudget,
}

impl<'a> Rig<'a> {
    pub fn new(
        sandbox: &'a Sandbox,
        host: &'a FakeHost,
        approval: &'a dyn Approval,
        remembered: &'a RememberedApprovals,
        limits: Limits,
    ) -> Rig<'a> {
        let budget = TurnBudget::for_limits(&limits);
        Rig {
            toolbox: Toolbox {
                sandbox,
                host,
                summarizer: None,
                approval,
                remembered,
                limits,
                external: None,
            },
            budget,
        }
    }

    pub fn call(&self, name: &str, args: Value) -> agent::Result<ToolOutput> {
        self.call_in(None, name, args)
    }

    pub fn call_in(
        &self,
        conversation: Option<&str>,
        name: &str,
        args: Value,
    ) -> agent::Result<ToolOutput> {
        let mut progress = |_| {};
        let mut cx = CallContext {
            conversation: conversation.map(str::to_string),
            budget: &self.budget,
            progress: &mut progress,
            cancel: None,
        };
        let out = self.toolbox.call(&ToolCall::new(name, args), &mut cx);
        if let Ok(o) = &out {
            assert!(!o.text_for_model.contains(SECRET), "{}", o.text_for_model);
            assert!(!o.data.to_string().contains(SECRET));
        }
        if let Err(e) = &out {
            assert!(!e.to_string().contains(SECRET));
        }
        out
    }
}

pub static DENY: DenyWrites = DenyWrites;

pub fn sandbox(tree: &Tree) -> Sandbox {
    Sandbox::new(&[agent::GrantSpec::read_only(tree.grant())], &[]).unwrap()
}

pub fn code(r: agent::Result<ToolOutput>) -> String {
    match r {
        Ok(o) => panic!("expected an error, got {}", o.text_for_model),
        Err(e) => e.code().to_string(),
    }
}

pub fn absolute(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}
