//! The app's side of the iOS bridge (src/mobile_bridge.rs), driven by the mobile plugin's fake
//! OS (mobile/src/desktop.rs, feature `fake-os`), which sends the events the Swift side sends,
//! through the same dispatcher, to the app on Tauri's mock runtime with the real model:
//! entering the background snapshots and flushes (and stops a streaming reply, kept as
//! partial and announced on return), a memory warning drops the draft and shrinks the context
//! with a notice, a thermal notification changes the governor's state, a revoked bookmark is
//! refused, and the agent's reminders also reach the platform's Reminders.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use companion_app::commands::{agent as agent_cmd, app, chat as chat_cmd, conversations};
use companion_app::mobile_bridge::STOPPED_IN_BACKGROUND;
use companion_app::shared::Phase;
use companion_app::{AppConfig, AppState};
use companion_mobile::{DeviceThermalState, MobileEvent, MobileExt};
use serde_json::{Value, json};
use tauri::ipc::{Channel, InvokeResponseBody};
use tauri::test::{MockRuntime, mock_builder, mock_context, noop_assets};
use tauri::{App, Manager};

struct TestApp {
    app: App<MockRuntime>,
    dir: tempfile::TempDir,
}

fn start(settings: Value) -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    let mut s = json!({"temperature": 0.0, "maxTokens": 24, "contextSize": 1024, "threads": 2});
    for (k, v) in settings.as_object().unwrap() {
        s[k] = v.clone();
    }
    std::fs::write(
        dir.path().join("settings.json"),
        json!({ "settings": s }).to_string(),
    )
    .unwrap();
    let config = AppConfig {
        database: dir.path().join("companion.db"),
        settings_file: dir.path().join("settings.json"),
        models_dir: dir.path().join("models"),
    };
    let mut app = companion_app::builder(mock_builder(), config)
        .build(mock_context(noop_assets()))
        .expect("the app builds on the mock runtime");
    #[allow(deprecated)]
    app.run_iteration(|_, _| {});
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = app::app_state(app.state::<AppState>());
        if s.phase != Phase::Loading {
            assert_eq!(s.phase, Phase::Ready, "{:?}", s.error);
            break;
        }
        assert!(Instant::now() < deadline, "the model did not load");
        std::thread::sleep(Duration::from_millis(50));
    }
    TestApp { app, dir }
}

fn ignore<T: serde::Serialize + Clone>() -> Channel<T> {
    Channel::new(|_| Ok(()))
}

