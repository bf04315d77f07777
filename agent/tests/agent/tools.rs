//! Each tool's behaviour over a small granted tree and a fake host: what it returns to the
//! model and to the UI, its argument checks, and the caps with the notices they leave.

use crate::common::{DENY, FakeHost, Rig, Tree, code, sandbox};
use agent::{CallOutcome, Limits, RememberedApprovals, ToolCall};
use serde_json::json;

#[test]
fn every_tool_is_declared_with_a_schema() {
    let tools = agent::declarations(&Limits::default());
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "list_folder",
            "find_files",
            "search_files",
            "read_file",
            "summarize_file",
            "search_conversations",
            "add_note",
            "list_notes",
            "search_notes",
            "create_reminder",
            "list_reminders",
            "now",
            "calculate"
        ]
    );
    let writes: Vec<&str> = tools
        .iter()
        .filter(|t| t.writes)
        .map(|t| t.name.as_ref())
        .collect();
    assert_eq!(writes, ["add_note", "create_reminder"]);
    for t in &tools {
        assert_eq!(t.parameters["type"], "object", "{}", t.name);
        assert_eq!(t.parameters["additionalProperties"], false, "{}", t.name);
    }
}

#[test]
fn list_folder_shows_grants_then_folders_then_files() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = Rig::new(&s, &host, &DENY, &r, Limits::default());
    let out = rig.call("list_folder", json!({})).unwrap();
    assert!(
        out.text_for_model.contains("grant/  (read only;"),
        "{}",
        out.text_for_model
    );
    let out = rig.call("list_folder", json!({"path": "grant"})).unwrap();
    assert_eq!(
        out.text_for_model,
        "grant: 2 folders, 0 files\ngarden/\nrecipes/"
    );
    let out = rig.call("list_folder", json!({"path": "garden"})).unwrap();
    assert_eq!(out.data["entries"][0]["name"], "roses.md");
    assert_eq!(out.data["entries"][1]["name"], "tomatoes.txt");
    assert_eq!(out.data["entries"][1]["bytes"], 75);
    assert!(!out.truncated);
}

#[test]
fn listings_and_finds_are_cut_at_their_caps_and_say_so() {
    let tree = Tree::new();
    for i in 0..30 {
        std::fs::write(tree.grant().join(format!("garden/seed-{i:02}.txt")), "x").unwrap();
    }
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let limits = Limits {
        list_max_entries: 10,
        find_max_results: 5,
        search_max_entries: 20,
        ..Limits::default()
    };
    let rig = Rig::new(&s, &host, &DENY, &r, limits);
    let out = rig.call("list_folder", json!({"path": "garden"})).unwrap();
    assert!(out.truncated);
    assert_eq!(out.data["entries"].as_array().unwrap().len(), 10);
    assert!(
        out.text_for_model
            .contains("[cut: showing 10 of 32 entries"),
        "{}",
        out.text_for_model
    );
    let out = rig.call("find_files", json!({"query": "seed"})).unwrap();
    assert!(out.truncated);
    assert!(
        out.text_for_model
            .contains("cut: showing the first 5 matches")
    );
    let out = rig.call("find_files", json!({"query": "zzz"})).unwrap();
    assert!(out.truncated, "the walk stopped at 20 entries");
    assert!(
        out.text_for_model
            .contains("stopped after looking at 20 files and folders"),
        "{}",
        out.text_for_model
    );
}

#[test]
fn find_files_matches_every_word_of_names() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = Rig::new(&s, &host, &DENY, &r, Limits::default());
    let out = rig
        .call("find_files", json!({"query": "TOMATOES txt"}))
        .unwrap();
    assert_eq!(out.data["matches"][0]["path"], "grant/garden/tomatoes.txt");
    assert_eq!(out.data["matches"].as_array().unwrap().len(), 1);
    let out = rig
        .call("find_files", json!({"query": "garden", "path": "grant"}))
        .unwrap();
    assert_eq!(out.data["matches"][0]["kind"], "folder");
    assert_eq!(
        code(rig.call(
            "find_files",
            json!({"query": "a", "path": "garden/roses.md"})
        )),
        "not_a_folder"
    );
    assert_eq!(
        code(rig.call("find_files", json!({"query": "?!"}))),
        "invalid_arguments"
    );
}

