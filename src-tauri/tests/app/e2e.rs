//! End to end on the real app and the real model: the built `companion-app` in WebKitGTK,
//! driven over WebDriver (tauri-driver + WebKitWebDriver) the way a user would: type and watch
//! the reply stream in, stop a reply, create / switch / rename / search / delete
//! conversations, restart the app and find the conversation with its history, paste a picture
//! and see it in the sent message (a model with its vision projector). Screenshots of
//! the main views go to `$CARGO_TARGET_TMPDIR/e2e-screenshots/`. It prints the app's
//! start-to-ready time and the UI's send-to-first-token time with and without a typed draft.
//!
//! Needs a display (CI runs it under `xvfb-run`) and `tauri-driver` (`scripts/setup-app`
//! installs both); without them it fails and says so: it never passes without running.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use serde_json::json;
use support::webdriver::{ENTER, click, js, screenshot, start_driver, wait_for};

async fn launch() -> Client {
    support::webdriver::launch(Path::new(env!("CARGO_BIN_EXE_companion-app"))).await
}

/// How many different colours the PNG `png` holds: one for a blank page, hundreds once text
/// and controls are painted (anti-aliased glyphs alone give dozens).
fn distinct_colours(png: &[u8]) -> usize {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("a PNG screenshot");
    let mut pixels = vec![0; reader.output_buffer_size().expect("a bounded PNG")];
    let frame = reader.next_frame(&mut pixels).expect("the PNG's pixels");
    let channels = frame.color_type.samples();
    pixels[..frame.buffer_size()]
        .chunks_exact(channels)
        .collect::<std::collections::HashSet<_>>()
        .len()
}

/// The window shows the ready app: the composer is laid out on screen and the screenshot is
/// not a blank page.
async fn assert_painted(c: &Client, png: &[u8], what: &str) {
    let composer = js(
        c,
        "const r = document.querySelector('#composer').getBoundingClientRect(); \
         return [r.width, r.height, r.top, window.innerHeight];",
    )
    .await;
    let [width, height, top, window_height] =
        [0, 1, 2, 3].map(|i| composer[i].as_f64().unwrap_or(0.0));
    assert!(
        width > 100.0 && height > 10.0 && top >= 0.0 && top < window_height,
        "{what}: the composer is not on screen: {composer}"
    );
    let colours = distinct_colours(png);
    assert!(
        colours > 32,
        "{what}: the screenshot is blank ({colours} colours)"
    );
}

const LAST_ASSISTANT: &str =
    "[...document.querySelectorAll('.message[data-role=assistant]')].pop()";

/// Type `text` and press Enter; returns whether partial text was seen while it streamed.
async fn send(c: &Client, text: &str) -> bool {
    let composer = c.find(Locator::Css("#composer")).await.unwrap();
    composer.send_keys(text).await.unwrap();
    composer.send_keys(ENTER).await.unwrap();
    let mut saw_partial = false;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let v = js(
            c,
            &format!(
                "const m = {LAST_ASSISTANT}; return m ? [m.dataset.status, m.querySelector('.message-text').textContent] : null;"
            ),
        )
        .await;
        if let Some([status, text]) = v.as_array().map(|a| [a[0].clone(), a[1].clone()]) {
            let streaming = status == json!("streaming");
            if streaming && !text.as_str().unwrap_or("").trim().is_empty() {
                saw_partial = true;
            }
            if !streaming
                && js(c, "return document.querySelector('#stop').hidden").await == json!(true)
            {
                return saw_partial;
            }
        }
        assert!(Instant::now() < deadline, "the reply did not finish");
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
}

/// Records, in the page, when Enter is pressed in the composer and when the first piece of
/// the streaming reply appears.
const FIRST_TOKEN_PROBE: &str = r#"
window.__t = { sent: null, first: null };
if (!window.__probe) {
  window.__probe = true;
  document.addEventListener('keydown', e => {
    if (e.target.id === 'composer' && e.key === 'Enter' && !e.shiftKey) window.__t.sent = performance.now();
  }, true);
  new MutationObserver(() => {
    const t = window.__t;
    if (t.sent === null || t.first !== null) return;
    const m = [...document.querySelectorAll('.message[data-role=assistant]')].pop();
    if (m && m.dataset.status === 'streaming' && m.querySelector('.message-text').textContent.trim()) t.first = performance.now();
  }).observe(document.body, { subtree: true, childList: true, characterData: true });
}
"#;

