//! `companion chat --allow DIR…`: the interactive chat with the agent's tools enabled. Each
//! message runs the agent loop (calls printed as they happen, writes asked on the terminal
//! unless `--yes`); the calls and their results stay in the live context for the rest of the
//! chat, and every message and answer is saved to the conversation. Ctrl-C stops the
//! message being answered; at the prompt it leaves, as do Ctrl-D and `/exit`.
//!
//! This mode runs the agent on the whole transcript each turn and does not yet go through
//! the ConversationManager: no drafts, summaries or KV snapshots while tools are on.

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent::calls::Entry;
use agent::{ApprovalAnswer, ApprovalRequest, Limits, RememberedApprovals, Toolbox};
use anyhow::{Context, Result};
use chat::DocumentParams;
use chat::agent_loop::{Agent, AgentParams, CallGrammar, EngineModel};
use chat::tools::{JobSummarizer, StoreHost};
use engine::SessionId;
use memory::{NewMessage, Role};

use super::agent::StepPrinter;
use super::chat::Args;

pub fn run(args: Args) -> Result<()> {
    let params = args.sampling.params();
    params.sampling.validate()?;
    let store = args.store.open()?;
    let sandbox = super::tools::command_line_sandbox(&args.allow, &args.allow_write, &store)?;

    // a saved conversation continues as plain turns; a new one is created
    let (id, mut history) = match args.conversation.as_str() {
        "new" => {
            let settings = match &args.system {
                Some(s) => serde_json::json!({"systemPrompt": s}),
                None => serde_json::json!({}),
            };
            let c = store.create_conversation(
                chat::manager::NEW_CONVERSATION_TITLE,
                None,
                &settings,
            )?;
            (c.id, Vec::new())
        }
        id => {
            let id = store.resolve_conversation(id)?;
            let entries = store
                .messages(&id)?
                .into_iter()
                .map(|m| match m.role {
                    Role::Assistant => Entry::Model {
                        text: m.text,
                        call: None,
                    },
                    _ => Entry::User(m.text),
                })
                .collect();
            (id, entries)
        }
    };

    eprintln!("loading {} …", args.model.model_path().display());
    let engine = args.model.spawn()?;
    crate::options::say_if_base_model(&engine);
    let grammar = CallGrammar::new(engine.tokenizer())?;
    let names: Vec<String> = sandbox.grants().iter().map(|g| g.name.clone()).collect();
    eprintln!(
        "conversation {id}, tools on {}. /exit or Ctrl-D quits, Ctrl-C stops an answer.",
        names.join(", ")
    );

    let current: Arc<Mutex<Option<Arc<AtomicBool>>>> = Arc::new(Mutex::new(None));
    {
        let current = current.clone();
        ctrlc::set_handler(move || {
            let guard = current.lock().unwrap_or_else(|p| p.into_inner());
            match guard.as_ref() {
                Some(flag) => flag.store(true, Ordering::Relaxed),
                // at the prompt: every answer is saved already
                None => std::process::exit(130),
            }
        })
        .context("cannot install the Ctrl-C handler")?;
    }
    let host = StoreHost { store: &store };
    let remembered = RememberedApprovals::new();
    let summarizer_cancel = AtomicBool::new(false);
    let summarizer = JobSummarizer {
        engine: &engine,
        store: &store,
        params: DocumentParams {
            context: args.model.context as usize,
            ..DocumentParams::default()
        },
        cancel: &summarizer_cancel,
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
        let cancel = Arc::new(AtomicBool::new(false));
        *current.lock().unwrap_or_else(|p| p.into_inner()) = Some(cancel.clone());
        let mut agent = Agent {
            model: &mut model,
            toolbox: &toolbox,
            grammar: &grammar,
            params: AgentParams {
                max_steps: args.max_steps,
                sampling: params.sampling.clone(),
                answer_max_tokens: params.max_tokens,
                system_prompt: args.system.clone(),
                ..AgentParams::default()
            },
            conversation: Some(id.as_str().to_string()),
            cancel,
        };
        let mut printer = StepPrinter::default();
        let result = agent.run(&history, text, &mut |e| printer.show(e));
        *current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        match result {
            Ok(outcome) => {
                store.append_message(&id, &NewMessage::complete(Role::User, text, None))?;
                store.append_message(
                    &id,
                    &NewMessage::complete(Role::Assistant, outcome.answer.clone(), None),
                )?;
                history = outcome
                    .entries
                    .into_iter()
                    .filter(|e| !matches!(e, Entry::System(_)))
                    .collect();
            }
            Err(e) => eprintln!("error: {e}"),
        }
    }
    eprintln!("saved as conversation {id}");
    Ok(())
}
