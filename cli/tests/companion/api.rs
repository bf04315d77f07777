//! The local API end to end: `companion serve` on the real default model, driven by the
//! official `openai` Python client (`cli/tests/openai_client.py`, installed by scripts/test):
//! models, whole and streamed chat and text completions, a seeded sample twice, a JSON-schema
//! reply, tool calls, a picture as a data URL (read by the vision fixture's projector), saving
//! only when asked, the refusals (401, 400, 403, 404, 413; a picture behind a URL) and a
//! client that disconnects mid-stream. Then, from outside the server: its log shows that the
//! abandoned stream was cancelled (long before its token limit), and the database holds the
//! one exchange that asked to be saved and nothing else. The same for Anthropic's Messages API
//! with the official `anthropic` client (`cli/tests/anthropic_client.py`), on a server of its
//! own.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const TOKEN: &str = "companion-test-token-5f0c2a9e";
const CONTEXT: &str = "2048";

/// A file of the vision fixture (`tests/fixtures/gemma3-vision`).
fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/gemma3-vision")
        .join(name)
}

/// Stops the server however the test ends.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A server on a free port with its own database, and what its first line says: the API's
/// base URL (`…/v1`) and the model's id.
fn start(db: &Path) -> (Server, String, String) {
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_companion"))
            .args(["serve", "--port", "0", "--context", CONTEXT])
            .arg("--db")
            .arg(db)
            // the vision fixture's projector, for the clients' pictures
            .arg("--mmproj")
            .arg(fixture("gemma3-vision.mmproj-f16.gguf"))
            .env("COMPANION_API_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("companion serve starts"),
    );
    let mut first = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // "Companion API on http://127.0.0.1:PORT/v1 (model ID; bearer token from COMPANION_API_TOKEN)"
    let base = first
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address on the first line: {first:?}"))
        .to_string();
    assert!(base.ends_with("/v1"), "{first}");
    assert!(first.contains("from COMPANION_API_TOKEN"), "{first}");
    let model = first
        .split("(model ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no model on the first line: {first:?}"))
        .to_string();
    (server, base, model)
}

/// Runs a client script against the server; its checks, one a line, are printed.
fn run_client(script: &str, base: &str, model: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let out = Command::new("python3")
        .arg(&script)
        .args([base, TOKEN, model, CONTEXT])
        .arg(fixture("square.png"))
        // the scripts import their shared helpers: no __pycache__ left in the source tree
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "the client's checks failed:\n{stdout}"
    );
    stdout
}

/// What the server left behind once stopped: its log shows the one stream the client
/// abandoned after four pieces stopped at the next decode steps (not at its 1500 tokens) and
/// holds none of `request_words`; the database holds exactly the exchange the client asked to
/// save (the script prints its id).
fn check_after(dir: &Path, db: &Path, stdout: &str, request_words: &[&str]) {
    let log = std::fs::read_to_string(dir.join("logs").join("companion.log")).unwrap();
    let cancelled: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("api request") && l.contains("finish=Cancelled"))
        .collect();
    assert_eq!(
        cancelled.len(),
        1,
        "one cancelled request in the log:\n{log}"
    );
    let tokens: usize = cancelled[0]
        .split("completion_tokens=")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no token count in {}", cancelled[0]));
    assert!(
        tokens < 200,
        "the abandoned stream ran on for {tokens} tokens"
    );
    for word in request_words {
        assert!(!log.contains(word), "the log holds request text: {word}");
    }

    let saved = stdout
        .lines()
        .find_map(|l| l.strip_prefix("saved-conversation "))
        .expect("the script names the saved conversation")
        .trim()
        .to_string();
    let store = memory::Store::open(db).unwrap().store;
    let conversations = store.list_conversations(0, 100).unwrap();
    assert_eq!(conversations.len(), 1, "{conversations:?}");
    let saved_one = &conversations[0].conversation;
    assert_eq!(saved_one.id.to_string(), saved);
    let messages = store.messages(&saved_one.id).unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].text, "Remember this exchange.");
}

#[test]
fn the_openai_client_works_against_companion_serve() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("companion.db");
    let (server, base, model) = start(&db);
    let stdout = run_client("openai_client.py", &base, &model);
    drop(server);
    check_after(dir.path(), &db, &stdout, &["Tell me", "lighthouse"]);
}

#[test]
fn the_anthropic_client_works_against_companion_serve() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("companion.db");
    let (server, base, model) = start(&db);
    // Anthropic's client adds `/v1/messages` to the server's root
    let root = base.trim_end_matches("/v1");
    let stdout = run_client("anthropic_client.py", root, &model);
    drop(server);
    check_after(
        dir.path(),
        &db,
        &stdout,
        &["Tell me", "lighthouse", "Oslo", "Sunny"],
    );
}

/// `companion serve | head -1`: whoever started the server stops reading its output. The
/// server goes on serving; writing its banner to a closed pipe must not end it.
#[test]
fn the_server_outlives_a_closed_stdout() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_companion"))
            .args(["serve", "--port", &port.to_string(), "--context", CONTEXT])
            .arg("--db")
            .arg(dir.path().join("companion.db"))
            .env("COMPANION_API_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("companion serve starts"),
    );
    // closed before the server has written anything
    drop(server.0.stdout.take());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            panic!("the server ended when its output was closed: {status}");
        }
        if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            write!(
                c,
                "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut reply = String::new();
            let _ = c.read_to_string(&mut reply);
            if reply.starts_with("HTTP/1.1 200") {
                assert!(reply.contains("\"object\":\"list\""), "{reply}");
                break;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not answer"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // still serving after its banner went nowhere
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(server.0.try_wait().unwrap().is_none(), "the server ended");
}
