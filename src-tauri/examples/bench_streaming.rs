//! The app's streaming rate against the CLI's, side by side in one run (issue 21: the app's
//! decode rate within 10% of the CLI's on the same machine). Run it with `scripts/bench-app`,
//! which builds it and gives it a virtual display.
//!
//! Each round sends the same message in a new conversation of the real app (WebKitGTK, driven
//! over WebDriver like the end-to-end test) and then to `companion generate --json`, with the
//! same settings: greedy, no repetition penalty, the same reply length and context. For the app
//! it reports two rates:
//! - **engine**: the decode rate the app's engine measured (the reply's stats), which includes
//!   whatever the webview's work took from the engine's cores;
//! - **seen**: what a user sees, in the page: the tokens after the first over the time from the
//!   first painted text to the final message on screen.
//!
//! While a reply streams the benchmark does not poll the page more than twice a second (the
//! end-to-end test polls every 15 ms, and that alone slows the reply down on two cores): the
//! page's own clock (`performance.now()` in a MutationObserver) times it.
//!
//!   bench_streaming [--rounds N] [--tokens N] [--message TEXT]
//!
//! To find where the time goes, `BENCH_EXTRA_JS` is run in the page before each message (e.g.
//! `document.querySelector('#messages').style.display='none'` takes rendering out).

#[path = "../tests/support/webdriver.rs"]
mod webdriver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use fantoccini::{Client, Locator};
use serde_json::{Value, json};
use webdriver::{ENTER, js, start_driver, wait_for};

const CONTEXT: usize = 2048;
const DEFAULT_MESSAGE: &str = "Tell me a long story about a lighthouse keeper and the sea.";

/// Records, in the page, when the streaming reply first shows text and when the finished reply
/// (with its stats) replaces it. Installed once; `window.__b` is reset before each message.
const PROBE: &str = r#"
window.__b = { first: null, done: null, rate: null, tokens: null };
if (!window.__benchProbe) {
  window.__benchProbe = true;
  new MutationObserver(() => {
    const b = window.__b;
    if (b.done !== null) return;
    const m = [...document.querySelectorAll('.message[data-role=assistant]')].pop();
    if (!m) return;
    if (m.dataset.status === 'streaming') {
      if (b.first === null && m.querySelector('.message-text').textContent.trim()) b.first = performance.now();
      return;
    }
    const stats = m.querySelector('.stats');
    if (b.first !== null && stats) {
      b.done = performance.now();
      b.rate = Number(stats.dataset.tokensPerSecond);
      b.tokens = Number(stats.dataset.generatedTokens);
    }
  }).observe(document.body, { subtree: true, childList: true, characterData: true });
}
"#;

struct Options {
    rounds: usize,
    tokens: usize,
    message: String,
}

fn options() -> Result<Options> {
    let mut o = Options {
        rounds: 3,
        tokens: 256,
        message: DEFAULT_MESSAGE.into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--rounds" => o.rounds = value()?.parse()?,
            "--tokens" => o.tokens = value()?.parse()?,
            "--message" => o.message = value()?,
            other => {
                bail!("unknown option {other}; see the comment at the top of bench_streaming.rs")
            }
        }
    }
    if o.rounds == 0 || o.tokens < 16 {
        bail!("--rounds must be at least 1 and --tokens at least 16");
    }
    Ok(o)
}

/// The built binaries next to this example (target/release/examples/ → target/release/).
fn sibling(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .context("the example's folder")?;
    let path = dir.join(name);
    if !path.is_file() {
        bail!("{} is missing: scripts/bench-app builds it", path.display());
    }
    Ok(path)
}

struct Round {
    engine: f64,
    seen: f64,
    tokens: u64,
}

