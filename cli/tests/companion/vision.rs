//! `companion generate --image` with a vision projector (`--mmproj`), as a user runs it: the
//! fixture projector of `tests/fixtures/gemma3-vision` beside the default model, against the
//! greedy steps llama.cpp's `tools/mtmd` recorded for the same prompt and picture.

use std::path::PathBuf;

use crate::support::{assert_clean_failure, companion, json};

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/gemma3-vision")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn recorded() -> serde_json::Value {
    let text = std::fs::read_to_string(fixture("gemma3-vision.llamacpp.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_picture_in_a_raw_prompt_continues_as_llamacpp_does() {
    let rec = recorded();
    let prompt = rec["prompt"].as_str().unwrap();
    let mmproj = fixture(rec["mmproj"].as_str().unwrap());
    for case in rec["cases"].as_array().unwrap() {
        let image = fixture(case["image"].as_str().unwrap());
        let want: Vec<u64> = case["generate"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_u64().unwrap())
            .collect();
        let out = json(&companion(&[
            "generate",
            "--raw",
            "--json",
            "--temperature",
            "0",
            "--speculate",
            "off",
            "--max-tokens",
            &want.len().to_string(),
            "--mmproj",
            &mmproj,
            "--image",
            &image,
            prompt,
        ]));
        let ids: Vec<u64> = out["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(ids, want, "{image}");
        // the prompt's tokens and the picture's 16 rows
        let text_ids: usize = case["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["text"].as_array().map(Vec::len))
            .sum();
        assert_eq!(
            out["timings"]["promptTokens"].as_u64().unwrap() as usize,
            text_ids + 16
        );
    }
}

/// In the chat template the pictures open the user turn: each adds its 16 rows and its two
/// markers to the prompt.
#[test]
fn pictures_open_the_user_turn_of_a_chat_prompt() {
    let mmproj = fixture("gemma3-vision.mmproj-f16.gguf");
    let prompt_tokens = |images: &[&str]| {
        let mut args = vec![
            "generate",
            "--json",
            "--max-tokens",
            "2",
            "--mmproj",
            mmproj.as_str(),
        ];
        for image in images {
            args.extend(["--image", *image]);
        }
        args.push("What is in these pictures?");
        json(&companion(&args))["timings"]["promptTokens"]
            .as_u64()
            .unwrap()
    };
    let (small, wide) = (fixture("small.png"), fixture("wide.png"));
    let one = prompt_tokens(&[&small]);
    assert_eq!(prompt_tokens(&[&small, &wide]), one + 18);
}

#[test]
fn pictures_without_a_projector_or_that_cannot_be_read_are_refused_in_a_line() {
    let picture = fixture("small.png");
    assert_clean_failure(
        &companion(&["generate", "--max-tokens", "1", "--image", &picture, "hi"]),
        "vision projector",
    );
    let not_a_picture = fixture("README.md");
    assert_clean_failure(
        &companion(&["generate", "--image", &not_a_picture, "hi"]),
        "no format",
    );
    assert_clean_failure(
        &companion(&[
            "generate",
            "--raw",
            "--mmproj",
            &fixture("gemma3-vision.mmproj-f16.gguf"),
            "--image",
            &picture,
            "<__media__> and <__media__>",
        ]),
        "2 picture markers",
    );
}

/// `companion chat` with pictures, as a user runs it: `--image` for the first message,
/// `/image FILE` for a later one; both are kept with their messages, the conversation resumes
/// from its snapshot, and its JSON export embeds both pictures.
#[test]
fn chat_keeps_its_pictures_and_resumes_with_them() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let chat = |extra: &[&str], input: &str| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_companion"))
            .args(["chat", "--temperature", "0", "--max-tokens", "6"])
            .args(["--mmproj", &fixture("gemma3-vision.mmproj-f16.gguf")])
            .arg("--db")
            .arg(&db)
            .args(extra)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", crate::support::stderr(&o));
        crate::support::stderr(&o)
    };
    let err = chat(
        &["--image", &fixture("square.png")],
        &format!(
            "What is this?\n/image {}\n/image {}\nAnd this one?\n",
            fixture("README.md"),
            fixture("wide.png")
        ),
    );
    assert!(err.contains("attached to your next message"), "{err}");
    // a file that is no picture is said in a line, and the chat goes on
    assert!(err.contains("error [bad_picture]"), "{err}");
    let id = err
        .lines()
        .find_map(|l| l.strip_prefix("saved as conversation "))
        .expect("the conversation's id")
        .trim()
        .to_string();

    let err = chat(&["--conversation", &id], "Tell me more.\n");
    assert!(err.contains("resumed from its snapshot"), "{err}");

    let export = json(&crate::support::companion_db(
        &db,
        "conversations",
        &["export", &id, "--format", "json"],
    ));
    let embedded = export["images"]
        .as_array()
        .expect("the pictures are embedded");
    assert_eq!(embedded.len(), 2);
    let with_pictures: Vec<usize> = export["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["images"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(with_pictures, [1, 0, 1, 0, 0, 0]);

    // without a projector, `--image` is refused before the chat starts
    assert_clean_failure(
        &crate::support::companion_db(&db, "chat", &["--image", &fixture("small.png")]),
        "projector",
    );
}

/// `companion summarize` on a photo: read through the projector, then summarized; without a
/// projector it is refused before the model loads, in one line.
#[test]
fn a_photo_is_summarized_as_a_document() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let db = db.to_str().unwrap();
    let photo = fixture("wide.png");
    assert_clean_failure(
        &companion(&["summarize", "--db", db, &photo]),
        "vision projector",
    );
    let out = json(&companion(&[
        "summarize",
        "--db",
        db,
        "--json",
        "--mmproj",
        &fixture("gemma3-vision.mmproj-f16.gguf"),
        "--summary-tokens",
        "16",
        "--page-tokens",
        "32",
        &photo,
    ]));
    assert_eq!(out["format"], "picture");
    assert_eq!(out["pagesRead"], 1);
    assert!(!out["summary"].as_str().unwrap().trim().is_empty(), "{out}");
}
