//! The sandbox's promises, tried through the tools: nothing outside a granted folder is ever
//! read or listed (`..`, absolute paths, symlinks, loops, swaps, long and odd names), hidden
//! files and Companion's own data stay unseen, and what is refused says why. Every result is
//! also checked (in `Rig::call`) never to contain the secret kept outside the grant.

use std::os::unix::fs::symlink;

use crate::common::{DENY, FakeHost, Rig, SECRET, Tree, absolute, code, sandbox};
use agent::{GrantSpec, Limits, RememberedApprovals, Sandbox};
use serde_json::json;

fn rig<'a>(s: &'a Sandbox, host: &'a FakeHost, r: &'a RememberedApprovals) -> Rig<'a> {
    Rig::new(s, host, &DENY, r, Limits::default())
}

#[test]
fn dot_dot_chains_cannot_climb_out() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = rig(&s, &host, &r);
    for path in [
        "grant/../outside/secret.txt",
        "garden/../../outside/secret.txt",
        "grant/garden/../../../../../../etc/passwd",
        "garden/./../recipes/../../outside",
    ] {
        let e = rig.call("read_file", json!({ "path": path })).unwrap_err();
        assert_eq!(e.code(), "outside_grants", "{path}: {e}");
        assert!(
            e.to_string().starts_with("outside the granted folders"),
            "{e}"
        );
        assert_eq!(
            code(rig.call("list_folder", json!({ "path": path }))),
            "outside_grants"
        );
    }
    // `..` that stays inside is fine
    let ok = rig
        .call(
            "read_file",
            json!({"path": "garden/../garden/tomatoes.txt"}),
        )
        .unwrap();
    assert!(ok.text_for_model.contains("Plant the tomatoes"));
}

#[test]
fn absolute_paths_outside_are_refused_and_inside_are_mapped() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = rig(&s, &host, &r);
    for path in [
        "/etc/passwd".to_string(),
        absolute(&tree.outside().join("secret.txt")),
        absolute(tree.tmp.path()),
        "/".to_string(),
    ] {
        assert_eq!(
            code(rig.call("read_file", json!({ "path": path }))),
            "outside_grants",
            "{path}"
        );
    }
    let inside = absolute(&tree.grant().join("garden/tomatoes.txt"));
    let out = rig.call("read_file", json!({ "path": inside })).unwrap();
    assert!(out.text_for_model.starts_with("grant/garden/tomatoes.txt"));
}

#[test]
fn symlinks_leading_outside_are_refused_and_those_inside_followed() {
    let tree = Tree::new();
    let g = tree.grant();
    symlink("../outside/secret.txt", g.join("relative-out.txt")).unwrap();
    symlink(
        tree.outside().join("secret.txt"),
        g.join("absolute-out.txt"),
    )
    .unwrap();
    symlink("../outside", g.join("folder-out")).unwrap();
    symlink("garden/tomatoes.txt", g.join("inside.txt")).unwrap();
    symlink("../recipes", g.join("garden/to-recipes")).unwrap();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = rig(&s, &host, &r);
    for path in [
        "relative-out.txt",
        "absolute-out.txt",
        "folder-out/secret.txt",
    ] {
        assert_eq!(
            code(rig.call("read_file", json!({ "path": path }))),
            "outside_grants",
            "{path}"
        );
    }
    assert_eq!(
        code(rig.call("list_folder", json!({"path": "folder-out"}))),
        "outside_grants"
    );
    assert_eq!(
        code(rig.call(
            "search_files",
            json!({"query": "secret", "path": "folder-out"})
        )),
        "outside_grants"
    );
    // followed inside, and shown by where they lead
    let out = rig
        .call("read_file", json!({"path": "inside.txt"}))
        .unwrap();
    assert!(
        out.text_for_model.starts_with("grant/garden/tomatoes.txt"),
        "{}",
        out.text_for_model
    );
    let out = rig
        .call("list_folder", json!({"path": "garden/to-recipes"}))
        .unwrap();
    assert!(out.text_for_model.contains("soup.html"));
    // walks do not follow links at all: the secret is not found, and nothing is found twice
    let out = rig
        .call("search_files", json!({"query": "secret outside"}))
        .unwrap();
    assert!(
        out.text_for_model.starts_with("No file"),
        "{}",
        out.text_for_model
    );
    let out = rig
        .call("search_files", json!({"query": "tomatoes"}))
        .unwrap();
    assert_eq!(
        out.data["matches"].as_array().unwrap().len(),
        2,
        "{}",
        out.text_for_model
    );
    // the listing shows links as links
    let out = rig.call("list_folder", json!({"path": "grant"})).unwrap();
    assert!(
        out.text_for_model.contains("folder-out  (link)"),
        "{}",
        out.text_for_model
    );
}

