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
