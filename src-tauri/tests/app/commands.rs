//! The app's commands on Tauri's mock runtime with the real model: called directly, with test
//! Channels collecting what a webview would receive.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use companion_app::commands::{app, chat as chat_cmd, conversations, settings as settings_cmd};
use companion_app::shared::Phase;
use companion_app::{AppConfig, AppState};
use serde_json::{Value, json};
use tauri::ipc::{Channel, InvokeResponseBody};
use tauri::test::{MockRuntime, mock_builder, mock_context, noop_assets};
use tauri::{App, Manager};

struct TestApp {
    app: App<MockRuntime>,
    _dir: Option<tempfile::TempDir>,
}

fn config(dir: &std::path::Path) -> AppConfig {
    AppConfig {
        database: dir.join("companion.db"),
        settings_file: dir.join("settings.json"),
        models_dir: dir.join("models"),
    }
}

/// Settings as a user would have saved them: a small context and short greedy replies.
fn write_settings(dir: &std::path::Path, extra: Value) {
    let mut s = json!({
        "temperature": 0.0,
        "maxTokens": 24,
        "contextSize": 1024,
        "threads": 2,
    });
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    std::fs::write(
        dir.join("settings.json"),
        json!({ "settings": s }).to_string(),
    )
    .unwrap();
}

fn start(dir: &std::path::Path) -> App<MockRuntime> {
    let mut app = companion_app::builder(mock_builder(), config(dir))
        .build(mock_context(noop_assets()))
        .expect("the app builds on the mock runtime");
    // the setup hook (state, worker, engine load) runs with the event loop's first turn
    #[allow(deprecated)]
    app.run_iteration(|_, _| {});
    app
}

fn wait_ready(app: &App<MockRuntime>) -> companion_app::shared::AppStateView {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = app::app_state(app.state::<AppState>());
        if s.phase != Phase::Loading || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn fresh() -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    write_settings(dir.path(), json!({}));
    let app = start(dir.path());
    let s = wait_ready(&app);
    assert_eq!(s.phase, Phase::Ready, "{:?}", s.error);
    TestApp {
        app,
        _dir: Some(dir),
    }
}

