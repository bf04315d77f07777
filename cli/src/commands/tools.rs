//! `companion tools`: the agent's tools without the model, for scripts and tests.
//!
//! - `tools list [--json] [--mcp-config FILE]`: every tool with its description and argument
//!   schema, with the tools of the MCP servers in FILE (named `server/tool`);
//! - `tools call NAME ARGS_JSON [--allow DIR]… [--allow-write DIR]… [--yes] [--db PATH]
//!   [--json]`: run one tool. Folders are granted for this run only, by `--allow`
//!   (read-only) and `--allow-write`; the database's own files are never reachable. A write
//!   asks on the terminal unless `--yes`. The result goes to stdout (its text, or with
//!   `--json` one object); a failure is one line on stderr and a non-zero exit. The call is
//!   recorded in the database's audit log either way. The model is loaded only if the tool
//!   is summarize_file. With `--mcp-config FILE`, an MCP server's tool (`server/tool`) is
//!   called the same way, asked first unless the server marks it read-only and the file
//!   allows that server's read-only tools (`"allowReadOnlyTools": true`).

use std::cell::OnceCell;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent::{
    ApprovalAnswer, ApprovalRequest, CallContext, FileSummarizer, FileSummary, FileToSummarize,
    GrantSpec, HostError, Limits, RememberedApprovals, Sandbox, ToolCall, ToolProgress, Toolbox,
    TurnBudget,
};
use anyhow::{Context, Result, anyhow};
use chat::DocumentParams;
use chat::tools::{JobSummarizer, StoreHost, private_paths};
use clap::{Args as ClapArgs, Subcommand};
use engine::EngineHandle;
use memory::Store;

use crate::options::{McpOptions, ModelOptions, StoreOptions};
use crate::output::outln;

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every tool with its description and JSON Schema
    List {
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        mcp: McpOptions,
    },
    /// Run one tool with JSON arguments, without the model (except for summarize_file)
    Call(Box<CallArgs>),
}

#[derive(ClapArgs)]
struct CallArgs {
    /// The tool's name (see `companion tools list`)
    name: String,
    /// Its arguments as a JSON object, e.g. '{"path": "docs/a.txt"}'
    #[arg(default_value = "{}")]
    arguments: String,
    /// Grant a folder, read only (repeatable)
    #[arg(long = "allow", value_name = "DIR")]
    allow: Vec<PathBuf>,
    /// Grant a folder that tools may also write to, each write asked first (repeatable)
    #[arg(long = "allow-write", value_name = "DIR")]
    allow_write: Vec<PathBuf>,
    /// Approve writes without asking
    #[arg(long)]
    yes: bool,
    /// Print one JSON object: the tool, its text, its data and whether it was cut
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    pub(crate) store: StoreOptions,
    #[command(flatten)]
    model: ModelOptions,
    #[command(flatten)]
    mcp: McpOptions,
}

impl Args {
    /// The database a `call` names with `--db`, for the log to go beside it.
    pub(crate) fn db(&self) -> Option<PathBuf> {
        match &self.command {
            Command::Call(call) => call.store.db.clone(),
            Command::List { .. } => None,
        }
    }
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::List { json, mcp } => list(json, &mcp),
        Command::Call(call) => run_call(*call),
    }
}

fn list(json: bool, mcp: &McpOptions) -> Result<()> {
    let mut tools = agent::declarations(&Limits::default());
    let hub = mcp.start()?;
    if let Some(hub) = &hub {
        use agent::ExternalTools;
        tools.extend(hub.tools().into_iter().map(|t| t.tool));
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&tools)?)?;
        return Ok(());
    }
    for tool in tools {
        let writes = match (tool.name.contains('/'), tool.writes) {
            (false, true) => "  [writes: asks first]",
            (false, false) => "",
            (true, true) => "  [MCP: asks first]",
            (true, false) => "  [MCP: read-only, allowed without asking]",
        };
        outln!("{}{writes}\n  {}", tool.name, tool.description)?;
        outln!("  arguments: {}", tool.parameters)?;
    }
    Ok(())
}

