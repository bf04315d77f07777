//! iOS: the Swift plugin (`ios/Sources/CompanionMobile/CompanionMobilePlugin.swift`) and the
//! calls into it. Type-checked on Linux (`cargo check --target aarch64-apple-ios`); built and
//! linked only on a Mac, where tauri-plugin's build step builds the Swift package.
//!
//! Events come back on one Tauri channel given to Swift once (`setEventHandler`, a method the
//! webview cannot reach: no command of this plugin is allowed to it). Its callback runs on the
//! thread Swift sent from — the main thread — so it only parses and queues (see
//! [`crate::events`]). Calls into Swift (`run_mobile_plugin`) block until Swift answers, and
//! Swift answers some of them (the picker, EventKit's access prompt) from the main thread:
//! they are made from the app's worker or the event dispatcher, never from the main thread.

use std::marker::PhantomData;
use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tauri::ipc::{Channel, InvokeResponseBody};
use tauri::plugin::mobile::PluginInvokeError;
use tauri::plugin::{PluginApi, PluginHandle};
use tauri::{AppHandle, Runtime};

use crate::error::{Error, Result};
use crate::events::{Dispatcher, MobileEvent};
use crate::{PickedFolder, ResolvedBookmark};

tauri::ios_plugin_binding!(init_plugin_companion_mobile);

pub(crate) struct Platform<R: Runtime> {
    handle: PluginHandle<R>,
    _runtime: PhantomData<fn() -> R>,
}

#[derive(Serialize)]
struct EventHandlerArgs {
    handler: Channel,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TaskArgs {
    task: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BookmarkArgs {
    bookmark: String,
}

#[derive(Deserialize)]
struct Container {
    path: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Picked {
    path: Option<String>,
    bookmark: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Resolved {
    path: String,
    stale: bool,
    bookmark: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReminderArgs<'a> {
    title: &'a str,
    due_ms: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Created {
    identifier: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FolderArgs {
    path: String,
}

/// Swift's rejection codes (`invoke.reject(message, code:)`) as the plugin's errors.
fn native(action: &str, e: PluginInvokeError) -> Error {
    match e {
        PluginInvokeError::InvokeRejected(r) => {
            let message = r.message.unwrap_or_default();
            match r.code.as_deref() {
                Some("revoked") => Error::BookmarkRevoked(message),
                Some("denied") => Error::Denied(message),
                _ => Error::Native {
                    action: action.into(),
                    message,
                },
            }
        }
        other => Error::Bridge(other.to_string()),
    }
}

fn decode(text: &str) -> Result<Vec<u8>> {
    BASE64
        .decode(text)
        .map_err(|e| Error::Bridge(format!("a bookmark that is not base64: {e}")))
}

impl<R: Runtime> Platform<R> {
    pub(crate) fn init<C: DeserializeOwned>(
        _app: &AppHandle<R>,
        api: PluginApi<R, C>,
        dispatcher: &Dispatcher,
    ) -> Result<Self> {
        let handle = api
            .register_ios_plugin(init_plugin_companion_mobile)
            .map_err(|e| Error::Bridge(e.to_string()))?;
        let events = dispatcher.clone();
        let handler: Channel = Channel::new(move |body| {
            if let InvokeResponseBody::Json(json) = body {
                match serde_json::from_str::<MobileEvent>(&json) {
                    Ok(event) => events.event(event),
                    Err(e) => {
                        tracing::warn!(error = %e, "an event from iOS that is not understood")
                    }
                }
            }
            Ok(())
        });
        // Swift keeps the channel and answers at once, from its own queue
        handle
            .run_mobile_plugin::<()>("setEventHandler", EventHandlerArgs { handler })
            .map_err(|e| native("listen to the app's lifecycle", e))?;
        Ok(Platform {
            handle,
            _runtime: PhantomData,
        })
    }

    pub(crate) fn end_background_task(&self, task: u64) -> Result<()> {
        self.handle
            .run_mobile_plugin::<()>("endBackgroundTask", TaskArgs { task })
            .map_err(|e| native("end the background task", e))
    }

    pub(crate) fn pick_folder(&self) -> Result<Option<PickedFolder>> {
        let picked: Picked = self
            .handle
            .run_mobile_plugin("pickFolder", ())
            .map_err(|e| native("open the folder picker", e))?;
        match (picked.path, picked.bookmark) {
            (Some(path), Some(bookmark)) => Ok(Some(PickedFolder {
                path: PathBuf::from(path),
                bookmark: decode(&bookmark)?,
            })),
            _ => Ok(None),
        }
    }

    pub(crate) fn resolve_bookmark(&self, bookmark: &[u8]) -> Result<ResolvedBookmark> {
        let resolved: Resolved = self
            .handle
            .run_mobile_plugin(
                "resolveBookmark",
                BookmarkArgs {
                    bookmark: BASE64.encode(bookmark),
                },
            )
            .map_err(|e| native("open the folder", e))?;
        let refreshed = match (resolved.stale, resolved.bookmark) {
            (true, Some(b)) => Some(decode(&b)?),
            _ => None,
        };
        Ok(ResolvedBookmark {
            path: PathBuf::from(resolved.path),
            refreshed,
        })
    }

    pub(crate) fn create_reminder(&self, text: &str, due_ms: i64) -> Result<String> {
        let created: Created = self
            .handle
            .run_mobile_plugin(
                "createReminder",
                ReminderArgs {
                    title: text,
                    due_ms,
                },
            )
            .map_err(|e| native("add the reminder", e))?;
        Ok(created.identifier)
    }

    pub(crate) fn ubiquity_container(&self) -> Result<Option<PathBuf>> {
        let container: Container = self
            .handle
            .run_mobile_plugin("ubiquityContainer", ())
            .map_err(|e| native("find the app's iCloud Drive folder", e))?;
        Ok(container.path.map(PathBuf::from))
    }

    pub(crate) fn protect_storage(&self, folder: &std::path::Path) -> Result<()> {
        self.handle
            .run_mobile_plugin::<()>(
                "protectStorage",
                FolderArgs {
                    path: folder.to_string_lossy().into_owned(),
                },
            )
            .map_err(|e| native("protect the model folder", e))
    }
}
