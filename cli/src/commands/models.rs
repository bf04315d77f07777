//! `companion models`: the model library in the database — list, import (checked, hashed with
//! a progress bar, copied through a temporary file), remove, use (with a self-check that
//! keeps the model in use when the new one fails) and verify (re-hash and compare).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand};
use memory::Store;

use crate::options::StoreOptions;

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    pub(crate) store: StoreOptions,
    /// Where imported models are kept [default: Companion's models directory]
    #[arg(long, value_name = "DIR", global = true)]
    models_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Every model in the library, with its versions; `*` marks the one in use
    List {
        #[arg(long)]
        json: bool,
    },
    /// Check a Gemma GGUF and copy it into the library (a newer version when its name is
    /// known); a Gemma 4 assistant is paired with the model it drafts for
    Import {
        path: PathBuf,
        /// The sha256 published with the file: a file that does not match is not kept
        #[arg(long, value_name = "HEX")]
        sha256: Option<String>,
    },
    /// Remove a model from the library (and its file, when the library copied it)
    Remove { name: String },
    /// Use a model from now on, after a self-check (NAME, `NAME v2`, a file name or a sha256 prefix)
    Use {
        name: String,
        /// After the switch, remove the version that was in use before
        #[arg(long)]
        remove_old: bool,
        /// Backend for the self-check: cpu, cuda or metal
        #[arg(long, default_value = "cpu", value_name = "DEVICE")]
        device: engine::DeviceChoice,
    },
    /// Hash a model's file again and compare it with the sha256 recorded at import
    Verify { name: String },
}

pub fn run(args: Args) -> Result<()> {
    let store = args.store.open()?;
    let models_dir = args.models_dir.clone().unwrap_or_else(engine::models_dir);
    let mut out = std::io::stdout().lock();
    match args.command {
        Command::List { json } => {
            let models = store.models()?;
            let in_use = store.model_in_use()?;
            let assistants = store.assistants()?;
            let projectors = store.paired_files(memory::Pairing::Projector)?;
            let assistant_of =
                |m: &memory::ModelRecord| assistants.iter().find(|a| a.model_id == m.id);
            let projector_of =
                |m: &memory::ModelRecord| projectors.iter().find(|a| a.model_id == m.id);
            if json {
                let rows: Vec<serde_json::Value> = models
                    .iter()
                    .map(|m| {
                        let mut v = serde_json::to_value(m).unwrap_or_default();
                        v["inUse"] = in_use.as_ref().is_some_and(|u| u.id == m.id).into();
                        v["assistant"] = serde_json::to_value(assistant_of(m)).unwrap_or_default();
                        v["projector"] = serde_json::to_value(projector_of(m)).unwrap_or_default();
                        v
                    })
                    .collect();
                writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
                return Ok(());
            }
            if models.is_empty() {
                eprintln!(
                    "the library is empty: Companion uses the default model ({}); `companion models import PATH` adds one",
                    engine::default_model_path().display()
                );
            } else if in_use.is_none() {
                eprintln!(
                    "none of these is in use yet: Companion uses the default model ({}); `companion models use NAME` picks one",
                    engine::default_model_path().display()
                );
            }
            for m in &models {
                let mark = if in_use.as_ref().is_some_and(|u| u.id == m.id) {
                    "*"
                } else {
                    " "
                };
                writeln!(
                    out,
                    "{mark} {}  {}  {}M params  {}  {:.1} MB  sha256 {}  added {}",
                    m.label(),
                    m.architecture,
                    m.parameters / 1_000_000,
                    m.quantization,
                    m.file_bytes as f64 / 1e6,
                    &m.sha256[..12],
                    memory::types::rfc3339(m.added_at)
                )?;
                let paired = [
                    ("Gemma 4 assistant", assistant_of(m)),
                    ("vision projector", projector_of(m)),
                ];
                for (what, a) in paired {
                    if let Some(a) = a {
                        writeln!(
                            out,
                            "    with its {what}  {:.1} MB  sha256 {}  ({})",
                            a.file_bytes as f64 / 1e6,
                            &a.sha256[..12],
                            a.path
                        )?;
                    }
                }
            }
        }
        Command::Import { path, sha256 } => {
            let mut bar = Progress::new("hashing and copying");
            let imported = chat::models::import_model(
                &store,
                &models_dir,
                &path,
                sha256.as_deref(),
                &mut |d, t| bar.show(d, t),
            )?;
            bar.finish();
            let m = &imported.model;
            if let Some(paired) = &imported.paired {
                let a = &paired.file;
                let (what, does) = match paired.kind {
                    memory::Pairing::Assistant => (
                        "Gemma 4 assistant",
                        "it drafts for it with --speculate auto or mtp",
                    ),
                    memory::Pairing::Projector => (
                        "vision projector",
                        "it reads pictures for it (generate --image)",
                    ),
                };
                if imported.added {
                    writeln!(
                        out,
                        "paired {} with its {what} ({}), sha256 {}: {does}",
                        m.label(),
                        a.path,
                        a.sha256
                    )?;
                } else {
                    writeln!(out, "already paired with {} ({})", m.label(), a.path)?;
                }
                if let Some(old) = &paired.replaced {
                    eprintln!("it replaces the {what} {} had ({})", m.label(), old.path);
                }
            } else if !imported.added {
                writeln!(out, "already in the library as {} ({})", m.label(), m.path)?;
            } else {
                writeln!(
                    out,
                    "imported {} ({}), sha256 {}",
                    m.label(),
                    m.path,
                    m.sha256
                )?;
                if let Some(older) = &imported.newer_than {
                    eprintln!(
                        "a newer version of {}: `companion models use \"{}\"` switches to it, and {} stays until you remove it",
                        older.name,
                        m.label(),
                        older.label()
                    );
                }
            }
        }
        Command::Remove { name } => {
            let m = store.resolve_model(&name)?;
            let deleted = chat::models::remove_model(&store, &models_dir, &m)?;
            if deleted {
                writeln!(out, "removed {} and its file", m.label())?;
            } else {
                writeln!(
                    out,
                    "removed {} from the library; its file stays at {}",
                    m.label(),
                    m.path
                )?;
            }
        }
        Command::Use {
            name,
            remove_old,
            device,
        } => {
            let target = store.resolve_model(&name)?;
            eprintln!("checking {} …", target.label());
            let switched = chat::models::use_model(&store, &target, |path| {
                chat::models::self_check(engine::EngineConfig {
                    model_path: path.to_path_buf(),
                    device,
                    // a short context: the check reads a few tokens
                    context: 256,
                    ..engine::EngineConfig::default()
                })
            })?;
            writeln!(
                out,
                "now using {} (self-check: {:?})",
                switched.model.label(),
                switched.check_text
            )?;
            if let Some(previous) = switched.previous {
                if remove_old {
                    chat::models::remove_model(&store, &models_dir, &previous)?;
                    writeln!(out, "removed {}", previous.label())?;
                } else {
                    eprintln!(
                        "{} is kept; `companion models remove \"{}\"` removes it",
                        previous.label(),
                        previous.label()
                    );
                }
            }
        }
        Command::Verify { name } => {
            let m = store.resolve_model(&name)?;
            let mut bar = Progress::new("hashing");
            let verified = chat::models::verify_model(&m, &mut |d, t| bar.show(d, t))?;
            bar.finish();
            if verified.matches {
                writeln!(out, "{}: ok, sha256 {}", m.label(), verified.sha256)?;
            } else {
                return Err(chat::Error::ModelDamaged {
                    model: m.label(),
                    path: m.path.clone().into(),
                    expected: m.sha256.clone(),
                    found: verified.sha256,
                }
                .into());
            }
        }
    }
    Ok(())
}