fn notices(app: &App<MockRuntime>) -> Vec<String> {
    app::app_state(app.state::<AppState>()).notices
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn entering_the_background_stops_the_reply_snapshots_and_flushes() {
    let t = start(json!({"maxTokens": 400}));
    let state = t.app.state::<AppState>();
    conversations::create_conversation(state.clone())
        .await
        .unwrap();
    let opened = state.shared.open().unwrap();

    // a reply that streams until something stops it
    let (first_piece, got_first) = mpsc::channel();
    let channel = Channel::new(move |body: InvokeResponseBody| {
        if let InvokeResponseBody::Json(s) = body {
            let v: Value = serde_json::from_str(&s).unwrap();
            if v["event"] == "text" {
                let _ = first_piece.send(());
            }
        }
        Ok(())
    });
    let handle = t.app.handle().clone();
    let reply = tokio::spawn(async move {
        chat_cmd::send_message(
            handle.state::<AppState>(),
            "Write a long story about a lighthouse keeper.".into(),
            None,
            None,
            channel,
        )
        .await
    });
    got_first
        .recv_timeout(Duration::from_secs(60))
        .expect("the reply started");

    // iOS: the user went home; Swift asked for background time under task 7
    let fake = t.app.mobile().fake_os();
    fake.send(MobileEvent::DidEnterBackground { task: Some(7) });

    let reply = reply.await.unwrap().unwrap();
    assert_eq!(
        reply.status,
        memory::MessageStatus::Stopped,
        "kept as partial"
    );
    let tokens = reply.stats.as_ref().unwrap().generated_tokens;
    assert!(tokens < 400, "stopped, not finished ({tokens} tokens)");
    assert_eq!(
        fake.ended_background_tasks(),
        vec![7],
        "the background time given back once the work was done"
    );
    // the log is folded into the database file (before anything here opens the database)
    let wal = t.dir.path().join("companion.db-wal");
    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(wal_len, 0, "every write is in the database file");
    // and the snapshot is in the store
    let key = state
        .worker
        .call(|w| Ok(w.manager()?.snapshot_key()?))
        .await
        .unwrap();
    let store = memory::Store::open(t.dir.path().join("companion.db"))
        .unwrap()
        .store;
    assert!(
        store.load_snapshot(&opened, &key).unwrap().is_some(),
        "the conversation's KV cache was snapshotted"
    );
    assert!(
        !notices(&t.app).iter().any(|n| n == STOPPED_IN_BACKGROUND),
        "nothing said while away"
    );

    // back: the user hears what happened to the reply, once
    fake.send(MobileEvent::WillEnterForeground);
    let said = notices(&t.app);
    assert!(said.iter().any(|n| n == STOPPED_IN_BACKGROUND), "{said:?}");
    fake.send(MobileEvent::WillEnterForeground);
    assert!(!notices(&t.app).iter().any(|n| n == STOPPED_IN_BACKGROUND));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_memory_warning_drops_the_draft_shrinks_the_context_and_says_so() {
    let t = start(json!({"contextSize": 4096}));
    let state = t.app.state::<AppState>();
    conversations::create_conversation(state.clone())
        .await
        .unwrap();
    chat_cmd::send_message(state.clone(), "Hello there.".into(), None, None, ignore())
        .await
        .unwrap();
    let engine = state.shared.engine().unwrap();
    assert_eq!(engine.context(), 4096);
    let committed = engine.session_tokens().unwrap().len();

    // the user types; the engine prefills the draft
    chat_cmd::set_draft(
        state.clone(),
        "And what about the weather tomorrow in the mountains".into(),
    )
    .await
    .unwrap();
    wait_until("the draft is prefilled", || {
        engine.session_tokens().unwrap().len() > committed + 5
    });

    // iOS: a memory warning, and almost nothing left to allocate
    t.app.mobile().fake_os().send(MobileEvent::MemoryWarning {
        available_bytes: Some(1 << 20),
    });
    wait_until("the context is lowered", || engine.context() < 4096);
    let context = engine.context();
    assert_eq!(
        context,
        engine::memory_guard::MIN_USEFUL_CONTEXT,
        "1 MiB leaves room for the smallest useful context only"
    );
    // what stays is the conversation and the empty user turn the draft was typed into
    let history = state
        .worker
        .call(|w| Ok(w.manager()?.history()?))
        .await
        .unwrap();
    let without_draft = engine
        .tokenizer()
        .encode_open_user_turn(&history, "")
        .unwrap();
    let kept = engine.session_tokens().unwrap();
    assert!(
        kept.len() <= without_draft.len() && without_draft.starts_with(&kept),
        "the draft's prefill is gone ({} tokens kept, {} without the draft)",
        kept.len(),
        without_draft.len()
    );
    assert!(kept.len() >= committed, "the conversation itself is kept");
    wait_until("the user is told", || {
        notices(&t.app)
            .iter()
            .any(|n| n.contains(&format!("now {context} tokens (was 4096)")))
    });

    // the conversation goes on in the smaller context
    let reply = chat_cmd::send_message(state.clone(), "Thank you.".into(), None, None, ignore())
        .await
        .unwrap();
    assert_eq!(reply.status, memory::MessageStatus::Complete);
    assert!(engine.session_tokens().unwrap().len() <= context);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_thermal_notification_sets_the_governor_s_state_at_once() {
    // the OS's own reading here (Linux, no thermal zone) is unknown: cooler than serious, it
    // would be obeyed only after the 4 s hold, so what the test sees is the notification
    let t = start(json!({}));
    let engine = t.app.state::<AppState>().shared.engine().unwrap();
    let fake = t.app.mobile().fake_os();
    fake.send(MobileEvent::ThermalStateChanged {
        state: DeviceThermalState::Serious,
    });
    wait_until("the engine obeys serious", || {
        engine.thermal_state() == engine::ThermalState::Serious
    });
    assert!(
        engine.background_paused(),
        "background work waits when serious"
    );
    fake.send(MobileEvent::ThermalStateChanged {
        state: DeviceThermalState::Critical,
    });
    wait_until("the engine obeys critical", || {
        engine.thermal_state() == engine::ThermalState::Critical
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_bookmark_is_refused_and_reminders_reach_the_platform() {
    let t = start(json!({}));
    let state = t.app.state::<AppState>();
    let fake = t.app.mobile().fake_os();
    let garden = t.dir.path().join("garden");
    std::fs::create_dir(&garden).unwrap();
    std::fs::write(garden.join("tomatoes.txt"), "Water tomatoes twice a week.").unwrap();
    let garden = garden.canonicalize().unwrap();
    // and a folder granted on the desktop way, which stays
    let notes = t.dir.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    state
        .with_store(|s| {
            Ok(s.grant_folder(
                &notes.canonicalize().unwrap().to_string_lossy(),
                memory::GrantMode::Read,
            )?)
        })
        .unwrap();
    // picked in iOS's document picker: kept with its bookmark
    let bookmark = fake.bookmark(&garden);
    state
        .with_store(|s| {
            Ok(s.grant_folder_with(
                &garden.to_string_lossy(),
                memory::GrantMode::Read,
                Some(&bookmark),
            )?)
        })
        .unwrap();
    let tools = state.shared.platform_tools();
    let store = memory::Store::open(t.dir.path().join("companion.db"))
        .unwrap()
        .store;
    let file = garden.join("tomatoes.txt");

    let (sandbox, unavailable) =
        chat::tools::sandbox_with(&store, &[], tools.bookmarks.as_deref()).unwrap();
    assert!(unavailable.is_empty());
    sandbox
        .locate(&file.to_string_lossy())
        .expect("reachable while granted");
    let folders = agent_cmd::list_folders(state.clone()).await.unwrap();
    assert!(folders.iter().all(|f| f.available));

    // the user revokes Companion's access in the Files app
    fake.revoke(&garden);
    let (sandbox, unavailable) =
        chat::tools::sandbox_with(&store, &[], tools.bookmarks.as_deref()).unwrap();
    assert_eq!(unavailable.len(), 1);
    assert!(
        unavailable[0]
            .reason
            .contains("no longer lets Companion open"),
        "{:?}",
        unavailable[0]
    );
    let refused = sandbox.locate(&file.to_string_lossy()).unwrap_err();
    assert_eq!(refused.code(), "outside_grants", "{refused}");
    let folders = agent_cmd::list_folders(state.clone()).await.unwrap();
    let shown = folders
        .iter()
        .find(|f| f.path == garden.to_string_lossy())
        .unwrap();
    assert!(!shown.available);
    assert!(shown.unavailable_reason.is_some());
    assert!(
        folders.iter().filter(|f| f.available).count() == 1,
        "the other grant stays"
    );

    // a reminder the agent creates goes to Reminders too
    let host = chat::tools::StoreHost {
        store: &store,
        platform_reminders: tools
            .reminders
            .as_deref()
            .map(|r| r as &dyn chat::tools::PlatformReminders),
    };
    let due = memory::now_ms() + 3_600_000;
    agent::ToolHost::create_reminder(&host, &None, "Call the ryokan", due).unwrap();
    assert_eq!(fake.reminders(), vec![("Call the ryokan".to_string(), due)]);
    let kept = store.reminders(false, 10).unwrap();
    assert_eq!(kept[0].external_id.as_deref(), Some("fake-reminder-1"));

    // refused access: kept in Companion all the same
    fake.deny_reminders();
    agent::ToolHost::create_reminder(&host, &None, "Water the plants", due).unwrap();
    assert_eq!(fake.reminders().len(), 1);
    assert_eq!(store.reminders(false, 10).unwrap().len(), 2);
}