#[test]
fn search_files_finds_every_word_with_lines_and_snippets() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = Rig::new(&s, &host, &DENY, &r, Limits::default());
    let out = rig
        .call("search_files", json!({"query": "Tomatoes BASIL"}))
        .unwrap();
    let matches = out.data["matches"].as_array().unwrap();
    let paths: Vec<&str> = matches
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["grant/garden/tomatoes.txt", "grant/recipes/soup.html"]
    );
    assert_eq!(matches[0]["lines"][0]["line"], 1);
    assert_eq!(
        matches[0]["lines"][2]["snippet"],
        "Basil grows well beside them."
    );
    assert!(
        out.text_for_model
            .contains("\n  3: Plant the tomatoes in May."),
        "{}",
        out.text_for_model
    );
    // a word that is missing from a file excludes it; a script's text is not the page's
    let out = rig
        .call("search_files", json!({"query": "tomatoes march"}))
        .unwrap();
    assert!(out.data["matches"].as_array().unwrap().is_empty());
    let out = rig
        .call("search_files", json!({"query": "hidden script"}))
        .unwrap();
    assert!(out.data["matches"].as_array().unwrap().is_empty());
    // limited to a folder
    let out = rig
        .call(
            "search_files",
            json!({"query": "tomatoes", "path": "recipes"}),
        )
        .unwrap();
    assert_eq!(out.data["matches"].as_array().unwrap().len(), 1);
}

#[test]
fn search_files_stops_at_its_byte_cap_and_at_the_turn_budget() {
    let tree = Tree::new();
    let big = "filler line without the word\n".repeat(40_000); // ~1.2 MB
    std::fs::write(tree.grant().join("a-big.txt"), format!("{big}needle\n")).unwrap();
    std::fs::write(tree.grant().join("b-small.txt"), "needle\n").unwrap();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let limits = Limits {
        search_max_bytes: 256 * 1024,
        ..Limits::default()
    };
    let rig = Rig::new(&s, &host, &DENY, &r, limits.clone());
    let out = rig
        .call("search_files", json!({"query": "needle"}))
        .unwrap();
    assert!(out.truncated);
    assert!(out.data["bytesRead"].as_u64().unwrap() <= 256 * 1024);
    assert!(
        out.text_for_model
            .contains("cut: stopped after reading 262.1 KB"),
        "{}",
        out.text_for_model
    );

    let turn = Limits {
        turn_max_bytes: 100 * 1024,
        ..Limits::default()
    };
    let rig = Rig::new(&s, &host, &DENY, &r, turn);
    let out = rig
        .call("search_files", json!({"query": "needle"}))
        .unwrap();
    assert!(out.truncated);
    assert!(
        out.text_for_model
            .contains("this turn has read 102.4 KB of files, all it may"),
        "{}",
        out.text_for_model
    );
    let e = rig
        .call("read_file", json!({"path": "b-small.txt"}))
        .unwrap_err();
    assert_eq!(e.code(), "turn_budget_spent");
    assert!(e.to_string().contains("ask again in a new message"));
    rig.budget.reset();
    assert!(
        rig.call("read_file", json!({"path": "b-small.txt"}))
            .is_ok()
    );
}

