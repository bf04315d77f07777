//! One server, connected: started (a process on stdio, or a URL), the protocol's handshake
//! done, its tools read and checked. A server is a stranger: its tool names, descriptions and
//! schemas go into the model's prompt and grammar, so each is bounded and a tool that breaks
//! a bound is left out with a notice rather than trusted.

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use agent::{ExternalTool, Tool};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use crate::config::{ServerConfig, Transport};
use crate::error::{Error, Result};

/// The most tools one server may add (each costs prompt tokens).
pub const MAX_TOOLS_PER_SERVER: usize = 64;
/// A tool's description is cut to this many characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// A tool whose argument schema is larger than this (as JSON) is left out.
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// The end of a stdio server's error output kept for messages.
const STDERR_TAIL_BYTES: usize = 2048;

pub(crate) struct Connection {
    /// Kept for its lifetime: dropping it ends the session (and the process).
    pub service: RunningService<RoleClient, ClientConfig>,
    pub peer: Peer<RoleClient>,
    /// `(the server's own name for it, the tool as the agent sees it)`.
    pub tools: Vec<(String, ExternalTool)>,
    pub notices: Vec<String>,
    pub stderr: Arc<Mutex<String>>,
    /// A stdio server's process group (its leader's pid), to end whatever it started.
    pub process_group: Option<u32>,
}

fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("companion", env!("CARGO_PKG_VERSION")),
    )
}

/// Starts `name` and reads its tools.
pub(crate) async fn connect(name: &str, config: &ServerConfig) -> Result<Connection> {
    let start = |problem: String| Error::Start {
        server: name.to_string(),
        problem,
    };
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut process_group = None;
    let service = match &config.transport {
        Transport::Stdio { command, args, env } => {
            if cfg!(target_os = "ios") {
                return Err(Error::StdioUnsupported);
            }
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).envs(env);
            let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
            wrapped.wrap(process_wrap::tokio::KillOnDrop);
            #[cfg(unix)]
            wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
            let (process, err) = TokioChildProcess::builder(wrapped)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| start(format!("cannot run `{command}`: {e}")))?;
            if let Some(err) = err {
                tokio::spawn(keep_tail(err, stderr.clone()));
            }
            process_group = process.id().filter(|_| cfg!(unix));
            client_info()
                .serve(process)
                .await
                .map_err(|e| start(with_stderr(e.to_string(), &stderr)))?
        }
        Transport::Http { url, headers } => {
            let mut map = std::collections::HashMap::new();
            for (k, v) in headers {
                let key = k
                    .parse()
                    .map_err(|_| start(format!("the header name `{k}` is not valid")))?;
                let value = v
                    .parse()
                    .map_err(|_| start(format!("the value of header `{k}` is not valid")))?;
                map.insert(key, value);
            }
            let transport = StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(map),
            );
            client_info()
                .serve(transport)
                .await
                .map_err(|e| start(e.to_string()))?
        }
    };
    let peer = service.peer().clone();
    let listed = peer.list_all_tools().await.map_err(|e| {
        start(format!(
            "its tool list: {}",
            with_stderr(e.to_string(), &stderr)
        ))
    })?;
    let mut notices = Vec::new();
    let mut tools: Vec<(String, ExternalTool)> = Vec::new();
    for tool in listed {
        let value = serde_json::to_value(&tool).unwrap_or(Value::Null);
        match checked_tool(name, config, &value) {
            Ok(t) if tools.iter().any(|(own, _)| *own == tool.name) => notices.push(format!(
                "a second tool named {} was left out: the first is used",
                t.tool.name
            )),
            Ok(t) if tools.len() < MAX_TOOLS_PER_SERVER => tools.push((tool.name.to_string(), t)),
            Ok(t) => notices.push(format!(
                "{} left out: a server may add at most {MAX_TOOLS_PER_SERVER} tools",
                t.tool.name
            )),
            Err(notice) => notices.push(notice),
        }
    }
    Ok(Connection {
        service,
        peer,
        tools,
        notices,
        stderr,
        process_group,
    })
}