/// A Channel that records every chat event as JSON.
fn recorder() -> (Channel<chat_cmd::ChatEvent>, Arc<Mutex<Vec<Value>>>) {
    recorder_of()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_streams_in_order_and_the_sidebar_sees_it() {
    let t = fresh();
    let state = t.app.state::<AppState>();
    let opened = conversations::create_conversation(state.clone())
        .await
        .unwrap();
    assert!(opened.messages.is_empty());

    let (channel, events) = recorder();
    let reply = chat_cmd::send_message(
        state.clone(),
        "Name three colors of the rainbow.".into(),
        None,
        None,
        channel,
    )
    .await
    .unwrap();
    let events = events.lock().unwrap().clone();
    let k = kinds(&events);
    assert_eq!(k.first().map(String::as_str), Some("user"), "{k:?}");
    assert_eq!(k.last().map(String::as_str), Some("done"), "{k:?}");
    assert!(k.iter().filter(|e| *e == "text").count() >= 2, "{k:?}");
    assert_eq!(events[0]["data"]["seq"], 0);
    assert_eq!(events[0]["data"]["role"], "user");
    let streamed: String = events
        .iter()
        .filter(|e| e["event"] == "text")
        .map(|e| e["data"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, reply.text);
    assert_eq!(reply.seq, 1);
    let stats = reply.stats.as_ref().expect("the reply carries its timings");
    assert!(stats.tokens_per_second > 0.0 && stats.time_to_first_token_ms > 0.0);
    assert!(app::status(state.clone()).last_reply.is_some());

    let list = conversations::list_conversations(state.clone())
        .await
        .unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].title, "Name three colors of the rainbow.");
    assert_eq!(list[0].message_count, 2);

    let hits = conversations::search_conversations(state.clone(), "rainbow".into())
        .await
        .unwrap();
    assert!(
        hits.iter()
            .any(|h| h.seq == Some(0) && h.segments.iter().any(|s| s.hit)),
        "{hits:?}"
    );

    let id = list[0].id.clone();
    let renamed = conversations::rename_conversation(state.clone(), id.clone(), "  Colors ".into())
        .await
        .unwrap();
    assert_eq!(renamed.title, "Colors");
    assert!(
        conversations::rename_conversation(state.clone(), id.clone(), " ".into())
            .await
            .is_err()
    );
    assert!(
        conversations::set_pinned(state.clone(), id.clone(), true)
            .await
            .unwrap()
            .pinned
    );

    // regenerate: the same question, answered again in place (greedy: the same answer)
    let (channel, events) = recorder();
    let again = chat_cmd::regenerate(state.clone(), channel).await.unwrap();
    assert_eq!(again.seq, 1);
    assert_eq!(again.text, reply.text);
    assert_eq!(events.lock().unwrap()[0]["data"]["seq"], 0);

    // edit the question: everything after it goes, the new one is answered
    let question = events.lock().unwrap()[0]["data"]["id"].as_i64().unwrap();
    let (channel, _) = recorder();
    let edited = chat_cmd::edit_message(state.clone(), question, "What is 2 + 2?".into(), channel)
        .await
        .unwrap();
    assert_eq!(edited.seq, 1);
    let reopened = conversations::open_conversation(state.clone(), id.clone())
        .await
        .unwrap();
    assert_eq!(reopened.messages.len(), 2);
    assert_eq!(reopened.messages[0].text, "What is 2 + 2?");

    conversations::delete_conversation(state.clone(), id)
        .await
        .unwrap();
    assert!(
        conversations::list_conversations(state.clone())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(state.shared.open().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_keeps_the_partial_reply_as_stopped() {
    let t = fresh();
    let state = t.app.state::<AppState>();
    let mut s = settings_cmd::get_settings(state.clone());
    s.max_tokens = 400;
    let handle = t.app.handle().clone();
    let applied = settings_cmd::set_settings(handle, state.clone(), s)
        .await
        .unwrap();
    assert!(!applied.reloading, "max tokens apply without a reload");
    conversations::create_conversation(state.clone())
        .await
        .unwrap();

    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let stopper = t.app.handle().clone();
    let channel = Channel::new(move |body: InvokeResponseBody| {
        if let InvokeResponseBody::Json(s) = body {
            let v: Value = serde_json::from_str(&s).unwrap();
            let texts = {
                let mut e = sink.lock().unwrap();
                e.push(v.clone());
                e.iter().filter(|e| e["event"] == "text").count()
            };
            // text arrives in batches (src/text_batch.rs): stop at the first, one token
            if texts == 1 {
                chat_cmd::stop_reply(stopper.state::<AppState>());
            }
        }
        Ok(())
    });
    let reply = chat_cmd::send_message(
        state.clone(),
        "Write a long story about a lighthouse keeper.".into(),
        None,
        None,
        channel,
    )
    .await
    .unwrap();
    assert_eq!(reply.status, memory::MessageStatus::Stopped);
    let n = reply.stats.as_ref().unwrap().generated_tokens;
    assert!(
        (1..20).contains(&n),
        "stopped soon after the first piece, not at {n} tokens"
    );
    let id = state.shared.open().unwrap();
    let stored = conversations::open_conversation(state.clone(), id.0)
        .await
        .unwrap();
    assert_eq!(stored.messages[1].status, memory::MessageStatus::Stopped);
    assert_eq!(stored.messages[1].text, reply.text);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_model_fails_with_what_to_do_and_conversations_stay_listed() {
    let dir = tempfile::tempdir().unwrap();
    write_settings(
        dir.path(),
        json!({ "modelPath": dir.path().join("nope.gguf") }),
    );
    let app = start(dir.path());
    let s = wait_ready(&app);
    assert_eq!(s.phase, Phase::Failed);
    let e = s.error.unwrap();
    assert_eq!(e.code, "model_not_found");
    assert!(
        e.message.contains("import a GGUF file in the model panel"),
        "{}",
        e.message
    );
    let state = app.state::<AppState>();
    assert!(
        conversations::list_conversations(state.clone())
            .await
            .unwrap()
            .is_empty()
    );
    let err = conversations::create_conversation(state.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code, "not_ready");
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_restart_the_conversation_resumes_from_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    write_settings(dir.path(), json!({}));
    let id;
    let first;
    {
        let app = start(dir.path());
        assert_eq!(wait_ready(&app).phase, Phase::Ready);
        let state = app.state::<AppState>();
        id = conversations::create_conversation(state.clone())
            .await
            .unwrap()
            .conversation
            .id;
        let (channel, _) = recorder();
        first = chat_cmd::send_message(state.clone(), "Say hello.".into(), None, None, channel)
            .await
            .unwrap();
        companion_app::on_exit(app.handle());
    }
    let app = start(dir.path());
    assert_eq!(wait_ready(&app).phase, Phase::Ready);
    let state = app.state::<AppState>();
    let list = conversations::list_conversations(state.clone())
        .await
        .unwrap();
    assert_eq!(list.len(), 1);
    let opened = conversations::open_conversation(state.clone(), id)
        .await
        .unwrap();
    assert_eq!(opened.messages.len(), 2);
    assert_eq!(opened.messages[1].text, first.text);
    assert!(
        matches!(opened.resume, chat::Resume::Snapshot { tokens } if tokens > 0),
        "{:?}",
        opened.resume
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_document_is_summarized_into_a_conversation() {
    use companion_app::commands::documents;
    let t = fresh();
    let state = t.app.state::<AppState>();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lighthouse.txt");
    let text = "The lighthouse on the northern cape was built in 1852 from granite quarried nearby. \
For a century its keepers lit the lamp every evening and wound the clockwork that turned the lens.\n\n\
In 1962 the light was automated and the last keeper left. The keeper's house became a small museum \
about the ships that were saved and the ones that were lost on the reef below.\n\n";
    std::fs::write(&file, text.repeat(3)).unwrap();

    // a path the user did not drop (or pick) is refused, whatever it is
    let (channel, _) = recorder_of::<documents::DocumentEvent>();
    let path = file.display().to_string();
    let refused = documents::summarize_dropped(state.clone(), path.clone(), channel)
        .await
        .unwrap_err();
    assert_eq!(refused.code, "not_granted");

    state.grant([file.clone()]);
    let (channel, events) = recorder_of::<documents::DocumentEvent>();
    let done = documents::summarize_dropped(state.clone(), path, channel)
        .await
        .unwrap();
    let events = events.lock().unwrap().clone();
    let k = kinds(&events);
    assert_eq!(k.first().map(String::as_str), Some("started"), "{k:?}");
    assert!(k.iter().any(|e| e == "progress"), "{k:?}");
    assert_eq!(k.last().map(String::as_str), Some("done"), "{k:?}");
    assert_eq!(
        events.last().unwrap()["data"]["conversationId"],
        json!(done.conversation_id)
    );

    // the summary is a conversation the user can go on with
    let opened = conversations::open_conversation(state.clone(), done.conversation_id)
        .await
        .unwrap();
    assert_eq!(opened.conversation.title, "Summary of lighthouse.txt");
    assert_eq!(opened.messages.len(), 2);
    assert!(!opened.messages[1].text.trim().is_empty());
    let (channel, _) = recorder();
    let reply = chat_cmd::send_message(
        state.clone(),
        "When was it automated?".into(),
        None,
        None,
        channel,
    )
    .await
    .unwrap();
    assert_eq!(reply.seq, 3);
}

/// A Channel that records every event as JSON.
fn recorder_of<T: serde::Serialize + Clone>() -> (Channel<T>, Arc<Mutex<Vec<Value>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let channel = Channel::new(move |body: InvokeResponseBody| {
        match body {
            InvokeResponseBody::Json(s) => {
                sink.lock().unwrap().push(serde_json::from_str(&s).unwrap())
            }
            InvokeResponseBody::Raw(_) => panic!("events are JSON"),
        }
        Ok(())
    });
    (channel, events)
}

#[tokio::test(flavor = "multi_thread")]
async fn engine_settings_and_a_model_switch_reload_and_reopen_the_conversation() {
    use companion_app::commands::model;
    let t = fresh();
    let state = t.app.state::<AppState>();
    let id = conversations::create_conversation(state.clone())
        .await
        .unwrap()
        .conversation
        .id;
    let (channel, _) = recorder();
    chat_cmd::send_message(state.clone(), "Hello.".into(), None, None, channel)
        .await
        .unwrap();
    let info = model::model_info(state.clone()).await.unwrap().unwrap();
    assert_eq!(info.sha256, engine::DEFAULT_MODEL_SHA256);
    assert_eq!(info.context, 1024);
    assert_eq!(
        (info.family.as_str(), info.architecture.as_str()),
        ("Gemma 3", "gemma3")
    );
    assert!(
        info.layout
            .starts_with("gemma3, 18 layers (15 sliding, window 512)"),
        "{}",
        info.layout
    );

    // a new context size: the engine reloads in the background and reopens the conversation
    let mut s = settings_cmd::get_settings(state.clone());
    s.context_size = 2048;
    let applied = settings_cmd::set_settings(t.app.handle().clone(), state.clone(), s)
        .await
        .unwrap();
    assert!(applied.reloading);
    assert_eq!(app::app_state(state.clone()).phase, Phase::Loading);
    assert_eq!(wait_ready(&t.app).phase, Phase::Ready);
    assert_eq!(
        model::model_info(state.clone())
            .await
            .unwrap()
            .unwrap()
            .context,
        2048
    );
    assert_eq!(state.shared.open().map(|i| i.0), Some(id.clone()));

    // a model outside the models directory is refused; one inside is switched to
    let outside = state
        .config
        .models_dir
        .parent()
        .unwrap()
        .join("elsewhere.gguf");
    let refused = model::switch_model(
        t.app.handle().clone(),
        state.clone(),
        outside.display().to_string(),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code, "unknown_model");
    std::fs::create_dir_all(&state.config.models_dir).unwrap();
    let copy = state.config.models_dir.join("copy-of-gemma.gguf");
    std::fs::copy(engine::default_model_path(), &copy).unwrap();
    let listed = model::list_models(state.clone()).await.unwrap();
    assert!(
        listed
            .iter()
            .any(|m| m.file_name == "copy-of-gemma.gguf" && !m.current),
        "{listed:?}"
    );
    model::switch_model(
        t.app.handle().clone(),
        state.clone(),
        copy.display().to_string(),
    )
    .await
    .unwrap();
    assert_eq!(wait_ready(&t.app).phase, Phase::Ready);
    let info = model::model_info(state.clone()).await.unwrap().unwrap();
    assert_eq!(info.file_name, "copy-of-gemma.gguf");
    assert!(
        model::list_models(state.clone())
            .await
            .unwrap()
            .iter()
            .any(|m| m.current && m.file_name == "copy-of-gemma.gguf")
    );
    // the same weights, so the conversation's snapshot still fits and it is open again
    assert_eq!(state.shared.open().map(|i| i.0), Some(id));
    let saved = settings_cmd::get_settings(state.clone());
    assert_eq!(saved.model_path.as_deref(), Some(copy.as_path()));

    // a model whose header is sound but whose weights are not numbers fails its self-check:
    // the app stays on the model in use, and says so
    let mut bytes = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/gemma-family/gemma3-gqa.q8_0.gguf"),
    )
    .unwrap();
    let data = engine::gguf::reader::read(&bytes)
        .unwrap()
        .tensor_data_offset as usize;
    bytes[data..].fill(0xFF);
    let damaged = state.config.models_dir.join("damaged.gguf");
    std::fs::write(&damaged, bytes).unwrap();
    let failed = model::switch_model(
        t.app.handle().clone(),
        state.clone(),
        damaged.display().to_string(),
    )
    .await
    .unwrap_err();
    assert_eq!(failed.code, "self_check_failed");
    assert!(
        failed.message.contains("copy-of-gemma.gguf stays in use"),
        "{}",
        failed.message
    );
    assert_eq!(app::app_state(state.clone()).phase, Phase::Ready);
    let saved = settings_cmd::get_settings(state.clone());
    assert_eq!(saved.model_path.as_deref(), Some(copy.as_path()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_library_model_is_verified_and_removed_but_never_the_one_in_use() {
    use companion_app::commands::model;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    std::fs::create_dir_all(&cfg.models_dir).unwrap();
    // the model in use is a model of the library (imported where it lies, so not copied)
    let in_use = cfg.models_dir.join("gemma.gguf");
    std::fs::copy(engine::default_model_path(), &in_use).unwrap();
    model::import_file(&in_use, &cfg.models_dir, &cfg.database, &mut |_, _| {}).unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/gemma-family/gemma2-softcap.q8_0.gguf");
    let (other, _) =
        model::import_file(&fixture, &cfg.models_dir, &cfg.database, &mut |_, _| {}).unwrap();
    write_settings(dir.path(), json!({ "modelPath": in_use }));
    let app = start(dir.path());
    assert_eq!(wait_ready(&app).phase, Phase::Ready);
    let state = app.state::<AppState>();
    let listed = model::list_models(state.clone()).await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");

    // an intact copy verifies, with progress up to its whole size
    let (progress, seen) = recorder_of::<model::ImportProgress>();
    let ok = model::verify_model(state.clone(), other.path.clone(), progress)
        .await
        .unwrap();
    assert!(ok.matches, "{ok:?}");
    assert_eq!(ok.found, other.sha256);
    let size = std::fs::metadata(&other.path).unwrap().len();
    assert_eq!(seen.lock().unwrap().last().unwrap()["done"], json!(size));

    // one byte changed on the disk since the import: found, with both fingerprints
    let mut bytes = std::fs::read(&other.path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&other.path, &bytes).unwrap();
    let (progress, _) = recorder_of::<model::ImportProgress>();
    let damaged = model::verify_model(state.clone(), other.path.clone(), progress)
        .await
        .unwrap();
    assert!(!damaged.matches);
    assert_eq!(damaged.expected, other.sha256);
    assert_ne!(damaged.found, other.sha256);

    // the model in use is refused, and so is a file the library does not know
    let refused = model::remove_model(state.clone(), in_use.display().to_string())
        .await
        .unwrap_err();
    assert_eq!(refused.code, "model_in_use");
    assert!(
        refused.message.contains("switch to another"),
        "{}",
        refused.message
    );
    let unknown = model::remove_model(state.clone(), fixture.display().to_string())
        .await
        .unwrap_err();
    assert_eq!(unknown.code, "unknown_model");
    assert!(in_use.is_file());

    // the other is removed with the library's copy of it
    let removed = model::remove_model(state.clone(), other.path.clone())
        .await
        .unwrap();
    assert!(removed.file_deleted);
    assert!(!std::path::Path::new(&other.path).exists());
    assert!(fixture.is_file(), "the user's own file stays");
    let listed = model::list_models(state.clone()).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].current);
}

/// One HTTP/1.1 request over a plain socket: (status, body).
fn http(port: u16, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("the API accepts");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_local_api_follows_its_switch_and_serves_the_loaded_model() {
    let t = fresh();
    let state = t.app.state::<AppState>();
    let off = settings_cmd::api_status(state.clone());
    assert!(
        !off.running && off.url.is_none() && off.token.is_none(),
        "{off:?}"
    );

    // switched on: it serves the app's model with the token the panel shows
    let port = free_port();
    let mut s = settings_cmd::get_settings(state.clone());
    assert!(!s.api_enabled, "off by default");
    s.api_enabled = true;
    s.api_port = port;
    let applied = settings_cmd::set_settings(t.app.handle().clone(), state.clone(), s.clone())
        .await
        .unwrap();
    assert!(!applied.reloading, "the API needs no reload");
    let on = settings_cmd::api_status(state.clone());
    assert_eq!(
        on.url.as_deref(),
        Some(format!("http://127.0.0.1:{port}/v1").as_str())
    );
    let token = on.token.clone().expect("the token, for the copy button");
    assert!(on.token_file.ends_with("api-token"), "{}", on.token_file);
    let (status, _) = http(port, "GET", "/v1/models", None, "");
    assert_eq!(status, 401);
    let (status, body) = http(port, "GET", "/v1/models", Some(&token), "");
    assert_eq!(status, 200, "{body}");
    let models: Value = serde_json::from_str(&body).unwrap();
    let model = models["data"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(model, "gemma-3-270m-q4_k_m");
    let request = json!({"model": model, "messages": [{"role": "user", "content": "Hi"}],
                         "max_tokens": 3, "temperature": 0});
    let (status, body) = tokio::task::spawn_blocking(move || {
        http(
            port,
            "POST",
            "/v1/chat/completions",
            Some(&token),
            &request.to_string(),
        )
    })
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(reply["usage"]["completion_tokens"], 3, "{body}");
    // nothing was saved: the request did not ask
    assert!(
        conversations::list_conversations(state.clone())
            .await
            .unwrap()
            .is_empty()
    );

    // a port another program holds: said, and the rest of the settings still saved
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let mut busy = s.clone();
    busy.api_port = taken.local_addr().unwrap().port();
    busy.max_tokens = 33;
    let e = settings_cmd::set_settings(t.app.handle().clone(), state.clone(), busy)
        .await
        .unwrap_err();
    assert_eq!(e.code, "api_port", "{e:?}");
    let status = settings_cmd::api_status(state.clone());
    assert!(!status.running && status.problem.is_some(), "{status:?}");
    assert_eq!(settings_cmd::get_settings(state.clone()).max_tokens, 33);

    // switched off: the port is closed
    let mut off = s;
    off.api_enabled = false;
    settings_cmd::set_settings(t.app.handle().clone(), state.clone(), off)
        .await
        .unwrap();
    assert!(!settings_cmd::api_status(state.clone()).running);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "the API still listens after it was switched off"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn vision_fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/gemma3-vision")
        .join(name)
}

/// The default model as a model of the library, in the app's models directory (linked where
/// the file system allows, else copied; imported where it lies, so not copied again).
fn default_model_in_library(cfg: &AppConfig) -> std::path::PathBuf {
    use companion_app::commands::model;
    std::fs::create_dir_all(&cfg.models_dir).unwrap();
    let in_use = cfg.models_dir.join("gemma.gguf");
    if std::fs::hard_link(engine::default_model_path(), &in_use).is_err() {
        std::fs::copy(engine::default_model_path(), &in_use).unwrap();
    }
    model::import_file(&in_use, &cfg.models_dir, &cfg.database, &mut |_, _| {}).unwrap();
    in_use
}

/// The app's pictures on the real default model with the vision fixture's projector: the
/// projector imported in the model panel's way pairs with the model in use and loads at once;
/// a message sent with a picture keeps it (listed by its message, read back by sha256, kept by
/// a regenerate); a picture that is not one, or pictures with tools on, are refused before
/// anything is saved.
#[tokio::test(flavor = "multi_thread")]
async fn a_picture_goes_with_its_message_once_the_projector_is_imported() {
    use companion_app::commands::{model, pictures};
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let in_use = default_model_in_library(&cfg);
    write_settings(dir.path(), json!({ "modelPath": in_use }));
    let app = start(dir.path());
    assert_eq!(wait_ready(&app).phase, Phase::Ready);
    let state = app.state::<AppState>();
    let info = model::model_info(state.clone()).await.unwrap().unwrap();
    assert!(!info.reads_pictures && info.projector.is_none());
    let estimate_without = info.memory_estimate_bytes;
    assert!(!app::status(state.clone()).reads_pictures);

    // the projector is paired with the model in use, as `companion models import` pairs it,
    // and the engine reloads with it
    let (paired_with, pairing) = model::import_file(
        &vision_fixture("gemma3-vision.mmproj-f16.gguf"),
        &cfg.models_dir,
        &cfg.database,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(pairing, Some(memory::Pairing::Projector));
    let view = model::imported_view(
        &state,
        &paired_with,
        pairing,
        &state.settings().model_path(),
    )
    .unwrap();
    assert!(view.paired_projector && view.current && !view.paired_assistant);
    assert_eq!(
        serde_json::to_value(&view).unwrap()["pairedProjector"],
        json!(true)
    );
    assert_eq!(wait_ready(&app).phase, Phase::Ready);
    let info = model::model_info(state.clone()).await.unwrap().unwrap();
    assert!(info.reads_pictures, "the paired projector loaded");
    // the panel names the projector and counts its file and its encoder's working memory
    assert!(
        info.projector
            .as_deref()
            .is_some_and(|p| p.contains("while it reads a picture")),
        "{:?}",
        info.projector
    );
    assert!(info.memory_estimate_bytes > estimate_without);
    assert!(app::status(state.clone()).reads_pictures);

    let picture_bytes = std::fs::read(vision_fixture("small.png")).unwrap();
    let picture = pictures::data_url("image/png", &picture_bytes);
    conversations::create_conversation(state.clone())
        .await
        .unwrap();
    let (channel, events) = recorder();
    let reply = chat_cmd::send_message(
        state.clone(),
        "What is in this picture?".into(),
        None,
        Some(vec![picture.clone()]),
        channel,
    )
    .await
    .unwrap();
    assert_eq!(reply.seq, 1);
    assert!(reply.pictures.is_empty(), "the reply has none");
    let user = events.lock().unwrap()[0].clone();
    assert_eq!(user["event"], "user");
    let sha256 = user["data"]["pictures"][0]["sha256"]
        .as_str()
        .expect("the user's message lists its picture")
        .to_string();
    assert_eq!(user["data"]["pictures"][0]["mimeType"], "image/png");
    assert_eq!(sha256.len(), 64);
    let id = state.shared.open().unwrap();
    let stored = conversations::open_conversation(state.clone(), id.0.clone())
        .await
        .unwrap();
    assert_eq!(stored.messages[0].pictures.len(), 1);
    assert_eq!(stored.messages[0].pictures[0].sha256, sha256);
    // the prompt counted the picture's rows: more than the words alone
    let prompt_tokens = reply.stats.as_ref().unwrap().prompt_tokens;
    assert!(prompt_tokens > 16, "{prompt_tokens} prompt tokens");

    // read back for its thumbnail, by sha256 only
    let shown = pictures::picture(state.clone(), sha256.clone())
        .await
        .unwrap();
    assert_eq!(shown, picture);
    let not_a_sha = pictures::picture(state.clone(), "../companion.db".into())
        .await
        .unwrap_err();
    assert_eq!(not_a_sha.code, "invalid_argument", "{not_a_sha:?}");
    let unknown = pictures::picture(state.clone(), "0".repeat(64))
        .await
        .unwrap_err();
    assert_eq!(unknown.code, "picture_not_found");

    // refused before anything is saved: not a picture; pictures with tools on
    let count = || async {
        conversations::list_conversations(state.clone())
            .await
            .unwrap()[0]
            .message_count
    };
    assert_eq!(count().await, 2);
    let (channel, events) = recorder();
    let bad = chat_cmd::send_message(
        state.clone(),
        "And this?".into(),
        None,
        Some(vec![
            picture.clone(),
            "data:image/png;base64,aGVsbG8=".into(),
        ]),
        channel,
    )
    .await
    .unwrap_err();
    assert_eq!(bad.code, "bad_picture");
    assert!(
        bad.message.starts_with("Picture 2 of 2:"),
        "{}",
        bad.message
    );
    assert!(events.lock().unwrap().is_empty());
    let (channel, _) = recorder();
    let with_tools = chat_cmd::send_message(
        state.clone(),
        "And this?".into(),
        Some(true),
        Some(vec![picture.clone()]),
        channel,
    )
    .await
    .unwrap_err();
    assert_eq!(with_tools.code, "pictures_with_tools");
    assert_eq!(count().await, 2);
    assert!(
        !conversations::list_conversations(state.clone())
            .await
            .unwrap()[0]
            .tools,
        "the refused message did not turn the tools on"
    );

    // a regenerate answers the message with its picture again
    let (channel, _) = recorder();
    let again = chat_cmd::regenerate(state.clone(), channel).await.unwrap();
    assert_eq!(again.seq, 1);
    assert_eq!(again.text, reply.text, "greedy: the same reply");
    let stored = conversations::open_conversation(state.clone(), id.0.clone())
        .await
        .unwrap();
    assert_eq!(stored.messages[0].pictures[0].sha256, sha256);

    // on a model without its projector (the same weights, outside the library) the message
    // cannot be answered again: refused before it and its reply are taken back
    let bare = cfg.models_dir.join("bare-gemma.gguf");
    std::fs::hard_link(&in_use, &bare)
        .or_else(|_| std::fs::copy(&in_use, &bare).map(|_| ()))
        .unwrap();
    model::switch_model(
        app.handle().clone(),
        state.clone(),
        bare.display().to_string(),
    )
    .await
    .unwrap();
    assert_eq!(wait_ready(&app).phase, Phase::Ready);
    assert!(!app::status(state.clone()).reads_pictures);
    let (channel, _) = recorder();
    let refused = chat_cmd::regenerate(state.clone(), channel)
        .await
        .unwrap_err();
    assert_eq!(refused.code, "no_projector");
    let stored = conversations::open_conversation(state.clone(), id.0)
        .await
        .unwrap();
    assert_eq!(stored.messages.len(), 2, "nothing was taken back");
    assert_eq!(stored.messages[0].pictures[0].sha256, sha256);
    assert_eq!(stored.messages[1].text, reply.text);
    companion_app::on_exit(app.handle());
}

/// The default model alone reads no pictures: a message with one is refused with
/// `no_projector`, and nothing is kept (no conversation, no message, no picture file).
#[tokio::test(flavor = "multi_thread")]
async fn a_picture_to_a_model_without_a_projector_is_refused_and_nothing_is_kept() {
    use companion_app::commands::{model, pictures};
    let t = fresh();
    let state = t.app.state::<AppState>();
    let info = model::model_info(state.clone()).await.unwrap().unwrap();
    assert!(!info.reads_pictures);
    assert_eq!(
        serde_json::to_value(&info).unwrap()["readsPictures"],
        json!(false)
    );
    let picture = pictures::data_url(
        "image/png",
        &std::fs::read(vision_fixture("square.png")).unwrap(),
    );
    let (channel, events) = recorder();
    let refused = chat_cmd::send_message(
        state.clone(),
        "What is this?".into(),
        None,
        Some(vec![picture]),
        channel,
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code, "no_projector");
    assert!(
        refused.message.contains("reads no pictures") && refused.message.contains("mmproj"),
        "{}",
        refused.message
    );
    assert!(events.lock().unwrap().is_empty());
    assert!(
        conversations::list_conversations(state.clone())
            .await
            .unwrap()
            .is_empty(),
        "no conversation was created for it"
    );
    let images = state.config.database.with_file_name("companion.db.images");
    assert!(
        std::fs::read_dir(&images).map_or(true, |mut d| d.next().is_none()),
        "no picture file was kept"
    );

    // the same message without its picture is answered as ever
    let (channel, _) = recorder();
    let reply = chat_cmd::send_message(state.clone(), "What is this?".into(), None, None, channel)
        .await
        .unwrap();
    assert_eq!(reply.seq, 1);
}