#[test]
fn read_file_reads_windows_that_chain_and_says_when_there_is_more() {
    let tree = Tree::new();
    let text: String = (1..=200)
        .map(|i| format!("line {i} of the long file\n"))
        .collect();
    std::fs::write(tree.grant().join("long.txt"), &text).unwrap();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = Rig::new(&s, &host, &DENY, &r, Limits::default());
    let mut offset = 0u64;
    let mut joined = String::new();
    let mut calls = 0;
    loop {
        let out = rig
            .call(
                "read_file",
                json!({"path": "long.txt", "offset": offset, "length": 1000}),
            )
            .unwrap();
        calls += 1;
        joined.push_str(out.data["text"].as_str().unwrap());
        match out.data["nextOffset"].as_u64() {
            Some(next) => {
                assert!(out.truncated);
                assert!(
                    out.text_for_model
                        .contains(&format!("read_file with offset {next} continues"))
                );
                offset = next;
            }
            None => {
                assert!(out.text_for_model.ends_with("[end of file]"));
                break;
            }
        }
    }
    assert_eq!(joined, text.trim_end());
    assert!(calls >= 5);
    // html and pdf come as their text
    let out = rig
        .call("read_file", json!({"path": "recipes/soup.html"}))
        .unwrap();
    assert!(out.text_for_model.contains("Simmer the tomatoes"));
    assert!(!out.text_for_model.contains("<p>") && !out.text_for_model.contains("hidden script"));
    let pdf = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/documents/lighthouse.pdf");
    std::fs::copy(pdf, tree.grant().join("lighthouse.pdf")).unwrap();
    let out = rig
        .call(
            "read_file",
            json!({"path": "lighthouse.pdf", "length": 300}),
        )
        .unwrap();
    assert_eq!(out.data["format"], "pdf");
    assert!(out.data["text"].as_str().unwrap().len() <= 300);
    // the length cap is the schema's
    let e = rig
        .call("read_file", json!({"path": "long.txt", "length": 100_000}))
        .unwrap_err();
    assert_eq!(e.code(), "invalid_arguments");
    assert!(
        e.to_string()
            .contains("argument `length` must be at most 16384"),
        "{e}"
    );
}

#[test]
fn invalid_arguments_are_refused_before_anything_runs_and_name_the_argument() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = Rig::new(&s, &host, &DENY, &r, Limits::default());
    let cases = [
        (
            "read_file",
            json!({}),
            "read_file: argument `path` is required",
        ),
        (
            "read_file",
            json!({"path": 7}),
            "read_file: argument `path` must be a string, not 7",
        ),
        (
            "read_file",
            json!({"path": "a", "offset": -1}),
            "argument `offset` must be at least 0, not -1",
        ),
        (
            "read_file",
            json!({"path": "a", "offest": 1}),
            "unknown argument `offest` (it takes length, offset, path)",
        ),
        (
            "calculate",
            json!({"expression": ""}),
            "argument `expression` must not be empty",
        ),
        (
            "now",
            json!({"zone": "UTC"}),
            "unknown argument `zone` (it takes no arguments)",
        ),
        (
            "add_note",
            json!({"title": "t"}),
            "argument `text` is required",
        ),
        (
            "list_reminders",
            json!({"include_done": "yes"}),
            "argument `include_done` must be true or false",
        ),
        (
            "now",
            json!([1]),
            "the arguments must be an object, not a list",
        ),
    ];
    let count = cases.len();
    for (tool, args, needle) in cases {
        let e = rig.call(tool, args.clone()).unwrap_err();
        assert_eq!(e.code(), "invalid_arguments", "{tool} {args}");
        assert!(e.to_string().contains(needle), "{tool} {args}: {e}");
    }
    assert!(host.notes.borrow().is_empty(), "nothing ran");
    let e = rig.call("delete_everything", json!({})).unwrap_err();
    assert_eq!(e.code(), "unknown_tool");
    // every refusal is in the audit log, as an error with its code
    let audit = host.audit.borrow();
    assert_eq!(audit.len(), count + 1);
    assert!(audit.iter().all(|a| a.outcome == CallOutcome::Error));
    assert_eq!(
        audit.last().unwrap().error_code.as_deref(),
        Some("unknown_tool")
    );
}

#[test]
fn now_and_calculate() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = Rig::new(&s, &host, &DENY, &r, Limits::default());
    let out = rig.call("now", json!({})).unwrap();
    let date = out.data["date"].as_str().unwrap();
    assert_eq!(date.len(), 10);
    assert!(out.text_for_model.contains(date));
    assert!(out.data["timeZone"].as_str().is_some_and(|z| !z.is_empty()));
    let weekday = out.data["weekday"].as_str().unwrap();
    assert!(
        [
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Friday",
            "Saturday",
            "Sunday"
        ]
        .contains(&weekday)
    );
    let out = rig
        .call("calculate", json!({"expression": "(12.5 * 4) / 3"}))
        .unwrap();
    assert_eq!(out.text_for_model, "(12.5 * 4) / 3 = 16.6666666667");
    assert_eq!(out.data["text"], "16.6666666667");
    let e = rig
        .call("calculate", json!({"expression": "2 / (1 - 1)"}))
        .unwrap_err();
    assert_eq!(e.code(), "invalid_expression");
    assert!(e.to_string().contains("division by zero"));
}

