//! Companion's app: the Tauri 2 shell around the engine and the conversation memory. The
//! webview (frontend/) calls the commands in [`commands`]; replies and document progress
//! stream back over `tauri::ipc::Channel`s. The engine runs on its own thread behind the chat
//! worker ([`worker`]), so no command ever waits on a forward pass on a UI thread.
//!
//! [`builder`] is generic over the runtime so the tests can run the app on Tauri's mock
//! runtime; [`run`] starts the real one.

pub mod api_server;
pub mod approval;
pub mod commands;
pub mod error;
pub mod mcp_servers;
pub mod mobile_bridge;
pub mod reminders;
pub mod settings;
pub mod settings_file;
pub mod shared;
pub mod shutdown;
pub mod state;
pub mod sync_watch;
pub mod text_batch;
pub mod views;
pub mod webview_painting;
pub mod worker;

use std::sync::Arc;

use tauri::{Manager, RunEvent, Runtime, WindowEvent};

pub use error::{AppError, Result};
pub use state::{AppConfig, AppState};

/// The app on `builder`: plugins, commands, state (set up when the app starts: the database
/// is opened, settings read, and the engine starts loading on the worker).
pub fn builder<R: Runtime>(builder: tauri::Builder<R>, config: AppConfig) -> tauri::Builder<R> {
    builder
        .plugin(tauri_plugin_dialog::init())
        // due reminders as desktop notifications, shown from Rust (crate::reminders); the
        // webview gets none of the plugin's commands
        .plugin(tauri_plugin_notification::init())
        // the iOS side (mobile/): lifecycle, memory, thermal state, bookmarks, EventKit
        .plugin(companion_mobile::init())
        .setup(move |app| {
            let state = start(app.handle(), config)?;
            let settings = state.settings();
            if settings.api_enabled {
                // a taken port is shown in the settings panel and said once
                if let Err(e) = state.api.apply(true, settings.api_port, &state.shared) {
                    state.shared.notice(e.message.clone());
                }
            }
            app.manage(state);
            connect_platform(app.handle());
            let notifier = reminders::PluginNotifier(app.handle().clone());
            app.manage(reminders::ReminderWatch::start(
                app.handle().clone(),
                notifier,
            )?);
            Ok(())
        })
        .on_window_event(|window, event| {
            // a dropped file is a file the user chose to give us: remember it as granted
            if let WindowEvent::DragDrop(tauri::DragDropEvent::Drop { paths, .. }) = event
                && let Some(state) = window.try_state::<AppState>()
            {
                state.grant(paths.iter().cloned());
            }
        })
        .invoke_handler(tauri::generate_handler![
            commands::app::app_state,
            commands::agent::list_folders,
            commands::agent::add_folder,
            commands::agent::set_folder_mode,
            commands::agent::revoke_folder,
            commands::agent::list_notes,
            commands::agent::delete_note,
            commands::agent::list_reminders,
            commands::agent::complete_reminder,
            commands::agent::delete_reminder,
            commands::agent::due_reminders,
            commands::agent::list_activity,
            commands::agent::clear_activity,
            commands::agent::answer_approval,
            commands::agent::set_conversation_tools,
            commands::servers::mcp_servers,
            commands::servers::save_mcp_config,
            commands::servers::set_mcp_server_enabled,
            commands::sync::sync_status,
            commands::sync::choose_sync_folder,
            commands::sync::stop_sync,
            commands::sync::sync_now,
            commands::app::status,
            commands::conversations::list_conversations,
            commands::conversations::create_conversation,
            commands::conversations::open_conversation,
            commands::conversations::rename_conversation,
            commands::conversations::set_pinned,
            commands::conversations::delete_conversation,
            commands::conversations::search_conversations,
            commands::conversations::export_conversation,
            commands::chat::set_draft,
            commands::chat::send_message,
            commands::chat::regenerate,
            commands::chat::edit_message,
            commands::chat::stop_reply,
            commands::chat::resume_reply,
            commands::pictures::picture,
            commands::pictures::dropped_picture,
            commands::settings::get_settings,
            commands::settings::set_settings,
            commands::settings::api_status,
            commands::model::model_info,
            commands::model::list_models,
            commands::model::import_model,
            commands::model::switch_model,
            commands::model::remove_model,
            commands::model::verify_model,
            commands::documents::summarize_document,
            commands::documents::summarize_dropped,
            commands::documents::cancel_document,
            commands::logs::log_folder,
            commands::logs::open_log_folder,
        ])
}

/// Give the mobile plugin the app's reaction to the OS's events, and the tools the platform's
/// bookmarks and reminders ([`mobile_bridge`]).
fn connect_platform<R: Runtime>(app: &tauri::AppHandle<R>) {
    use companion_mobile::MobileExt;
    let handle = app.clone();
    app.mobile()
        .on_event(move |event| mobile_bridge::handle(&handle, event));
    let state = app.state::<AppState>();
    let platform_reminders = cfg!(target_os = "ios") || companion_mobile::HAS_FAKE_OS;
    state.shared.set_platform_tools(shared::PlatformTools {
        bookmarks: Some(Arc::new(mobile_bridge::PluginBookmarks(app.clone()))),
        reminders: platform_reminders.then(|| {
            Arc::new(mobile_bridge::PluginReminders(app.clone()))
                as Arc<dyn chat::tools::PlatformReminders + Send + Sync>
        }),
    });
    #[cfg(target_os = "ios")]
    {
        mobile_bridge::watch_available_memory(app.clone());
        // the models: out of iCloud backup, readable once the phone was unlocked after boot
        if let Err(e) = app.mobile().protect_storage(&state.config.models_dir) {
            tracing::warn!(code = e.code(), error = %e, "the model folder's attributes were not set");
        }
    }
}

