//! The local API end to end: `companion serve` on the real default model, driven by the
//! official `openai` Python client (`cli/tests/openai_client.py`, installed by scripts/test):
//! models, whole and streamed chat and text completions, a seeded sample twice, a JSON-schema
//! reply, tool calls, saving only when asked, the refusals (401, 400, 403, 404, 413) and a
//! client that disconnects mid-stream. Then, from outside the server: its log shows that the
//! abandoned stream was cancelled (long before its token limit), and the database holds the
//! one exchange that asked to be saved and nothing else.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const TOKEN: &str = "companion-test-token-5f0c2a9e";
const CONTEXT: &str = "2048";

/// Stops the server however the test ends.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_openai_client_works_against_companion_serve() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("companion.db");
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_companion"))
            .args(["serve", "--port", "0", "--context", CONTEXT])
            .arg("--db")
            .arg(&db)
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

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openai_client.py");
    let out = Command::new("python3")
        .arg(&script)
        .args([&base, TOKEN, &model, CONTEXT])
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "the client's checks failed:\n{stdout}"
    );
    drop(server);

    // the stream abandoned after four pieces stopped at the next decode steps, not at 1500
    let log = std::fs::read_to_string(dir.path().join("logs").join("companion.log")).unwrap();
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
    assert!(
        !log.contains("Tell me") && !log.contains("lighthouse"),
        "the log holds request text"
    );

    // exactly the exchange that asked to be saved
    let saved = stdout
        .lines()
        .find_map(|l| l.strip_prefix("saved-conversation "))
        .expect("the script names the saved conversation")
        .trim()
        .to_string();
    let store = memory::Store::open(&db).unwrap().store;
    let conversations = store.list_conversations(0, 100).unwrap();
    assert_eq!(conversations.len(), 1, "{conversations:?}");
    let saved_one = &conversations[0].conversation;
    assert_eq!(saved_one.id.to_string(), saved);
    let messages = store.messages(&saved_one.id).unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].text, "Remember this exchange.");
}