#[test]
fn conversations_notes_and_reminders_go_through_the_host() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let yes = |_: &agent::ApprovalRequest<'_>| agent::ApprovalAnswer::Yes;
    let rig = Rig::new(&s, &host, &yes, &r, Limits::default());
    let out = rig
        .call("search_conversations", json!({"query": "kyoto"}))
        .unwrap();
    assert!(
        out.text_for_model
            .contains("\"Trip to Kyoto\" (assistant): The maple leaves")
    );
    let out = rig
        .call("search_conversations", json!({"query": "paris"}))
        .unwrap();
    assert!(out.text_for_model.starts_with("No earlier conversation"));
    rig.call(
        "add_note",
        json!({"title": "Seeds", "text": "buy basil seeds"}),
    )
    .unwrap();
    let out = rig.call("list_notes", json!({})).unwrap();
    assert!(out.text_for_model.contains("#1 \"Seeds\": buy basil seeds"));
    let out = rig.call("search_notes", json!({"query": "basil"})).unwrap();
    assert_eq!(out.data["matches"][0]["note"]["id"], 1);
    let out = rig
        .call(
            "create_reminder",
            json!({"text": "water the tomatoes", "when": "in 2 hours"}),
        )
        .unwrap();
    assert!(
        out.text_for_model.starts_with("Reminder #1 set for "),
        "{}",
        out.text_for_model
    );
    let due = host.reminders.borrow()[0].due_at;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(
        (due - now - 2 * 3_600_000).abs() < 60_000,
        "due in two hours"
    );
    let out = rig.call("list_reminders", json!({})).unwrap();
    assert!(out.text_for_model.contains("water the tomatoes"));
    let e = rig
        .call(
            "create_reminder",
            json!({"text": "x", "when": "last tuesday"}),
        )
        .unwrap_err();
    assert_eq!(e.code(), "invalid_time");
    let e = rig
        .call(
            "create_reminder",
            json!({"text": "x", "when": "2001-01-01 10:00"}),
        )
        .unwrap_err();
    assert!(e.to_string().contains("already passed"), "{e}");
    assert_eq!(host.reminders.borrow().len(), 1);
}

#[test]
fn summarize_file_needs_a_summarizer_and_reports_its_progress() {
    use agent::{FileSummarizer, FileSummary, FileToSummarize, HostError, ToolProgress};
    struct Fake;
    impl FileSummarizer for Fake {
        fn summarize(
            &self,
            file: &FileToSummarize,
            progress: &mut dyn FnMut(ToolProgress),
        ) -> Result<FileSummary, HostError> {
            assert!(file.path.is_absolute() && file.still_the_same());
            for done in 1..=3 {
                progress(ToolProgress {
                    tool: "summarize_file".into(),
                    done,
                    total: Some(3),
                    message: "chunks".into(),
                    remaining_seconds: None,
                });
            }
            Ok(FileSummary {
                summary: format!("{} is about tomatoes", file.shown),
                chunks: 3,
                from_store: false,
            })
        }
    }
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let mut rig = Rig::new(&s, &host, &DENY, &r, Limits::default());
    assert_eq!(
        code(rig.call("summarize_file", json!({"path": "garden/tomatoes.txt"}))),
        "summarizer_unavailable"
    );
    rig.toolbox.summarizer = Some(&Fake);
    std::fs::write(tree.grant().join("blob"), [0u8, 1, 2, 3]).unwrap();
    assert_eq!(
        code(rig.call("summarize_file", json!({"path": "blob"}))),
        "not_text"
    );
    let mut seen = Vec::new();
    let mut progress = |p: ToolProgress| seen.push(p.done);
    let mut cx = agent::CallContext {
        conversation: None,
        budget: &rig.budget,
        progress: &mut progress,
        cancel: None,
    };
    let out = rig
        .toolbox
        .call(
            &ToolCall::new("summarize_file", json!({"path": "garden/tomatoes.txt"})),
            &mut cx,
        )
        .unwrap();
    assert_eq!(
        out.text_for_model.lines().nth(1),
        Some("grant/garden/tomatoes.txt is about tomatoes")
    );
    assert_eq!(seen, [1, 2, 3]);
}
