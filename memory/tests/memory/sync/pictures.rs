//! Pictures through sync: a message's pictures reach the other device inside its record, go
//! there when the last message that had them goes, and a record whose picture is missing or
//! does not hash right is refused whole, with a notice.

use std::path::{Path, PathBuf};

use memory::sync::clock::Stamp;
use memory::sync::folder::{self, FileKind};
use memory::sync::record::{Body, Field, Picture, Record};
use memory::{Error, ImageRef, NewMessage, Role};

use super::{Device, Rng, settle};

fn picture_files(device: &Device) -> Vec<String> {
    crate::images::files_in(&PathBuf::from(format!("{}.images", device.db.display())))
}

fn with(device: &Device, conversation: &memory::ConversationId, text: &str, images: &[&ImageRef]) {
    device
        .store
        .append_message(
            conversation,
            &NewMessage::complete(Role::User, text, None)
                .with_images(images.iter().map(|i| (*i).clone()).collect()),
        )
        .unwrap();
}

#[test]
fn pictures_reach_the_other_device_and_leave_with_their_last_message() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = (
        Device::new(dir.path(), "mac"),
        Device::new(dir.path(), "iphone"),
    );
    let mut rng = Rng(11);
    let shell_bytes = b"\x89PNG\r\n\x1a\n a shell".repeat(300);
    let shell = mac.store.save_image(&shell_bytes, "image/png").unwrap();
    let crab = mac.store.save_image(b"GIF89a a crab", "image/gif").unwrap();
    let c = mac.conversation("Shells");
    with(&mac, &c.id, "whose shell?", &[&shell]);
    with(&mac, &c.id, "and with the crab?", &[&crab, &shell]);
    settle(&[&mac, &phone], &mut rng);

    assert_eq!(mac.visible(), phone.visible());
    let there = phone.store.messages(&c.id).unwrap();
    assert_eq!(there[0].images, vec![shell.clone()]);
    assert_eq!(there[1].images, vec![crab.clone(), shell.clone()]);
    assert_eq!(phone.store.image_bytes(&shell).unwrap(), shell_bytes);
    assert_eq!(picture_files(&phone), picture_files(&mac));
    assert_eq!(picture_files(&phone).len(), 2);

    // an edit on the phone takes the second message: the crab goes on both, the shell stays
    phone.store.truncate_messages(&c.id, 1).unwrap();
    settle(&[&mac, &phone], &mut rng);
    assert_eq!(mac.visible(), phone.visible());
    assert!(matches!(
        mac.store.image_bytes(&crab),
        Err(Error::ImageMissing(_))
    ));
    assert_eq!(mac.store.image_bytes(&shell).unwrap(), shell_bytes);
    assert_eq!(picture_files(&mac), vec![shell.sha256.clone()]);

    // the conversation deleted on the Mac takes the last picture from both
    mac.store.delete_conversation(&c.id).unwrap();
    settle(&[&mac, &phone], &mut rng);
    assert!(phone.store.list_conversations(0, 10).unwrap().is_empty());
    assert!(picture_files(&phone).is_empty());
    assert!(picture_files(&mac).is_empty());
}

/// A segment of `device` holding one message record with `pictures`, written into `view`.
fn hostile_segment(view: &Path, device: &str, n: u64, pictures: Vec<Picture>) {
    let at = Stamp::new(5 << 16, device);
    let record = Record::Message {
        uid: format!("m{n}"),
        conversation: "0f6c3c1e-2d0a-4c58-9a51-3b7c1c0e7a11".into(),
        role: "user".into(),
        created_at: 1,
        created: at.clone(),
        body: Field {
            value: Body {
                text: "look".into(),
                status: "complete".into(),
                updated_at: 1,
                timings: None,
            },
            at,
        },
        images: pictures,
    };
    let dir = view.join(folder::ROOT).join(device);
    std::fs::create_dir_all(&dir).unwrap();
    let kind = FileKind::Segment(n);
    std::fs::write(
        dir.join(folder::file_name(kind)),
        folder::encode(device, kind, &[record]),
    )
    .unwrap();
}

