//! `companion chat --allow DIR… | --mcp-config FILE`: the interactive chat with the agent's tools enabled. Each
//! message is a turn with tools of the conversation ([`chat::ConversationManager::send_with_tools`]):
//! calls printed as they happen, writes asked on the terminal unless `--yes`; the messages,
//! the calls kept with each answer, summaries of older turns and the KV snapshot at the end are
//! saved like any chat's, so `--conversation ID` resumes it (with or without tools). Ctrl-C
//! stops the message being answered (a summarize_file job too); at the prompt it leaves, as do
//! Ctrl-D and `/exit`.

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent::{ApprovalAnswer, ApprovalRequest, Limits, RememberedApprovals, Toolbox};
use anyhow::{Context, Result};
use chat::agent_loop::{AgentEvent, CallGrammar, EngineModel};
use chat::tools::{JobSummarizer, StoreHost};
use chat::{ConversationManager, DocumentParams, ManagerConfig, Tools, TurnEvent};
use engine::SessionId;
use memory::Store;

use super::agent::StepPrinter;
use super::chat::Args;

pub fn run(args: Args) -> Result<()> {
    let params = args.sampling.params();
    params.sampling.validate()?;
    let store = args.store.open()?;
    let sandbox = super::tools::command_line_sandbox(&args.allow, &args.allow_write, &store)?;
    let (existing, stored_system) = super::chat::conversation_to_continue(&args, &store)?;
    // the tools' own connection to the same database (the manager holds the other)
    let tool_store = Store::open(store.path())?.store;

    eprintln!("loading {} …", args.model.model_path().display());
    let engine = args.model.spawn()?;
    crate::options::say_if_base_model(&engine);
    let grammar = CallGrammar::new(engine.tokenizer())?;
    let mut config = ManagerConfig::for_engine(&engine);
    config.system_prompt = args.system.clone().or(stored_system);
    let mut manager = ConversationManager::new(engine.clone(), store, config);
    let id = match existing {
        Some(id) => {
            manager.open(&id)?;
            id
        }
        None => manager.create(chat::manager::NEW_CONVERSATION_TITLE)?,
    };
    let hub = args.mcp.start()?;
    let mut names: Vec<String> = sandbox.grants().iter().map(|g| g.name.clone()).collect();
    if let Some(hub) = &hub {
        names.extend(
            hub.status()
                .iter()
                .filter(|s| s.state == "ready")
                .map(|s| format!("MCP server \"{}\"", s.name)),
        );
    }
    eprintln!(
        "conversation {id}, tools on {}. /exit or Ctrl-D quits, Ctrl-C stops an answer.",
        names.join(", ")
    );

    // one stop flag for the whole chat, cleared before each message: the document job a
    // summarize_file call runs holds it for as long as the toolbox lives
    let cancel = Arc::new(AtomicBool::new(false));
    let answering = Arc::new(Mutex::new(false));
    {
        let cancel = cancel.clone();
        let answering = answering.clone();
        ctrlc::set_handler(move || {
            if *answering.lock().unwrap_or_else(|p| p.into_inner()) {
                cancel.store(true, Ordering::Relaxed);
            } else {
                // at the prompt: every answer is saved already
                std::process::exit(130);
            }
        })
        .context("cannot install the Ctrl-C handler")?;
    }
    let host = StoreHost::new(&tool_store);
    let remembered = RememberedApprovals::new();
    let summarizer = JobSummarizer {
        engine: &engine,
        store: &tool_store,
        params: DocumentParams {
            context: args.model.context as usize,
            ..DocumentParams::default()
        },
        cancel: &cancel,
    };
    let yes = args.yes;
    let approval = move |request: &ApprovalRequest<'_>| {
        if yes {
            ApprovalAnswer::Yes
        } else {
            super::tools::ask_on_terminal(request)
        }
    };
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
    let stdin = std::io::stdin();
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            eprintln!();
            break;
        }
        let text = line.trim();
        match text {
            "" => continue,
            "/exit" | "/quit" => break,
            _ => {}
        }
        cancel.store(false, Ordering::Relaxed);
        *answering.lock().unwrap_or_else(|p| p.into_inner()) = true;
        let mut printer = StepPrinter::new(cancel.clone());
        let result = manager.send_with_tools(
            text,
            &params,
            Tools {
                model: &mut model,
                toolbox: &toolbox,
                grammar: &grammar,
                max_steps: args.max_steps,
            },
            &cancel,
            &mut |event| match event {
                TurnEvent::Text(t) => printer.show(AgentEvent::Text(t.to_string())),
                TurnEvent::Tool(e) => printer.show(e.clone()),
                TurnEvent::Summarizing => eprintln!("(summarizing older turns…)"),
                TurnEvent::Thermal(n) => eprintln!("\n[thermal: {}] {}", n.state, n.message),
                TurnEvent::User(_) | TurnEvent::Tick => {}
            },
        );
        *answering.lock().unwrap_or_else(|p| p.into_inner()) = false;
        if let Err(e) = result {
            crate::log::report(e.code(), &e.to_string());
        }
        // stdout's reader left: the answer was stopped there; end the chat as /exit does
        if let Err(closed) = printer.finish() {
            manager.close()?;
            eprintln!("saved as conversation {id}");
            return Err(closed.into());
        }
    }
    manager.close()?;
    eprintln!("saved as conversation {id}");
    Ok(())
}
