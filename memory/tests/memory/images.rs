//! Pictures attached to messages: kept once per content beside the database, read back with
//! their messages, gone with the last message that had them, carried whole by JSON exports,
//! and kept by databases from before them.

use std::path::{Path, PathBuf};

use anyhow::Result;
use memory::export::ConversationExport;
use memory::{ConversationId, Error, ImageRef, MAX_IMAGE_BYTES, NewMessage, Role, Store};

fn store(dir: &tempfile::TempDir) -> Store {
    Store::open(dir.path().join("companion.db"))
        .expect("opens")
        .store
}

/// The folder the store keeps its pictures in (`companion.db.images`).
fn image_dir(store: &Store) -> PathBuf {
    let name = store.path().file_name().unwrap().to_string_lossy();
    store.path().with_file_name(format!("{name}.images"))
}

fn image_file(store: &Store, image: &ImageRef) -> PathBuf {
    image_dir(store).join(&image.sha256)
}

/// Picture files in the folder, temporary files aside.
pub(crate) fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Bytes that begin as a PNG does, different for each `seed`.
fn png(seed: u8, len: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend((0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    bytes
}

fn rows(store: &Store, sql: &str) -> i64 {
    let raw = rusqlite::Connection::open(store.path()).unwrap();
    raw.query_row(sql, [], |r| r.get(0)).unwrap()
}

fn conversation(store: &Store, title: &str) -> ConversationId {
    store
        .create_conversation(title, None, &serde_json::json!({}))
        .unwrap()
        .id
}

#[test]
fn a_message_keeps_its_pictures_in_order_and_reads_them_back() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = store(&dir);
    let c = conversation(&s, "Birds");
    let gull = png(1, 5000);
    let a = s.save_image(&gull, "image/png")?;
    let b = s.save_image(b"\xff\xd8\xff\xe0 a jpeg", "image/jpeg")?;
    assert_eq!(a.sha256.len(), 64);
    assert!(
        a.sha256
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_eq!(
        std::fs::read(image_file(&s, &a))?,
        gull,
        "the file is the bytes"
    );
    // saving the same picture again is the same picture, kept once
    assert_eq!(s.save_image(&gull, "image/png")?, a);
    assert_eq!(files_in(&image_dir(&s)).len(), 2);

    s.append_message(&c, &NewMessage::complete(Role::User, "no picture", None))?;
    let m = s.append_message(
        &c,
        &NewMessage::complete(Role::User, "what bird is this?", None).with_images(vec![
            b.clone(),
            a.clone(),
            b.clone(),
        ]),
    )?;
    assert_eq!(m.images, vec![b.clone(), a.clone(), b.clone()], "in order");
    assert_eq!(s.message(m.id)?.images, m.images);
    let messages = s.messages(&c)?;
    assert!(messages[0].images.is_empty());
    assert_eq!(messages[1].images, m.images);
    assert_eq!(s.prompt_parts(&c)?.messages[1].images, m.images);
    assert_eq!(s.image_bytes(&a)?, gull);
    assert_eq!(rows(&s, "SELECT count(*) FROM images"), 2);
    // looked up by its sha256 (what the app's `picture` command is given)
    assert_eq!(s.image(&a.sha256)?, Some(a.clone()));
    let saved_only = s.save_image(&png(9, 100), "image/png")?;
    assert_eq!(s.image(&saved_only.sha256)?, None, "no message links to it");
    for bad in ["../companion.db", &a.sha256.to_uppercase(), ""] {
        assert!(
            matches!(s.image(bad), Err(Error::InvalidArgument(_))),
            "{bad:?} is refused"
        );
    }
    assert_eq!(
        rows(
            &s,
            &format!(
                "SELECT byte_count FROM images WHERE sha256 = '{}'",
                a.sha256
            )
        ),
        gull.len() as i64
    );
    // the message's JSON for the app names them as `sha256` and `mimeType`
    let json = serde_json::to_value(&messages[1])?;
    assert_eq!(
        json["images"][1],
        serde_json::json!({"sha256": a.sha256, "mimeType": "image/png"})
    );
    assert!(serde_json::to_value(&messages[0])?.get("images").is_none());
    Ok(())
}

#[test]
fn only_pictures_companion_keeps_are_saved() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = store(&dir);
    for mime in ["image/png", "image/jpeg", "image/webp", "image/gif"] {
        s.save_image(mime.as_bytes(), mime)?;
    }
    let err = s.save_image(b"<svg/>", "image/svg+xml").unwrap_err();
    assert!(matches!(err, Error::ImageType(_)), "{err}");
    assert_eq!(err.code(), "image_type_unsupported");
    assert!(err.to_string().contains("PNG, JPEG, WebP or GIF"), "{err}");
    let err = s
        .save_image(&vec![7; MAX_IMAGE_BYTES + 1], "image/png")
        .unwrap_err();
    assert!(matches!(err, Error::ImageTooLarge(_)), "{err}");
    assert_eq!(
        err.to_string(),
        "the picture is 33 MiB; Companion keeps pictures of up to 32 MiB"
    );
    assert!(matches!(
        s.save_image(b"", "image/png"),
        Err(Error::InvalidArgument(_))
    ));
    s.save_image(&vec![7; MAX_IMAGE_BYTES], "image/png")?;
    assert_eq!(
        files_in(&image_dir(&s)).len(),
        5,
        "nothing refused was written"
    );
    // a name that is not a sha256 never becomes a path
    let err = s
        .image_bytes(&ImageRef {
            sha256: "../../companion.db".into(),
            mime: "image/png".into(),
        })
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    Ok(())
}

#[test]
fn a_missing_or_damaged_picture_is_a_clear_error() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = store(&dir);
    let c = conversation(&s, "Lost");
    let a = s.save_image(&png(2, 300), "image/png")?;
    s.append_message(
        &c,
        &NewMessage::complete(Role::User, "look", None).with_images(vec![a.clone()]),
    )?;

    std::fs::write(image_file(&s, &a), b"something else")?;
    let err = s.image_bytes(&a).unwrap_err();
    assert!(
        matches!(&err, Error::ImageCorrupt(sha) if *sha == a.sha256),
        "{err}"
    );
    assert_eq!(err.code(), "image_corrupt");

    std::fs::remove_file(image_file(&s, &a))?;
    let err = s.image_bytes(&a).unwrap_err();
    assert!(
        matches!(&err, Error::ImageMissing(sha) if *sha == a.sha256),
        "{err}"
    );
    assert_eq!(err.code(), "image_missing");
    assert_eq!(
        err.to_string(),
        format!(
            "a picture of this conversation (sha256 {}…) is missing from the data folder",
            &a.sha256[..12]
        )
    );
    // the message is still there, naming it
    assert_eq!(s.messages(&c)?[0].images, vec![a.clone()]);

    // a message cannot be appended with a picture whose file is not there; nothing of it stays
    let err = s
        .append_message(
            &c,
            &NewMessage::complete(Role::User, "again", None).with_images(vec![a.clone()]),
        )
        .unwrap_err();
    assert!(matches!(err, Error::ImageMissing(_)), "{err}");
    assert_eq!(s.messages(&c)?.len(), 1);
    let err = s
        .append_message(
            &c,
            &NewMessage::complete(Role::User, "svg", None).with_images(vec![ImageRef {
                sha256: a.sha256.clone(),
                mime: "image/svg+xml".into(),
            }]),
        )
        .unwrap_err();
    assert!(matches!(err, Error::ImageType(_)), "{err}");
    assert_eq!(s.messages(&c)?.len(), 1);
    Ok(())
}

