//! Every configured server, for as long as the app or the command runs: started together,
//! each on its own, so that one that hangs, crashes or talks nonsense costs only its own
//! tools. The agent is synchronous (its loop runs on a blocking thread beside the engine);
//! the protocol is asynchronous, so the hub keeps a small runtime of its own and every call
//! waits on a channel with a deadline, from any thread, never on another runtime's executor.
//! Dropping the hub ends every server's process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use agent::{ExternalOutput, ExternalTool, ExternalTools, HostError};
use serde::Serialize;
use serde_json::Value;

use crate::config::{McpConfig, START_TIMEOUT, ServerConfig};
use crate::connection::{self, Connection};
use crate::content;
use crate::error::{Error, Result};

/// The text a UI card keeps of one result (the model's copy is cut by the toolbox's caps).
const DATA_TEXT_BYTES: usize = 64 * 1024;
/// How often a call in progress looks whether the user stopped the turn.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// A server as the Servers panel and `companion tools list` show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// `ready`, `failed`, `stopped` (it ended after starting) or `disabled`.
    pub state: &'static str,
    /// Why it failed or stopped.
    pub message: Option<String>,
    pub tools: Vec<ToolStatus>,
    /// Tools left out, each with its reason.
    pub notices: Vec<String>,
    pub allow_read_only_tools: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolStatus {
    pub name: String,
    pub description: String,
    /// Runs without asking (read-only, and the user allowed it).
    pub pre_approved: bool,
}

enum State {
    Ready(Box<Connection>),
    Failed(String),
    Disabled,
}

struct Server {
    name: String,
    config: ServerConfig,
    state: State,
}

pub struct McpHub {
    /// `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
    servers: Vec<Server>,
}

impl McpHub {
    /// Starts every enabled server of `config` at once and waits until each is ready or has
    /// failed (at most [`START_TIMEOUT`]). A server that fails is reported in
    /// [`McpHub::status`], never as an error here.
    pub fn start(config: &McpConfig) -> Result<McpHub> {
        Self::start_within(config, START_TIMEOUT)
    }

