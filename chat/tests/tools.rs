//! The agent's tools on a real store: notes, reminders and conversation search go to SQLite,
//! every call lands in the audit table, grants kept in the store open the sandbox, and the
//! store's own files stay private even inside a granted folder.

use agent::{
    ApprovalAnswer, ApprovalRequest, CallContext, GrantSpec, Limits, RememberedApprovals, ToolCall,
    Toolbox, TurnBudget,
};
use anyhow::Result;
use chat::tools::{StoreHost, sandbox_for};
use memory::{NewMessage, Role, Store, ToolOutcome};
use serde_json::json;

fn call(
    toolbox: &Toolbox<'_>,
    conversation: Option<&str>,
    name: &str,
    args: serde_json::Value,
) -> agent::Result<agent::ToolOutput> {
    let budget = TurnBudget::for_limits(&toolbox.limits);
    let mut progress = |_| {};
    let mut cx = CallContext {
        conversation: conversation.map(str::to_string),
        budget: &budget,
        progress: &mut progress,
        cancel: None,
    };
    toolbox.call(&ToolCall::new(name, args), &mut cx)
}

#[test]
fn tools_write_and_read_the_store_and_every_call_is_audited() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path().join("companion.db"))?.store;
    let c = store.create_conversation("Garden plans", None, &json!({}))?;
    store.append_message(
        &c.id,
        &NewMessage::complete(Role::User, "When should I plant tomatoes?", None),
    )?;
    let sandbox = sandbox_for(&store, &[])?;
    let host = StoreHost::new(&store);
    let remembered = RememberedApprovals::new();
    let yes = |_: &ApprovalRequest<'_>| ApprovalAnswer::YesForConversation;
    let toolbox = Toolbox {
        sandbox: &sandbox,
        host: &host,
        summarizer: None,
        approval: &yes,
        remembered: &remembered,
        limits: Limits::default(),
        external: None,
    };
    let conv = Some(c.id.as_str());
    let out = call(
        &toolbox,
        conv,
        "search_conversations",
        json!({"query": "tomatoes"}),
    )?;
    assert!(
        out.text_for_model.contains("\"Garden plans\" (user)"),
        "{}",
        out.text_for_model
    );
    call(
        &toolbox,
        conv,
        "add_note",
        json!({"title": "Planting", "text": "Tomatoes go out in May, 番茄"}),
    )?;
    assert_eq!(store.notes(0, 10)?[0].conversation_id.as_ref(), Some(&c.id));
    let out = call(&toolbox, None, "search_notes", json!({"query": "番茄"}))?;
    assert!(
        out.text_for_model.contains("#1 \"Planting\""),
        "{}",
        out.text_for_model
    );
    let out = call(&toolbox, None, "list_notes", json!({}))?;
    assert!(out.text_for_model.starts_with("1 notes"));
    call(
        &toolbox,
        conv,
        "create_reminder",
        json!({"text": "plant tomatoes", "when": "in 3 days"}),
    )?;
    let reminders = store.reminders(false, 10)?;
    assert_eq!(reminders[0].text, "plant tomatoes");
    let out = call(&toolbox, None, "list_reminders", json!({}))?;
    assert!(out.text_for_model.contains("plant tomatoes"));
    // a store error keeps its code
    let e = call(
        &toolbox,
        conv,
        "add_note",
        json!({"title": "   ", "text": "x"}),
    )
    .unwrap_err();
    assert_eq!(e.code(), "invalid_argument");
    // no folder granted: no file access
    assert_eq!(
        call(&toolbox, None, "list_folder", json!({}))
            .unwrap_err()
            .code(),
        "no_grant"
    );

    let calls = store.tool_calls(None, 0, 100)?;
    assert_eq!(calls.len(), 8);
    let newest = &calls[0];
    assert_eq!(newest.tool, "list_folder");
    assert_eq!(newest.outcome, ToolOutcome::Error);
    assert_eq!(newest.error_code.as_deref(), Some("no_grant"));
    let of_conversation = store.tool_calls(Some(&c.id), 0, 100)?;
    assert_eq!(of_conversation.len(), 4);
    assert!(of_conversation.iter().any(
        |t| t.arguments == json!({"title": "Planting", "text": "Tomatoes go out in May, 番茄"})
    ));
    Ok(())
}

#[test]
fn grants_kept_in_the_store_open_the_sandbox_and_the_store_stays_private() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs)?;
    std::fs::write(docs.join("plan.txt"), "tomatoes and basil\n")?;
    // the database lives inside the granted folder
    let store = Store::open(docs.join("companion.db"))?.store;
    let c = store.create_conversation("secret conversation", None, &json!({}))?;
    store.append_message(
        &c.id,
        &NewMessage::complete(Role::User, "tomatoes basil private", None),
    )?;
    store.grant_folder(docs.to_str().unwrap(), memory::GrantMode::Read)?;
    // the log beside it (what the CLI and the app write there)
    let logs = logging::log_dir(&docs.join("companion.db"));
    std::fs::create_dir(&logs)?;
    std::fs::write(logs.join("companion.log"), "INFO chat: a log line\n")?;
    let extra = dir.path().join("extra");
    std::fs::create_dir(&extra)?;
    let sandbox = sandbox_for(&store, &[GrantSpec::may_write(&extra)])?;
    let names: Vec<String> = sandbox.grants().into_iter().map(|g| g.name).collect();
    assert_eq!(names, ["docs", "extra"]);
    let host = StoreHost::new(&store);
    let remembered = RememberedApprovals::new();
    let toolbox = Toolbox {
        sandbox: &sandbox,
        host: &host,
        summarizer: None,
        approval: &agent::DenyWrites,
        remembered: &remembered,
        limits: Limits::default(),
        external: None,
    };
    let out = call(&toolbox, None, "list_folder", json!({"path": "docs"}))?;
    assert_eq!(
        out.text_for_model,
        "docs: 0 folders, 1 files\nplan.txt  (19 bytes)"
    );
    for path in [
        "docs/companion.db",
        "docs/companion.db-wal",
        "docs/companion.db.writers",
        "docs/logs",
        "docs/logs/companion.log",
    ] {
        let e = call(&toolbox, None, "read_file", json!({ "path": path })).unwrap_err();
        assert_eq!(e.code(), "private_data", "{path}");
    }
    let out = call(
        &toolbox,
        None,
        "search_files",
        json!({"query": "tomatoes basil"}),
    )?;
    let matches = out.data["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 1, "{}", out.text_for_model);
    assert_eq!(matches[0]["path"], "docs/plan.txt");
    Ok(())
}
