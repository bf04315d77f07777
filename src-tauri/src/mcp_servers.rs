//! The MCP servers of the Tools panel's Servers tab: their configuration, `mcp.json` in the
//! app's data folder (the ecosystem's `mcpServers` format, editable in the panel), and the
//! running servers ([`mcp::McpHub`]), whose tools the agent's turns use beside the built-in
//! ones. Servers start on a thread of their own, never holding up the app's start or a
//! command; a new configuration replaces the running hub when the new one is ready, and the
//! old one's processes end. On iOS only servers with a `url` can run (apps may not start
//! programs): the panel says so, and a stdio server fails with that sentence.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use mcp::{McpConfig, McpHub, ServerStatus};
use serde::Serialize;

use crate::error::{AppError, Result};

/// The configuration file, in the app's data folder.
pub const CONFIG_FILE: &str = "mcp.json";
/// The largest configuration the panel accepts.
const MAX_CONFIG_BYTES: usize = 256 * 1024;

/// What the Servers tab shows.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServersView {
    /// Where the configuration is kept.
    pub config_path: Option<String>,
    /// The configuration's text (the editor's content); `{"mcpServers": {}}` when none.
    pub config: String,
    /// The servers are (re)starting: the list is the previous one until they are ready.
    pub starting: bool,
    /// Why the saved configuration could not be used, if it could not.
    pub error: Option<String>,
    pub servers: Vec<ServerStatus>,
    /// False on iOS: only servers with a `url`.
    pub stdio_supported: bool,
}

#[derive(Default)]
struct Inner {
    path: Option<PathBuf>,
    hub: Option<Arc<McpHub>>,
    error: Option<String>,
    /// Starts in flight (each bumps `generation`; only the newest may install its hub).
    starting: usize,
}

#[derive(Default)]
pub struct McpServers {
    inner: Mutex<Inner>,
    generation: AtomicU64,
    /// Held from reading a configuration to its restart: two saves (or switches) never
    /// interleave, and the servers that run are those of the file as saved last.
    saving: Mutex<()>,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

const EMPTY: &str = "{\n  \"mcpServers\": {}\n}\n";

impl McpServers {
    /// The running servers, for a turn: it keeps them for as long as it runs.
    pub fn hub(&self) -> Option<Arc<McpHub>> {
        lock(&self.inner).hub.clone()
    }

    /// Reads `mcp.json` in `data_dir` (none: no servers) and starts its servers.
    pub fn load(self: &Arc<Self>, data_dir: &Path) {
        let path = data_dir.join(CONFIG_FILE);
        lock(&self.inner).path = Some(path.clone());
        if !path.exists() {
            return;
        }
        match McpConfig::load(&path) {
            Ok(config) => self.restart(config),
            Err(e) => lock(&self.inner).error = Some(e.to_string()),
        }
    }

    pub fn view(&self) -> ServersView {
        let inner = lock(&self.inner);
        let config = inner
            .path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_else(|| EMPTY.to_string());
        ServersView {
            config_path: inner.path.as_ref().map(|p| p.display().to_string()),
            config,
            starting: inner.starting > 0,
            error: inner.error.clone(),
            servers: inner.hub.as_ref().map(|h| h.status()).unwrap_or_default(),
            stdio_supported: !cfg!(target_os = "ios"),
        }
    }

    /// Checks `text`, saves it (atomically) and restarts the servers with it.
    pub fn save(self: &Arc<Self>, text: &str) -> Result<()> {
        let _saving = self.saving.lock().unwrap_or_else(|p| p.into_inner());
        self.save_locked(text)
    }

    fn save_locked(self: &Arc<Self>, text: &str) -> Result<()> {
        if text.len() > MAX_CONFIG_BYTES {
            return Err(AppError::new(
                "mcp_config",
                "The server configuration is too large.",
            ));
        }
        let config = McpConfig::parse(text).map_err(|e| AppError::new(e.code(), e.to_string()))?;
        let path = lock(&self.inner).path.clone().ok_or_else(|| {
            AppError::new("mcp_config", "The app's data folder is not known yet.")
        })?;
        write_atomically(&path, text)?;
        lock(&self.inner).error = None;
        self.restart(config);
        Ok(())
    }