async fn first_token_ms(c: &Client) -> f64 {
    wait_for(c, "window.__t.first !== null", Duration::from_secs(60)).await;
    js(c, "return window.__t.first - window.__t.sent")
        .await
        .as_f64()
        .unwrap()
}

async fn wait_idle(c: &Client) {
    wait_for(
        c,
        &format!("document.querySelector('#stop').hidden && !({LAST_ASSISTANT}?.dataset.status === 'streaming')"),
        Duration::from_secs(120),
    )
    .await;
}

/// The list entry of conversation `id`.
fn item(id: &str) -> String {
    format!(".conversation-item[data-id='{id}']")
}

/// A JS condition: the element `css` exists and is not hidden.
fn shown(css: &str) -> String {
    format!("document.querySelector(\"{css}\") && !document.querySelector(\"{css}\").hidden")
}

/// A JS condition: a message of the user's containing `text` is on screen.
fn user_message(text: &str) -> String {
    format!(
        "[...document.querySelectorAll('.message[data-role=user]')].some(m => m.textContent.includes({}))",
        json!(text)
    )
}

async fn wait_ready(c: &Client) {
    wait_for(
        c,
        "document.body.dataset.phase === 'ready'",
        Duration::from_secs(60),
    )
    .await;
}

/// The id of the listed conversation whose entry mentions `text`.
async fn listed(c: &Client, text: &str) -> String {
    let script = format!(
        "return [...document.querySelectorAll('.conversation-item')].find(i => i.textContent.includes({}))?.dataset.id",
        json!(text)
    );
    js(c, &script)
        .await
        .as_str()
        .unwrap_or_else(|| panic!("no conversation mentioning {text} is listed"))
        .to_string()
}

/// Click conversation `id` in the list and wait until it is open with `text` on screen.
async fn open(c: &Client, id: &str, text: &str) {
    click(c, &format!("{} .conversation-title", item(id))).await;
    let active = format!(
        "document.querySelector(\"{}\")?.classList.contains('active')",
        item(id)
    );
    wait_for(c, &active, Duration::from_secs(30)).await;
    wait_for(c, &user_message(text), Duration::from_secs(30)).await;
}

const LONG_MESSAGE: &str = "I am planning a week-long trip through the north of Italy in the spring. \
I like museums, small towns, long walks and good food, but I do not like crowds or long drives. \
I will travel by train and stay in three places at most. Which three places would you choose, \
and what would you do on each day?";

/// The model library the app finds at its first launch: two quantizations of one named model
/// (versions 1 and 2, from the family fixtures) and a copy whose tensor data is all 0xFF
/// (NaN weights under a sound header: version 3, which imports and fails its self-check).
struct Library {
    damaged: PathBuf,
}

