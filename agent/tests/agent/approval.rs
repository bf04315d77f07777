//! Writes ask first, with the exact arguments; reads never ask; "yes for this conversation"
//! covers that tool in that conversation only; and every call — done, failed or declined —
//! is in the audit log with its conversation, arguments, outcome, code and time.

use std::cell::RefCell;

use crate::common::{FakeHost, Rig, Tree, sandbox};
use agent::{ApprovalAnswer, ApprovalRequest, CallOutcome, Limits, RememberedApprovals};
use serde_json::{Value, json};

/// What was asked: conversation, tool, arguments, action.
type Asked = (Option<String>, String, Value, String);

/// Answers from a script, recording what it was asked.
struct Scripted {
    answers: RefCell<Vec<ApprovalAnswer>>,
    asked: RefCell<Vec<Asked>>,
}

impl Scripted {
    fn new(answers: &[ApprovalAnswer]) -> Self {
        Scripted {
            answers: RefCell::new(answers.iter().rev().copied().collect()),
            asked: RefCell::new(Vec::new()),
        }
    }
}

impl agent::Approval for Scripted {
    fn ask(&self, r: &ApprovalRequest<'_>) -> ApprovalAnswer {
        self.asked.borrow_mut().push((
            r.conversation.clone(),
            r.tool.to_string(),
            r.arguments.clone(),
            r.action.clone(),
        ));
        self.answers
            .borrow_mut()
            .pop()
            .expect("asked more often than scripted")
    }
}

#[test]
fn no_means_nothing_is_written_and_the_refusal_is_recorded() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let approval = Scripted::new(&[ApprovalAnswer::No]);
    let rig = Rig::new(&s, &host, &approval, &r, Limits::default());
    let args = json!({"title": "Groceries", "text": "tomatoes, basil"});
    let e = rig
        .call_in(Some("conv-1"), "add_note", args.clone())
        .unwrap_err();
    assert_eq!(e.code(), "denied");
    assert_eq!(e.to_string(), "you declined add_note; nothing was changed");
    assert!(host.notes.borrow().is_empty());
    let asked = approval.asked.borrow();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0.as_deref(), Some("conv-1"));
    assert_eq!(asked[0].2, args, "the exact arguments are shown");
    assert_eq!(
        asked[0].3,
        "save a note titled \"Groceries\" (15 characters)"
    );
    let audit = host.audit.borrow();
    assert_eq!(audit[0].outcome, CallOutcome::Denied);
    assert_eq!(audit[0].error_code.as_deref(), Some("denied"));
    assert_eq!(audit[0].arguments, args);
}

#[test]
fn yes_is_asked_again_each_time_and_yes_for_the_conversation_is_not() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let approval = Scripted::new(&[
        ApprovalAnswer::Yes,
        ApprovalAnswer::Yes,
        ApprovalAnswer::YesForConversation,
        ApprovalAnswer::No,
        ApprovalAnswer::No,
    ]);
    let rig = Rig::new(&s, &host, &approval, &r, Limits::default());
    let note = |n: i32| json!({"title": format!("n{n}"), "text": "x"});
    rig.call_in(Some("a"), "add_note", note(1)).unwrap();
    rig.call_in(Some("a"), "add_note", note(2)).unwrap();
    assert_eq!(
        approval.asked.borrow().len(),
        2,
        "a plain yes is for one call"
    );
    rig.call_in(Some("a"), "add_note", note(3)).unwrap();
    rig.call_in(Some("a"), "add_note", note(4)).unwrap();
    rig.call_in(Some("a"), "add_note", note(5)).unwrap();
    assert_eq!(
        approval.asked.borrow().len(),
        3,
        "yes for the conversation covers the rest"
    );
    // not another tool, not another conversation
    let reminder = json!({"text": "water", "when": "in 1 hour"});
    assert_eq!(
        rig.call_in(Some("a"), "create_reminder", reminder)
            .unwrap_err()
            .code(),
        "denied"
    );
    assert_eq!(
        rig.call_in(Some("b"), "add_note", note(6))
            .unwrap_err()
            .code(),
        "denied"
    );
    assert_eq!(approval.asked.borrow().len(), 5);
    assert_eq!(host.notes.borrow().len(), 5);
    // the reminder's approval showed the time as understood
    let asked = approval.asked.borrow();
    assert!(
        asked[3].3.starts_with("set a reminder \"water\" for "),
        "{}",
        asked[3].3
    );
    // forgetting the conversation (it closed) asks again
    drop(asked);
    r.forget(&Some("a".into()));
    assert!(!r.covers(&Some("a".into()), "add_note"));
}

#[test]
fn reading_never_asks_and_an_invalid_write_is_refused_before_asking() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let approval = Scripted::new(&[]);
    let rig = Rig::new(&s, &host, &approval, &r, Limits::default());
    for (tool, args) in [
        ("list_folder", json!({})),
        ("read_file", json!({"path": "garden/roses.md"})),
        ("search_files", json!({"query": "roses"})),
        ("find_files", json!({"query": "roses"})),
        ("list_notes", json!({})),
        ("search_notes", json!({"query": "x"})),
        ("list_reminders", json!({})),
        ("search_conversations", json!({"query": "x"})),
        ("now", json!({})),
        ("calculate", json!({"expression": "1+1"})),
    ] {
        rig.call(tool, args)
            .unwrap_or_else(|e| panic!("{tool}: {e}"));
    }
    // a write with a bad argument or a time that passed is refused without asking
    assert_eq!(
        rig.call("add_note", json!({"title": ""}))
            .unwrap_err()
            .code(),
        "invalid_arguments"
    );
    let past = json!({"text": "x", "when": "2001-01-01 09:00"});
    assert_eq!(
        rig.call("create_reminder", past).unwrap_err().code(),
        "invalid_time"
    );
    assert!(approval.asked.borrow().is_empty(), "nothing was asked");
}

#[test]
fn every_call_is_audited_with_its_conversation_arguments_outcome_and_time() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let approval = Scripted::new(&[ApprovalAnswer::Yes]);
    let rig = Rig::new(&s, &host, &approval, &r, Limits::default());
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    rig.call_in(Some("c"), "read_file", json!({"path": "garden/roses.md"}))
        .unwrap();
    rig.call_in(
        Some("c"),
        "read_file",
        json!({"path": "../outside/secret.txt"}),
    )
    .unwrap_err();
    rig.call_in(None, "add_note", json!({"title": "t", "text": "x"}))
        .unwrap();
    let audit = host.audit.borrow();
    assert_eq!(audit.len(), 3);
    assert_eq!(audit[0].tool, "read_file");
    assert_eq!(audit[0].conversation.as_deref(), Some("c"));
    assert_eq!(audit[0].outcome, CallOutcome::Ok);
    assert_eq!(audit[0].error_code, None);
    assert_eq!(audit[0].arguments, json!({"path": "garden/roses.md"}));
    assert_eq!(audit[1].outcome, CallOutcome::Error);
    assert_eq!(audit[1].error_code.as_deref(), Some("outside_grants"));
    assert_eq!(audit[2].conversation, None);
    assert_eq!(audit[2].outcome, CallOutcome::Ok);
    assert!(audit.iter().all(|a| a.started_at >= before));
}
