//! Sync end to end: two instances of the real app (each with its own database, settings and
//! data, as two devices have) share one sync folder. In the first, a message is sent and the
//! folder is chosen in the settings panel's Sync section; the second chooses the same folder
//! and finds the conversation in its list, with the message, without a restart. The native
//! folder picker answers with the shared folder (`COMPANION_E2E_PICKED_FOLDER`, set by the
//! test, never by the webview). The instances run one after the other: the WebDriver serves
//! one app at a time, and a cloud folder is the same whether the other device is on or off.
//!
//! Needs a display (CI runs it under `xvfb-run`) and `tauri-driver` (`scripts/setup-app`).

use crate::support;

use std::path::Path;
use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::json;
use support::webdriver::{ENTER, click, js, screenshot, start_driver_with, wait_for};

const MESSAGE: &str = "Sync check: the lighthouse keeper's notebook";

async fn launch() -> Client {
    let c = support::webdriver::launch(Path::new(env!("CARGO_BIN_EXE_companion-app"))).await;
    wait_for(
        &c,
        "document.body.dataset.phase === 'ready'",
        Duration::from_secs(60),
    )
    .await;
    c
}

/// Greedy replies of a few tokens: the test is about the conversation, not the reply.
fn short_replies(home: &Path) {
    let dir = home.join("data/app.companion.desktop");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = json!({"settings": {"temperature": 0.0, "maxTokens": 8}});
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
}

/// Open the settings panel and choose the (stand-in) picked folder for sync; wait until a
/// round has run and its line says `expect`.
async fn choose_sync_folder(c: &Client, expect: &str) {
    click(c, "#open-settings").await;
    wait_for(
        c,
        "document.querySelector('#settings-panel').dataset.state === 'ready'",
        Duration::from_secs(10),
    )
    .await;
    wait_for(
        c,
        "document.querySelector('#sync-status').textContent.startsWith('Off.')",
        Duration::from_secs(10),
    )
    .await;
    click(c, "#sync-choose").await;
    wait_for(
        c,
        &format!(
            "document.querySelector('#sync-status').textContent.includes({})",
            json!(expect)
        ),
        Duration::from_secs(30),
    )
    .await;
    let problem = js(c, "return document.querySelector('#sync-error').hidden").await;
    assert_eq!(problem, json!(true), "the round reported a problem");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conversation_written_in_one_app_appears_in_another_sharing_the_folder() {
    let folder = tempfile::tempdir().unwrap();
    let (mac, phone) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = [(
        "COMPANION_E2E_PICKED_FOLDER",
        folder.path().display().to_string(),
    )];

    // --- the first device writes a conversation, then starts syncing
    short_replies(mac.path());
    {
        let _driver = start_driver_with(mac.path(), &env);
        let c = launch().await;
        let composer = c.find(Locator::Css("#composer")).await.unwrap();
        composer.send_keys(MESSAGE).await.unwrap();
        composer.send_keys(ENTER).await.unwrap();
        wait_for(
            &c,
            "document.querySelector('#stop').hidden && ['complete', 'stopped'].includes([...document.querySelectorAll('.message[data-role=assistant]')].pop()?.dataset.status)",
            Duration::from_secs(120),
        )
        .await;
        choose_sync_folder(&c, "No other device has synced through this folder yet.").await;
        screenshot(&c, "sync-settings").await;
        c.close().await.unwrap();
    }
    let written: Vec<_> = walk(&folder.path().join("companion-sync"));
    assert!(
        written.iter().any(|p| p.contains("/seg-")),
        "no segment in the folder: {written:?}"
    );

    // --- the second device has nothing until it syncs through the same folder
    short_replies(phone.path());
    let _driver = start_driver_with(phone.path(), &env);
    let c = launch().await;
    let listed = format!(
        "[...document.querySelectorAll('.conversation-item')].some(i => i.textContent.includes({}))",
        json!("lighthouse keeper")
    );
    assert_eq!(js(&c, &format!("return {listed}")).await, json!(false));
    choose_sync_folder(&c, "1 other device seen.").await;
    click(&c, "#settings-panel .close").await;
    // the list follows the round without a restart
    wait_for(&c, &listed, Duration::from_secs(20)).await;
    let id = js(
        &c,
        "return [...document.querySelectorAll('.conversation-item')].find(i => i.textContent.includes('lighthouse keeper')).dataset.id",
    )
    .await;
    let id = id.as_str().expect("the conversation's id");
    click(
        &c,
        &format!(".conversation-item[data-id=\"{id}\"] .conversation-title"),
    )
    .await;
    wait_for(
        &c,
        &format!(
            "[...document.querySelectorAll('.message[data-role=user]')].some(m => m.textContent.includes({}))",
            json!(MESSAGE)
        ),
        Duration::from_secs(30),
    )
    .await;
    screenshot(&c, "sync-second-device").await;
    // nothing went wrong on the way (the notification plugin's page script once did, at load)
    let error = js(
        &c,
        "const b = document.querySelector('#error-banner'); return b && !b.hidden ? b.textContent : null",
    )
    .await;
    assert_eq!(error, json!(null), "an error banner is shown");
    c.close().await.unwrap();
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out
}
