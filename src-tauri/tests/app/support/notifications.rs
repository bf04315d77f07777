//! A stand-in for the desktop's notification service: a private D-Bus session bus (Debian's
//! `dbus-daemon`, installed by scripts/setup-app) with an `org.freedesktop.Notifications`
//! server on it (the Desktop Notifications Specification's interface, served with zbus) that
//! records every notification it is asked to show. The app, started with this bus as its
//! session bus, talks to it exactly as to GNOME's or KDE's service.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One notification the app asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub app_name: String,
    pub summary: String,
    pub body: String,
}

struct Server {
    shown: Arc<Mutex<Vec<Shown>>>,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Server {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &self,
        app_name: String,
        _replaces_id: u32,
        _app_icon: String,
        summary: String,
        body: String,
        _actions: Vec<String>,
        _hints: HashMap<String, zbus::zvariant::OwnedValue>,
        _expire_timeout: i32,
    ) -> u32 {
        let mut shown = self.shown.lock().unwrap();
        shown.push(Shown {
            app_name,
            summary,
            body,
        });
        shown.len() as u32
    }

    fn get_capabilities(&self) -> Vec<String> {
        vec!["body".into()]
    }

    fn get_server_information(&self) -> (String, String, String, String) {
        (
            "companion-test".into(),
            "Companion".into(),
            "1".into(),
            "1.2".into(),
        )
    }

    fn close_notification(&self, _id: u32) {}
}

pub struct NotificationService {
    daemon: Child,
    /// What `DBUS_SESSION_BUS_ADDRESS` must say for the app to use this bus.
    pub address: String,
    shown: Arc<Mutex<Vec<Shown>>>,
    _connection: zbus::blocking::Connection,
}

impl NotificationService {
    /// A bus whose socket is in `dir`, and the service on it.
    pub fn start(dir: &Path) -> NotificationService {
        let socket = dir.join("session-bus");
        let mut daemon = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .arg(format!("--address=unix:path={}", socket.display()))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("dbus-daemon cannot start ({e}): run scripts/setup-app, which installs it")
            });
        let mut address = String::new();
        BufReader::new(daemon.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        let address = address.trim().to_string();
        assert!(!address.is_empty(), "dbus-daemon printed no address");
        let shown = Arc::new(Mutex::new(Vec::new()));
        let connection = zbus::blocking::connection::Builder::address(address.as_str())
            .unwrap()
            .name("org.freedesktop.Notifications")
            .unwrap()
            .serve_at(
                "/org/freedesktop/Notifications",
                Server {
                    shown: shown.clone(),
                },
            )
            .unwrap()
            .build()
            .unwrap_or_else(|e| panic!("the notification service cannot start: {e}"));
        NotificationService {
            daemon,
            address,
            shown,
            _connection: connection,
        }
    }

    pub fn shown(&self) -> Vec<Shown> {
        self.shown.lock().unwrap().clone()
    }

    /// Wait until at least `n` notifications were shown; what was shown by then.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Shown> {
        let deadline = Instant::now() + timeout;
        loop {
            let shown = self.shown();
            if shown.len() >= n || Instant::now() > deadline {
                return shown;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for NotificationService {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}
