//! Every configured server, for as long as the app or the command runs: started together,
//! each on its own, so that one that hangs, crashes or talks nonsense costs only its own
//! tools. The agent is synchronous (its loop runs on a blocking thread beside the engine);
//! the protocol is asynchronous, so the hub keeps a small runtime of its own and every call
//! waits on a channel with a deadline, from any thread, never on another runtime's executor.
//! Dropping the hub ends every server's process.

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

    /// Calls `name` (`server/tool`), waiting at most the server's call timeout.
    pub fn call_tool(&self, name: &str, arguments: &Value) -> Result<ExternalOutput> {
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
        runtime.spawn(async move {
            let _ = tx.send(tokio::time::timeout(timeout, connection::call(peer, own, args)).await);
        });
        let timed_out = || Error::CallTimeout {
            tool: name.to_string(),
            seconds: timeout.as_secs_f64().ceil() as u64,
        };
        let result = match rx.recv_timeout(timeout + Duration::from_secs(1)) {
            Err(_) | Ok(Err(_)) => return Err(timed_out()),
            Ok(Ok(Err(e))) => {
                if connection.peer.is_transport_closed() {
                    return Err(gone());
                }
                return Err(Error::Call {
                    tool: name.to_string(),
                    problem: connection::with_stderr(e.to_string(), &connection.stderr),
                });
            }
            Ok(Ok(Ok(result))) => result,
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
    ) -> std::result::Result<ExternalOutput, HostError> {
        self.call_tool(name, arguments).map_err(HostError::from)
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        // each session is closed inside the runtime (its process is killed on drop), then the
        // runtime stops without waiting for a server that does not let go
        let services: Vec<_> = self
            .servers
            .drain(..)
            .filter_map(|s| match s.state {
                State::Ready(c) => Some(c.service),
                _ => None,
            })
            .collect();
        let (tx, rx) = mpsc::channel::<()>();
        runtime.spawn(async move {
            for service in services {
                let _ = tokio::time::timeout(Duration::from_secs(2), service.cancel()).await;
            }
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(Duration::from_secs(5));
        runtime.shutdown_timeout(Duration::from_secs(1));
    }
}