#[test]
fn a_picture_goes_with_the_last_message_that_had_it() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = store(&dir);
    let shared = s.save_image(&png(3, 2000), "image/png")?;
    let only_a = s.save_image(&png(4, 2000), "image/png")?;
    let only_b = s.save_image(b"GIF89a a gif", "image/gif")?;
    let a = conversation(&s, "A");
    let b = conversation(&s, "B");
    s.append_message(&a, &NewMessage::complete(Role::User, "first", None))?;
    s.append_message(
        &a,
        &NewMessage::complete(Role::User, "two pictures", None)
            .with_images(vec![shared.clone(), only_a.clone()]),
    )?;
    s.append_message(
        &b,
        &NewMessage::complete(Role::User, "the same one", None)
            .with_images(vec![shared.clone(), only_b.clone()]),
    )?;

    // an edit in A takes A's own picture, not the one B has too
    s.truncate_messages(&a, 1)?;
    assert!(!image_file(&s, &only_a).exists());
    assert!(image_file(&s, &shared).exists());
    assert!(image_file(&s, &only_b).exists());
    assert_eq!(rows(&s, "SELECT count(*) FROM images"), 2);
    assert_eq!(
        s.messages(&b)?[0].images,
        vec![shared.clone(), only_b.clone()]
    );

    // A attaches the shared one again, then B goes: it stays for A
    s.append_message(
        &a,
        &NewMessage::complete(Role::User, "again", None).with_images(vec![shared.clone()]),
    )?;
    s.delete_conversation(&b)?;
    assert!(image_file(&s, &shared).exists());
    assert!(!image_file(&s, &only_b).exists());
    assert_eq!(s.image_bytes(&shared)?, png(3, 2000));

    // and with A's last message that had it, it goes
    s.delete_conversation(&a)?;
    assert_eq!(files_in(&image_dir(&s)), Vec::<String>::new());
    assert_eq!(rows(&s, "SELECT count(*) FROM images"), 0);
    assert_eq!(rows(&s, "SELECT count(*) FROM message_images"), 0);
    assert_eq!(s.integrity_check()?, "ok");
    Ok(())
}

