//! `companion sync`: one round of sync through a folder (write this device's changes, apply
//! the other devices'), and `companion sync status`. The folder is remembered from the last
//! round. No model is loaded; the app syncs in the background by itself.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args as ClapArgs, Subcommand};

use crate::options::StoreOptions;

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// The sync folder: one that iCloud Drive, Syncthing, Dropbox or a network share keeps
    /// the same on every device [default: the folder of the last round]
    #[arg(long, value_name = "DIR")]
    folder: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    pub(crate) store: StoreOptions,
}

#[derive(Subcommand)]
enum Command {
    /// This device's id, the folder, the last round, and the other devices
    Status {
        #[arg(long)]
        json: bool,
        /// The conversation database (also accepted before `status`)
        #[arg(long, value_name = "PATH")]
        db: Option<PathBuf>,
    },
}

impl Args {
    /// The database given before or after `status`.
    pub(crate) fn db(&self) -> Option<PathBuf> {
        match &self.command {
            Some(Command::Status { db: Some(db), .. }) => Some(db.clone()),
            _ => self.store.db.clone(),
        }
    }
}

pub fn run(mut args: Args) -> Result<()> {
    if let Some(Command::Status { db: Some(db), .. }) = &args.command {
        args.store.db = Some(db.clone());
    }
    let store = args.store.open()?;
    let mut out = std::io::stdout().lock();
    if let Some(Command::Status { json, .. }) = args.command {
        let status = store.sync_status()?;
        if json || args.json {
            writeln!(out, "{}", serde_json::to_string_pretty(&status)?)?;
            return Ok(());
        }
        writeln!(out, "this device: {}", status.device)?;
        match (&status.folder, status.last_round_at) {
            (Some(folder), Some(at)) => writeln!(
                out,
                "folder: {folder} (last round {})",
                memory::types::rfc3339(at)
            )?,
            _ => writeln!(out, "folder: none yet (`companion sync --folder DIR`)")?,
        }
        writeln!(
            out,
            "changes not yet written: {}; waiting for what they belong to: {}",
            status.unsent, status.waiting
        )?;
        if status.peers.is_empty() {
            writeln!(out, "other devices: none seen yet")?;
        }
        for p in &status.peers {
            writeln!(
                out,
                "other device {}: applied through its file {}{}",
                p.device,
                p.through,
                p.seen_at
                    .map(|t| format!(", last heard from {}", memory::types::rfc3339(t)))
                    .unwrap_or_default()
            )?;
        }
        if let Some(error) = &status.last_error {
            writeln!(out, "last round: {error}")?;
        }
        return Ok(());
    }
    let folder = match args.folder.or(store.sync_folder()?) {
        Some(folder) => folder,
        None => bail!(
            "no sync folder yet: give one with --folder DIR (a folder that iCloud Drive, Syncthing, Dropbox or a network share keeps the same on your devices)"
        ),
    };
    // remembered for the next round, which may run from another directory
    let folder = std::fs::canonicalize(&folder).unwrap_or(folder);
    let report = store.sync_round(&folder)?;
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "this device: {} — folder {}",
        report.device,
        folder.display()
    )?;
    if let Some(old) = &report.copied_from {
        writeln!(
            out,
            "this database is a copy of device {old}'s (a restored backup or a copied file): it now syncs as {}, sent everything it has and applies what {old} wrote",
            report.device
        )?;
    }
    if report.wrote.is_empty() {
        writeln!(out, "wrote: nothing new")?;
    } else {
        writeln!(
            out,
            "wrote: {} change{} in {}",
            report.wrote_records,
            plural(report.wrote_records),
            report.wrote.join(", ")
        )?;
    }
    if report.applied_files.is_empty() {
        writeln!(out, "applied: nothing new from other devices")?;
    } else {
        writeln!(
            out,
            "applied: {} file{} from other devices, {} change{}",
            report.applied_files.len(),
            plural(report.applied_files.len()),
            report.applied_records,
            plural(report.applied_records)
        )?;
    }
    if report.waiting > 0 {
        writeln!(
            out,
            "waiting: {} change{} for a conversation or message that has not arrived yet",
            report.waiting,
            plural(report.waiting)
        )?;
    }
    if let Some(n) = report.compacted {
        writeln!(out, "folded this device's files up to {n} into a snapshot")?;
    }
    for notice in &report.notices {
        eprintln!("notice: {}: {}", notice.file, notice.message);
    }
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
