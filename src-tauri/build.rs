//! Embeds the built frontend and declares the app's commands, so that capabilities must allow
//! each one by name (capabilities/default.json): the webview can call nothing else.

const COMMANDS: &[&str] = &[
    "app_state",
    "status",
    "list_conversations",
    "create_conversation",
    "open_conversation",
    "rename_conversation",
    "set_pinned",
    "delete_conversation",
    "search_conversations",
    "export_conversation",
    "set_draft",
    "send_message",
    "regenerate",
    "edit_message",
    "stop_reply",
    "resume_reply",
    "picture",
    "dropped_picture",
    "get_settings",
    "set_settings",
    "api_status",
    "model_info",
    "list_models",
    "import_model",
    "switch_model",
    "remove_model",
    "verify_model",
    "summarize_document",
    "summarize_dropped",
    "cancel_document",
    "log_folder",
    "open_log_folder",
    "list_folders",
    "add_folder",
    "set_folder_mode",
    "revoke_folder",
    "list_notes",
    "delete_note",
    "list_reminders",
    "complete_reminder",
    "delete_reminder",
    "due_reminders",
    "list_activity",
    "clear_activity",
    "answer_approval",
    "set_conversation_tools",
    "mcp_servers",
    "save_mcp_config",
    "set_mcp_server_enabled",
    "sync_status",
    "choose_sync_folder",
    "stop_sync",
    "sync_now",
];

fn main() {
    let index = std::path::Path::new("../frontend/dist/index.html");
    println!("cargo:rerun-if-changed=../frontend/dist");
    if !index.exists() {
        println!(
            "cargo:warning=frontend/dist is missing: run scripts/setup-app (or `npm ci && npm run build` in frontend/) before building the app"
        );
        std::process::exit(1);
    }
    tauri_build::try_build(
        tauri_build::Attributes::new()
            .app_manifest(tauri_build::AppManifest::new().commands(COMMANDS)),
    )
    .unwrap_or_else(|e| {
        println!("cargo:warning=tauri build step failed: {e:#}");
        std::process::exit(1);
    });
}
