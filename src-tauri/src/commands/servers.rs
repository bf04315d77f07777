//! The Servers tab of the Tools panel: the MCP servers whose tools the agent may use
//! ([`crate::mcp_servers`]). Saving a configuration or switching a server restarts the servers
//! in the background; the tab polls [`mcp_servers`] while `starting`.

use tauri::State;

use crate::error::Result;
use crate::mcp_servers::ServersView;
use crate::state::AppState;

#[tauri::command]
pub async fn mcp_servers(state: State<'_, AppState>) -> Result<ServersView> {
    Ok(state.shared.mcp.view())
}

/// Checks and saves the configuration's text (the `mcpServers` JSON), then restarts the
/// servers with it; a configuration that is not valid is refused and the saved one kept.
#[tauri::command]
pub async fn save_mcp_config(state: State<'_, AppState>, config: String) -> Result<ServersView> {
    state.shared.mcp.save(&config)?;
    Ok(state.shared.mcp.view())
}

#[tauri::command]
pub async fn set_mcp_server_enabled(
    state: State<'_, AppState>,
    name: String,
    enabled: bool,
) -> Result<ServersView> {
    state.shared.mcp.set_enabled(&name, enabled)?;
    Ok(state.shared.mcp.view())
}
