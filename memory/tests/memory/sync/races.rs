//! Deletions racing other devices' changes, each case one that the convergence property found:
//! the devices end the same, and nothing waits for a parent that will never come.

use memory::{NewSummary, Role};

use super::{Device, Rng, carry, settle, texts};

fn summary(device: &Device, conversation: &memory::ConversationId, last_seq: i64, text: &str) {
    device
        .store
        .add_summary(
            conversation,
            &NewSummary {
                first_seq: 0,
                last_seq,
                text: text.into(),
                token_count: 3,
                model: "m".into(),
            },
        )
        .unwrap();
}

fn summary_texts(device: &Device, conversation: &memory::ConversationId) -> Vec<String> {
    match device.store.summaries(conversation) {
        Ok(s) => s.into_iter().map(|s| s.text).collect(),
        Err(_) => Vec::new(),
    }
}

/// A summary written (by a clock that runs ahead) after a deletion it had not heard of, over
/// messages that deletion took, goes with them on every device — the device that deleted
/// first does not keep it waiting for messages or a conversation that will not come.
#[test]
fn a_summary_of_messages_a_deletion_took_goes_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let mac = Device::new(dir.path(), "mac");
    let phone = Device::new(dir.path(), "iphone");
    let quiet = mac.conversation("deleted, summarized after");
    let busy = mac.conversation("deleted, summarized and written to after");
    for c in [&quiet.id, &busy.id] {
        mac.append(c, Role::User, "one");
        mac.append(c, Role::Assistant, "two");
    }
    settle(&[&mac, &phone], &mut Rng(5));

    mac.store.delete_conversation(&quiet.id).unwrap();
    mac.store.delete_conversation(&busy.id).unwrap();
    phone.skew_clock(3_600_000);
    summary(
        &phone,
        &quiet.id,
        1,
        "summary of a conversation deleted meanwhile",
    );
    summary(&phone, &busy.id, 1, "summary of messages deleted meanwhile");
    // a message stamped after the deletion keeps that conversation, without what it took
    phone.append(&busy.id, Role::User, "written after");
    settle(&[&mac, &phone], &mut Rng(5));

    assert_eq!(mac.visible(), phone.visible());
    assert!(mac.store.conversation(&quiet.id).is_err());
    assert_eq!(texts(&mac, &busy.id), ["written after"]);
    assert!(summary_texts(&mac, &busy.id).is_empty());
}

/// A message another device wrote at the same time, stamped between a summary's first and
/// last messages, and then deleted there: the summary stays on every device, whichever of the
/// three (message, summary, deletion) a device heard of first.
#[test]
fn deleting_a_message_interleaved_into_a_summary_keeps_the_summary_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let mac = Device::new(dir.path(), "mac");
    let phone = Device::new(dir.path(), "iphone");
    let c = mac.conversation("interleaved");
    mac.append(&c.id, Role::User, "one");
    settle(&[&mac, &phone], &mut Rng(6));

    mac.skew_clock(60_000);
    phone.append(&c.id, Role::User, "the phone's, deleted soon");
    phone.round();
    // the Mac writes two more (stamped after the phone's) and summarizes before hearing of it
    mac.append(&c.id, Role::Assistant, "two");
    mac.append(&c.id, Role::User, "three");
    summary(&mac, &c.id, 1, "one and two");
    carry(&[&mac, &phone], &mut Rng(6), false);
    // the Mac has the phone's message inside the summary's range now
    mac.round();
    assert_eq!(
        mac.store.messages(&c.id).unwrap()[1].text,
        "the phone's, deleted soon"
    );
    // the phone, still without the Mac's, deletes its own (an edit)
    phone.store.truncate_messages(&c.id, 1).unwrap();
    phone.round();
    carry(&[&mac, &phone], &mut Rng(6), false);
    mac.round();
    phone.round();
    settle(&[&mac, &phone], &mut Rng(6));

    assert_eq!(mac.visible(), phone.visible());
    assert_eq!(texts(&phone, &c.id), ["one", "two", "three"]);
    assert_eq!(summary_texts(&phone, &c.id), ["one and two"]);
}

/// A deletion that loses to a later rename: the device that deleted first (and created the
/// conversation again from the rename) and the one that kept it agree on when it was last
/// updated; so do they after a write on a device whose wall clock is behind that time.
#[test]
fn a_conversation_kept_after_a_deletion_has_one_update_time_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let mac = Device::new(dir.path(), "mac");
    let phone = Device::new(dir.path(), "iphone");
    let c = mac.conversation("renamed after a deletion");
    settle(&[&mac, &phone], &mut Rng(7));

    // the Mac, its clock furthest ahead, renames and sends it before it hears of the phone's
    // message; the phone, its clock ahead too, deletes before it hears of the rename
    mac.skew_clock(120_000);
    mac.store
        .rename_conversation(&c.id, "renamed later")
        .unwrap();
    mac.round();
    phone.append(&c.id, Role::User, "written before the deletion");
    phone.round();
    carry(&[&mac, &phone], &mut Rng(7), false);
    phone.skew_clock(60_000);
    phone.store.delete_conversation(&c.id).unwrap();
    settle(&[&mac, &phone], &mut Rng(7));
    assert_eq!(mac.visible(), phone.visible());
    let kept = phone.store.conversation(&c.id).unwrap();
    assert_eq!(kept.title, "renamed later");
    assert!(phone.store.messages(&c.id).unwrap().is_empty());

    // the deletion's time (the phone's clock) is ahead of the phone's wall clock: a write
    // there does not move the conversation back in the list, here or on the Mac
    phone.append(&c.id, Role::User, "written on the phone");
    assert!(phone.store.conversation(&c.id).unwrap().updated_at >= kept.updated_at);
    settle(&[&mac, &phone], &mut Rng(7));
    assert_eq!(mac.visible(), phone.visible());
}