    /// [`McpHub::start`], giving each server at most `start_timeout` to be ready.
    pub fn start_within(config: &McpConfig, start_timeout: Duration) -> Result<McpHub> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mcp")
            .enable_all()
            .build()
            .map_err(|e| Error::Start {
                server: "(all)".into(),
                problem: format!("no runtime for MCP: {e}"),
            })?;
        let mut pending = Vec::new();
        let mut servers = Vec::new();
        for (name, server) in &config.mcp_servers {
            if server.disabled {
                servers.push(Server {
                    name: name.clone(),
                    config: server.clone(),
                    state: State::Disabled,
                });
                continue;
            }
            let (tx, rx) = mpsc::channel();
            let (n, c) = (name.clone(), server.clone());
            runtime.spawn(async move {
                let started = tokio::time::timeout(start_timeout, connection::connect(&n, &c))
                    .await
                    .unwrap_or_else(|_| {
                        Err(Error::StartTimeout {
                            server: n.clone(),
                            seconds: start_timeout.as_secs_f64().ceil() as u64,
                        })
                    });
                let _ = tx.send(started);
            });
            pending.push((name.clone(), server.clone(), rx));
        }
        for (name, config, rx) in pending {
            let state = match rx.recv_timeout(start_timeout + Duration::from_secs(2)) {
                Ok(Ok(connection)) => {
                    let connection = Box::new(connection);
                    tracing::info!(server = %name, tools = connection.tools.len(), "MCP server ready");
                    State::Ready(connection)
                }
                Ok(Err(e)) => {
                    tracing::warn!(server = %name, code = e.code(), "MCP server did not start");
                    State::Failed(e.to_string())
                }
                Err(_) => State::Failed(
                    Error::StartTimeout {
                        server: name.clone(),
                        seconds: start_timeout.as_secs_f64().ceil() as u64,
                    }
                    .to_string(),
                ),
            };
            servers.push(Server {
                name,
                config,
                state,
            });
        }
        servers.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(McpHub {
            runtime: Some(runtime),
            servers,
        })
    }

    /// Every configured server: its state, its tools and what was left out.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers
            .iter()
            .map(|s| {
                let (state, message, tools, notices) = match &s.state {
                    State::Ready(c) if c.peer.is_transport_closed() => (
                        "stopped",
                        Some(connection::with_stderr(
                            "the server has stopped".into(),
                            &c.stderr,
                        )),
                        Vec::new(),
                        c.notices.clone(),
                    ),
                    State::Ready(c) => (
                        "ready",
                        None,
                        c.tools
                            .iter()
                            .map(|(_, t)| ToolStatus {
                                name: t.tool.name.to_string(),
                                description: t.tool.description.to_string(),
                                pre_approved: t.pre_approved,
                            })
                            .collect(),
                        c.notices.clone(),
                    ),
                    State::Failed(m) => ("failed", Some(m.clone()), Vec::new(), Vec::new()),
                    State::Disabled => ("disabled", None, Vec::new(), Vec::new()),
                };
                ServerStatus {
                    name: s.name.clone(),
                    transport: s.config.transport.kind(),
                    state,
                    message,
                    tools,
                    notices,
                    allow_read_only_tools: s.config.allow_read_only_tools,
                }
            })
            .collect()
    }

    fn find(&self, name: &str) -> Option<(&Server, &Connection, &str)> {
        self.servers.iter().find_map(|s| match &s.state {
            State::Ready(c) => c
                .tools
                .iter()
                .find(|(_, t)| t.tool.name == name)
                .map(|(own, _)| (s, c.as_ref(), own.as_str())),
            _ => None,
        })
    }

    /// Calls `name` (`server/tool`), waiting at most the server's call timeout, or until
    /// `cancel` is set. An abandoned call is cancelled at the server (the SDK sends
    /// `notifications/cancelled` when the request is dropped).
    pub fn call_tool(
        &self,
        name: &str,
        arguments: &Value,
        cancel: Option<&AtomicBool>,
    ) -> Result<ExternalOutput> {
        let (server, connection, own) = self
            .find(name)
            .ok_or_else(|| Error::UnknownTool(name.to_string()))?;
        let gone = || Error::ServerGone {
            server: server.name.clone(),
            tool: name.to_string(),
        };
        if connection.peer.is_transport_closed() {
            return Err(gone());
        }
        let timeout = server.config.call_timeout();
        let runtime = self.runtime.as_ref().ok_or_else(gone)?;
        let (tx, rx) = mpsc::channel();
        let (peer, own, args) = (connection.peer.clone(), own.to_string(), arguments.clone());
        let task = runtime.spawn(async move {
            let _ = tx.send(tokio::time::timeout(timeout, connection::call(peer, own, args)).await);
        });
        let timed_out = || Error::CallTimeout {
            tool: name.to_string(),
            seconds: timeout.as_secs_f64().ceil() as u64,
        };
        // waited in slices, to see a stop
        let deadline = std::time::Instant::now() + timeout + Duration::from_secs(1);
        let answer = loop {
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                task.abort();
                return Err(Error::Cancelled {
                    tool: name.to_string(),
                });
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left.min(CANCEL_POLL)) {
                Ok(answer) => break Some(answer),
                Err(mpsc::RecvTimeoutError::Timeout) if !left.is_zero() => continue,
                Err(_) => break None,
            }
        };
        let result = match answer {
            None | Some(Err(_)) => {
                task.abort();
                return Err(timed_out());
            }
            Some(Ok(Err(e))) => {
                if connection.peer.is_transport_closed() {
                    return Err(gone());
                }
                return Err(Error::Call {
                    tool: name.to_string(),
                    problem: connection::with_stderr(e.to_string(), &connection.stderr),
                });
            }
            Some(Ok(Ok(result))) => result,
        };
        let (text, is_error) = content::result_text(&result);
        let data = content::result_data(&server.name, name, &text, is_error, DATA_TEXT_BYTES);
        Ok(ExternalOutput {
            text,
            data,
            is_error,
        })
    }
}

impl ExternalTools for McpHub {
    fn tools(&self) -> Vec<ExternalTool> {
        self.servers
            .iter()
            .filter_map(|s| match &s.state {
                State::Ready(c) if !c.peer.is_transport_closed() => Some(c.tools.iter()),
                _ => None,
            })
            .flatten()
            .map(|(_, t)| t.clone())
            .collect()
    }

    fn call(
        &self,
        name: &str,
        arguments: &Value,
        cancel: Option<&AtomicBool>,
    ) -> std::result::Result<ExternalOutput, HostError> {
        self.call_tool(name, arguments, cancel)
            .map_err(HostError::from)
    }
}

impl McpHub {
    /// Ends every server now, however many holders the hub has (the app is quitting while a
    /// turn may still hold it): each session is cancelled, which closes the server's stdin;
    /// a stdio server's process group still there after `wait` is sent SIGTERM, then SIGKILL.
    pub fn shutdown(&self, wait: Duration) {
        let mut groups = Vec::new();
        for server in &self.servers {
            if let State::Ready(c) = &server.state {
                c.service.cancellation_token().cancel();
                groups.extend(c.process_group);
            }
        }
        // closing the session closes the server's stdin: a server that does not exit then,
        // nor start to, is signalled
        connection::end_process_groups(&groups, wait);
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // dropped on an async task (a holder of the last `Arc` there): no waiting here
            for server in &self.servers {
                if let State::Ready(c) = &server.state {
                    c.service.cancellation_token().cancel();
                    connection::kill_process_group(c.process_group);
                }
            }
            self.servers.clear();
            runtime.shutdown_background();
            return;
        }
        self.shutdown(Duration::from_secs(2));
        // the sessions are dropped inside the runtime (their processes' kill runs there)
        let servers: Vec<Server> = self.servers.drain(..).collect();
        let (tx, rx) = mpsc::channel::<()>();
        runtime.spawn(async move {
            drop(servers);
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(Duration::from_secs(2));
        runtime.shutdown_timeout(Duration::from_secs(1));
    }
}
