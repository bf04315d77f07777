//! A streamed run as server-sent events, in whichever dialect writes them: the dialect says
//! what opens the stream, what each text piece becomes and what ends it; this module owns the
//! plumbing — the order, the keep-alive, and holding the run's cancel guard for as long as the
//! client holds the stream.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chat::completion::Completion;
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::run::{CancelOnDrop, Streamed};

/// What one dialect writes at each step of a stream.
pub(crate) trait StreamWriter: Send + 'static {
    /// Before anything is generated.
    fn opening(&mut self) -> Vec<Event>;
    /// A piece of the model's text.
    fn text(&mut self, piece: &str) -> Vec<Event>;
    /// The run's end: its outcome, or the error that ended it mid-stream.
    fn done(&mut self, result: Result<Completion, ApiError>) -> Vec<Event>;
}

/// The events of `rx` as an SSE response. The stream owns `guard`: when the client goes away
/// the response body is dropped, and with it the guard, which cancels the run.
pub(crate) fn sse(
    rx: mpsc::UnboundedReceiver<Streamed>,
    guard: CancelOnDrop,
    mut writer: impl StreamWriter,
) -> Response {
    let opening: VecDeque<Event> = writer.opening().into();
    let start = (rx, opening, false, writer, guard);
    let events = futures_util::stream::unfold(
        start,
        |(mut rx, mut pending, mut ended, mut writer, guard)| async move {
            loop {
                if let Some(event) = pending.pop_front() {
                    return Some((
                        Ok::<_, Infallible>(event),
                        (rx, pending, ended, writer, guard),
                    ));
                }
                if ended {
                    return None;
                }
                let events = match rx.recv().await {
                    Some(Streamed::Text(t)) => writer.text(&t),
                    Some(Streamed::Done(result)) => {
                        ended = true;
                        writer.done(result)
                    }
                    // the generation thread ended without a word (it panicked)
                    None => {
                        ended = true;
                        writer.done(Err(ApiError::server(
                            "the generation ended without a result",
                        )))
                    }
                };
                pending.extend(events);
            }
        },
    );
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))
        .into_response()
}