/// A copy of `device`'s database on a new device (a backup restored onto a new phone, a
/// database file copied to a second Mac), with an empty view of the sync folder.
fn restored(dir: &std::path::Path, name: &str, backup: &std::path::Path) -> Device {
    let db = dir.join(name).join("companion.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::copy(backup, &db).unwrap();
    Device::new(dir, name)
}

fn backup(device: &Device, to: &std::path::Path) {
    rusqlite::Connection::open(&device.db)
        .unwrap()
        .execute("VACUUM INTO ?1", [to.to_str().unwrap()])
        .unwrap();
}

/// A phone restored from a backup made before it wrote more: the restored copy finds files in
/// its directory that it never wrote, takes a new id, and gets back what was written after
/// the backup; nothing is lost anywhere.
#[test]
fn a_database_restored_from_a_backup_gets_back_what_was_written_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let mac = Device::new(dir.path(), "mac");
    let phone = Device::new(dir.path(), "old-phone");
    let c = mac.conversation("restored");
    mac.append(&c.id, Role::User, "before the backup");
    settle(&[&mac, &phone], &mut Rng(8));
    let saved = dir.path().join("backup.db");
    backup(&phone, &saved);
    phone.append(&c.id, Role::User, "after the backup");
    phone.round();

    // the old phone is wiped; the new one starts from the backup and the folder as it is
    let new_phone = restored(dir.path(), "new-phone", &saved);
    carry(&[&mac, &phone, &new_phone], &mut Rng(8), false);
    let old_id = phone.store.sync_device().unwrap();
    assert_eq!(new_phone.store.sync_device().unwrap(), old_id);
    let report = new_phone.round();
    assert_eq!(report.copied_from.as_deref(), Some(old_id.as_str()));
    assert_ne!(report.device, old_id);
    // it sent everything it has under the new id
    assert_eq!(
        report.wrote_records, 2,
        "the conversation and its message: {report:?}"
    );
    assert!(report.wrote.iter().all(|f| f.contains(&report.device)));
    assert_eq!(
        texts(&new_phone, &c.id),
        ["before the backup", "after the backup"]
    );

    new_phone.append(&c.id, Role::User, "on the new phone");
    settle(&[&mac, &new_phone], &mut Rng(8));
    assert_eq!(mac.visible(), new_phone.visible());
    assert_eq!(
        texts(&mac, &c.id),
        ["before the backup", "after the backup", "on the new phone"]
    );
}

/// Two devices running copies of one database: the copy that sees the other's file takes a
/// new id; every change of both reaches all three devices.
#[test]
fn two_copies_of_one_database_sync_as_two_devices() {
    let dir = tempfile::tempdir().unwrap();
    let mac = Device::new(dir.path(), "mac");
    let phone = Device::new(dir.path(), "phone");
    let c = mac.conversation("copied");
    mac.append(&c.id, Role::User, "before the copy");
    settle(&[&mac, &phone], &mut Rng(9));
    let saved = dir.path().join("copy.db");
    backup(&phone, &saved);
    let copy = restored(dir.path(), "second-phone", &saved);

    phone.append(&c.id, Role::User, "on the phone");
    phone.round();
    copy.append(&c.id, Role::User, "on the copy");
    carry(&[&mac, &phone, &copy], &mut Rng(9), false);
    let report = copy.round();
    assert!(report.copied_from.is_some());
    settle(&[&mac, &phone, &copy], &mut Rng(9));

    assert_eq!(mac.visible(), phone.visible());
    assert_eq!(mac.visible(), copy.visible());
    let mut got = texts(&mac, &c.id);
    got.sort();
    assert_eq!(got, ["before the copy", "on the copy", "on the phone"]);
    assert_ne!(
        phone.store.sync_device().unwrap(),
        copy.store.sync_device().unwrap()
    );
}

/// Two live copies that write the same segment number before either sees the other's: the
/// folder keeps one of the two files, and the copy whose file lost finds a progress mark it did
/// not write, takes a new id and sends everything; no change of either is lost.
#[test]
fn two_copies_writing_the_same_segment_at_once_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mac = Device::new(dir.path(), "mac");
    let phone = Device::new(dir.path(), "phone");
    let c = mac.conversation("written at once");
    mac.append(&c.id, Role::User, "before the copy");
    settle(&[&mac, &phone], &mut Rng(10));
    let saved = dir.path().join("copy.db");
    backup(&phone, &saved);
    let copy = restored(dir.path(), "second-phone", &saved);
    // its view of the folder, as the cloud gives it (the copy's first round sees its own
    // directory as it was, nothing newer)
    carry(&[&mac, &phone, &copy], &mut Rng(10), false);

    phone.append(&c.id, Role::User, "on the phone");
    copy.append(&c.id, Role::User, "on the copy");
    let (a, b) = (phone.round(), copy.round());
    assert_eq!(a.wrote, b.wrote, "both wrote the same segment");
    assert!(b.copied_from.is_none());
    // the folder keeps the phone's file (the copy's view is overwritten with it)
    carry(&[&mac, &phone, &copy], &mut Rng(10), false);
    let report = copy.round();
    assert!(report.copied_from.is_some(), "{report:?}");
    settle(&[&mac, &phone, &copy], &mut Rng(10));

    assert_eq!(mac.visible(), phone.visible());
    assert_eq!(mac.visible(), copy.visible());
    let mut got = texts(&mac, &c.id);
    got.sort();
    assert_eq!(got, ["before the copy", "on the copy", "on the phone"]);
}
