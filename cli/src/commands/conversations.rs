//! `companion conversations`: list, show, search, export, import, rename, pin and delete the
//! conversations in the database that `companion chat` and the app write. No model is loaded.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use memory::{Role, Store};

use crate::options::StoreOptions;

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    pub(crate) store: StoreOptions,
}

#[derive(Subcommand)]
enum Command {
    /// Pinned first, then the most recent
    List {
        #[arg(long, default_value_t = 0)]
        offset: i64,
        #[arg(long, default_value_t = 20)]
        limit: i64,
        #[arg(long)]
        json: bool,
    },
    /// Print a conversation as Markdown (or its JSON export)
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Full-text search over messages and titles
    Search {
        query: String,
        #[arg(long, default_value_t = 20)]
        limit: i64,
        #[arg(long)]
        json: bool,
    },
    /// Write a conversation to a file or stdout
    Export {
        id: String,
        #[arg(long, value_enum, default_value_t = Format::Markdown)]
        format: Format,
        /// Output file [default: stdout]
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Import a JSON export
    Import {
        file: PathBuf,
        /// Give it a new id (to keep a copy next to the original)
        #[arg(long)]
        new_id: bool,
    },
    Rename {
        id: String,
        title: String,
    },
    Pin {
        id: String,
    },
    Unpin {
        id: String,
    },
    /// Delete a conversation with its summaries and snapshot
    Delete {
        id: String,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Markdown,
    Json,
}

pub fn run(args: Args) -> Result<()> {
    let store = args.store.open()?;
    let resolve = |s: &Store, id: &str| s.resolve_conversation(id);
    let mut out = std::io::stdout().lock();
    match args.command {
        Command::List {
            offset,
            limit,
            json,
        } => {
            let list = store.list_conversations(offset, limit)?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?;
            } else if list.is_empty() {
                eprintln!("no conversations yet: `companion chat` starts one");
            }
            if !json {
                for item in list {
                    let c = &item.conversation;
                    writeln!(
                        out,
                        "{}  {}{}  ({} messages, {})",
                        short(c.id.as_str()),
                        if c.pinned { "📌 " } else { "" },
                        c.title,
                        item.message_count,
                        memory::types::rfc3339(c.updated_at)
                    )?;
                }
            }
        }
        Command::Show { id, json } => {
            let id = resolve(&store, &id)?;
            if json {
                writeln!(out, "{}", store.export_json(&id)?)?;
            } else {
                write!(out, "{}", store.export_markdown(&id)?)?;
            }
        }
        Command::Search { query, limit, json } => {
            let hits = store.search(&query, limit)?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&hits)?)?;
            } else {
                if hits.is_empty() {
                    eprintln!("nothing matches `{query}`");
                }
                for h in hits {
                    let mut snippet = h.snippet.clone();
                    for &(a, b) in h.highlights.iter().rev() {
                        snippet.insert(b, ']');
                        snippet.insert(a, '[');
                    }
                    let place = match (h.seq, h.role) {
                        (Some(seq), Some(role)) => format!(
                            "#{seq} {}",
                            if role == Role::User {
                                "you"
                            } else {
                                "companion"
                            }
                        ),
                        _ => "title".into(),
                    };
                    writeln!(
                        out,
                        "{}  {} · {}: {}",
                        short(h.conversation_id.as_str()),
                        h.conversation_title,
                        place,
                        snippet
                    )?;
                }
            }
        }
        Command::Export { id, format, output } => {
            let id = resolve(&store, &id)?;
            let text = match format {
                Format::Markdown => store.export_markdown(&id)?,
                Format::Json => store.export_json(&id)? + "\n",
            };
            match output {
                Some(path) => std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => out.write_all(text.as_bytes())?,
            }
        }
        Command::Import { file, new_id } => {
            let json = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let imported = store.import_json(&json, new_id)?;
            if imported.replaced_id.is_some() {
                eprintln!(
                    "notice: the export's conversation id is not a valid one; it was imported as {}",
                    imported.id
                );
            }
            writeln!(out, "{}", imported.id)?;
        }
        Command::Rename { id, title } => {
            store.rename_conversation(&resolve(&store, &id)?, &title)?
        }
        Command::Pin { id } => store.set_pinned(&resolve(&store, &id)?, true)?,
        Command::Unpin { id } => store.set_pinned(&resolve(&store, &id)?, false)?,
        Command::Delete { id } => {
            let id = resolve(&store, &id)?;
            let title = store.conversation(&id)?.title;
            store.delete_conversation(&id)?;
            eprintln!("deleted “{title}”");
        }
    }
    Ok(())
}

/// The first characters of an id, as `list` and `search` show it: cut on a character boundary
/// (an id from an older database may be any text).
fn short(id: &str) -> &str {
    id.char_indices().nth(8).map_or(id, |(at, _)| &id[..at])
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_ids_are_cut_on_character_boundaries() {
        assert_eq!(super::short("0f6c3c1e-2d0a"), "0f6c3c1e");
        assert_eq!(super::short("aéééééééé"), "aééééééé");
        assert_eq!(super::short("短"), "短");
    }
}