/// The model the library has in use in `db`, for commands given no `--model`: `None` when
/// there is no database, no model chosen, or its file is gone (then with a notice).
/// The file of `pairing` the library pairs with the model at `model_path`, if any (quietly
/// none when the library cannot be read: the model still runs).
pub fn library_paired(
    db: &std::path::Path,
    pairing: memory::Pairing,
    model_path: &std::path::Path,
) -> Option<PathBuf> {
    if !db.is_file() {
        return None;
    }
    let store = Store::open(db).ok()?.store;
    chat::paired::paired_for(&store, pairing, model_path)
        .ok()
        .flatten()
}

pub fn library_model(db: &std::path::Path) -> Option<PathBuf> {
    if !db.is_file() {
        return None;
    }
    let store = match Store::open(db) {
        Ok(opened) => opened.store,
        Err(e) => {
            tracing::warn!(code = e.code(), "the model library could not be read");
            return None;
        }
    };
    let model = store.model_in_use().ok().flatten()?;
    let path = PathBuf::from(&model.path);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "notice: the file of {} is gone ({}); using the default model",
            model.label(),
            model.path
        );
        None
    }
}

/// A one-line progress bar on stderr (a line per 10% when stderr is not a terminal).
struct Progress {
    what: &'static str,
    tty: bool,
    shown: u64,
}

impl Progress {
    fn new(what: &'static str) -> Self {
        Progress {
            what,
            tty: std::io::stderr().is_terminal(),
            shown: u64::MAX,
        }
    }

    fn show(&mut self, done: u64, total: u64) {
        let percent = (done * 100).checked_div(total).unwrap_or(100);
        let step = if self.tty { percent } else { percent / 10 * 10 };
        if step == self.shown {
            return;
        }
        self.shown = step;
        let mb = |b: u64| b as f64 / 1e6;
        if self.tty {
            let filled = (percent / 5) as usize;
            eprint!(
                "\r{} [{}{}] {percent:3}%  {:.0}/{:.0} MB",
                self.what,
                "#".repeat(filled),
                " ".repeat(20 - filled.min(20)),
                mb(done),
                mb(total)
            );
        } else {
            eprintln!(
                "{} {step}% ({:.0}/{:.0} MB)",
                self.what,
                mb(done),
                mb(total)
            );
        }
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}
