//! `companion agent [--allow DIR]… [--allow-write DIR]… [--yes] [--max-steps N] [--json]
//! [--db PATH] TASK`: the agent on the model. Each step is printed as it happens — the call
//! with its arguments, a write waiting for the terminal's answer (unless `--yes`), progress,
//! the result's preview — and the answer streams to stdout. With `--json`, one JSON event per
//! line instead (the events the app's cards show). Folders are granted for this run only;
//! every call is recorded in the database's audit log. `--mcp-config FILE` adds the tools of
//! the MCP servers in FILE (asked like writes, see `companion tools`). Ctrl-C stops the run: between steps,
//! or at the next token.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent::{ApprovalAnswer, ApprovalRequest, Limits, RememberedApprovals, Toolbox};
use anyhow::{Context, Result};
use chat::DocumentParams;
use chat::agent_loop::{Agent, AgentEvent, AgentParams, AgentStop, CallGrammar, EngineModel};
use chat::tools::{JobSummarizer, StoreHost};
use clap::Args as ClapArgs;
use engine::SessionId;

use crate::options::{McpOptions, ModelOptions, SamplingOptions, StoreOptions};
use crate::output::Stream;

#[derive(ClapArgs)]
pub struct Args {
    /// What to do, in your words
    task: String,
    /// Grant a folder, read only (repeatable)
    #[arg(long = "allow", value_name = "DIR")]
    allow: Vec<std::path::PathBuf>,
    /// Grant a folder that tools may also write to, each write asked first (repeatable)
    #[arg(long = "allow-write", value_name = "DIR")]
    allow_write: Vec<std::path::PathBuf>,
    /// Approve writes without asking
    #[arg(long)]
    yes: bool,
    /// Tool calls the agent may make
    #[arg(long, default_value_t = 8, value_name = "N")]
    max_steps: usize,
    /// One JSON event per line instead of text
    #[arg(long)]
    json: bool,
    /// System prompt
    #[arg(long)]
    system: Option<String>,
    #[command(flatten)]
    sampling: SamplingOptions,
    #[command(flatten)]
    model: ModelOptions,
    #[command(flatten)]
    pub(crate) store: StoreOptions,
    #[command(flatten)]
    pub(crate) mcp: McpOptions,
}

pub fn run(args: Args) -> Result<()> {
    let sampling = args.sampling.params();
    sampling.sampling.validate()?;
    let store = args.store.open()?;
    let sandbox = super::tools::command_line_sandbox(&args.allow, &args.allow_write, &store)?;
    if !args.json {
        eprintln!("loading {} …", args.model.model_path().display());
    }
    let engine = args.model.spawn()?;
    crate::options::say_if_base_model(&engine);
    let grammar = CallGrammar::new(engine.tokenizer())?;
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = cancel.clone();
        ctrlc::set_handler(move || cancel.store(true, Ordering::Relaxed))
            .context("cannot install the Ctrl-C handler")?;
    }
    let host = StoreHost::new(&store);
    let remembered = RememberedApprovals::new();
    let summarizer = JobSummarizer {
        engine: &engine,
        store: &store,
        params: DocumentParams {
            context: args.model.context as usize,
            ..DocumentParams::default()
        },
        cancel: &cancel,
    };
    let yes = args.yes;
    let json = args.json;
    let approval = move |request: &ApprovalRequest<'_>| {
        if yes {
            ApprovalAnswer::Yes
        } else if json {
            // --json has no terminal dialogue: a write needs --yes
            ApprovalAnswer::No
        } else {
            super::tools::ask_on_terminal(request)
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
    let mut model = EngineModel {
        engine: engine.clone(),
        session: SessionId::MAIN,
    };
    let mut agent = Agent {
        model: &mut model,
        toolbox: &toolbox,
        grammar: &grammar,
        params: AgentParams {
            max_steps: args.max_steps,
            sampling: sampling.sampling.clone(),
            answer_max_tokens: sampling.max_tokens,
            system_prompt: args.system.clone(),
            ..AgentParams::default()
        },
        conversation: None,
        cancel: cancel.clone(),
    };
    let mut printer = StepPrinter::new(cancel.clone());
    let outcome = agent.run(&[], &args.task, &mut |event| {
        if json {
            if let Ok(mut line) = serde_json::to_string(&event) {
                line.push('\n');
                printer.stream.piece(&line);
            }
        } else {
            printer.show(event);
        }
    })?;
    printer.finish()?;
    if !json && outcome.constrained_tokens > 0 {
        eprintln!(
            "({} tokens decoded under the call grammar; its masks took {:.2} ms per token)",
            outcome.constrained_tokens,
            1e3 * outcome.constraint_seconds / outcome.constrained_tokens as f64
        );
    }
    Ok(())
}

/// The agent's events on the terminal: text to stdout as it streams, steps to stderr. When
/// stdout's reader leaves, the run is cancelled (see [`Stream`]).
pub(crate) struct StepPrinter {
    stream: Stream,
    in_text: bool,
}

impl StepPrinter {
    pub(crate) fn new(cancel: Arc<AtomicBool>) -> Self {
        Self {
            stream: Stream::new(Some(cancel)),
            in_text: false,
        }
    }

    /// The first failed write to stdout, if any.
    pub(crate) fn finish(self) -> std::io::Result<()> {
        self.stream.finish()
    }

    fn end_text(&mut self) {
        if self.in_text {
            self.stream.piece("\n");
            self.in_text = false;
        }
    }

    pub(crate) fn show(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Text(t) => {
                self.stream.piece(&t);
                self.in_text = true;
            }
            AgentEvent::CallStarted {
                step,
                tool,
                arguments,
            } => {
                self.end_text();
                eprintln!("[{step}] {tool} {arguments}");
            }
            AgentEvent::WaitingForApproval { .. } => self.end_text(),
            AgentEvent::Progress(p) => {
                let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
                eprintln!("    {}: {}{total} {}", p.tool, p.done, p.message);
            }
            AgentEvent::CallFinished {
                ok,
                error_code,
                preview,
                truncated,
                ..
            } => {
                let status = match (&error_code, ok) {
                    (_, true) => "ok".to_string(),
                    (Some(code), false) => format!("failed ({code})"),
                    (None, false) => "failed".to_string(),
                };
                let cut = if truncated { ", cut" } else { "" };
                eprintln!("    → {status}{cut}: {preview}");
            }
            AgentEvent::InvalidCall { step, problem } => {
                self.end_text();
                eprintln!("[{step}] the model's call was refused: {problem}");
            }
            AgentEvent::Done { stop, steps } => {
                self.end_text();
                match stop {
                    AgentStop::Answered => {}
                    AgentStop::MaxTokens => eprintln!("(the answer reached its token limit)"),
                    AgentStop::StepLimit => {
                        eprintln!(
                            "(the step limit of {steps} tool calls was reached: it answered with what it had)"
                        )
                    }
                    AgentStop::ContextFull => eprintln!("(stopped: the context is full)"),
                    AgentStop::NoRoomForResults => eprintln!(
                        "(the context had no room for another result: it answered with what it had)"
                    ),
                    AgentStop::Cancelled => eprintln!("(stopped)"),
                }
            }
        }
    }
}
