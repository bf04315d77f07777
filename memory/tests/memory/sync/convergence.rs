//! Property: two or three devices doing random things, their files carried late, reordered,
//! twice, half-written, with skewed clocks, end with the same visible state once everything
//! is delivered — and no message that nobody deleted is lost or duplicated.

use std::collections::{BTreeMap, BTreeSet};

use memory::{ConversationId, NewSummary, NewToolCall, Role, ToolOutcome};
use proptest::prelude::*;

use super::{Device, Rng, carry, settle};

#[derive(Debug, Clone)]
enum Op {
    Create,
    Rename(usize),
    Pin(usize, bool),
    Append(usize),
    Reply(usize, bool),
    /// Edit or regenerate: messages from this position on are deleted.
    Truncate(usize, usize),
    Delete(usize),
    Summarize(usize),
    AddNote,
    DeleteNote(usize),
    AddReminder,
    CompleteReminder(usize),
    DeleteReminder(usize),
    ToolCall,
    /// This device's clock jumps ahead by this many minutes.
    Skew(u16),
    Round,
    Carry,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Create),
        1 => any::<usize>().prop_map(Op::Rename),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(c, p)| Op::Pin(c, p)),
        4 => any::<usize>().prop_map(Op::Append),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(c, s)| Op::Reply(c, s)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(c, k)| Op::Truncate(c, k)),
        1 => any::<usize>().prop_map(Op::Delete),
        1 => any::<usize>().prop_map(Op::Summarize),
        1 => Just(Op::AddNote),
        1 => any::<usize>().prop_map(Op::DeleteNote),
        1 => Just(Op::AddReminder),
        1 => any::<usize>().prop_map(Op::CompleteReminder),
        1 => any::<usize>().prop_map(Op::DeleteReminder),
        1 => Just(Op::ToolCall),
        1 => (1u16..240).prop_map(Op::Skew),
        3 => Just(Op::Round),
        3 => Just(Op::Carry),
    ]
}

/// What the test knows of the messages written: unique texts, by conversation, and the
/// conversations some device deleted or truncated (whose messages may rightly be gone).
#[derive(Default)]
struct Ledger {
    written: BTreeMap<String, ConversationId>,
    touched_by_deletion: BTreeSet<ConversationId>,
    counter: usize,
}

impl Ledger {
    fn text(&mut self) -> String {
        self.counter += 1;
        format!("message-{}", self.counter)
    }
}

fn pick<T: Clone>(items: &[T], i: usize) -> Option<T> {
    (!items.is_empty()).then(|| items[i % items.len()].clone())
}

