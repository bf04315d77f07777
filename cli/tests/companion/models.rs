//! `companion models` on the small random-weight family files (tests/fixtures/gemma-family):
//! two quantizations of one named model are two versions of it; a third copy whose weights
//! are damaged imports (its header is sound) but fails the self-check, and the model in use
//! stays; the model in use cannot be removed; verify re-hashes; a wrong `--sha256` or a file
//! that is not a model leaves nothing behind; commands without `--model` load the library's
//! model in use.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

use crate::support::ok;

const NAME: &str = "synthetic gemma3-gqa";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/gemma-family")
        .join(name)
}

struct Library {
    dir: tempfile::TempDir,
}

impl Library {
    fn new() -> Self {
        Library {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("c.db")
    }

    fn models_dir(&self) -> PathBuf {
        self.dir.path().join("models")
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_companion"))
            .arg("models")
            .arg("--db")
            .arg(self.db())
            .arg("--models-dir")
            .arg(self.models_dir())
            .args(args)
            .env_remove("COMPANION_MODEL")
            .output()
            .expect("the binary runs")
    }

    /// The files in the models directory, temporary ones included.
    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.models_dir())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn list(&self) -> Vec<serde_json::Value> {
        serde_json::from_str(&ok(&self.run(&["list", "--json"]))).unwrap()
    }

    /// `companion doctor --json` on the library's model in use.
    fn doctor(&self) -> serde_json::Value {
        let out = Command::new(env!("CARGO_BIN_EXE_companion"))
            .args(["doctor", "--json"])
            .env("COMPANION_DB", self.db())
            .env_remove("COMPANION_MODEL")
            .output()
            .unwrap();
        serde_json::from_str(&ok(&out)).unwrap()
    }

    fn in_use(&self) -> Option<String> {
        self.list()
            .into_iter()
            .find(|m| m["inUse"] == true)
            .map(|m| format!("{} v{}", m["name"].as_str().unwrap(), m["version"]))
    }
}

/// The one `error [code]: message` line of a failed command.
fn error(o: &Output) -> String {
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    stderr
        .lines()
        .find(|l| l.starts_with("error ["))
        .unwrap_or_else(|| panic!("no error line in {stderr}"))
        .to_string()
}

