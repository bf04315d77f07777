//! How the webview paints on Linux without a GPU.
//!
//! WebKitGTK composites the page with OpenGL. Where the machine has no GPU (no DRM render node
//! under /dev/dri: a virtual machine, a CI runner, a headless box), that OpenGL is Mesa's
//! llvmpipe, i.e. the CPU, and every frame of the composited window is drawn in software: the
//! idle app's blinking caret alone kept about 8% of a core busy, and while a reply streamed the
//! interface took 61% of a core from the engine on a 2-core machine (`scripts/bench-app`, the
//! "UI CPU" column; 18% with compositing off, and the idle app then costs about 1%). WebKitGTK's
//! own switch for this is the `WEBKIT_DISABLE_COMPOSITING_MODE` environment variable, read when
//! the first webview is made, so it is set at start, before any thread exists, unless the user
//! chose a value. With a GPU, nothing changes. macOS and iOS composite on the GPU through Core
//! Animation and are not concerned.

/// The variable WebKitGTK's UI process reads to keep accelerated compositing off (one of
/// WebKitGTK's documented debugging variables; Tauri's Linux users set it by hand for other
/// rendering trouble, tauri-apps/tauri#10626).
pub const DISABLE_COMPOSITING: &str = "WEBKIT_DISABLE_COMPOSITING_MODE";

/// Whether to turn compositing off: only when the user has not set the variable either way and
/// the machine has no GPU to composite on.
pub fn composite_in_software(user_choice: Option<&str>, has_render_node: bool) -> bool {
    user_choice.is_none() && !has_render_node
}

/// A DRM render node (`/dev/dri/renderD*`) is what WebKit's OpenGL needs to use a GPU.
pub fn has_render_node(dri: &std::path::Path) -> bool {
    std::fs::read_dir(dri)
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("renderD"))
        })
        .unwrap_or(false)
}

/// Turn WebKit's compositing off where it would run on the CPU; returns whether it did. Call
/// first thing in the process, while it has one thread (setting the environment is only sound
/// then).
#[cfg(target_os = "linux")]
pub fn paint_without_compositing_where_there_is_no_gpu() -> bool {
    let user = std::env::var(DISABLE_COMPOSITING).ok();
    if !composite_in_software(
        user.as_deref(),
        has_render_node(std::path::Path::new("/dev/dri")),
    ) {
        return false;
    }
    // SAFETY: called at the start of `run`, before the log writer, Tauri, GTK or any other
    // thread exists, so nothing reads the environment concurrently.
    unsafe { std::env::set_var(DISABLE_COMPOSITING, "1") };
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_machine_without_a_gpu_and_without_the_users_choice_turns_compositing_off() {
        assert!(composite_in_software(None, false));
        assert!(!composite_in_software(None, true));
        assert!(
            !composite_in_software(Some("0"), false),
            "the user's 0 stands"
        );
        assert!(!composite_in_software(Some("1"), true));
    }

    #[test]
    fn a_render_node_is_found_by_its_name() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!has_render_node(dir.path()));
        assert!(!has_render_node(&dir.path().join("absent")));
        std::fs::write(dir.path().join("card0"), "").unwrap();
        assert!(
            !has_render_node(dir.path()),
            "a card node alone is not a render node"
        );
        std::fs::write(dir.path().join("renderD128"), "").unwrap();
        assert!(has_render_node(dir.path()));
    }
}