fn run_call(args: CallArgs) -> Result<()> {
    let arguments: serde_json::Value = serde_json::from_str(&args.arguments)
        .with_context(|| format!("the arguments of {} are not valid JSON", args.name))?;
    let store = args.store.open()?;
    let sandbox = super::tools::command_line_sandbox(&args.allow, &args.allow_write, &store)?;
    let host = StoreHost::new(&store);
    let remembered = RememberedApprovals::new();
    let summarizer = LazySummarizer {
        model: args.model.clone(),
        store: &store,
        engine: OnceCell::new(),
        cancel: Arc::new(AtomicBool::new(false)),
    };
    let yes = args.yes;
    let approval = move |request: &ApprovalRequest<'_>| {
        if yes {
            ApprovalAnswer::Yes
        } else {
            ask_on_terminal(request)
        }
    };
    let hub = args.mcp.start()?;
    let toolbox = Toolbox {
        sandbox: &sandbox,
        host: &host,
        summarizer: Some(&summarizer),
        approval: &approval,
        remembered: &remembered,
        limits: Limits::default(),
        external: hub.as_ref().map(|h| h as &dyn agent::ExternalTools),
    };
    let budget = TurnBudget::for_limits(&toolbox.limits);
    let mut drew = false;
    let mut progress = |p: ToolProgress| {
        let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
        eprint!("\r{}: {}{total} {}   ", p.tool, p.done, p.message);
        let _ = std::io::stderr().flush();
        drew = true;
    };
    let mut cx = CallContext {
        conversation: None,
        budget: &budget,
        progress: &mut progress,
        cancel: None,
    };
    let result = toolbox.call(&ToolCall::new(&args.name, arguments), &mut cx);
    if drew {
        eprintln!();
    }
    match result {
        Ok(out) => {
            if args.json {
                let value = serde_json::json!({
                    "tool": args.name,
                    "text": out.text_for_model,
                    "data": out.data,
                    "truncated": out.truncated,
                });
                outln!("{value}")?;
            } else {
                outln!("{}", out.text_for_model)?;
            }
            Ok(())
        }
        Err(e) => {
            if args.json {
                outln!(
                    "{}",
                    serde_json::json!({"tool": args.name, "error": {"code": e.code(), "message": e.to_string()}})
                )?;
            }
            Err(anyhow!(e))
        }
    }
}

/// `add_note wants to save a note titled "x" (3 characters)` with the exact arguments, then
/// y / n / a (yes for this run).
pub(crate) fn ask_on_terminal(request: &ApprovalRequest<'_>) -> ApprovalAnswer {
    eprintln!(
        "{} wants to {}\n  arguments: {}",
        request.tool, request.action, request.arguments
    );
    eprint!("Allow? [y]es, [n]o, [a]lways in this run: ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return ApprovalAnswer::No;
    }
    match line.trim().to_lowercase().as_str() {
        "y" | "yes" => ApprovalAnswer::Yes,
        "a" | "always" => ApprovalAnswer::YesForConversation,
        _ => ApprovalAnswer::No,
    }
}

/// summarize_file's model, loaded on first use: every other tool runs without it.
struct LazySummarizer<'a> {
    model: ModelOptions,
    store: &'a Store,
    engine: OnceCell<EngineHandle>,
    cancel: Arc<AtomicBool>,
}

impl FileSummarizer for LazySummarizer<'_> {
    fn summarize(
        &self,
        file: &FileToSummarize,
        progress: &mut dyn FnMut(ToolProgress),
    ) -> Result<FileSummary, HostError> {
        if self.engine.get().is_none() {
            let engine = self.model.spawn().map_err(|e| {
                let code = e
                    .downcast_ref::<engine::Error>()
                    .map_or("model_unavailable", |e| e.code());
                HostError::new(code, crate::one_line(&e))
            })?;
            let cancel = self.cancel.clone();
            ctrlc::set_handler(move || cancel.store(true, Ordering::Relaxed))
                .map_err(|e| HostError::new("io", e.to_string()))?;
            let _ = self.engine.set(engine);
        }
        let Some(engine) = self.engine.get() else {
            return Err(HostError::new(
                "model_unavailable",
                "the model could not be loaded",
            ));
        };
        let job = JobSummarizer {
            engine,
            store: self.store,
            params: DocumentParams {
                context: self.model.context as usize,
                ..DocumentParams::default()
            },
            cancel: &self.cancel,
        };
        job.summarize(file, progress)
    }
}

/// The sandbox of a command line's `--allow` (read-only) and `--allow-write` folders, with the
/// store's own files private: one place for `tools call`, `agent` and `chat --allow`.
pub(crate) fn command_line_sandbox(
    allow: &[PathBuf],
    allow_write: &[PathBuf],
    store: &memory::Store,
) -> agent::Result<Sandbox> {
    let specs: Vec<GrantSpec> = allow
        .iter()
        .map(GrantSpec::read_only)
        .chain(allow_write.iter().map(GrantSpec::may_write))
        .collect();
    Sandbox::new(&specs, &private_paths(store.path()))
}