/// Open the database (a damaged one is set aside and the user told), read the settings, and
/// start the worker, which loads the model in the background.
fn start<R: Runtime>(app: &tauri::AppHandle<R>, config: AppConfig) -> Result<AppState> {
    let shared = Arc::new(shared::Shared::default());
    let store = match memory::Store::open(&config.database) {
        Ok(opened) => {
            if let Some(recovery) = &opened.recovery {
                shared.notice(recovery.message());
            }
            Some(opened.store)
        }
        // the worker meets the same error and shows it as the reason the app cannot start
        Err(e) => {
            tracing::error!(code = e.code(), error = %e, "the database cannot be opened");
            None
        }
    };
    // the MCP servers start in the background, beside the model's load
    match app.path().app_data_dir() {
        Ok(dir) => shared.mcp.load(&dir),
        Err(e) => tracing::warn!(error = %e, "no data folder: MCP servers are off"),
    }
    let (settings, notice) = state::load_settings(app, &config.settings_file);
    if let Some(n) = notice {
        shared.notice(n);
    }
    AppState::new(config, store, settings, shared)
}

/// Stop the running work and snapshot the open conversation before the process ends, within
/// [`shutdown::EXIT_DEADLINE`] (the outcome is logged there).
pub fn on_exit<R: Runtime>(app: &tauri::AppHandle<R>) {
    if let Some(watch) = app.try_state::<reminders::ReminderWatch>() {
        watch.stop();
    }
    if let Some(state) = app.try_state::<AppState>() {
        state.api.stop();
        if let Some(sync) = &state.sync {
            sync.stop();
        }
        let _ = shutdown::close_within(&state.worker, &state.shared, shutdown::EXIT_DEADLINE);
        // after the turn has been told to stop; also ends servers a turn still holds
        state.shared.mcp.stop();
    }
}

/// Start the desktop app (or, on iOS, the mobile entry point).
#[cfg_attr(mobile, tauri::mobile_entry_point)]
pub fn run() {
    // first: it sets the environment, which is only sound while this is the only thread
    #[cfg(target_os = "linux")]
    let software_painting = webview_painting::paint_without_compositing_where_there_is_no_gpu();
    let config = AppConfig::from_env();
    // before anything else, so that a failure to start is in the log too; an app without a
    // log still runs
    if let Err(e) = logging::install(&logging::log_dir(&config.database)) {
        eprintln!("Companion runs without a log: {e}");
    }
    #[cfg(target_os = "linux")]
    if software_painting {
        tracing::info!("no GPU render node: the webview paints without compositing");
    }
    let app = builder(tauri::Builder::default(), config).build(tauri::generate_context!());
    match app {
        Ok(app) => app.run(|handle, event| {
            if let RunEvent::Exit = event {
                on_exit(handle);
            }
        }),
        Err(e) => {
            tracing::error!(code = "app", error = %e, "the app could not start");
            eprintln!("Companion could not start: {e}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every command the app registers must be declared in build.rs and allowed in the main
    /// window's capability, or the webview's calls are refused at run time ("not allowed by
    /// ACL") with nothing failing at build time; and nothing may be allowed that is not
    /// registered.
    #[test]
    fn registered_declared_and_allowed_commands_agree() {
        let lib = include_str!("lib.rs");
        let start = lib.find("generate_handler![").expect("the handler list");
        let end = start + lib[start..].find(']').expect("its end");
        let mut registered: Vec<String> = lib[start..end]
            .split(',')
            .filter_map(|path| path.trim().rsplit("::").next())
            .filter(|name| !name.is_empty() && !name.contains('['))
            .map(str::to_string)
            .collect();
        registered.sort();

        let build = include_str!("../build.rs");
        let list = &build[build.find("COMMANDS").unwrap()..];
        let list = &list[list.find("= &[").unwrap() + 4..list.find("];").unwrap()];
        let mut declared: Vec<String> = list
            .split(',')
            .map(|s| s.trim().trim_matches('"').to_string())
            .filter(|s| !s.is_empty())
            .collect();
        declared.sort();

        let capability: serde_json::Value =
            serde_json::from_str(include_str!("../capabilities/default.json")).unwrap();
        let mut allowed: Vec<String> = capability["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p.as_str()?.strip_prefix("allow-"))
            .map(|p| p.replace('-', "_"))
            .collect();
        allowed.sort();

        assert_eq!(
            registered, declared,
            "lib.rs's handlers against build.rs's COMMANDS"
        );
        assert_eq!(
            registered, allowed,
            "lib.rs's handlers against capabilities/default.json"
        );
    }
}