#[test]
fn symlink_loops_end_in_a_clear_refusal() {
    let tree = Tree::new();
    let g = tree.grant();
    symlink("loop-b", g.join("loop-a")).unwrap();
    symlink("loop-a", g.join("loop-b")).unwrap();
    symlink("self", g.join("self")).unwrap();
    symlink(".", g.join("garden/here")).unwrap();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = rig(&s, &host, &r);
    for path in ["loop-a", "self", "loop-b/x"] {
        let e = rig.call("read_file", json!({ "path": path })).unwrap_err();
        assert_eq!(e.code(), "symlink_loop", "{path}: {e}");
        assert!(e.to_string().contains("loop of symbolic links"));
    }
    // a link to its own folder resolves (it is no loop), and walks never enter it
    let out = rig
        .call(
            "read_file",
            json!({"path": "garden/here/here/here/roses.md"}),
        )
        .unwrap();
    assert!(out.text_for_model.starts_with("grant/garden/roses.md"));
    let out = rig.call("find_files", json!({"query": "roses"})).unwrap();
    assert_eq!(out.data["matches"].as_array().unwrap().len(), 1);
}

#[test]
fn a_symlink_swapped_back_and_forth_never_leads_outside() {
    let tree = Tree::new();
    let g = tree.grant();
    std::fs::write(g.join("flip.txt"), "inside text\n").unwrap();
    std::fs::write(g.join("flip-real.txt"), "inside text\n").unwrap();
    symlink(tree.outside().join("secret.txt"), g.join("flip-link")).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (g, stop) = (g.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // rename is atomic: flip.txt is always either the file or the link outside
                let from = if n.is_multiple_of(2) {
                    "flip-link"
                } else {
                    "flip-real.txt"
                };
                let _ = std::fs::hard_link(g.join(from), g.join("flip.tmp"));
                let _ = std::fs::rename(g.join("flip.tmp"), g.join("flip.txt"));
                n += 1;
            }
        })
    };
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = rig(&s, &host, &r);
    let (mut read, mut refused) = (0, 0);
    for _ in 0..300 {
        // `Rig::call` asserts that no result and no error ever holds the secret
        match rig.call("read_file", json!({"path": "flip.txt"})) {
            Ok(out) => {
                assert!(out.text_for_model.contains("inside text"));
                read += 1;
            }
            Err(e) => {
                // which refusal depends on where the swap caught the call (a busy machine
                // catches it in the type check too); that nothing outside is read is the point
                assert!(
                    matches!(
                        e.code(),
                        "outside_grants" | "changed_while_opening" | "not_found" | "not_text"
                    ),
                    "{e}"
                );
                refused += 1;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    assert_eq!(read + refused, 300);
}

#[test]
fn a_granted_folder_that_is_a_symlink_is_granted_where_it_leads() {
    let tree = Tree::new();
    let link = tree.path("link-to-grant");
    symlink(tree.grant(), &link).unwrap();
    let s = Sandbox::new(&[GrantSpec::read_only(&link)], &[]).unwrap();
    assert_eq!(s.grants()[0].name, "grant");
    assert_eq!(
        s.grants()[0].path,
        std::fs::canonicalize(tree.grant()).unwrap()
    );
    let (host, r) = (FakeHost::default(), RememberedApprovals::new());
    let rig = rig(&s, &host, &r);
    // by the link's path, by the real path, and by name
    for path in [
        absolute(&link.join("garden/roses.md")),
        absolute(&tree.grant().join("garden/roses.md")),
        "grant/garden/roses.md".to_string(),
    ] {
        let out = rig.call("read_file", json!({ "path": path })).unwrap();
        assert!(out.text_for_model.contains("Prune roses"), "{path}");
    }
    // the link's own folder is not granted
    assert_eq!(
        code(rig.call(
            "read_file",
            json!({"path": absolute(&tree.outside().join("secret.txt"))})
        )),
        "outside_grants"
    );
}

#[test]
fn very_long_paths_and_names_are_refused_or_skipped() {
    let tree = Tree::new();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = rig(&s, &host, &r);
    let long_name = "n".repeat(300);
    assert_eq!(
        code(rig.call("read_file", json!({"path": format!("garden/{long_name}")}))),
        "path_too_long"
    );
    // over 4096 characters: refused by the schema, naming the argument
    let beyond = format!("garden/{}", ["abcdefgh"; 600].join("/"));
    let e = rig.call("read_file", json!({"path": beyond})).unwrap_err();
    assert_eq!(e.code(), "invalid_arguments");
    assert!(
        e.to_string()
            .contains("argument `path` must have at most 4096 characters"),
        "{e}"
    );
    // under 4096 characters but over PATH_MAX bytes: refused by the sandbox
    let beyond = format!("garden/{}", ["日本語"; 500].join("/"));
    assert!(beyond.len() > 4096 && beyond.chars().count() < 4096);
    let e = rig.call("read_file", json!({"path": beyond})).unwrap_err();
    assert_eq!(e.code(), "path_too_long");
    assert!(e.to_string().len() < 600, "a short message: {e}");
    // a real tree deeper than PATH_MAX, made through handles
    let grant =
        cap_std::fs::Dir::open_ambient_dir(tree.grant(), cap_std::ambient_authority()).unwrap();
    let level = "d".repeat(200);
    let mut dir = grant.try_clone().unwrap();
    for _ in 0..25 {
        dir.create_dir(&level).unwrap();
        dir = dir.open_dir(&level).unwrap();
    }
    dir.write("deepest-tomatoes.txt", "tomatoes at the bottom")
        .unwrap();
    let out = rig.call("find_files", json!({"query": "deepest"})).unwrap();
    assert!(out.data["matches"].as_array().unwrap().is_empty());
    assert!(
        out.text_for_model.contains("were not searched"),
        "{}",
        out.text_for_model
    );
    let out = rig
        .call("search_files", json!({"query": "tomatoes"}))
        .unwrap();
    assert_eq!(out.data["matches"].as_array().unwrap().len(), 2);
}

#[test]
fn names_that_are_not_utf8_are_skipped_and_counted() {
    use std::os::unix::ffi::OsStrExt;
    let tree = Tree::new();
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9-tomatoes.txt");
    std::fs::write(
        tree.grant().join("garden").join(odd),
        "tomatoes in latin-1 land",
    )
    .unwrap();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = rig(&s, &host, &r);
    let out = rig.call("list_folder", json!({"path": "garden"})).unwrap();
    assert!(
        out.text_for_model
            .contains("1 names that are not valid UTF-8 are not shown"),
        "{}",
        out.text_for_model
    );
    let out = rig
        .call("search_files", json!({"query": "tomatoes"}))
        .unwrap();
    assert!(out.text_for_model.contains("not valid UTF-8 were skipped"));
    // the lossy spelling of the name names nothing
    assert_eq!(
        code(rig.call(
            "read_file",
            json!({"path": "garden/caf\u{fffd}-tomatoes.txt"})
        )),
        "not_found"
    );
}

#[test]
fn binary_files_and_special_files_are_refused_clearly() {
    let tree = Tree::new();
    let g = tree.grant();
    let mut elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0".to_vec();
    elf.extend((0..4000u32).map(|i| (i % 251) as u8));
    std::fs::write(g.join("program"), &elf).unwrap();
    std::fs::write(g.join("photo.jpg"), b"\xff\xd8\xff\xe0\0\x10JFIF\0tomatoes").unwrap();
    let fifo = g.join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = rig(&s, &host, &r);
    for path in ["program", "photo.jpg", "pipe"] {
        let e = rig.call("read_file", json!({ "path": path })).unwrap_err();
        assert_eq!(e.code(), "not_text", "{path}");
        assert!(e.to_string().starts_with("not a text file"), "{e}");
    }
    assert_eq!(
        code(rig.call("read_file", json!({"path": "garden"}))),
        "not_a_file"
    );
    assert_eq!(
        code(rig.call("list_folder", json!({"path": "garden/roses.md"}))),
        "not_a_folder"
    );
    assert_eq!(
        code(rig.call("read_file", json!({"path": "garden/nope.txt"}))),
        "not_found"
    );
    let out = rig
        .call("search_files", json!({"query": "tomatoes"}))
        .unwrap();
    assert!(
        out.text_for_model
            .contains("files that are not text were skipped"),
        "{}",
        out.text_for_model
    );
}

#[test]
fn hidden_files_are_never_listed_read_or_searched() {
    let tree = Tree::new();
    let g = tree.grant();
    std::fs::write(g.join(".env"), "API_KEY=tomatoes").unwrap();
    std::fs::create_dir(g.join(".git")).unwrap();
    std::fs::write(g.join(".git/config"), "tomatoes").unwrap();
    symlink(".env", g.join("visible-link")).unwrap();
    let (s, host, r) = (
        sandbox(&tree),
        FakeHost::default(),
        RememberedApprovals::new(),
    );
    let rig = rig(&s, &host, &r);
    for path in [
        ".env",
        ".git/config",
        "garden/../.git/config",
        "visible-link",
    ] {
        let e = rig.call("read_file", json!({ "path": path })).unwrap_err();
        assert_eq!(e.code(), "hidden", "{path}: {e}");
    }
    assert_eq!(
        code(rig.call("list_folder", json!({"path": ".git"}))),
        "hidden"
    );
    let out = rig.call("list_folder", json!({"path": "grant"})).unwrap();
    assert!(!out.text_for_model.contains(".env") && !out.text_for_model.contains(".git"));
    let out = rig
        .call("search_files", json!({"query": "API_KEY"}))
        .unwrap();
    assert!(out.text_for_model.starts_with("No file"));
    let out = rig.call("find_files", json!({"query": "config"})).unwrap();
    assert!(out.data["matches"].as_array().unwrap().is_empty());
}

#[test]
fn companions_own_data_inside_a_grant_stays_unseen() {
    let tree = Tree::new();
    let data = tree.grant().join("companion-data");
    std::fs::create_dir_all(data.join("companion.db.snapshots")).unwrap();
    std::fs::write(
        data.join("companion.db"),
        "tomatoes in my private conversations",
    )
    .unwrap();
    symlink("companion-data/companion.db", tree.grant().join("db-link")).unwrap();
    let s = Sandbox::new(
        &[GrantSpec::read_only(tree.grant())],
        std::slice::from_ref(&data),
    )
    .unwrap();
    let (host, r) = (FakeHost::default(), RememberedApprovals::new());
    let rig = rig(&s, &host, &r);
    for path in ["companion-data/companion.db", "db-link", "companion-data"] {
        let e = rig.call("read_file", json!({ "path": path })).unwrap_err();
        assert_eq!(e.code(), "private_data", "{path}: {e}");
    }
    assert_eq!(
        code(rig.call("list_folder", json!({"path": "companion-data"}))),
        "private_data"
    );
    let out = rig.call("list_folder", json!({"path": "grant"})).unwrap();
    assert!(!out.text_for_model.contains("companion-data"));
    let out = rig
        .call("search_files", json!({"query": "private conversations"}))
        .unwrap();
    assert!(out.text_for_model.starts_with("No file"));
    // the data folder, or one inside it, cannot be granted
    for p in [data.clone(), data.join("companion.db.snapshots")] {
        let e = Sandbox::new(&[GrantSpec::read_only(&p)], std::slice::from_ref(&data)).unwrap_err();
        assert_eq!(e.code(), "bad_grant");
        assert!(e.to_string().contains("Companion's own data"));
    }
}

#[test]
fn no_grant_means_no_file_access() {
    let s = Sandbox::new(&[], &[]).unwrap();
    let (host, r) = (FakeHost::default(), RememberedApprovals::new());
    let rig = rig(&s, &host, &r);
    for (tool, args) in [
        ("list_folder", json!({})),
        ("read_file", json!({"path": "/etc/passwd"})),
        ("find_files", json!({"query": "passwd"})),
        ("search_files", json!({"query": "root"})),
        ("summarize_file", json!({"path": "a.txt"})),
    ] {
        let e = rig.call(tool, args).unwrap_err();
        assert_eq!(e.code(), "no_grant", "{tool}");
        assert!(e.to_string().contains("--allow"), "{e}");
    }
    let e = Sandbox::new(&[GrantSpec::read_only("/no/such/folder")], &[]).unwrap_err();
    assert_eq!(e.code(), "bad_grant");
}

#[test]
fn writes_go_only_to_folders_that_may_be_written() {
    let tree = Tree::new();
    let other = tree.path("writable");
    std::fs::create_dir(&other).unwrap();
    let s = Sandbox::new(
        &[
            GrantSpec::read_only(tree.grant()),
            GrantSpec::may_write(&other),
        ],
        &[],
    )
    .unwrap();
    let e = s.locate_for_write("grant/garden/new.txt").unwrap_err();
    assert_eq!(e.code(), "read_only");
    assert!(e.to_string().contains("may write"));
    let ok = s.locate_for_write("writable/new.txt").unwrap();
    assert_eq!(ok.shown(), "writable/new.txt");
    assert_eq!(
        s.locate_for_write("writable/.hidden").unwrap_err().code(),
        "hidden"
    );
    assert_eq!(
        s.locate_for_write("writable/../grant/x")
            .unwrap_err()
            .code(),
        "outside_grants"
    );
    assert_eq!(
        s.locate_for_write("elsewhere.txt").unwrap_err().code(),
        "outside_grants"
    );
    // the toolbox itself has no file-writing tool yet
    assert!(
        agent::declarations(&Limits::default())
            .iter()
            .filter(|t| t.writes)
            .all(|t| !t.name.contains("file"))
    );
    assert!(!SECRET.is_empty());
}