/// Ends a stdio server's process group: what is left of it after `grace` gets SIGTERM, and
/// SIGKILL half a second later (the order MCP's stdio shutdown gives, after closing stdin).
#[cfg(unix)]
pub(crate) fn end_process_groups(groups: &[u32], grace: std::time::Duration) {
    use std::time::{Duration, Instant};
    let alive = |g: u32| {
        // SAFETY: killpg with signal 0 only checks that the group exists
        unsafe { libc::killpg(g as libc::pid_t, 0) == 0 }
    };
    let wait_until_gone = |within: Duration| {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline && groups.iter().any(|g| alive(*g)) {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_until_gone(grace);
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        for g in groups.iter().filter(|g| alive(**g)) {
            // SAFETY: signals a process group this hub started and leads
            unsafe { libc::killpg(*g as libc::pid_t, signal) };
        }
        wait_until_gone(Duration::from_millis(500));
    }
}

#[cfg(not(unix))]
pub(crate) fn end_process_groups(_groups: &[u32], _grace: std::time::Duration) {}

/// SIGKILL to a stdio server's process group, without waiting.
pub(crate) fn kill_process_group(group: Option<u32>) {
    #[cfg(unix)]
    if let Some(g) = group {
        // SAFETY: signals a process group this hub started and leads
        unsafe { libc::killpg(g as libc::pid_t, libc::SIGKILL) };
    }
    #[cfg(not(unix))]
    let _ = group;
}

/// A tool of server `server` as the agent sees it, or why it is left out.
pub(crate) fn checked_tool(
    server: &str,
    config: &ServerConfig,
    tool: &Value,
) -> std::result::Result<ExternalTool, String> {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
    let name_ok = agent::tool::is_plain_name(name, 64, b".");
    if !name_ok {
        let shown: String = name.chars().take(40).collect();
        return Err(format!(
            "a tool of \"{server}\" named {shown:?} was left out: tool names are 1-64 letters, \
             digits, `_`, `.` or `-`"
        ));
    }
    let full = format!("{server}/{name}");
    let mut schema = tool
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"type": "object"}));
    let Some(map) = schema.as_object_mut() else {
        return Err(format!(
            "{full} was left out: its input schema is not an object"
        ));
    };
    map.entry("type").or_insert_with(|| "object".into());
    // the prompt shows the schema; its own $schema URL and metadata are noise there
    map.remove("$schema");
    if schema.to_string().len() > MAX_SCHEMA_BYTES {
        return Err(format!(
            "{full} was left out: its input schema is larger than {} KB",
            MAX_SCHEMA_BYTES / 1024
        ));
    }
    let description: String = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_DESCRIPTION_CHARS)
        .collect();
    let read_only = tool
        .pointer("/annotations/readOnlyHint")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let pre_approved = read_only && config.allow_read_only_tools;
    Ok(ExternalTool {
        approval_key: format!("{full}@{:016x}", fingerprint(config)),
        tool: Tool {
            name: full.into(),
            description: description.trim().to_string().into(),
            parameters: schema,
            writes: !pre_approved,
        },
        server: server.to_string(),
        pre_approved,
    })
}

/// A hash of the server's configuration (what it runs, where it is, its trust): a "yes for this
/// conversation" given to one program is not carried over to another under the same name.
fn fingerprint(config: &ServerConfig) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(config)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// Calls `tool` (the server's name for it) with `arguments`; the result as JSON.
pub(crate) async fn call(
    peer: Peer<RoleClient>,
    tool: String,
    arguments: Value,
) -> std::result::Result<Value, rmcp::ServiceError> {
    let mut params = CallToolRequestParams::new(tool);
    if let Value::Object(map) = arguments {
        params = params.with_arguments(map);
    }
    let result = peer.call_tool(params).await?;
    Ok(serde_json::to_value(result).unwrap_or(Value::Null))
}

/// Keeps the last bytes a server wrote to its error output (for messages), reading all of it
/// so that a server that writes a lot never blocks on a full pipe.
async fn keep_tail(mut err: tokio::process::ChildStderr, tail: Arc<Mutex<String>>) {
    let mut buf = vec![0u8; 4096];
    while let Ok(n) = err.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
        t.push_str(&String::from_utf8_lossy(&buf[..n]));
        if t.len() > STDERR_TAIL_BYTES {
            let mut cut = t.len() - STDERR_TAIL_BYTES;
            while !t.is_char_boundary(cut) {
                cut += 1;
            }
            t.drain(..cut);
        }
    }
}

/// `message`, with the last line the server wrote to its error output, if any.
pub(crate) fn with_stderr(message: String, stderr: &Mutex<String>) -> String {
    let tail = stderr.lock().unwrap_or_else(|e| e.into_inner());
    match tail.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(line) => {
            let line: String = line.trim().chars().take(300).collect();
            format!("{message} (it said: {line})")
        }
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(allow: bool) -> ServerConfig {
        ServerConfig {
            transport: Transport::Stdio {
                command: "x".into(),
                args: vec![],
                env: Default::default(),
            },
            disabled: false,
            allow_read_only_tools: allow,
            timeout_seconds: None,
        }
    }

    #[test]
    fn read_only_tools_skip_approval_only_when_the_user_allowed_them() {
        let tool = json!({"name": "get", "description": "Gets\nthings",
            "inputSchema": {"type": "object", "$schema": "x"},
            "annotations": {"readOnlyHint": true}});
        let asked = checked_tool("s", &config(false), &tool).unwrap();
        assert_eq!(asked.tool.name, "s/get");
        assert!(asked.tool.writes && !asked.pre_approved);
        assert_eq!(asked.tool.description, "Gets things");
        assert!(asked.tool.parameters.get("$schema").is_none());
        let trusted = checked_tool("s", &config(true), &tool).unwrap();
        assert!(!trusted.tool.writes && trusted.pre_approved);
        assert_ne!(
            asked.approval_key, trusted.approval_key,
            "another configuration, another approval"
        );
        let writer = json!({"name": "put", "inputSchema": {"type": "object"}});
        assert!(
            checked_tool("s", &config(true), &writer)
                .unwrap()
                .tool
                .writes
        );
    }

    #[test]
    fn tools_that_break_a_bound_are_left_out_with_a_reason() {
        let big = json!({"name": "big", "inputSchema": {"type": "object",
            "description": "x".repeat(MAX_SCHEMA_BYTES)}});
        for (tool, needle) in [
            (json!({"name": "a b", "inputSchema": {}}), "tool names are"),
            (json!({"name": "<end_of_turn>"}), "tool names are"),
            (json!({"name": "ok", "inputSchema": []}), "not an object"),
            (big, "larger than"),
        ] {
            let e = checked_tool("s", &config(false), &tool).unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
        let long = json!({"name": "d", "description": "é".repeat(5000)});
        let t = checked_tool("s", &config(false), &long).unwrap();
        assert_eq!(t.tool.description.chars().count(), MAX_DESCRIPTION_CHARS);
        assert_eq!(t.tool.parameters, json!({"type": "object"}));
    }
}