    /// Turns one server on or off in the saved configuration, keeping everything else.
    pub fn set_enabled(self: &Arc<Self>, name: &str, enabled: bool) -> Result<()> {
        let _saving = self.saving.lock().unwrap_or_else(|p| p.into_inner());
        let text = self.view().config;
        let mut value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            AppError::new("mcp_config", format!("The configuration is not JSON: {e}"))
        })?;
        let Some(server) = value
            .get_mut("mcpServers")
            .and_then(|s| s.get_mut(name))
            .and_then(|s| s.as_object_mut())
        else {
            return Err(AppError::new(
                "mcp_config",
                format!("There is no server named \"{name}\"."),
            ));
        };
        if enabled {
            server.remove("disabled");
        } else {
            server.insert("disabled".into(), true.into());
        }
        let text = serde_json::to_string_pretty(&value).unwrap_or_default() + "\n";
        self.save_locked(&text)
    }

    /// Starts `config`'s servers on a thread; when they are ready they replace the running
    /// ones (unless a newer start began meanwhile), whose processes then end.
    fn restart(self: &Arc<Self>, config: McpConfig) {
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        lock(&self.inner).starting += 1;
        let this = self.clone();
        let spawned = std::thread::Builder::new()
            .name("mcp-start".into())
            .spawn(move || {
                let started = McpHub::start(&config);
                let old = {
                    let mut inner = lock(&this.inner);
                    inner.starting -= 1;
                    if this.generation.load(Ordering::SeqCst) != generation {
                        None
                    } else {
                        match started {
                            Ok(hub) => inner.hub.replace(Arc::new(hub)),
                            Err(e) => {
                                inner.error = Some(e.to_string());
                                None
                            }
                        }
                    }
                };
                // the old servers end outside the lock (a turn may still hold them)
                drop(old);
            });
        if let Err(e) = spawned {
            let mut inner = lock(&self.inner);
            inner.starting -= 1;
            inner.error = Some(format!("The servers could not be started: {e}"));
        }
    }

    /// Ends every server (the app is quitting), also those a turn still holds: the process
    /// exits without dropping what it holds.
    pub fn stop(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        let hub = lock(&self.inner).hub.take();
        if let Some(hub) = hub {
            hub.shutdown(std::time::Duration::from_secs(1));
        }
    }
}

fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let fail = |e: std::io::Error| {
        AppError::new(
            "io",
            format!("The server configuration could not be saved: {e}"),
        )
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    // one writer at a time (`saving`); the text reaches the disk before it replaces the file
    let tmp = path.with_extension("json.tmp");
    let mut file = std::fs::File::create(&tmp).map_err(fail)?;
    std::io::Write::write_all(&mut file, text.as_bytes()).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn wait_ready(servers: &McpServers) -> ServersView {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let view = servers.view();
            if !view.starting {
                return view;
            }
            assert!(Instant::now() < deadline, "the servers did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_saved_configuration_is_kept_and_started_and_a_bad_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let servers = Arc::new(McpServers::default());
        servers.load(dir.path());
        let empty = servers.view();
        assert!(empty.servers.is_empty() && empty.error.is_none());
        assert!(empty.config.contains("mcpServers"));

        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../mcp/tests/hostile_server.py"
        );
        let text = serde_json::json!({"mcpServers": {"srv": {"command": "python3", "args": [script, "serve"]}}})
            .to_string();
        servers.save(&text).unwrap();
        let view = wait_ready(&servers);
        assert_eq!(view.servers.len(), 1);
        assert_eq!(view.servers[0].state, "ready");
        assert!(servers.hub().is_some());
        assert_eq!(
            std::fs::read_to_string(dir.path().join(CONFIG_FILE)).unwrap(),
            text
        );

        let e = servers.save("{\"mcpServers\": [1]}").unwrap_err();
        assert_eq!(e.code, "mcp_config");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(CONFIG_FILE)).unwrap(),
            text
        );

        servers.set_enabled("srv", false).unwrap();
        let view = wait_ready(&servers);
        assert_eq!(view.servers[0].state, "disabled");
        assert!(
            view.config.contains("\"disabled\": true"),
            "{}",
            view.config
        );
        assert!(servers.set_enabled("nope", true).is_err());
        servers.stop();
        assert!(servers.hub().is_none());
    }
}