fn library_with_versions(home: &Path) -> Library {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gemma-family");
    let store = memory::Store::open(home.join("companion.db"))
        .unwrap()
        .store;
    let models_dir = home.join("cache/companion/models");
    let damaged_source = home.join("gemma3-gqa.damaged.gguf");
    let mut bytes = std::fs::read(fixtures.join("gemma3-gqa.q8_0.gguf")).unwrap();
    let data = engine::gguf::reader::read(&bytes)
        .unwrap()
        .tensor_data_offset as usize;
    bytes[data..].fill(0xFF);
    std::fs::write(&damaged_source, bytes).unwrap();
    let mut damaged = None;
    for source in [
        fixtures.join("gemma3-gqa.q4_k_m.gguf"),
        fixtures.join("gemma3-gqa.q8_0.gguf"),
        damaged_source,
    ] {
        let imported =
            chat::models::import_model(&store, &models_dir, &source, None, &mut |_, _| {}).unwrap();
        damaged = Some(PathBuf::from(imported.model.path));
    }
    Library {
        damaged: damaged.unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_app_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    // a user's saved settings: greedy replies of a bounded length, a 2048-token context
    let settings_dir = home.path().join("data/app.companion.desktop");
    std::fs::create_dir_all(&settings_dir).unwrap();
    let settings = json!({"settings": {"temperature": 0.0, "maxTokens": 160, "contextSize": 2048}});
    std::fs::write(settings_dir.join("settings.json"), settings.to_string()).unwrap();
    let library = library_with_versions(home.path());
    let _driver = start_driver(home.path());

    // --- first launch
    let launched = Instant::now();
    let c = launch().await;
    wait_ready(&c).await;
    let start_to_ready = launched.elapsed();
    // the default model is a base model: the new conversation says what that means
    wait_for(
        &c,
        "document.querySelector('.chat-empty .model-notice')?.textContent.includes('base model')",
        Duration::from_secs(10),
    )
    .await;
    let ready = screenshot(&c, "01-ready").await;
    assert_painted(&c, &ready, "the first launch when ready").await;

    // streamed text arrives while the reply is generated
    let saw_partial = send(&c, "What is the capital of France?").await;
    assert!(
        saw_partial,
        "the reply's text appeared only at the end, not streamed"
    );
    let reply = js(
        &c,
        &format!("return {LAST_ASSISTANT}.querySelector('.message-text').textContent"),
    )
    .await;
    assert!(!reply.as_str().unwrap().trim().is_empty());
    assert_eq!(
        js(&c, &format!("return {LAST_ASSISTANT}.dataset.status")).await,
        json!("complete")
    );
    screenshot(&c, "02-chat").await;

    // stop a reply: the partial text stays, marked stopped
    let composer = c.find(Locator::Css("#composer")).await.unwrap();
    composer
        .send_keys("Write a very long story about a dragon who learns to cook.")
        .await
        .unwrap();
    composer.send_keys(ENTER).await.unwrap();
    let streaming = format!(
        "{LAST_ASSISTANT}?.dataset.status === 'streaming' && {LAST_ASSISTANT}.querySelector('.message-text').textContent.trim().length > 0"
    );
    wait_for(&c, &streaming, Duration::from_secs(60)).await;
    click(&c, "#stop").await;
    wait_for(
        &c,
        &format!("{LAST_ASSISTANT}.dataset.status === 'stopped'"),
        Duration::from_secs(30),
    )
    .await;
    wait_for(
        &c,
        "document.querySelector('#stop').hidden",
        Duration::from_secs(10),
    )
    .await;
    screenshot(&c, "03-stopped").await;

    // send-to-first-token in the UI: without a draft (text set at once, then Enter) ...
    js(&c, FIRST_TOKEN_PROBE).await;
    let set_text = format!(
        "const t = document.querySelector('#composer'); t.value = {}; t.focus();",
        json!(LONG_MESSAGE)
    );
    js(&c, &set_text).await;
    c.find(Locator::Css("#composer"))
        .await
        .unwrap()
        .send_keys(ENTER)
        .await
        .unwrap();
    let cold_ms = first_token_ms(&c).await;
    wait_idle(&c).await;
    // ... and with a draft typed first (prefilled while "typing"), then Enter
    js(&c, FIRST_TOKEN_PROBE).await;
    let composer = c.find(Locator::Css("#composer")).await.unwrap();
    composer
        .send_keys(&LONG_MESSAGE.replace("Italy", "Spain"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    composer.send_keys(ENTER).await.unwrap();
    let drafted_ms = first_token_ms(&c).await;
    wait_idle(&c).await;

    // a second conversation, then switch back to the first
    click(&c, "#new-conversation").await;
    wait_for(
        &c,
        "document.querySelectorAll('.message').length === 0",
        Duration::from_secs(30),
    )
    .await;
    send(&c, "Tell me about penguins.").await;
    wait_for(
        &c,
        "document.querySelectorAll('.conversation-item').length === 2",
        Duration::from_secs(10),
    )
    .await;
    let france = listed(&c, "capital of France").await;
    let penguins = listed(&c, "penguins").await;
    open(&c, &france, "capital of France").await;

    // rename: the old title is selected when the field opens, so typing replaces it
    // (WebDriver's `clear` would blur the field, which ends the rename)
    click(&c, &format!("{} .rename", item(&france))).await;
    let input = c.find(Locator::Css("input.rename-input")).await.unwrap();
    input.send_keys(&format!("Geography{ENTER}")).await.unwrap();
    let renamed = format!(
        "document.querySelector(\"{} .conversation-title\")?.textContent.trim() === 'Geography'",
        item(&france)
    );
    wait_for(&c, &renamed, Duration::from_secs(10)).await;

    // search: a result opens its conversation at the message; Escape brings the list back
    let search = c.find(Locator::Css("#search")).await.unwrap();
    search.send_keys("penguins").await.unwrap();
    let result = format!(".search-result[data-conversation-id='{penguins}']");
    wait_for(&c, &shown(&result), Duration::from_secs(10)).await;
    screenshot(&c, "04-search").await;
    click(&c, &result).await;
    wait_for(&c, &user_message("penguins"), Duration::from_secs(30)).await;
    search.send_keys("\u{E00C}").await.unwrap();
    wait_for(&c, &shown("#conversation-list"), Duration::from_secs(5)).await;

    // delete, with confirmation
    click(&c, &format!("{} .delete", item(&penguins))).await;
    wait_for(&c, &shown("#confirm-dialog"), Duration::from_secs(5)).await;
    screenshot(&c, "05-confirm-delete").await;
    click(&c, "#confirm-ok").await;
    let deleted = format!(
        "!document.querySelector(\"{}\") && document.querySelectorAll('.conversation-item').length === 1",
        item(&penguins)
    );
    wait_for(&c, &deleted, Duration::from_secs(10)).await;

    click(&c, "#open-settings").await;
    wait_for(&c, &shown("#settings-panel"), Duration::from_secs(5)).await;
    // the fields show the values in force (the saved settings above), not empty boxes
    wait_for(
        &c,
        "document.querySelector('#settings-panel').dataset.state === 'ready'",
        Duration::from_secs(10),
    )
    .await;
    let fields = js(
        &c,
        "return ['temperature', 'maxTokens', 'contextSize', 'topP'].map(k => document.querySelector('#setting-' + k).value)",
    )
    .await;
    let fields: Vec<f64> = fields
        .as_array()
        .expect("the settings fields")
        .iter()
        .map(|v| v.as_str().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN))
        .collect();
    assert_eq!(fields[0], 0.0, "temperature field: {fields:?}");
    assert_eq!(fields[1], 160.0, "longest-reply field: {fields:?}");
    assert_eq!(fields[2], 2048.0, "context field: {fields:?}");
    assert!(
        fields[3] > 0.0 && fields[3] <= 1.0,
        "top-p field shows the default: {fields:?}"
    );
    screenshot(&c, "06-settings").await;
    c.close().await.unwrap();

    // --- restart: the conversation is there with its history
    let relaunched = Instant::now();
    let c = launch().await;
    wait_ready(&c).await;
    let restart_to_ready = relaunched.elapsed();
    wait_for(
        &c,
        &format!("document.querySelector(\"{}\")", item(&france)),
        Duration::from_secs(10),
    )
    .await;
    open(&c, &france, "capital of France").await;
    let messages = js(&c, "return document.querySelectorAll('.message').length").await;
    assert!(
        messages.as_u64().unwrap() >= 8,
        "the whole history came back: {messages} messages"
    );
    screenshot(&c, "07-after-restart").await;

    // the model panel: the library's two versions of a model, and a third whose weights are
    // damaged; switching to it fails its self-check and the model in use stays
    click(&c, "#open-model").await;
    wait_for(&c, &shown("#model-panel"), Duration::from_secs(5)).await;
    wait_for(
        &c,
        "document.querySelectorAll('#model-list .model-file').length === 4",
        Duration::from_secs(10),
    )
    .await;
    let labels = js(
        &c,
        "return [...document.querySelectorAll('#model-list .model-name > span:first-child')].map(s => s.textContent)",
    )
    .await;
    assert_eq!(
        labels,
        json!([
            "synthetic gemma3-gqa v1",
            "synthetic gemma3-gqa v2",
            "synthetic gemma3-gqa v3",
            "gemma-3-270m-q4_k_m.gguf"
        ]),
        "the library's versions, then the model in use"
    );
    js(
        &c,
        "document.querySelector('#model-list').lastElementChild.scrollIntoView({block: 'end'})",
    )
    .await;
    screenshot(&c, "10-model-versions").await;
    click(
        &c,
        &format!("[data-path=\"{}\"] .use-model", library.damaged.display()),
    )
    .await;
    wait_for(
        &c,
        "document.querySelector('#model-panel .panel-error')?.textContent.includes('stays in use')",
        Duration::from_secs(30),
    )
    .await;
    screenshot(&c, "11-model-self-check-failed").await;
    assert_eq!(
        js(&c, "return document.body.dataset.phase").await,
        json!("ready"),
        "the model in use is still loaded"
    );
    // the damaged version's file is what was imported (its weights were NaN before): Verify
    // says it is intact; then Remove takes it out of the library after the confirmation
    let damaged_row = format!("[data-path=\"{}\"]", library.damaged.display());
    click(&c, &format!("{damaged_row} .verify-model")).await;
    wait_for(
        &c,
        "document.querySelector('#model-panel .panel-message')?.textContent.includes('synthetic gemma3-gqa v3 is intact')",
        Duration::from_secs(30),
    )
    .await;
    click(&c, &format!("{damaged_row} .remove-model")).await;
    wait_for(&c, &shown("#confirm-dialog"), Duration::from_secs(5)).await;
    screenshot(&c, "12-model-remove-confirm").await;
    click(&c, "#confirm-ok").await;
    wait_for(
        &c,
        "document.querySelector('#model-panel .panel-message')?.textContent.startsWith('Removed synthetic gemma3-gqa v3')",
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        js(
            &c,
            "return document.querySelectorAll('#model-list .model-file').length"
        )
        .await,
        json!(3)
    );
    assert!(!library.damaged.exists(), "the library's copy is deleted");
    click(&c, "#model-panel .close").await;

    // the iPhone layout: at 360 px wide nothing overflows and the sidebar is a slide-over
    c.set_window_size(360, 740).await.unwrap();
    wait_for(&c, "window.innerWidth <= 380", Duration::from_secs(10)).await;
    let fits = "document.documentElement.scrollWidth <= window.innerWidth \
        && document.querySelector('#send').getBoundingClientRect().right <= window.innerWidth";
    wait_for(&c, fits, Duration::from_secs(5)).await;
    let sidebar_visible = "(() => { const r = document.querySelector('#new-conversation').getBoundingClientRect(); \
        return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth; })()";
    // the sidebar slides out (a 0.18 s transition, slower on a busy machine) and ends hidden,
    // so that it no longer covers the toggle
    let sidebar_hidden =
        "getComputedStyle(document.querySelector('.sidebar')).visibility === 'hidden'";
    wait_for(&c, sidebar_hidden, Duration::from_secs(5)).await;
    assert_eq!(
        js(&c, &format!("return {sidebar_visible}")).await,
        json!(false),
        "the sidebar hides at 360 px"
    );
    screenshot(&c, "08-narrow").await;
    click(&c, "#toggle-sidebar").await;
    wait_for(&c, sidebar_visible, Duration::from_secs(5)).await;
    screenshot(&c, "09-narrow-sidebar").await;
    c.close().await.unwrap();

    println!(
        "app start to ready: {:.2} s (first launch), {:.2} s (restart)",
        start_to_ready.as_secs_f64(),
        restart_to_ready.as_secs_f64()
    );
    println!(
        "UI send to first token: {cold_ms:.0} ms without a draft, {drafted_ms:.0} ms with a typed draft"
    );
}

/// Pictures in the real webview: the default model with the vision fixture's projector, both
/// imported into the library the app's way (the projector pairs with the model); a picture
/// pasted into the composer waits as a thumbnail, goes with the message, and the sent message
/// shows it, read back from the store through the `picture` command and decoded by WebKit.
#[tokio::test(flavor = "multi_thread")]
async fn a_pasted_picture_is_sent_and_shown_in_the_message() {
    use companion_app::commands::model;
    let home = tempfile::tempdir().unwrap();
    let database = home.path().join("companion.db");
    let models_dir = home.path().join("cache/companion/models");
    std::fs::create_dir_all(&models_dir).unwrap();
    let in_use = models_dir.join("gemma.gguf");
    if std::fs::hard_link(engine::default_model_path(), &in_use).is_err() {
        std::fs::copy(engine::default_model_path(), &in_use).unwrap();
    }
    let vision = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gemma3-vision");
    model::import_file(&in_use, &models_dir, &database, &mut |_, _| {}).unwrap();
    let (_, pairing) = model::import_file(
        &vision.join("gemma3-vision.mmproj-f16.gguf"),
        &models_dir,
        &database,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(pairing, Some(memory::Pairing::Projector));
    let settings_dir = home.path().join("data/app.companion.desktop");
    std::fs::create_dir_all(&settings_dir).unwrap();
    let settings = json!({"settings": {"temperature": 0.0, "maxTokens": 16, "contextSize": 1024,
                                       "modelPath": in_use}});
    std::fs::write(settings_dir.join("settings.json"), settings.to_string()).unwrap();
    let _driver = start_driver(home.path());

    let c = launch().await;
    wait_ready(&c).await;
    // the status poll tells the page that the model reads pictures
    wait_for(
        &c,
        "!document.querySelector('#attach').disabled",
        Duration::from_secs(10),
    )
    .await;

    // a paste of a PNG file into the message box, as the clipboard gives it
    let png = std::fs::read(vision.join("small.png")).unwrap();
    let paste = format!(
        "const bytes = Uint8Array.from(atob({}), c => c.charCodeAt(0)); \
         const file = new File([bytes], 'small.png', {{ type: 'image/png' }}); \
         let data; \
         try {{ data = new DataTransfer(); data.items.add(file); }} \
         catch (e) {{ data = {{ files: [file], items: [], types: ['Files'], getData: () => '' }}; }} \
         const event = new Event('paste', {{ bubbles: true, cancelable: true }}); \
         Object.defineProperty(event, 'clipboardData', {{ value: data }}); \
         document.querySelector('#composer').dispatchEvent(event); \
         return event.defaultPrevented;",
        json!(
            companion_app::commands::pictures::data_url("image/png", &png)
                .split_once(',')
                .unwrap()
                .1
        )
    );
    assert_eq!(js(&c, &paste).await, json!(true), "the paste was taken");
    wait_for(
        &c,
        "document.querySelectorAll('#pending-pictures .pending-picture img').length === 1 \
         && !document.querySelector('#pending-pictures').hidden",
        Duration::from_secs(10),
    )
    .await;
    screenshot(&c, "13-picture-pending").await;

    send(&c, "What is in this picture?").await;
    assert_eq!(
        js(&c, &format!("return {LAST_ASSISTANT}.dataset.status")).await,
        json!("complete")
    );
    assert_eq!(
        js(
            &c,
            "return document.querySelector('#pending-pictures').hidden"
        )
        .await,
        json!(true),
        "the tray is empty once the message is sent"
    );
    // the sent message shows the picture, as WebKit decoded it (small.png is 61 × 97)
    let thumbnail =
        "[...document.querySelectorAll('.message[data-role=user] img.message-picture')]";
    wait_for(
        &c,
        &format!(
            "{thumbnail}.length === 1 && {thumbnail}[0].complete && {thumbnail}[0].naturalWidth === 61"
        ),
        Duration::from_secs(10),
    )
    .await;
    let size = js(
        &c,
        &format!("const r = {thumbnail}[0].getBoundingClientRect(); return [r.width, r.height];"),
    )
    .await;
    let height = size[1].as_f64().unwrap_or(0.0);
    assert!(
        height > 0.0 && height <= 160.0,
        "the thumbnail is laid out, at most 160 px: {size}"
    );
    screenshot(&c, "14-picture-sent").await;
    c.close().await.unwrap();
}