#[test]
fn a_record_whose_picture_is_missing_or_wrong_is_refused_with_a_notice() {
    let dir = tempfile::tempdir().unwrap();
    let phone = Device::new(dir.path(), "iphone");
    let other = "0123456789abcdef";
    let sha = |bytes: &[u8]| -> String {
        use sha2::Digest;
        sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let cases = [
        (
            "does not match its sha256",
            Picture {
                sha256: sha(b"one picture"),
                mime: "image/png".into(),
                data: b64(b"another picture"),
            },
        ),
        (
            "came without its data",
            Picture {
                sha256: sha(b"one picture"),
                mime: "image/png".into(),
                data: String::new(),
            },
        ),
        (
            "PNG, JPEG, WebP or GIF",
            Picture {
                sha256: sha(b"<svg/>"),
                mime: "image/svg+xml".into(),
                data: b64(b"<svg/>"),
            },
        ),
        (
            "not the sha256 of a picture",
            Picture {
                sha256: "../../companion.db".into(),
                mime: "image/png".into(),
                data: b64(b"x"),
            },
        ),
        (
            "not base64",
            Picture {
                sha256: sha(b"one picture"),
                mime: "image/png".into(),
                data: "%%%".into(),
            },
        ),
    ];
    for (n, (_, picture)) in cases.iter().enumerate() {
        hostile_segment(&phone.folder, other, n as u64 + 1, vec![picture.clone()]);
    }
    let report = phone.round();
    assert_eq!(report.notices.len(), cases.len(), "{:?}", report.notices);
    for (notice, (why, _)) in report.notices.iter().zip(&cases) {
        assert_eq!(notice.code, "invalid", "{notice:?}");
        assert!(notice.message.contains(why), "{why}: {}", notice.message);
    }
    assert!(report.applied_files.is_empty());
    assert!(picture_files(&phone).is_empty(), "nothing written");
    assert_eq!(phone.store.sync_status().unwrap().waiting, 0);
}

#[test]
fn a_picture_left_out_of_a_record_is_filled_in_by_a_later_copy_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = (
        Device::new(dir.path(), "mac"),
        Device::new(dir.path(), "iphone"),
    );
    let bytes = b"\xff\xd8\xff\xe0 a lighthouse".to_vec();
    let lighthouse = mac.store.save_image(&bytes, "image/jpeg").unwrap();
    let c = mac.conversation("Coast");
    with(&mac, &c.id, "which one?", &[&lighthouse]);
    // its file gone on the Mac: the message is sent without it rather than not at all
    let file = PathBuf::from(format!("{}.images", mac.db.display())).join(&lighthouse.sha256);
    std::fs::remove_file(&file).unwrap();
    settle(&[&mac, &phone], &mut Rng(12));
    let there = phone.store.messages(&c.id).unwrap();
    assert_eq!(there.len(), 1);
    assert!(there[0].images.is_empty());

    // a copy of the same record that carries it (as a later snapshot would) fills it in
    let mac_id = mac.store.sync_device().unwrap();
    let own = mac.folder.join(folder::ROOT).join(&mac_id);
    let segment = std::fs::read(own.join(folder::file_name(FileKind::Segment(1)))).unwrap();
    let (_, mut records) = folder::decode(&segment, folder::FORMAT).unwrap();
    use base64::Engine;
    for r in &mut records {
        if let Record::Message { images, .. } = r {
            *images = vec![Picture {
                sha256: lighthouse.sha256.clone(),
                mime: lighthouse.mime.clone(),
                data: base64::engine::general_purpose::STANDARD.encode(&bytes),
            }];
        }
    }
    let other = "fedcba9876543210";
    let dir = phone.folder.join(folder::ROOT).join(other);
    std::fs::create_dir_all(&dir).unwrap();
    let kind = FileKind::Segment(1);
    std::fs::write(
        dir.join(folder::file_name(kind)),
        folder::encode(other, kind, &records),
    )
    .unwrap();
    let report = phone.round();
    assert!(report.notices.is_empty(), "{:?}", report.notices);
    assert_eq!(report.applied_records, 1, "only the message changed");
    let there = phone.store.messages(&c.id).unwrap();
    assert_eq!(there[0].images, vec![lighthouse.clone()]);
    assert_eq!(phone.store.image_bytes(&lighthouse).unwrap(), bytes);
    // applied again (a conflict copy), nothing changes
    std::fs::write(
        dir.join("seg-00000001 2.jsonl"),
        folder::encode(other, kind, &records),
    )
    .unwrap();
    phone.round();
    assert_eq!(phone.store.messages(&c.id).unwrap()[0].images.len(), 1);
}

#[test]
fn large_pictures_are_spread_over_several_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (mac, phone) = (
        Device::new(dir.path(), "mac"),
        Device::new(dir.path(), "iphone"),
    );
    let c = mac.conversation("Photos");
    let big = |seed: u8| -> Vec<u8> {
        (0..30usize << 20)
            .map(|i| (i as u8).wrapping_mul(seed))
            .collect()
    };
    let a = mac.store.save_image(&big(3), "image/png").unwrap();
    let b = mac.store.save_image(&big(5), "image/png").unwrap();
    with(&mac, &c.id, "one", &[&a]);
    with(&mac, &c.id, "two", &[&b]);
    let report = mac.round();
    assert_eq!(report.wrote.len(), 2, "{:?}", report.wrote);
    settle(&[&mac, &phone], &mut Rng(13));
    let there = phone.store.messages(&c.id).unwrap();
    assert_eq!(
        (there[0].images.clone(), there[1].images.clone()),
        (vec![a], vec![b.clone()])
    );
    assert_eq!(phone.store.image_bytes(&b).unwrap(), big(5));
}
