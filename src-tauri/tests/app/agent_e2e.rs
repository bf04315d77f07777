//! The agent end to end in the real app and on the real model, driven over WebDriver: grant a
//! folder in the Folders panel, turn Tools on, ask which file talks about tomatoes and see the
//! search and the read as call cards before the answer; ask for a note, see the approval card
//! with the exact arguments, deny it with Escape and see the write refused (no note kept, the
//! log saying "you declined"); add an MCP server as JSON in the Servers tab and use its tool
//! (listed, asked for with its exact arguments, approved with Enter, in the Activity log);
//! revoke the folder; reopen the app and find the cards again.
//! Before all that, a reminder that is already due when the app starts is shown once, both in
//! the window and as a desktop notification (on a private session bus with a stand-in for the
//! desktop's notification service, `support::notifications`), and not again after the restart.
//!
//! Two things a WebDriver test cannot do are stood in for, by the environment the test starts
//! the app with (never by the webview): the native folder picker answers with the test's folder
//! (`COMPANION_E2E_PICKED_FOLDER`), and *which* calls the model makes is scripted
//! (`COMPANION_E2E_SCRIPTED_CALLS`) because the 270M base model cannot choose them reliably
//! (`tests/tests/agent_loop.rs` shows what it does on its own). Each scripted call is still fed
//! token by token through the call grammar, run by the real tools in the real sandbox, its
//! result put in the model's context, and the answer written by the model.
//!
//! Needs a display (CI runs it under `xvfb-run`) and `tauri-driver` (`scripts/setup-app`).

use crate::support;

use std::path::Path;
use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::json;
use support::notifications::NotificationService;
use support::webdriver::{ENTER, click, js, screenshot, start_driver_with, wait_for};

const LAST_ASSISTANT: &str =
    "[...document.querySelectorAll('.message[data-role=assistant]')].pop()";

async fn type_and_send(c: &Client, text: &str) {
    let composer = c.find(Locator::Css("#composer")).await.unwrap();
    composer.send_keys(text).await.unwrap();
    composer.send_keys(ENTER).await.unwrap();
}

/// Wait until the reply has ended, and require it to have ended complete.
async fn wait_reply_done(c: &Client) {
    wait_for(
        c,
        &format!(
            "document.querySelector('#stop').hidden && ['complete', 'stopped', 'error'].includes({LAST_ASSISTANT}?.dataset.status)"
        ),
        Duration::from_secs(300),
    )
    .await;
    assert_eq!(
        js(c, &format!("return {LAST_ASSISTANT}.dataset.status")).await,
        json!("complete"),
        "the reply ended complete"
    );
}

/// The cards of the last reply: `[tool, status, preview]` each.
async fn cards(c: &Client) -> Vec<(String, String, String)> {
    let v = js(
        c,
        &format!(
            "return [...{LAST_ASSISTANT}.querySelectorAll('.tool-call')].map(t => \
             [t.dataset.tool, t.dataset.status, t.querySelector('.tool-preview')?.textContent ?? ''])"
        ),
    )
    .await;
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let s = |i: usize| t[i].as_str().unwrap().to_string();
            (s(0), s(1), s(2))
        })
        .collect()
}

const ESCAPE: &str = "\u{e00c}";