async fn app_round(c: &Client, message: &str) -> Result<Round> {
    c.find(Locator::Css("#new-conversation"))
        .await?
        .click()
        .await?;
    wait_for(
        c,
        "document.querySelector('.chat-empty') && document.querySelector('#stop').hidden",
        Duration::from_secs(30),
    )
    .await;
    js(c, PROBE).await;
    if let Ok(extra) = std::env::var("BENCH_EXTRA_JS") {
        js(c, &extra).await;
    }
    let composer = c.find(Locator::Css("#composer")).await?;
    composer.send_keys(message).await?;
    composer.send_keys(ENTER).await?;
    // twice a second: the page times the reply itself
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let b = js(c, "return window.__b.done !== null ? window.__b : null").await;
        if !b.is_null() {
            let f = |k: &str| b[k].as_f64().unwrap_or(f64::NAN);
            let tokens = f("tokens") as u64;
            let seconds = (f("done") - f("first")) / 1000.0;
            return Ok(Round {
                engine: f("rate"),
                seen: (tokens.saturating_sub(1)) as f64 / seconds,
                tokens,
            });
        }
        if std::time::Instant::now() > deadline {
            bail!("the app's reply did not finish in 10 minutes");
        }
    }
}

fn cli_round(companion: &Path, o: &Options) -> Result<Round> {
    let out = Command::new(companion)
        .args([
            "generate",
            "--json",
            "--temperature",
            "0",
            "--repeat-penalty",
            "1",
        ])
        .args(["--max-tokens", &o.tokens.to_string()])
        .args(["--context", &CONTEXT.to_string()])
        .arg(&o.message)
        .output()
        .context("companion generate")?;
    if !out.status.success() {
        bail!(
            "companion generate failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: Value = serde_json::from_slice(&out.stdout)?;
    let rate = v["timings"]["decodeTokensPerSecond"]
        .as_f64()
        .unwrap_or(f64::NAN);
    Ok(Round {
        engine: rate,
        seen: rate,
        tokens: v["timings"]["generatedTokens"].as_u64().unwrap_or(0),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let o = options()?;
    let app = sibling("companion-app")?;
    let companion = sibling("companion")?;
    let home = tempfile::tempdir()?;
    // the app's saved settings, the same as the CLI's flags
    let settings_dir = home.path().join("data/app.companion.desktop");
    std::fs::create_dir_all(&settings_dir)?;
    let settings = json!({"settings": {
        "temperature": 0.0, "repetitionPenalty": 1.0,
        "maxTokens": o.tokens, "contextSize": CONTEXT,
    }});
    std::fs::write(settings_dir.join("settings.json"), settings.to_string())?;
    let _driver = start_driver(home.path());
    let c = webdriver::launch(&app).await;
    wait_for(
        &c,
        "document.body.dataset.phase === 'ready'",
        Duration::from_secs(120),
    )
    .await;

    println!(
        "streaming {} tokens, greedy, context {CONTEXT}, {} alternating rounds (app, then CLI)",
        o.tokens, o.rounds
    );
    println!("round  app engine  app seen  tokens  |  CLI decode  tokens");
    let (mut engine, mut seen, mut cli) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=o.rounds {
        let a = app_round(&c, &o.message).await?;
        let b = cli_round(&companion, &o)?;
        println!(
            "{round:>5}  {:>10.1}  {:>8.1}  {:>6}  |  {:>10.1}  {:>6}",
            a.engine, a.seen, a.tokens, b.engine, b.tokens
        );
        if a.tokens < 16 || b.tokens < 16 {
            bail!(
                "a reply ended after fewer than 16 tokens: too short to time; try another --message"
            );
        }
        engine.push(a.engine);
        seen.push(a.seen);
        cli.push(b.engine);
    }
    let _ = c.close().await;
    let (engine, seen, cli) = (median(engine), median(seen), median(cli));
    println!(
        "median tok/s: app engine {engine:.1}, app seen {seen:.1}, CLI {cli:.1}; app seen / CLI = {:.2} (target >= 0.90), app engine / CLI = {:.2}",
        seen / cli,
        engine / cli
    );
    Ok(())
}
