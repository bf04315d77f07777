//! A write the agent wants to make waits for the user: [`AppApproval`] (the agent's `Approval`,
//! on the chat worker) parks an answer slot in [`PendingApproval`], the turn's events have
//! already shown the approval card with the exact arguments, and the `answer_approval` command
//! fills the slot. Stopping the reply, or the window going away, answers "no": a write never
//! happens because nobody was there to refuse it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::{Approval, ApprovalAnswer, ApprovalRequest};

/// How often a waiting approval looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// The answer slot of the write waiting for the user, if one is.
#[derive(Debug, Default)]
pub struct PendingApproval {
    slot: Mutex<Option<Sender<ApprovalAnswer>>>,
}

impl PendingApproval {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Sender<ApprovalAnswer>>> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give the waiting write its answer; `false` when none was waiting (a stale click).
    pub fn answer(&self, answer: ApprovalAnswer) -> bool {
        match self.lock().take() {
            Some(tx) => tx.send(answer).is_ok(),
            None => false,
        }
    }

    pub fn is_waiting(&self) -> bool {
        self.lock().is_some()
    }
}

/// The agent's approval in the app: wait for the user's answer, or "no" once `cancel` is set.
pub struct AppApproval {
    pub pending: Arc<PendingApproval>,
    pub cancel: Arc<AtomicBool>,
}

impl Approval for AppApproval {
    fn ask(&self, _request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        let (tx, rx) = mpsc::channel();
        *self.pending.lock() = Some(tx);
        let answer = loop {
            if self.cancel.load(Ordering::Relaxed) {
                break ApprovalAnswer::No;
            }
            match rx.recv_timeout(POLL) {
                Ok(answer) => break answer,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break ApprovalAnswer::No,
            }
        };
        self.pending.lock().take();
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request_on_thread(approval: AppApproval) -> std::thread::JoinHandle<ApprovalAnswer> {
        std::thread::spawn(move || {
            let args = json!({"title": "t", "text": "x"});
            approval.ask(&ApprovalRequest {
                conversation: &None,
                tool: "add_note",
                arguments: &args,
                action: "add a note".into(),
            })
        })
    }

    fn wait_until_waiting(pending: &PendingApproval) {
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while !pending.is_waiting() {
            assert!(std::time::Instant::now() < until, "the write never asked");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_users_answer_reaches_the_waiting_write() {
        for answer in [
            ApprovalAnswer::Yes,
            ApprovalAnswer::No,
            ApprovalAnswer::YesForConversation,
        ] {
            let pending = Arc::new(PendingApproval::default());
            let asked = request_on_thread(AppApproval {
                pending: pending.clone(),
                cancel: Arc::new(AtomicBool::new(false)),
            });
            wait_until_waiting(&pending);
            assert!(pending.answer(answer));
            assert_eq!(asked.join().unwrap(), answer);
            assert!(!pending.is_waiting());
            assert!(
                !pending.answer(ApprovalAnswer::Yes),
                "nothing waits any more"
            );
        }
    }

    #[test]
    fn stopping_the_reply_answers_no() {
        let pending = Arc::new(PendingApproval::default());
        let cancel = Arc::new(AtomicBool::new(false));
        let asked = request_on_thread(AppApproval {
            pending: pending.clone(),
            cancel: cancel.clone(),
        });
        wait_until_waiting(&pending);
        cancel.store(true, Ordering::Relaxed);
        assert_eq!(asked.join().unwrap(), ApprovalAnswer::No);
        assert!(!pending.is_waiting());
    }
}
