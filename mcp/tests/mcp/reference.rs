//! The reference servers of the Model Context Protocol (npm, pinned by
//! scripts/setup-mcp-servers, started with `node`): `server-everything` over stdio and over
//! Streamable HTTP, and `server-filesystem` over stdio with its own folder rules.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent::{ApprovalAnswer, ExternalTools, RememberedApprovals};
use mcp::McpHub;
use serde_json::json;

use crate::common::{Asker, Audit, call_through_toolbox, config, reference_servers};

#[test]
fn server_everything_over_stdio() {
    let module = reference_servers();
    let hub = McpHub::start(&config(json!({"mcpServers": {"everything": {
        "command": "node",
        "args": [module.join("server-everything/dist/index.js"), "stdio"],
    }}})))
    .unwrap();
    let status = hub.status();
    assert_eq!(status[0].state, "ready", "{status:?}");
    let names: Vec<String> = hub
        .tools()
        .into_iter()
        .map(|t| t.tool.name.to_string())
        .collect();
    for expected in [
        "everything/echo",
        "everything/get-sum",
        "everything/get-tiny-image",
    ] {
        assert!(names.contains(&expected.to_string()), "{names:?}");
    }
    let echo = hub
        .call_tool("everything/echo", &json!({"message": "héllo"}), None)
        .unwrap();
    assert!(echo.text.contains("héllo"), "{}", echo.text);
    assert!(!echo.is_error);
    let sum = hub
        .call_tool("everything/get-sum", &json!({"a": 2, "b": 40}), None)
        .unwrap();
    assert!(sum.text.contains("42"), "{}", sum.text);
    // an image is named, never inlined as base64
    let image = hub
        .call_tool("everything/get-tiny-image", &json!({}), None)
        .unwrap();
    assert!(image.text.contains("[image (image/png)"), "{}", image.text);
    assert!(image.text.len() < 2000, "{}", image.text.len());
    // wrong arguments: the server's own error comes back as the tool's error
    let bad = hub.call_tool("everything/get-sum", &json!({"a": "two"}), None);
    match bad {
        Ok(out) => assert!(out.is_error, "{}", out.text),
        Err(e) => assert_eq!(e.code(), "mcp_call_failed", "{e}"),
    }
}

/// Kills the HTTP server at the end of the test.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn server_everything_over_streamable_http() {
    let module = reference_servers();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = Served(
        Command::new("node")
            .arg(module.join("server-everything/dist/index.js"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("node runs"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server-everything did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let hub = McpHub::start(&config(json!({"mcpServers": {"web": {
        "url": format!("http://127.0.0.1:{port}/mcp"),
        "headers": {"X-Companion-Test": "1"},
    }}})))
    .unwrap();
    assert_eq!(hub.status()[0].state, "ready", "{:?}", hub.status());
    assert_eq!(hub.status()[0].transport, "http");
    let echo = hub
        .call_tool("web/echo", &json!({"message": "over http"}), None)
        .unwrap();
    assert!(echo.text.contains("over http"), "{}", echo.text);
}

#[test]
fn server_filesystem_reads_its_folder_under_our_approvals() {
    let module = reference_servers();
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("allowed");
    std::fs::create_dir(&allowed).unwrap();
    std::fs::write(allowed.join("notes.txt"), "buy apples").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "do not read").unwrap();
    let allowed = allowed.canonicalize().unwrap();
    let hub = McpHub::start(&config(json!({"mcpServers": {"files": {
        "command": "node",
        "args": [module.join("server-filesystem/dist/index.js"), &allowed],
        "allowReadOnlyTools": true,
    }}})))
    .unwrap();
    assert_eq!(hub.status()[0].state, "ready", "{:?}", hub.status());
    let tools = hub.tools();
    let tool = |name: &str| tools.iter().find(|t| t.tool.name == name).unwrap().clone();
    // the server marks its readers read-only and its writers not: we trust the first only
    assert!(tool("files/read_text_file").pre_approved);
    assert!(!tool("files/write_file").pre_approved);
    assert!(tool("files/write_file").tool.writes);

    let audit = Audit::default();
    let remembered = RememberedApprovals::new();
    let no = Asker::new(ApprovalAnswer::No);
    let path = allowed.join("notes.txt");
    let out = call_through_toolbox(
        &hub,
        &no,
        &remembered,
        &audit,
        "files/read_text_file",
        json!({"path": path}),
    )
    .unwrap();
    assert!(
        out.text_for_model.contains("buy apples"),
        "{}",
        out.text_for_model
    );
    assert!(
        no.asked().is_empty(),
        "a trusted read-only tool runs without asking"
    );
    // outside its folder, the server itself refuses
    let outside = call_through_toolbox(
        &hub,
        &no,
        &remembered,
        &audit,
        "files/read_text_file",
        json!({"path": dir.path().join("secret.txt")}),
    )
    .unwrap();
    assert!(
        outside.text_for_model.contains("reported an error"),
        "{}",
        outside.text_for_model
    );
    assert!(!outside.text_for_model.contains("do not read"));
    // a write is asked first with its exact arguments; declined, nothing is written
    let target = allowed.join("new.txt");
    let args = json!({"path": target, "content": "hello"});
    let e = call_through_toolbox(
        &hub,
        &no,
        &remembered,
        &audit,
        "files/write_file",
        args.clone(),
    )
    .unwrap_err();
    assert_eq!(e.code(), "denied");
    assert_eq!(no.asked()[0].1, args);
    assert!(!target.exists());
    let yes = Asker::new(ApprovalAnswer::Yes);
    call_through_toolbox(&hub, &yes, &remembered, &audit, "files/write_file", args).unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello");
    assert_eq!(audit.entries.lock().unwrap().len(), 4);
}
