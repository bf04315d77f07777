//! Streamed text sent to the webview in batches: one IPC message per [`TEXT_BATCH_MS`] at most,
//! not one per token.
//!
//! Every `Channel::send` is a JavaScript evaluation in the webview (serialized, handed to the
//! GTK main thread, run by the web process), and on a machine whose cores the engine uses for
//! decoding that work is taken from the decode: `scripts/bench-app` measured the app at 0.93
//! of the CLI's decode rate with the message list hidden, i.e. from the per-token messages
//! alone. The page paints the streaming reply every 200 ms (`STREAM_PAINT_MS` in
//! frontend/src/chat.ts), so a batch every 100 ms shows the same text at the same paints.
//!
//! The first piece goes at once (the reply must start the moment it exists), and a batch is
//! never held past the next event or the manager's idle tick (50 ms), so text is at most one
//! batch interval plus one tick late.

use std::time::{Duration, Instant};

pub const TEXT_BATCH_MS: u64 = 100;

/// Collects streamed pieces and says when they are due to be sent.
#[derive(Debug)]
pub struct TextBatch {
    pending: String,
    interval: Duration,
    last_sent: Option<Instant>,
}

impl Default for TextBatch {
    fn default() -> Self {
        Self::new(Duration::from_millis(TEXT_BATCH_MS))
    }
}

impl TextBatch {
    pub fn new(interval: Duration) -> Self {
        TextBatch {
            pending: String::new(),
            interval,
            last_sent: None,
        }
    }

    /// Add a piece; returns the text to send now, if the batch is due.
    pub fn push(&mut self, piece: &str, now: Instant) -> Option<String> {
        self.pending.push_str(piece);
        self.due(now)
    }

    /// Nothing new arrived (an idle tick): the text waiting, if it is due.
    pub fn due(&mut self, now: Instant) -> Option<String> {
        let due = match self.last_sent {
            None => true,
            Some(at) => now.saturating_duration_since(at) >= self.interval,
        };
        if due { self.take(now) } else { None }
    }

    /// Everything waiting, due or not (before another event, or at the end of the reply), so
    /// the order of events is kept.
    pub fn flush(&mut self, now: Instant) -> Option<String> {
        self.take(now)
    }

    fn take(&mut self, now: Instant) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        self.last_sent = Some(now);
        Some(std::mem::take(&mut self.pending))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_first_piece_goes_at_once_and_later_ones_wait_for_the_interval() {
        let t = Instant::now();
        let mut b = TextBatch::new(ms(100));
        assert_eq!(b.push("Once", t).as_deref(), Some("Once"));
        assert_eq!(b.push(" upon", t + ms(16)), None);
        assert_eq!(b.push(" a", t + ms(32)), None);
        assert_eq!(b.due(t + ms(60)), None);
        assert_eq!(
            b.push(" time", t + ms(100)).as_deref(),
            Some(" upon a time")
        );
        assert_eq!(b.push(",", t + ms(110)), None);
    }

    #[test]
    fn an_idle_tick_sends_what_is_due_and_flush_sends_everything() {
        let t = Instant::now();
        let mut b = TextBatch::new(ms(100));
        b.push("a", t);
        assert_eq!(b.push("b", t + ms(20)), None);
        // decode paused: the tick after the interval sends what waited
        assert_eq!(b.due(t + ms(150)).as_deref(), Some("b"));
        assert_eq!(b.due(t + ms(300)), None, "nothing waiting, nothing sent");
        assert_eq!(b.push("c", t + ms(310)).as_deref(), Some("c"));
        assert_eq!(b.push("d", t + ms(320)), None);
        assert_eq!(b.flush(t + ms(321)).as_deref(), Some("d"));
        assert_eq!(b.flush(t + ms(322)), None);
    }

    #[test]
    fn no_text_is_lost_or_reordered() {
        let t = Instant::now();
        let mut b = TextBatch::new(ms(100));
        let pieces: Vec<String> = (0..500).map(|i| format!("{i} ")).collect();
        let mut sent = String::new();
        for (i, p) in pieces.iter().enumerate() {
            if let Some(s) = b.push(p, t + ms(7 * i as u64)) {
                sent.push_str(&s);
            }
        }
        sent.push_str(&b.flush(t + ms(4000)).unwrap_or_default());
        assert_eq!(sent, pieces.concat());
    }
}
