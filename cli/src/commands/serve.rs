//! `companion serve`: the local API (OpenAI- and Anthropic-compatible) on 127.0.0.1 for the
//! user's other programs, on the model the other commands use. The first line on stdout says
//! where it listens and where its token is; Ctrl-C stops it after the requests in flight.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args as ClapArgs;

use crate::options::{ModelOptions, SpeculationOption, StoreOptions};

#[derive(ClapArgs)]
pub struct Args {
    /// Port on 127.0.0.1 (0: any free port); no other interface is ever used
    #[arg(long, default_value_t = api::DEFAULT_PORT)]
    port: u16,
    #[command(flatten)]
    speculation: SpeculationOption,
    #[command(flatten)]
    pub(crate) store: StoreOptions,
    #[command(flatten)]
    model: ModelOptions,
}

pub fn run(args: Args) -> Result<()> {
    let database = args
        .store
        .db
        .clone()
        .unwrap_or_else(memory::default_database_path);
    // opened now so that a damaged database is set aside (and said) before serving; saved
    // exchanges go through this connection
    let store = args.store.open()?;
    let from_env = std::env::var("COMPANION_API_TOKEN").ok();
    let (token, source) = api::load_or_create(&api::token_path(&database), from_env.as_deref())?;
    let engine = args.model.spawn()?;
    crate::options::say_if_base_model(&engine);
    let completer = Arc::new(chat::completion::Completer::new(engine));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the server's runtime")?;
    runtime.block_on(async move {
        let (listener, addr) = api::bind(args.port)
            .await
            .with_context(|| format!("cannot listen on 127.0.0.1:{}", args.port))?;
        let state = Arc::new(
            api::ApiState::new(completer, token, addr.port(), Some(store))
                .with_speculation(args.speculation.speculate),
        );
        let token_at = match &source {
            api::TokenSource::Environment => "from COMPANION_API_TOKEN".to_string(),
            api::TokenSource::File(path) => format!("in {}", path.display()),
        };
        // Written, not println!'d: whoever started the server may stop reading its output
        // once it has the address (`companion serve | head -1`, a script, the test), and a
        // closed pipe must not end the server (println! panics on it).
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "Companion API on http://{addr}/v1 (model {}; bearer token {token_at})",
            state.model_id().unwrap_or_default()
        );
        let _ = writeln!(
            out,
            "requests are not saved unless they send `{}: true`; Ctrl-C stops the server",
            api::SAVE_HEADER
        );
        let _ = out.flush();
        drop(out);
        api::serve(listener, state, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("the server stopped")
    })
}
