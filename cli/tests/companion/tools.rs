//! `companion tools` as a script meets it: the list, one call at a time on granted folders,
//! one-line errors with a non-zero exit, writes asked on the terminal (or `--yes`), every
//! call in the audit log, and the model loaded only for summarize_file (which runs on the
//! real default model).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::support::{assert_clean_failure, stderr};

fn companion(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_companion"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("docs");
        std::fs::create_dir(&docs).unwrap();
        std::fs::write(
            docs.join("tomatoes.txt"),
            "Plant tomatoes in May.\nWater them every morning.\n",
        )
        .unwrap();
        std::fs::write(docs.join("blob.bin"), [0u8, 1, 2, 3, 0, 0, 7]).unwrap();
        std::fs::write(dir.path().join("secret.txt"), "outside").unwrap();
        Setup { dir }
    }

    fn docs(&self) -> String {
        self.dir.path().join("docs").to_str().unwrap().to_string()
    }

    fn db(&self) -> String {
        self.dir
            .path()
            .join("companion.db")
            .to_str()
            .unwrap()
            .to_string()
    }

    fn call(&self, name: &str, args: &str, extra: &[&str], stdin: &str) -> Output {
        let (docs, db) = (self.docs(), self.db());
        let mut all = vec!["tools", "call", name, args, "--allow", &docs, "--db", &db];
        all.extend_from_slice(extra);
        companion(&all, stdin)
    }

    fn audit(&self) -> Vec<(String, String, Option<String>)> {
        let conn = rusqlite::Connection::open(self.db()).unwrap();
        let mut stmt = conn
            .prepare("SELECT tool, outcome, error_code FROM tool_calls ORDER BY id")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }
}

#[test]
fn tools_list_prints_every_tool_and_its_schema() {
    let o = companion(&["tools", "list", "--json"], "");
    assert!(o.status.success(), "{}", stderr(&o));
    let tools: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tools = tools.as_array().unwrap();
    assert_eq!(tools.len(), 13);
    let read = tools.iter().find(|t| t["name"] == "read_file").unwrap();
    assert_eq!(read["parameters"]["required"], serde_json::json!(["path"]));
    assert_eq!(read["writes"], false);
    let o = companion(&["tools", "list"], "");
    let text = stdout(&o);
    assert!(text.contains("add_note  [writes: asks first]"), "{text}");
    assert!(text.contains("calculate\n  Compute an arithmetic expression"));
}

