//! The `companion` binary as a user meets it: output formats and one-line errors.
//! Commands that load weights run on the real default model (`scripts/fetch-model`).

use std::process::{Command, Output};

use crate::support::{assert_clean_failure, companion, stderr};

#[test]
fn tokenize_prints_ids_json() {
    let o = companion(&["tokenize", "--bos", "Hello, world!"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"ids": [2, 9259, 236764, 1902, 236888]})
    );
}

/// `companion tokenize` reads special-token text as llama.cpp's `parse_special` does: every
/// string of llama.cpp's reference tokenizations (`tests/fixtures/llamacpp-gemma3-270m.json`),
/// chat markers among them, gives llama.cpp's ids through the command, with and without --bos.
#[test]
fn tokenize_gives_llamacpps_ids_for_every_reference_string() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/llamacpp-gemma3-270m.json"
    );
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = reference["tokenize"].as_array().unwrap();
    assert!(
        cases
            .iter()
            .any(|c| c["text"].as_str().unwrap().contains("<start_of_turn>")),
        "the reference must hold special-token text"
    );
    let mut mismatches = Vec::new();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        for (bos, key) in [(false, "ids"), (true, "ids_with_bos")] {
            let mut args = vec!["tokenize"];
            if bos {
                args.push("--bos");
            }
            // `--` so that text starting with '-' is not read as an option
            args.extend(["--", text]);
            let o = companion(&args);
            assert!(o.status.success(), "{text:?}: {}", stderr(&o));
            let got: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            if got["ids"] != case[key] {
                mismatches.push(format!(
                    "{text:?} (bos {bos}): ours {}, llama.cpp {}",
                    got["ids"], case[key]
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn tokenize_reads_chat_markers_as_their_tokens() {
    let o = companion(&["tokenize", "<end_of_turn><start_of_turn>model"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v, serde_json::json!({"ids": [106, 105, 4368]}));
}

/// Run `companion ARGS` with its stdout's reader gone before the first byte (as `| head -0`,
/// or `| head -1` after its line): the command must stop quietly, status 0, nothing on
/// stderr — no panic message, no error line.
fn run_with_closed_stdout(args: &[&str], db: &std::path::Path) -> Output {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_companion"))
        .args(args)
        .env("COMPANION_DB", db)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    drop(child.stdout.take());
    child.wait_with_output().expect("the binary ends")
}

#[test]
fn a_reader_that_leaves_early_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("companion.db");
    // a conversation to list
    let import = dir.path().join("c.json");
    std::fs::write(
        &import,
        serde_json::json!({
            "format": "companion.conversation",
            "version": 1,
            "conversation": {
                "id": "2f0e3c52-8a3e-4f7a-9d52-0d8f7c1b9a10", "title": "Pipes", "createdAt": 1,
                "updatedAt": 2, "model": null, "settings": {}, "pinned": false
            },
            "messages": [],
            "summaries": []
        })
        .to_string(),
    )
    .unwrap();
    let db_arg = db.to_str().unwrap();
    let imported = companion(&[
        "conversations",
        "--db",
        db_arg,
        "import",
        import.to_str().unwrap(),
    ]);
    assert!(imported.status.success(), "{}", stderr(&imported));
    for args in [
        &["tokenize", "Hello, world!"][..],
        &["tools", "list"],
        &["conversations", "--db", db_arg, "list"],
        &[
            "generate",
            "--raw",
            "--temperature",
            "0",
            "--max-tokens",
            "64",
            "Once upon a time",
        ],
    ] {
        let o = run_with_closed_stdout(args, &db);
        assert!(
            o.status.success() && stderr(&o).trim().is_empty(),
            "{args:?}: status {:?}, stderr: {}",
            o.status,
            stderr(&o)
        );
    }
}

#[test]
fn missing_model_says_how_to_fetch_it() {
    let o = companion(&["generate", "--model", "/nonexistent/x.gguf", "hi"]);
    assert_clean_failure(&o, "scripts/fetch-model");
}

#[test]
fn corrupt_model_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.gguf");
    std::fs::write(&p, b"GGUF\x03\x00\x00\x00garbage").unwrap();
    let o = companion(&["generate", "--model", p.to_str().unwrap(), "hi"]);
    assert_clean_failure(&o, "not a usable GGUF model");
}

#[test]
fn unreadable_or_malformed_ids_file_is_a_one_line_error() {
    let o = companion(&["score", "--ids-file", "/nonexistent/ids.json"]);
    assert_clean_failure(&o, "cannot read the ids file");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ids.json");
    std::fs::write(&p, "[1, 2, \"three\"]").unwrap();
    let o = companion(&["score", "--ids-file", p.to_str().unwrap()]);
    assert_clean_failure(&o, "not a JSON array of token ids");
}

#[test]
fn invalid_arguments_are_refused() {
    let o = companion(&["generate", "--top-p", "2", "hi"]);
    assert_clean_failure(&o, "top-p");
    let o = companion(&["generate", "--device", "tpu", "hi"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("unknown device"), "{}", stderr(&o));
}

#[test]
fn prompt_longer_than_the_context_is_refused() {
    let long = "word ".repeat(200);
    let o = companion(&["generate", "--context", "64", "--raw", &long]);
    assert_clean_failure(&o, "longer than the context");
}

#[test]
fn score_prints_one_object_per_position() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ids.json");
    std::fs::write(&p, "[2, 818, 5279, 529, 7001, 563]").unwrap();
    let o = companion(&["score", "--ids-file", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.len(), 5);
    for (i, row) in v.iter().enumerate() {
        assert_eq!(row["pos"], i + 1);
        let top = row["top"].as_array().unwrap();
        assert_eq!(top.len(), 5);
        let lp = row["logprob"].as_f64().unwrap();
        assert!(lp <= 0.0 && lp >= top[0][1].as_f64().unwrap() - 100.0);
    }
}

#[test]
fn generate_json_reports_ids_text_and_timings() {
    let o = companion(&[
        "generate",
        "--raw",
        "--json",
        "--temperature",
        "0",
        "--max-tokens",
        "8",
        "The capital of France is",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // llama.cpp's greedy continuation of this prompt starts with these tokens
    let ids: Vec<u64> = v["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(&ids[..3], &[506, 5279, 529]);
    assert!(v["text"].as_str().unwrap().starts_with(" the capital of"));
    assert!(v["timings"]["decodeTokensPerSecond"].as_f64().unwrap() > 0.0);
}

#[test]
fn generate_streams_text_to_stdout() {
    let o = companion(&[
        "generate",
        "--raw",
        "--temperature",
        "0",
        "--max-tokens",
        "6",
        "The capital of France is",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with(" the capital of"));
}

#[test]
fn cuda_request_without_cuda_falls_back_with_a_notice() {
    let o = companion(&[
        "generate",
        "--device",
        "cuda",
        "--raw",
        "--temperature",
        "0",
        "--max-tokens",
        "2",
        "Hi",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    if !cfg!(feature = "cuda") {
        assert!(stderr(&o).contains("notice:"), "{}", stderr(&o));
    }
}

#[test]
fn chat_answers_over_stdin_and_exits_on_eof() {
    use std::io::Write;
    // a database of its own: a test never writes the user's conversations
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_companion"))
        .args(["chat", "--temperature", "0", "--max-tokens", "12"])
        .arg("--db")
        .arg(&db)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Say hi.\nAnd again.\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines().filter(|l| !l.trim().is_empty()).count() >= 2,
        "{out}"
    );
    // the default model is a base model: the chat says so once, before the first reply
    let err = stderr(&o);
    assert_eq!(
        err.matches("notice: This is a base model").count(),
        1,
        "{err}"
    );
}

/// `chat --allow` is a saved conversation like any chat: its messages are kept (each answer
/// with the calls of its turn), the session is snapshotted at the end, and the conversation
/// resumes, with or without tools.
#[test]
fn chat_with_tools_is_a_saved_conversation_that_resumes() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("tomatoes.txt"), "Tomatoes need sun.\n").unwrap();
    let run = |extra: &[&str], input: &[u8]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_companion"))
            .args(["chat", "--temperature", "0", "--max-tokens", "16"])
            .args(["--max-steps", "1"])
            .arg("--db")
            .arg(&db)
            .args(extra)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    };
    let o = run(
        &["--allow", docs.to_str().unwrap()],
        b"Which of my files talks about tomatoes?\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let id = err
        .lines()
        .find_map(|l| l.strip_prefix("saved as conversation "))
        .unwrap_or_else(|| panic!("{err}"))
        .trim()
        .to_string();
    let store = memory::Store::open(&db).unwrap().store;
    let cid = memory::ConversationId(id.clone());
    let messages = store.messages(&cid).unwrap();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[1]
            .timings
            .as_ref()
            .is_some_and(|t| t.get("toolCalls").is_some()),
        "the answer keeps its turn's calls: {:?}",
        messages[1].timings
    );
    assert!(
        store.snapshot_info(&cid).unwrap().is_some(),
        "the session was snapshotted at the end"
    );
    drop(store);
    // resumed without tools, it goes on where it was
    let o = run(&["--conversation", &id], b"Thanks.\n");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("resumed from its snapshot"),
        "{}",
        stderr(&o)
    );
    let store = memory::Store::open(&db).unwrap().store;
    assert_eq!(store.messages(&cid).unwrap().len(), 4);
}
