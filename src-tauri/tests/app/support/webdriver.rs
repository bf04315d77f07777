//! Driving the built app over WebDriver: tauri-driver (which starts WebKitWebDriver and the
//! app) in a process group of its own, a session with the app, and JS run in its page. Shared
//! by the end-to-end tests (tests/app/e2e.rs, agent_e2e.rs) and the streaming benchmark
//! (examples/bench_streaming.rs).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const DRIVER_PORT: u16 = 4444;
/// Where tauri-driver starts WebKitWebDriver (its default `--native-port`).
const NATIVE_DRIVER_PORT: u16 = 4445;
/// The WebDriver key code of Enter.
pub const ENTER: &str = "\u{E007}";

/// tauri-driver (and the WebKitWebDriver and app it starts) in its own process group, ended
/// as a group: killing only the driver would leave the app running. One at a time in this
/// process: the driver's ports are fixed, and the end-to-end tests share one test binary.
pub struct Driver {
    child: Child,
    _turn: MutexGuard<'static, ()>,
}

static ONE_DRIVER_AT_A_TIME: Mutex<()> = Mutex::new(());

impl Drop for Driver {
    fn drop(&mut self) {
        let pgid = self.child.id().to_string();
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{pgid}")])
            .status();
        let _ = self.child.wait();
    }
}

fn tauri_driver() -> PathBuf {
    if let Some(p) = std::env::var_os("TAURI_DRIVER") {
        return p.into();
    }
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|h| h.join("bin/tauri-driver"));
    match cargo_bin {
        Some(p) if p.exists() => p,
        _ => PathBuf::from("tauri-driver"),
    }
}

/// Start tauri-driver with the app's data, settings and caches under `home`, on the default
/// model, with `COMPANION_SEED=7`.
// examples/bench_streaming.rs compiles this file too and starts the driver its own way
#[allow(dead_code)]
pub fn start_driver(home: &Path) -> Driver {
    start_driver_with(home, &[])
}

/// [`start_driver`], with more environment for the app it starts.
pub fn start_driver_with(home: &Path, env: &[(&str, String)]) -> Driver {
    assert!(
        std::env::var_os("DISPLAY").is_some(),
        "no display: run the end-to-end test under xvfb-run (scripts/test does)"
    );
    use std::os::unix::process::CommandExt;
    // a test that failed while holding its turn poisons the lock; the next one may still run
    let turn = ONE_DRIVER_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let model = engine::default_model_path();
    assert!(
        model.exists(),
        "the model is missing: run scripts/fetch-model"
    );
    let child = Command::new(tauri_driver())
        .args(["--port", &DRIVER_PORT.to_string()])
        .process_group(0)
        // the app's data, settings and WebKit's caches in a directory of this test's own
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("COMPANION_MODEL", &model)
        .env("COMPANION_DB", home.join("companion.db"))
        .env("COMPANION_SEED", "7")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .spawn()
        .unwrap_or_else(|e| {
            panic!("tauri-driver cannot start ({e}): run scripts/setup-app, which installs it")
        });
    let driver = Driver { child, _turn: turn };
    // tauri-driver proxies to WebKitWebDriver, which it starts itself: wait for both
    let deadline = Instant::now() + Duration::from_secs(30);
    for port in [DRIVER_PORT, NATIVE_DRIVER_PORT] {
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the WebDriver did not listen on port {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    driver
}

/// A WebDriver session: tauri-driver launches the app at `app` for it.
pub async fn launch(app: &Path) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert("tauri:options".into(), json!({ "application": app }));
    // a loaded machine can be slow to answer the first request: a few tries, then fail
    let mut tries = 0;
    loop {
        let session = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{DRIVER_PORT}"))
            .await;
        match session {
            Ok(client) => return client,
            Err(e) if tries < 4 => {
                tries += 1;
                eprintln!("WebDriver session not started ({e}); trying again");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(e) => panic!("no WebDriver session with the app: {e}"),
        }
    }
}

pub async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.expect(script)
}

/// Poll `condition` (a JS expression) until it is true.
pub async fn wait_for(c: &Client, condition: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let script = format!("return !!({condition});");
    loop {
        if js(c, &script).await == json!(true) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for: {condition}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Save a screenshot of the window as `$CARGO_TARGET_TMPDIR/e2e-screenshots/NAME.png`.
#[allow(dead_code)]
pub async fn screenshot(c: &Client, name: &str) -> Vec<u8> {
    // integration tests have cargo's target tmpdir; an example including this module does not
    let dir = option_env!("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join("e2e-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    // WebDriver's screenshot is the last frame WebKit drew, which on a busy machine can be from
    // before the last change the test waited for: wait for two frames to be drawn first
    c.execute_async(
        "const done = arguments[arguments.length - 1]; \
         requestAnimationFrame(() => requestAnimationFrame(() => done(true)));",
        vec![],
    )
    .await
    .expect("two animation frames");
    let png = c.screenshot().await.expect("a screenshot");
    std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
    png
}

/// Click the element, scrolled into view first: WebKitWebDriver refuses a click on an element
/// below the fold of a scrolling panel (the settings) rather than scrolling to it.
#[allow(dead_code)]
pub async fn click(c: &Client, css: &str) {
    let element = c
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"));
    let arg = serde_json::to_value(&element).expect("an element reference");
    c.execute("arguments[0].scrollIntoView({block: 'center'});", vec![arg])
        .await
        .unwrap_or_else(|e| panic!("scroll to {css}: {e}"));
    element
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}