fn sha256(path: &Path) -> String {
    Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A copy of `source` whose tensor data is all 0xFF bytes: NaN in every float and every block
/// scale, so the header is sound and every logit is not a number.
fn damaged_copy(source: &Path, to: &Path) {
    let mut bytes = std::fs::read(source).unwrap();
    let content = engine::gguf::reader::read(&bytes).unwrap();
    let start = content.tensor_data_offset as usize;
    bytes[start..].fill(0xFF);
    std::fs::write(to, bytes).unwrap();
}

#[test]
fn versions_a_failed_switch_keeps_the_model_in_use_and_the_one_in_use_stays() {
    let lib = Library::new();
    let empty = lib.run(&["list"]);
    ok(&empty);
    assert!(
        String::from_utf8_lossy(&empty.stderr).contains("the library is empty"),
        "{}",
        String::from_utf8_lossy(&empty.stderr)
    );

    // v1, with the sha256 the user was given
    let q4 = fixture("gemma3-gqa.q4_k_m.gguf");
    let q4_sha = sha256(&q4);
    let imported = lib.run(&[
        "import",
        q4.to_str().unwrap(),
        "--sha256",
        &q4_sha.to_uppercase(),
    ]);
    let out = ok(&imported);
    assert!(out.contains(&format!("imported {NAME} v1")), "{out}");
    assert!(out.contains(&q4_sha), "{out}");
    assert!(
        String::from_utf8_lossy(&imported.stderr).contains("100%"),
        "the copy shows its progress: {}",
        String::from_utf8_lossy(&imported.stderr)
    );
    assert_eq!(lib.files(), ["gemma3-gqa.q4_k_m.gguf"]);
    assert_eq!(
        sha256(&lib.models_dir().join("gemma3-gqa.q4_k_m.gguf")),
        q4_sha
    );
    let again = ok(&lib.run(&["import", q4.to_str().unwrap()]));
    assert!(again.contains("already in the library"), "{again}");
    assert_eq!(lib.in_use(), None);
    ok(&lib.run(&["use", NAME]));
    assert_eq!(lib.in_use().as_deref(), Some("synthetic gemma3-gqa v1"));

    // v2: same name, other bytes
    let q8 = fixture("gemma3-gqa.q8_0.gguf");
    let v2 = lib.run(&["import", q8.to_str().unwrap()]);
    assert!(ok(&v2).contains(&format!("imported {NAME} v2")));
    assert!(String::from_utf8_lossy(&v2.stderr).contains("a newer version"));

    // v3: a sound header over damaged weights imports, and fails its self-check
    let bad = lib.dir.path().join("gemma3-gqa.damaged.gguf");
    damaged_copy(&q8, &bad);
    assert!(ok(&lib.run(&["import", bad.to_str().unwrap()])).contains("v3"));
    let failed = error(&lib.run(&["use", &format!("{NAME} v3")]));
    assert!(
        failed.starts_with("error [self_check_failed]:")
            && failed.contains("synthetic gemma3-gqa v1 stays in use"),
        "{failed}"
    );
    assert_eq!(lib.in_use().as_deref(), Some("synthetic gemma3-gqa v1"));

    // switching to v2 keeps v1 until it is removed; the model in use cannot be
    let switched = lib.run(&["use", &format!("{NAME} v2")]);
    assert!(ok(&switched).contains(&format!("now using {NAME} v2")));
    assert!(String::from_utf8_lossy(&switched.stderr).contains("v1 is kept"));
    assert_eq!(lib.in_use().as_deref(), Some("synthetic gemma3-gqa v2"));
    let refused = error(&lib.run(&["remove", &format!("{NAME} v2")]));
    assert!(refused.starts_with("error [model_in_use]:"), "{refused}");
    let removed = ok(&lib.run(&["remove", &format!("{NAME}@1")]));
    assert!(removed.contains("and its file"), "{removed}");
    assert!(!lib.files().contains(&"gemma3-gqa.q4_k_m.gguf".to_string()));
    ok(&lib.run(&["remove", &format!("{NAME} v3")]));
    assert_eq!(lib.files(), ["gemma3-gqa.q8_0.gguf"]);

    // a command without --model loads the model in use
    let report = lib.doctor();
    let path = report["model"]["path"].as_str().unwrap();
    assert!(path.ends_with("models/gemma3-gqa.q8_0.gguf"), "{path}");

    // verify re-hashes: one changed byte is found
    assert!(ok(&lib.run(&["verify", &format!("{NAME} v2")])).contains(": ok"));
    let kept = lib.models_dir().join("gemma3-gqa.q8_0.gguf");
    let mut bytes = std::fs::read(&kept).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&kept, bytes).unwrap();
    let damaged = error(&lib.run(&["verify", NAME]));
    assert!(damaged.starts_with("error [model_damaged]:"), "{damaged}");
    assert!(damaged.contains("is damaged"), "{damaged}");
}

#[test]
fn a_file_that_does_not_match_its_sha256_or_is_no_model_leaves_nothing_behind() {
    let lib = Library::new();
    let q4 = fixture("gemma3-gqa.q4_k_m.gguf");
    let wrong = "0".repeat(64);
    let e = error(&lib.run(&["import", q4.to_str().unwrap(), "--sha256", &wrong]));
    assert!(e.starts_with("error [sha256_mismatch]:"), "{e}");
    assert!(
        e.contains(&sha256(&q4)),
        "the message gives what was found: {e}"
    );
    assert_eq!(lib.files(), Vec::<String>::new(), "no partial file stays");
    assert!(lib.list().is_empty());

    let e = error(&lib.run(&["import", q4.to_str().unwrap(), "--sha256", "abc"]));
    assert!(e.starts_with("error [invalid_argument]:"), "{e}");

    let notes = lib.dir.path().join("notes.gguf");
    std::fs::write(&notes, b"not a model at all").unwrap();
    let e = error(&lib.run(&["import", notes.to_str().unwrap()]));
    assert!(e.contains("GGUF"), "{e}");
    assert_eq!(lib.files(), Vec::<String>::new());

    let e = error(&lib.run(&["use", "nothing"]));
    assert!(e.starts_with("error [model_not_found]:"), "{e}");
}