#[test]
fn tools_call_prints_the_result_and_json() {
    let s = Setup::new();
    let o = s.call("read_file", r#"{"path": "docs/tomatoes.txt"}"#, &[], "");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("Plant tomatoes in May."));
    let o = s.call(
        "search_files",
        r#"{"query": "water morning"}"#,
        &["--json"],
        "",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["tool"], "search_files");
    assert_eq!(v["data"]["matches"][0]["path"], "docs/tomatoes.txt");
    assert_eq!(v["data"]["matches"][0]["lines"][0]["line"], 2);
    assert_eq!(v["truncated"], false);
    let o = companion(
        &[
            "tools",
            "call",
            "calculate",
            r#"{"expression": "6 * 7"}"#,
            "--db",
            &s.db(),
        ],
        "",
    );
    assert_eq!(stdout(&o).trim(), "6 * 7 = 42");
}

#[test]
fn refusals_are_one_line_errors_with_a_non_zero_exit() {
    let s = Setup::new();
    let secret = s.dir.path().join("secret.txt");
    let cases = [
        (
            format!(r#"{{"path": "{}"}}"#, secret.display()),
            "outside the granted folders",
        ),
        (
            r#"{"path": "docs/../secret.txt"}"#.to_string(),
            "outside the granted folders",
        ),
        (
            r#"{"path": "docs/missing.txt"}"#.to_string(),
            "no such file",
        ),
        (
            r#"{"path": "docs/blob.bin"}"#.to_string(),
            "not a text file",
        ),
        (
            r#"{"path": "docs/companion.db"}"#.to_string(),
            "no such file",
        ),
        (
            r#"{"path": 3}"#.to_string(),
            "argument `path` must be a string",
        ),
        (r#"{"path": "a""#.to_string(), "not valid JSON"),
    ];
    for (args, needle) in cases {
        let o = s.call("read_file", &args, &[], "");
        assert_clean_failure(&o, needle);
        assert!(
            !stdout(&o).contains("outside"),
            "nothing printed from outside"
        );
    }
    assert_clean_failure(
        &s.call("no_such_tool", "{}", &[], ""),
        "there is no tool named `no_such_tool`",
    );
    let o = companion(&["tools", "call", "list_folder", "{}", "--db", &s.db()], "");
    assert_clean_failure(&o, "no folder is granted");
    // --json also says it on stdout, with the code
    let o = s.call("read_file", r#"{"path": "docs/blob.bin"}"#, &["--json"], "");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"]["code"], "not_text");
}

#[test]
fn writes_ask_on_the_terminal_unless_yes_and_all_calls_are_audited() {
    let s = Setup::new();
    let args = r#"{"title": "Garden", "text": "buy basil"}"#;
    let o = s.call("add_note", args, &[], "n\n");
    assert_clean_failure_after_prompt(&o, "you declined add_note");
    // the exact arguments, in whichever key order serde_json's map keeps in this build
    let shown = stderr(&o);
    let line = shown
        .lines()
        .find_map(|l| l.trim().strip_prefix("arguments: "))
        .unwrap_or_else(|| panic!("no arguments line: {shown}"));
    let shown_args: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(
        shown_args,
        serde_json::json!({"title": "Garden", "text": "buy basil"}),
        "{shown}"
    );
    let o = s.call("add_note", args, &[], "y\n");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("Saved note #1 \"Garden\"."));
    let o = s.call("add_note", args, &["--yes"], "");
    assert!(o.status.success());
    assert!(!stderr(&o).contains("Allow?"), "--yes does not ask");
    // no answer at all (end of input) is a no
    let o = s.call(
        "create_reminder",
        r#"{"text": "water", "when": "in 1 hour"}"#,
        &[],
        "",
    );
    assert!(!o.status.success());
    let o = s.call("list_notes", "{}", &[], "");
    assert!(stdout(&o).starts_with("2 notes"), "{}", stdout(&o));
    let audit = s.audit();
    let outcomes: Vec<(&str, &str)> = audit
        .iter()
        .map(|(t, o, _)| (t.as_str(), o.as_str()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("add_note", "denied"),
            ("add_note", "ok"),
            ("add_note", "ok"),
            ("create_reminder", "denied"),
            ("list_notes", "ok")
        ]
    );
}

fn assert_clean_failure_after_prompt(o: &Output, needle: &str) {
    assert!(!o.status.success());
    let err = stderr(o);
    let last = err.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
    assert!(last.contains("error [") && last.contains(needle), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn the_model_is_loaded_only_for_summarize_file() {
    let s = Setup::new();
    let missing = ["--model", "/nonexistent/model.gguf"];
    let o = s.call("list_folder", r#"{"path": "docs"}"#, &missing, "");
    assert!(o.status.success(), "no model needed: {}", stderr(&o));
    let o = s.call(
        "summarize_file",
        r#"{"path": "docs/tomatoes.txt"}"#,
        &missing,
        "",
    );
    assert_clean_failure(&o, "scripts/fetch-model");
    // a binary file is refused before the model is looked for
    let o = s.call(
        "summarize_file",
        r#"{"path": "docs/blob.bin"}"#,
        &missing,
        "",
    );
    assert_clean_failure(&o, "not a text file");
}

#[test]
fn summarize_file_runs_the_document_job_on_the_real_model() {
    let model = std::env::var_os("COMPANION_MODEL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(engine::default_model_path);
    assert!(
        Path::new(&model).exists(),
        "the default model is needed: scripts/fetch-model"
    );
    let s = Setup::new();
    let o = s.call(
        "summarize_file",
        r#"{"path": "docs/tomatoes.txt"}"#,
        &["--json", "--context", "1024"],
        "",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["data"]["chunks"], 1);
    assert!(!v["data"]["summary"].as_str().unwrap().trim().is_empty());
    assert!(
        stderr(&o).contains("summarize_file: 1/1"),
        "progress shown: {}",
        stderr(&o)
    );
    // the second time it comes from the store
    let o = s.call(
        "summarize_file",
        r#"{"path": "docs/tomatoes.txt"}"#,
        &["--json", "--context", "1024"],
        "",
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["data"]["fromStore"], true);
}

/// `--mcp-config`: an MCP server's tools listed beside ours and called the same way — asked
/// on the terminal with the exact arguments, `--yes` to skip, a server that fails said in one
/// line while the others work, a bad file refused in one line.
#[test]
fn mcp_servers_tools_are_listed_and_called_under_approval() {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/hostile_server.py");
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        serde_json::json!({"mcpServers": {
            "srv": {"command": "python3", "args": [&script, "serve"]},
            "broken": {"command": "python3", "args": [&script, "exit-at-start"]},
        }})
        .to_string(),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let db = dir.path().join("c.db");
    let db = db.to_str().unwrap();

    let list = companion(&["tools", "list", "--json", "--mcp-config", config], "");
    assert!(list.status.success(), "{}", stderr(&list));
    let tools: serde_json::Value = serde_json::from_str(&stdout(&list)).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"read_file") && names.contains(&"srv/echo"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.starts_with("broken/")));
    assert!(
        stderr(&list).contains("missing API key HOSTILE_KEY"),
        "{}",
        stderr(&list)
    );

    let args = r#"{"text": "hello from the CLI"}"#;
    let call = |extra: &[&str], stdin: &str| {
        let mut a = vec![
            "tools",
            "call",
            "srv/echo",
            args,
            "--mcp-config",
            config,
            "--db",
            db,
        ];
        a.extend_from_slice(extra);
        companion(&a, stdin)
    };
    let declined = call(&[], "n\n");
    assert!(!declined.status.success());
    let err = stderr(&declined);
    assert!(
        err.contains("srv/echo wants to call srv/echo on the MCP server \"srv\""),
        "{err}"
    );
    assert!(
        err.contains(r#"arguments: {"text":"hello from the CLI"}"#),
        "{err}"
    );
    assert!(err.contains("error [denied]"), "{err}");
    let approved = call(&[], "y\n");
    assert!(approved.status.success(), "{}", stderr(&approved));
    assert_eq!(stdout(&approved).trim(), "hello from the CLI");
    let skipped = call(&["--yes", "--json"], "");
    assert!(skipped.status.success(), "{}", stderr(&skipped));
    let out: serde_json::Value = serde_json::from_str(&stdout(&skipped)).unwrap();
    assert_eq!(out["text"], "hello from the CLI");
    assert_eq!(out["data"]["server"], "srv");

    std::fs::write(dir.path().join("bad.json"), "{\"mcpServers\": 3}").unwrap();
    let bad = dir.path().join("bad.json");
    let o = companion(
        &["tools", "list", "--mcp-config", bad.to_str().unwrap()],
        "",
    );
    assert_clean_failure(&o, "not an MCP configuration");
}