/// Answers each approval card of the reply in progress as it comes, until the reply ends:
/// `key(n)` for the n-th (Enter allows, Escape denies), pressed on the focused Allow button.
/// Returns how many were answered.
async fn answer_approvals(c: &Client, which: &str, key: impl Fn(usize) -> &'static str) -> usize {
    let mut answered = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the {which} reply did not finish"
        );
        let state = js(
            c,
            &format!(
                "return document.querySelector('.approval-card .approve:not([disabled])') ? 'ask' : \
                 (document.querySelector('#stop').hidden && ['complete', 'stopped', 'error'].includes({LAST_ASSISTANT}?.dataset.status)) ? 'done' : 'wait'"
            ),
        )
        .await;
        match state.as_str() {
            Some("done") => return answered,
            Some("ask")
                if js(
                    c,
                    "return document.activeElement?.classList.contains('approve') ?? false",
                )
                .await
                    == json!(true) =>
            {
                let element = c.active_element().await.unwrap();
                element.send_keys(key(answered)).await.unwrap();
                answered += 1;
                wait_for(
                    c,
                    "!document.querySelector('.approval-card .approve:not([disabled])')",
                    Duration::from_secs(30),
                )
                .await;
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_in_the_app() {
    let home = tempfile::tempdir().unwrap();
    let settings_dir = home.path().join("data/app.companion.desktop");
    std::fs::create_dir_all(&settings_dir).unwrap();
    let settings = json!({"settings": {"temperature": 0.0, "maxTokens": 48, "contextSize": 2048}});
    std::fs::write(settings_dir.join("settings.json"), settings.to_string()).unwrap();
    let garden = home.path().join("garden");
    std::fs::create_dir_all(&garden).unwrap();
    std::fs::write(
        garden.join("tomatoes.txt"),
        "Tomatoes need full sun and deep watering twice a week.\nStake them when they reach knee height.\n",
    )
    .unwrap();
    std::fs::write(
        garden.join("roses.txt"),
        "Prune roses in late winter, just above an outward bud.\n",
    )
    .unwrap();
    std::fs::write(
        garden.join("bread.md"),
        "# Bread\nKnead for ten minutes, then let it rise.\n",
    )
    .unwrap();
    // outside the grant: never to be read
    std::fs::write(home.path().join("secret.txt"), "tomatoes password 1234").unwrap();

    let script = json!([
        [
            {"name": "search_files", "arguments": {"query": "tomatoes"}},
            {"name": "read_file", "arguments": {"path": "garden/tomatoes.txt"}}
        ],
        [
            {"name": "add_note", "arguments": {"title": "Tomatoes", "text": "Water them twice a week."}}
        ],
        [
            {"name": "srv/echo", "arguments": {"text": "tomatoes"}}
        ]
    ]);
    // the MCP server the Servers tab adds later (the test server, behaving, with one tool)
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/hostile_server.py");
    let mcp_config =
        json!({"mcpServers": {"srv": {"command": "python3", "args": [server, "echo-only"]}}});
    // a reminder the agent set earlier, due a minute ago
    let reminder = "Call the ryokan about the late check-in";
    {
        let store = memory::Store::open(home.path().join("companion.db"))
            .unwrap()
            .store;
        store
            .add_reminder(reminder, memory::now_ms() - 60_000, None)
            .unwrap();
    }
    let desktop = NotificationService::start(home.path());
    let _driver = start_driver_with(
        home.path(),
        &[
            ("DBUS_SESSION_BUS_ADDRESS", desktop.address.clone()),
            (
                "COMPANION_E2E_PICKED_FOLDER",
                garden.to_string_lossy().into_owned(),
            ),
            ("COMPANION_E2E_SCRIPTED_CALLS", script.to_string()),
        ],
    );
    let c = support::webdriver::launch(Path::new(env!("CARGO_BIN_EXE_companion-app"))).await;
    wait_for(
        &c,
        "document.body.dataset.phase === 'ready'",
        Duration::from_secs(120),
    )
    .await;

    // --- the due reminder: a desktop notification and a notice in the window, once
    let shown = desktop.wait_for(1, Duration::from_secs(30));
    assert_eq!(
        shown
            .iter()
            .map(|n| (n.summary.as_str(), n.body.as_str()))
            .collect::<Vec<_>>(),
        [("Reminder", reminder)],
        "{shown:?}"
    );
    wait_for(
        &c,
        &format!(
            "[...document.querySelectorAll('.notice[data-key^=reminder-]')].some(n => n.textContent.includes({}))",
            json!(reminder)
        ),
        Duration::from_secs(30),
    )
    .await;
    screenshot(&c, "19-reminder").await;

    // --- grant the folder in the Folders panel
    click(&c, "#open-tools").await;
    wait_for(
        &c,
        "!document.querySelector('#tools-panel').hidden && document.querySelector('#add-folder')",
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(
        js(
            &c,
            "return document.querySelectorAll('#folder-list .folder').length"
        )
        .await,
        json!(0),
        "no folder is granted at first"
    );
    click(&c, "#add-folder").await;
    let listed = format!(
        "document.querySelector('#folder-list .folder')?.dataset.path === {}",
        json!(std::fs::canonicalize(&garden).unwrap().to_string_lossy())
    );
    let error = "document.querySelector('#tools-panel .panel-error')";
    wait_for(
        &c,
        &format!("({listed}) || !{error}.hidden"),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(
        js(
            &c,
            &format!("return {error}.hidden ? null : {error}.textContent")
        )
        .await,
        json!(null),
        "the grant was refused"
    );
    wait_for(&c, &listed, Duration::from_secs(10)).await;
    assert_eq!(
        js(
            &c,
            "return document.querySelector('#folder-list .folder').dataset.mode"
        )
        .await,
        json!("read"),
        "a folder is granted read-only unless 'may write' is ticked"
    );
    screenshot(&c, "20-folders").await;
    click(&c, "#tools-panel .close").await;

    // --- Tools on; the agent searches, reads, and answers
    click(&c, "#tools-switch").await;
    assert_eq!(
        js(&c, "return document.querySelector('#tools-switch').checked").await,
        json!(true)
    );
    type_and_send(&c, "Which of my files talks about tomatoes? Summarize it.").await;
    wait_for(
        &c,
        &format!("{LAST_ASSISTANT}?.querySelector('.tool-call[data-tool=search_files]')"),
        Duration::from_secs(120),
    )
    .await;
    wait_reply_done(&c).await;
    let shown = cards(&c).await;
    let first_turn_calls = shown.len();
    eprintln!("first turn's calls: {shown:?}");
    // the scripted two first; after them the model is free, and this base model calls on
    // (greedy, it repeats the pattern) until the step limit: those calls are its own
    let scripted: Vec<(&str, &str)> = shown
        .iter()
        .take(2)
        .map(|(t, s, _)| (t.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        scripted,
        [("search_files", "ok"), ("read_file", "ok")],
        "{shown:?}"
    );
    assert!(
        shown[0].2.contains("1 files contain") && !shown[0].2.contains("secret"),
        "the search found the one file: {shown:?}"
    );
    let all_text = js(&c, &format!("return {LAST_ASSISTANT}.textContent")).await;
    assert!(
        !all_text.as_str().unwrap().contains("password"),
        "nothing outside the grant is read"
    );
    let answer = js(
        &c,
        &format!("return {LAST_ASSISTANT}.querySelector('.message-text').textContent"),
    )
    .await;
    eprintln!("first turn's answer: {answer}");
    assert!(
        !answer.as_str().unwrap().trim().is_empty(),
        "the model answered after the calls"
    );
    // a card opens to the exact arguments
    click(
        &c,
        ".message[data-role=assistant] .tool-call[data-tool=read_file] summary",
    )
    .await;
    let args = js(
        &c,
        &format!(
            "return {LAST_ASSISTANT}.querySelector('.tool-call[data-tool=read_file] .tool-arguments').textContent"
        ),
    )
    .await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(args.as_str().unwrap()).unwrap()["path"],
        json!("garden/tomatoes.txt")
    );
    screenshot(&c, "21-tool-calls").await;

    // --- a write waits for approval with its exact arguments; Escape denies it
    type_and_send(&c, "Note that the tomatoes need water twice a week.").await;
    wait_for(
        &c,
        "document.querySelector('.approval-card')",
        Duration::from_secs(120),
    )
    .await;
    let approval = js(
        &c,
        "const a = document.querySelector('.approval-card'); \
         return [a.dataset.tool, a.querySelector('.tool-arguments').textContent, document.activeElement?.classList.contains('approve')]",
    )
    .await;
    assert_eq!(approval[0], json!("add_note"));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(approval[1].as_str().unwrap()).unwrap(),
        json!({"title": "Tomatoes", "text": "Water them twice a week."}),
        "the approval card shows the exact arguments"
    );
    assert_eq!(
        approval[2],
        json!(true),
        "the approval card has the focus (Enter allows)"
    );
    screenshot(&c, "22-approval").await;
    // Escape denies; the model, free after the scripted call, may ask again: each is denied
    let denied = answer_approvals(&c, "second", |_| ESCAPE).await;
    assert_eq!(
        js(&c, &format!("return {LAST_ASSISTANT}.dataset.status")).await,
        json!("complete"),
        "the second reply ended complete"
    );
    let shown = cards(&c).await;
    eprintln!("second turn's calls: {shown:?}");
    assert_eq!(
        (shown[0].0.as_str(), shown[0].1.as_str()),
        ("add_note", "denied")
    );
    assert_eq!(
        shown.iter().filter(|(_, s, _)| s == "denied").count(),
        denied,
        "every write asked and was declined"
    );
    assert_eq!(
        js(
            &c,
            "return document.querySelectorAll('.approval-card').length"
        )
        .await,
        json!(0)
    );
    // --- nothing was written; the Activity log has every call, the refusal included
    click(&c, "#open-tools").await;
    click(&c, "#tools-panel .tab[data-tab=notes]").await;
    wait_for(
        &c,
        "document.querySelector('#tools-panel').dataset.tab === 'notes' && document.querySelector('#tools-panel .tools-body .empty')",
        Duration::from_secs(10),
    )
    .await;
    click(&c, "#tools-panel .tab[data-tab=activity]").await;
    wait_for(
        &c,
        "document.querySelectorAll('#activity-list .activity').length > 0",
        Duration::from_secs(10),
    )
    .await;
    let log = js(
        &c,
        "return [...document.querySelectorAll('#activity-list .activity')].map(a => [a.dataset.tool, a.dataset.outcome])",
    )
    .await;
    let log: Vec<(String, String)> = serde_json::from_value(log).unwrap();
    assert_eq!(log.len(), first_turn_calls + shown.len(), "{log:?}");
    // newest first: the first turn's scripted search and read are the oldest
    let oldest: Vec<(&str, &str)> = log
        .iter()
        .rev()
        .take(2)
        .map(|(t, o)| (t.as_str(), o.as_str()))
        .collect();
    assert_eq!(
        oldest,
        [("search_files", "ok"), ("read_file", "ok")],
        "{log:?}"
    );
    assert!(
        log.contains(&("add_note".to_string(), "denied".to_string())),
        "{log:?}"
    );
    screenshot(&c, "23-activity").await;

    // --- an MCP server's tool: listed in the Servers tab, asked for on the approval card with
    // its exact arguments (the server does not mark it trusted), run, and in the Activity log
    click(&c, "#tools-panel .tab[data-tab=servers]").await;
    wait_for(
        &c,
        "document.querySelector('#tools-panel .tools-body .empty') && document.querySelector('#mcp-config')",
        Duration::from_secs(10),
    )
    .await;
    // added from JSON in the tab's editor: checked, saved to the data folder, started
    js(
        &c,
        &format!(
            "document.querySelector('#mcp-config').value = {}; return null",
            json!(mcp_config.to_string())
        ),
    )
    .await;
    click(&c, "#save-mcp-config").await;
    wait_for(
        &c,
        "document.querySelector('#server-list .server[data-name=srv][data-state=ready]')",
        Duration::from_secs(30),
    )
    .await;
    let saved = std::fs::read_to_string(settings_dir.join("mcp.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&saved).unwrap(),
        mcp_config
    );
    let listed = js(
        &c,
        "return [...document.querySelectorAll('#server-list .server[data-name=srv] .server-tool')].map(t => t.dataset.tool)",
    )
    .await;
    assert!(
        listed.as_array().unwrap().contains(&json!("srv/echo")),
        "{listed}"
    );
    screenshot(&c, "24-servers").await;
    click(&c, "#tools-panel .close").await;
    type_and_send(&c, "Echo the word tomatoes through the server.").await;
    wait_for(
        &c,
        "document.activeElement?.matches('.approval-card .approve:not([disabled])') ?? false",
        Duration::from_secs(120),
    )
    .await;
    // the scripted call's card shows the server, the tool and the exact arguments
    let card = js(
        &c,
        "const a = document.querySelector('.approval-card'); \
         return [a.dataset.tool, a.querySelector('.tool-arguments').textContent, a.textContent]",
    )
    .await;
    assert_eq!(card[0], json!("srv/echo"));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(card[1].as_str().unwrap()).unwrap(),
        json!({"text": "tomatoes"})
    );
    assert!(
        card[2].as_str().unwrap().contains("MCP server \"srv\""),
        "{card}"
    );
    screenshot(&c, "25-mcp-approval").await;
    // Enter allows the scripted call; the model's own later calls are declined
    answer_approvals(&c, "third", |n| if n == 0 { ENTER } else { ESCAPE }).await;
    let mcp_cards = cards(&c).await;
    eprintln!("third turn's calls: {mcp_cards:?}");
    assert_eq!(
        (
            mcp_cards[0].0.as_str(),
            mcp_cards[0].1.as_str(),
            mcp_cards[0].2.as_str()
        ),
        ("srv/echo", "ok", "tomatoes")
    );
    click(&c, "#open-tools").await;
    click(&c, "#tools-panel .tab[data-tab=activity]").await;
    wait_for(
        &c,
        "document.querySelector('#activity-list .activity[data-tool=\"srv/echo\"][data-outcome=ok]')",
        Duration::from_secs(10),
    )
    .await;
    let log_len = js(
        &c,
        "return document.querySelectorAll('#activity-list .activity').length",
    )
    .await;
    assert_eq!(log_len, json!(log.len() + mcp_cards.len()));
    // revoking asks first, then the folder is gone from the list
    click(&c, "#tools-panel .tab[data-tab=folders]").await;
    wait_for(
        &c,
        "document.querySelector('#folder-list .folder .revoke')",
        Duration::from_secs(10),
    )
    .await;
    click(&c, "#folder-list .folder .revoke").await;
    wait_for(
        &c,
        "!document.querySelector('#confirm-dialog').hidden",
        Duration::from_secs(10),
    )
    .await;
    click(&c, "#confirm-ok").await;
    wait_for(
        &c,
        "!document.querySelector('#folder-list') && document.querySelector('#tools-panel .tools-body .empty')",
        Duration::from_secs(10),
    )
    .await;
    click(&c, "#tools-panel .close").await;
    c.close().await.unwrap();

    // --- after a restart the conversation shows its calls again, Tools still on
    let c = support::webdriver::launch(Path::new(env!("CARGO_BIN_EXE_companion-app"))).await;
    wait_for(
        &c,
        &format!(
            "document.body.dataset.phase === 'ready' && document.querySelectorAll('.tool-call').length === {}",
            log.len() + mcp_cards.len()
        ),
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(
        js(&c, "return document.querySelector('#tools-switch').checked").await,
        json!(true),
        "the switch is kept with the conversation"
    );
    // the reminder was shown before the restart: not again (the watch has looked by now, at
    // start, well before the model finished loading)
    assert_eq!(desktop.shown().len(), 1, "{:?}", desktop.shown());
    assert_eq!(
        js(
            &c,
            "return document.querySelectorAll('.notice[data-key^=reminder-]').length"
        )
        .await,
        json!(0)
    );
    c.close().await.unwrap();
}