fn run(device: &Device, op: &Op, ledger: &mut Ledger, all: &[&Device], rng: &mut Rng) {
    let s = &device.store;
    let conversations: Vec<ConversationId> = s
        .list_conversations(0, 1000)
        .unwrap()
        .into_iter()
        .map(|c| c.conversation.id)
        .collect();
    match op {
        Op::Create => {
            s.create_conversation("new", None, &serde_json::Value::Null)
                .unwrap();
        }
        Op::Rename(i) => {
            if let Some(c) = pick(&conversations, *i) {
                s.rename_conversation(&c, &format!("title {}", ledger.text()))
                    .unwrap();
            }
        }
        Op::Pin(i, p) => {
            if let Some(c) = pick(&conversations, *i) {
                s.set_pinned(&c, *p).unwrap();
            }
        }
        Op::Append(i) | Op::Reply(i, _) => {
            if let Some(c) = pick(&conversations, *i) {
                let text = ledger.text();
                ledger.written.insert(text.clone(), c.clone());
                match op {
                    Op::Reply(_, stopped) => device.reply(&c, &text, *stopped),
                    _ => device.append(&c, Role::User, &text),
                }
            }
        }
        Op::Truncate(i, k) => {
            if let Some(c) = pick(&conversations, *i) {
                let n = s.messages(&c).unwrap().len();
                if n > 0 {
                    s.truncate_messages(&c, (*k % n) as i64).unwrap();
                    ledger.touched_by_deletion.insert(c);
                }
            }
        }
        Op::Delete(i) => {
            if let Some(c) = pick(&conversations, *i) {
                s.delete_conversation(&c).unwrap();
                ledger.touched_by_deletion.insert(c);
            }
        }
        Op::Summarize(i) => {
            if let Some(c) = pick(&conversations, *i) {
                let n = s.messages(&c).unwrap().len() as i64;
                if n >= 2 {
                    s.add_summary(
                        &c,
                        &NewSummary {
                            first_seq: 0,
                            last_seq: n - 2,
                            text: ledger.text(),
                            token_count: 3,
                            model: "m".into(),
                        },
                    )
                    .unwrap();
                }
            }
        }
        Op::AddNote => {
            s.add_note(&ledger.text(), "body", None).unwrap();
        }
        Op::DeleteNote(i) => {
            if let Some(n) = pick(&s.notes(0, 1000).unwrap(), *i) {
                s.delete_note(n.id).unwrap();
            }
        }
        Op::AddReminder => {
            s.add_reminder(&ledger.text(), 2_000_000_000_000, None)
                .unwrap();
        }
        Op::CompleteReminder(i) => {
            if let Some(r) = pick(&s.reminders(true, 1000).unwrap(), *i) {
                s.complete_reminder(r.id).unwrap();
            }
        }
        Op::DeleteReminder(i) => {
            if let Some(r) = pick(&s.reminders(true, 1000).unwrap(), *i) {
                s.delete_reminder(r.id).unwrap();
            }
        }
        Op::ToolCall => {
            s.record_tool_call(&NewToolCall {
                conversation_id: pick(&conversations, 0),
                tool: "read_file".into(),
                arguments: serde_json::json!({"path": ledger.text()}),
                outcome: ToolOutcome::Ok,
                error_code: None,
                duration_ms: 1,
                at: None,
            })
            .unwrap();
        }
        Op::Skew(minutes) => device.skew_clock(*minutes as i64 * 60_000),
        Op::Round => {
            device.round();
        }
        Op::Carry => carry(all, rng, true),
    }
}

fn converge(device_count: usize, ops: Vec<(usize, Op)>, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let devices: Vec<Device> = (0..device_count)
        .map(|i| Device::new(dir.path(), &format!("device{i}")))
        .collect();
    let all: Vec<&Device> = devices.iter().collect();
    let mut ledger = Ledger::default();
    let mut rng = Rng(seed);
    for (who, op) in &ops {
        run(
            &devices[who % device_count],
            op,
            &mut ledger,
            &all,
            &mut rng,
        );
    }
    settle(&all, &mut rng);
    let first = devices[0].visible();
    for d in &devices[1..] {
        assert_eq!(first, d.visible());
    }
    // no message lost or duplicated: every message written in a conversation that nobody
    // deleted or edited is there exactly once, in the order it was written on its device
    for (text, conversation) in &ledger.written {
        if ledger.touched_by_deletion.contains(conversation) {
            continue;
        }
        let found = first
            .messages
            .iter()
            .filter(|m| m.contains(&format!("\"{text}\"")))
            .count();
        assert_eq!(found, 1, "message {text} found {found} times");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        // pinned, as every random test here is: the same cases on every run. To explore
        // further, run it with `RngSeed::Random` and more cases: that is how the cases in
        // `races.rs` were found
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x5EED_0041),
        ..ProptestConfig::default()
    })]

    #[test]
    fn two_devices_converge(ops in prop::collection::vec((0usize..2, op()), 1..60), seed: u64) {
        converge(2, ops, seed);
    }

    #[test]
    fn three_devices_converge(ops in prop::collection::vec((0usize..3, op()), 1..60), seed: u64) {
        converge(3, ops, seed);
    }
}