/// A Gemma 4 assistant imports as a model does and pairs with the model it fits; a command
/// that loads that model from the library drafts with it (`--speculate auto` runs `mtp`), the
/// same tokens as without; it is refused in one line where it fits no model.
#[test]
fn an_assistant_pairs_with_its_model_and_drafts_for_it() {
    let lib = Library::new();
    let assistant = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/gemma4-assistant/gemma4-dense.assistant.q8_0.gguf");
    let refused = error(&lib.run(&["import", assistant.to_str().unwrap()]));
    assert!(
        refused.starts_with("error [assistant_fits_no_model]:")
            && refused.contains("no Gemma 4 model is in the library"),
        "{refused}"
    );
    assert!(lib.files().is_empty());

    ok(&lib.run(&[
        "import",
        fixture("gemma4-dense.q8_0.gguf").to_str().unwrap(),
    ]));
    ok(&lib.run(&["use", "synthetic gemma4-dense"]));
    let paired = ok(&lib.run(&["import", assistant.to_str().unwrap()]));
    assert!(
        paired.contains("paired synthetic gemma4-dense v1 with its Gemma 4 assistant"),
        "{paired}"
    );
    let listed = lib.list();
    assert_eq!(
        listed[0]["assistant"]["sha256"].as_str().unwrap(),
        sha256(&assistant)
    );
    assert!(ok(&lib.run(&["list"])).contains("with its Gemma 4 assistant"));

    let generate = |speculate: &str| -> serde_json::Value {
        let out = Command::new(env!("CARGO_BIN_EXE_companion"))
            .args([
                "generate",
                "--raw",
                "--json",
                "--temperature",
                "0",
                "--max-tokens",
                "40",
            ])
            .args(["--speculate", speculate, "a b c d"])
            .env("COMPANION_DB", lib.db())
            .env_remove("COMPANION_MODEL")
            .output()
            .unwrap();
        serde_json::from_str(&ok(&out)).unwrap()
    };
    // doctor names it beside the model
    let report = lib.doctor();
    assert_eq!(
        report["assistant"]["fileBytes"].as_u64(),
        Some(std::fs::metadata(&assistant).unwrap().len()),
        "{report}"
    );
    let auto = generate("auto");
    assert_eq!(auto["speculation"]["mode"], "mtp");
    assert!(auto["speculation"]["checks"].as_u64().unwrap() > 0);
    let off = generate("off");
    assert_eq!(off["speculation"]["mode"], "off");
    assert_eq!(auto["ids"], off["ids"]);
}

/// A vision projector imports as an assistant does: refused in one line where it fits no
/// model (no Gemma 3 model; a Gemma 3 model of another width), paired with the model whose
/// width it makes, listed with it; a command that loads that model from the library reads
/// pictures through it without `--mmproj`.
#[test]
fn a_vision_projector_pairs_with_its_model_and_reads_pictures_for_it() {
    let lib = Library::new();
    let vision = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gemma3-vision");
    let projector = vision.join("gemma3-vision.mmproj-f16.gguf");
    let refused = error(&lib.run(&["import", projector.to_str().unwrap()]));
    assert!(
        refused.starts_with("error [projector_fits_no_model]:")
            && refused.contains("no Gemma 3 model is in the library"),
        "{refused}"
    );
    ok(&lib.run(&["import", fixture("gemma3-gqa.q8_0.gguf").to_str().unwrap()]));
    let refused = error(&lib.run(&["import", projector.to_str().unwrap()]));
    assert!(
        refused.contains("fits no model")
            && refused.contains("rows of 640")
            && !refused.contains('\n'),
        "{refused}"
    );
    // the default model (640 wide) is the one it was made for
    let model = engine::default_model_path();
    ok(&lib.run(&["import", model.to_str().unwrap()]));
    let paired = ok(&lib.run(&["import", projector.to_str().unwrap()]));
    assert!(paired.contains("with its vision projector"), "{paired}");
    let listed = lib.list();
    let with = listed
        .iter()
        .find(|m| !m["projector"].is_null())
        .expect("a model lists its projector");
    assert_eq!(
        with["projector"]["sha256"].as_str().unwrap(),
        sha256(&projector)
    );
    assert!(ok(&lib.run(&["list"])).contains("with its vision projector"));

    let text = std::fs::read_to_string(vision.join("gemma3-vision.llamacpp.json")).unwrap();
    let rec: serde_json::Value = serde_json::from_str(&text).unwrap();
    let case = &rec["cases"][0];
    let out = Command::new(env!("CARGO_BIN_EXE_companion"))
        .args([
            "generate",
            "--raw",
            "--json",
            "--temperature",
            "0",
            "--speculate",
            "off",
        ])
        .args([
            "--max-tokens",
            "8",
            "--model",
            with["path"].as_str().unwrap(),
        ])
        .args([
            "--image",
            vision
                .join(case["image"].as_str().unwrap())
                .to_str()
                .unwrap(),
        ])
        .arg(rec["prompt"].as_str().unwrap())
        .env("COMPANION_DB", lib.db())
        .env_remove("COMPANION_MODEL")
        .output()
        .unwrap();
    let out: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let want: Vec<&serde_json::Value> = case["generate"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["id"])
        .collect();
    let got: Vec<&serde_json::Value> = out["ids"].as_array().unwrap().iter().collect();
    assert_eq!(got, want);
}