/// A conversation with a picture attached to two messages and another to one.
fn pictured(s: &Store) -> Result<ConversationId> {
    let c = s.create_conversation("Shells", Some("gemma"), &serde_json::json!({"t": 1}))?;
    let shell = s.save_image(&png(5, 12_000), "image/png")?;
    let crab = s.save_image(b"RIFF\x10\x00\x00\x00WEBPVP8 a crab", "image/webp")?;
    s.append_message(
        &c.id,
        &NewMessage::complete(Role::User, "whose shell?", Some(7))
            .with_images(vec![shell.clone(), crab.clone()]),
    )?;
    s.append_message(
        &c.id,
        &NewMessage::complete(Role::Assistant, "A hermit crab's.", Some(5)),
    )?;
    s.append_message(
        &c.id,
        &NewMessage::complete(Role::User, "and this one?", None).with_images(vec![shell]),
    )?;
    Ok(c.id)
}

#[test]
fn a_json_export_carries_its_pictures_and_imports_exactly() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = store(&dir);
    let c = pictured(&s)?;
    let json = s.export_json(&c)?;
    let export: ConversationExport = serde_json::from_str(&json)?;
    assert_eq!(export.images.len(), 2, "each picture once");
    assert_eq!(export.messages[0].images.len(), 2);
    assert!(export.messages[1].images.is_empty());
    let value: serde_json::Value = serde_json::from_str(&json)?;
    assert_eq!(value["images"][0]["mimeType"], "image/png");
    assert!(value["messages"][1].get("images").is_none());

    let other_dir = tempfile::tempdir()?;
    let other = store(&other_dir);
    let id = other.import_json(&json, false)?.id;
    assert_eq!(other.export_json(&id)?, json, "export → import → export");
    for image in &export.messages[0].images {
        assert!(image_file(&other, image).exists());
        assert_eq!(other.image_bytes(image)?, s.image_bytes(image)?);
    }
    assert_eq!(other.messages(&id)?[2].images, export.messages[2].images);
    // a copy beside it shares the files; deleting the original keeps them for the copy
    let copy = other.import_json(&json, true)?.id;
    other.delete_conversation(&id)?;
    assert_eq!(files_in(&image_dir(&other)).len(), 2);
    assert_eq!(other.export(&copy)?.images, export.images);
    Ok(())
}

#[test]
fn a_markdown_export_names_each_picture() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = store(&dir);
    let c = pictured(&s)?;
    let md = s.export_markdown(&c)?;
    assert!(
        md.contains(
            "## You\n\nwhose shell?\n\n_[picture: image/png, 13 KB]_\n_[picture: image/webp, 1 KB]_\n"
        ),
        "{md}"
    );
    assert!(
        md.contains("## Companion\n\nA hermit crab's.\n\n## You"),
        "{md}"
    );
    Ok(())
}

