//! The servers, configured as the ecosystem configures them (Claude Desktop, Jan, LM Studio,
//! VS Code): a JSON file `{"mcpServers": {NAME: SERVER}}`, where a stdio server is
//! `{"command", "args", "env"}` and a Streamable HTTP server `{"url", "headers"}`. Companion's
//! own keys sit beside them and other programs ignore them: `disabled`,
//! `allowReadOnlyTools` (the server's tools that it marks read-only run without asking) and
//! `timeoutSeconds` (per call).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpConfig {
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, ServerConfig>,
}

/// One server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerConfig {
    #[serde(flatten)]
    pub transport: Transport,
    #[serde(default, skip_serializing_if = "is_false")]
    pub disabled: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_read_only_tools: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Transport {
    /// A program started with its standard input and output as the channel.
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
    /// A server at a URL (MCP's Streamable HTTP).
    Http {
        url: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

/// A call that takes longer than this ends with an error (a server may set its own).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Starting a server (the process, the handshake, its tool list) takes at most this.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// A server's name is part of its tools' names (`server/tool`).
const MAX_NAME_LEN: usize = 32;

impl ServerConfig {
    pub fn call_timeout(&self) -> Duration {
        self.timeout_seconds
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(|s| Duration::from_secs_f64(s.min(3600.0)))
            .unwrap_or(DEFAULT_CALL_TIMEOUT)
    }
}

impl McpConfig {
    /// Reads and checks a configuration file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ConfigRead {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text).map_err(|e| match e {
            Error::Config(problem) => Error::Config(format!("{}: {problem}", path.display())),
            other => other,
        })
    }

    /// Parses and checks configuration text (the app's editor hands it over as text).
    pub fn parse(text: &str) -> Result<Self> {
        let config: McpConfig = serde_json::from_str(text).map_err(|e| {
            Error::Config(format!(
                "not an MCP configuration ({e}); expected {{\"mcpServers\": {{\"name\": \
                 {{\"command\": …, \"args\": […]}} or {{\"url\": …}}}}}}"
            ))
        })?;
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<()> {
        for (name, server) in &self.mcp_servers {
            check_server_name(name)?;
            match &server.transport {
                Transport::Stdio { command, .. } if command.trim().is_empty() => {
                    return Err(Error::Config(format!(
                        "server \"{name}\": `command` is empty"
                    )));
                }
                Transport::Http { url, .. }
                    if !(url.starts_with("http://") || url.starts_with("https://")) =>
                {
                    return Err(Error::Config(format!(
                        "server \"{name}\": `url` must start with http:// or https://"
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Names as tool names admit them: letters, digits, `_` and `-`.
pub fn check_server_name(name: &str) -> Result<()> {
    let ok = agent::tool::is_plain_name(name, MAX_NAME_LEN, b"");
    if ok {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "the server name \"{name}\" is not allowed: use 1-{MAX_NAME_LEN} letters, digits, \
             `_` or `-` (it becomes part of its tools' names)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ecosystems_file_reads_with_our_keys_beside_it() {
        let c = McpConfig::parse(
            r#"{"mcpServers": {
                "files": {"command": "node", "args": ["index.js", "/tmp"], "env": {"A": "1"}},
                "web": {"url": "http://127.0.0.1:3001/mcp", "headers": {"Authorization": "Bearer x"},
                        "allowReadOnlyTools": true, "timeoutSeconds": 5},
                "off": {"command": "x", "disabled": true}
            }, "otherKey": 1}"#,
        )
        .unwrap();
        assert_eq!(c.mcp_servers.len(), 3);
        let files = &c.mcp_servers["files"];
        assert_eq!(files.transport.kind(), "stdio");
        assert_eq!(files.call_timeout(), DEFAULT_CALL_TIMEOUT);
        let web = &c.mcp_servers["web"];
        assert!(web.allow_read_only_tools);
        assert_eq!(web.call_timeout(), Duration::from_secs(5));
        assert!(matches!(&web.transport, Transport::Http { headers, .. } if headers.len() == 1));
        assert!(c.mcp_servers["off"].disabled);
    }

    #[test]
    fn bad_files_are_refused_in_one_sentence() {
        for (text, needle) in [
            ("[1, 2]", "not an MCP configuration"),
            (
                r#"{"mcpServers": {"a/b": {"command": "x"}}}"#,
                "not allowed",
            ),
            (
                r#"{"mcpServers": {"a": {"command": " "}}}"#,
                "`command` is empty",
            ),
            (
                r#"{"mcpServers": {"a": {"url": "file:///etc"}}}"#,
                "http://",
            ),
            (
                r#"{"mcpServers": {"a": {"neither": 1}}}"#,
                "not an MCP configuration",
            ),
        ] {
            let e = McpConfig::parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
