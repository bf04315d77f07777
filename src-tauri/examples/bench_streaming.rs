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
//! Each round also shows the share of CPU time the virtual machine's host took ("steal", from
//! /proc/stat) while it ran, and its own app-seen / CLI ratio: on a shared host the rates can
//! halve from one minute to the next, and the median of the rounds' own ratios is the figure
//! that survives it; rounds with very different steal say little.
//!
//! "UI CPU" is what the interface itself cost while the reply streamed, in percent of one core
//! (the web process, Xvfb, the app's threads other than the engine's; Linux /proc): a figure
//! that does not move with steal. On two cores it is roughly the share of the engine's time that
//! the interface takes away.
//!
//! While a reply streams the benchmark does not poll the page more than twice a second (the
//! end-to-end test polls every 15 ms, and that alone slows the reply down on two cores): the
//! page's own clock (`performance.now()` in a MutationObserver) times it.
//!
//!   bench_streaming [--rounds N] [--tokens N] [--message TEXT]
//!
//! To find where the time goes, `BENCH_EXTRA_JS` is run in the page before each message (e.g.
//! `document.querySelector('#messages').style.display='none'` takes rendering out).

#[path = "../tests/app/support/webdriver.rs"]
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
    /// CPU the user interface took while the reply streamed, in percent of one core: the web
    /// process, the X server and the app's threads other than the engine's.
    ui_cpu: Option<f64>,
}

/// CPU ticks so far (Linux /proc): (user interface, engine). The engine is the app's threads
/// the engine names (`companion-compu*` workers, `companion-engin*`); the user interface is
/// every other thread of the app, the web processes and Xvfb. Unlike rates, these do not move
/// with the host's steal: they say what the interface itself costs.
fn cpu_ticks() -> Option<(u64, u64)> {
    fn ticks(stat: &str) -> Option<(String, u64)> {
        let (head, rest) = stat.rsplit_once(')')?;
        let comm = head.split_once('(')?.1.to_string();
        let f: Vec<&str> = rest.split_whitespace().collect();
        // after the name: state is field 3, utime 14 and stime 15 of proc(5)
        Some((
            comm,
            f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
        ))
    }
    let (mut ui, mut engine) = (0, 0);
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((comm, total)) = ticks(&stat) else {
            continue;
        };
        match comm.as_str() {
            "Xvfb" | "WebKitWebProces" | "WebKitNetworkPr" => ui += total,
            "companion-app" => {
                let mut own = 0;
                for task in std::fs::read_dir(entry.path().join("task")).ok()?.flatten() {
                    let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
                        continue;
                    };
                    if let Some((name, t)) = ticks(&stat)
                        && (name.starts_with("companion-compu")
                            || name.starts_with("companion-engin"))
                    {
                        own += t;
                    }
                }
                engine += own;
                ui += total.saturating_sub(own);
            }
            _ => {}
        }
    }
    Some((ui, engine))
}

/// Ticks per second of `cpu_ticks` (sysconf CLK_TCK, through getconf; 100 where unknown).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
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
    let started = (std::time::Instant::now(), cpu_ticks());
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
            let ui_cpu = match (started.1, cpu_ticks()) {
                (Some((ui0, _)), Some((ui1, _))) => Some(
                    100.0 * (ui1 - ui0) as f64 / clock_ticks() / started.0.elapsed().as_secs_f64(),
                ),
                _ => None,
            };
            return Ok(Round {
                engine: f("rate"),
                seen: (tokens.saturating_sub(1)) as f64 / seconds,
                tokens,
                ui_cpu,
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
        ui_cpu: None,
    })
}

/// The CPU time counters of /proc/stat's first line: (steal, all). A virtual machine's host
/// takes "steal" time from it; where it takes a lot, and unevenly, rates move by twofold from one
/// round to the next, and only rounds that ran alike can be compared (elsewhere: none).
fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    Some((*fields.get(7)?, fields.iter().sum()))
}

/// Percent of the CPU time the host took between two readings.
fn steal_percent(from: Option<(u64, u64)>, to: Option<(u64, u64)>) -> Option<f64> {
    let ((s0, t0), (s1, t1)) = (from?, to?);
    (t1 > t0).then(|| 100.0 * (s1 - s0) as f64 / (t1 - t0) as f64)
}

fn percent(p: Option<f64>) -> String {
    p.map(|p| format!("{p:.0}%")).unwrap_or_else(|| "-".into())
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
    println!(
        "round  app engine  app seen  tokens  steal  UI CPU  |  CLI decode  tokens  steal  |  seen / CLI"
    );
    let (mut engine, mut seen, mut cli, mut pairs, mut ui) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=o.rounds {
        let t0 = cpu_times();
        let a = app_round(&c, &o.message).await?;
        let t1 = cpu_times();
        let b = cli_round(&companion, &o)?;
        let t2 = cpu_times();
        println!(
            "{round:>5}  {:>10.1}  {:>8.1}  {:>6}  {:>5}  {:>6}  |  {:>10.1}  {:>6}  {:>5}  |  {:>10.2}",
            a.engine,
            a.seen,
            a.tokens,
            percent(steal_percent(t0, t1)),
            percent(a.ui_cpu),
            b.engine,
            b.tokens,
            percent(steal_percent(t1, t2)),
            a.seen / b.engine
        );
        pairs.push(a.seen / b.engine);
        ui.extend(a.ui_cpu);
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
        "median tok/s: app engine {engine:.1}, app seen {seen:.1}, CLI {cli:.1}; app seen / CLI = {:.2} (target >= 0.90), app engine / CLI = {:.2}; median of the rounds' own seen / CLI = {:.2}; the interface took {} of a core while replies streamed (median)",
        seen / cli,
        engine / cli,
        median(pairs),
        if ui.is_empty() {
            "-".to_string()
        } else {
            format!("{:.0}%", median(ui))
        }
    );
    Ok(())
}