#[test]
fn a_hostile_export_is_refused_before_anything_is_written() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let s = store(&dir);
    let c = pictured(&s)?;
    let good: serde_json::Value = serde_json::from_str(&s.export_json(&c)?)?;

    let mut cases: Vec<(&str, serde_json::Value)> = Vec::new();
    let mut wrong_sha = good.clone();
    wrong_sha["images"][0]["data"] = serde_json::json!("aGVsbG8gd29ybGQ=");
    cases.push(("does not match its sha256", wrong_sha));
    let mut bad_base64 = good.clone();
    bad_base64["images"][0]["data"] = serde_json::json!("not base64 at all!");
    cases.push(("not base64", bad_base64));
    let mut missing = good.clone();
    missing["images"].as_array_mut().unwrap().remove(1);
    cases.push(("does not hold", missing));
    let mut svg = good.clone();
    svg["images"][1]["mimeType"] = serde_json::json!("image/svg+xml");
    svg["messages"][0]["images"][1]["mimeType"] = serde_json::json!("image/svg+xml");
    cases.push(("PNG, JPEG, WebP or GIF", svg));
    let mut mismatch = good.clone();
    mismatch["messages"][0]["images"][1]["mimeType"] = serde_json::json!("image/png");
    cases.push(("the export as image/webp", mismatch));
    let mut path = good.clone();
    path["messages"][2]["images"][0]["sha256"] = serde_json::json!("../../../etc/passwd");
    cases.push(("does not hold", path));
    let mut unused = good.clone();
    unused["messages"][0]["images"] = serde_json::json!([good["messages"][0]["images"][0]]);
    cases.push(("belongs to no message", unused));
    let mut twice = good.clone();
    let first = twice["images"][0].clone();
    twice["images"].as_array_mut().unwrap().push(first);
    cases.push(("listed twice", twice));
    let mut huge = good.clone();
    huge["images"][0]["data"] = serde_json::json!("A".repeat(MAX_IMAGE_BYTES / 3 * 4 + 8));
    cases.push(("larger than a picture can be", huge));

    for (why, export) in cases {
        let other_dir = tempfile::tempdir()?;
        let other = store(&other_dir);
        match other.import_json(&export.to_string(), false) {
            Err(Error::InvalidExport(message)) => {
                assert!(message.contains(why), "{why}: {message}");
                assert!(!message.contains('\n'), "one line: {message}");
            }
            other => panic!("{why}: {other:?}"),
        }
        assert!(other.list_conversations(0, 10)?.is_empty(), "{why}");
        assert_eq!(rows(&other, "SELECT count(*) FROM messages"), 0, "{why}");
        assert_eq!(rows(&other, "SELECT count(*) FROM images"), 0, "{why}");
        assert!(
            files_in(&image_dir(&other)).is_empty(),
            "{why}: no file written"
        );
    }
    Ok(())
}

#[test]
fn a_version_10_database_is_upgraded_and_takes_pictures() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("v10.db");
    {
        let raw = rusqlite::Connection::open(&path)?;
        raw.execute_batch(include_str!("../fixtures/schema-v10.sql"))?;
    }
    let s = Store::open(&path)?.store;
    let raw = rusqlite::Connection::open(&path)?;
    let version: i64 = raw.pragma_query_value(None, "user_version", |r| r.get(0))?;
    assert_eq!(version, memory::store::schema::SCHEMA_VERSION);
    let c = s.resolve_conversation("5b2c9e41")?;
    let messages = s.messages(&c)?;
    assert_eq!(messages.len(), 2);
    assert!(messages.iter().all(|m| m.images.is_empty()));
    assert_eq!(s.summaries(&c)?.len(), 1);
    assert_eq!(s.search("wingtips", 5)?.len(), 2);
    assert!(!s.export_json(&c)?.contains("\"images\""));

    let gull = s.save_image(&png(6, 900), "image/jpeg")?;
    let m = s.append_message(
        &c,
        &NewMessage::complete(Role::User, "and this one?", None).with_images(vec![gull.clone()]),
    )?;
    assert_eq!(s.message(m.id)?.images, vec![gull]);
    s.truncate_messages(&c, 2)?;
    assert_eq!(rows(&s, "SELECT count(*) FROM images"), 0);
    assert_eq!(s.messages(&c)?.len(), 2);
    assert_eq!(s.integrity_check()?, "ok");
    Ok(())
}
