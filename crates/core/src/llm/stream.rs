//! A streamed answer, put together event by event ([`StreamState`]), and the streamed call of
//! one step, over HTTP or through the `AI` binding: the body decoded as it arrives, text handed to the caller as it comes, a
//! provider that ignored `stream: true` read as a whole answer. Any provider's stream: each
//! decodes its own events ([`Api::decode`]) into the common accumulator ([`Accum`]).

use std::borrow::Cow;
use std::cell::Cell;

use serde_json::Value as Json;

use super::api::{Accum, Api};
use super::model::{ChatReply, Piece};
use super::sse::{SseDecoder, SseEvent};
use super::surrogates::Surrogates;
use super::transport::{within, Call, HttpResponse, Transport};
use super::wire::{excerpt, http_answer, http_failure, unavailable};
use crate::error::{Error, Result};

/// How much of a streamed body is kept for an error message once events are flowing.
const RAW_CAP: usize = 64 * 1024;
/// How much of a body without any event is kept: it may be a whole plain JSON answer from a
/// provider that ignored `stream: true`.
const PLAIN_BODY_CAP: usize = 4 * 1024 * 1024;
/// Most bytes of one event (or of one line) still being read: a stream that never ends its
/// line or its event stops there instead of filling the Durable Object's memory.
const MAX_PENDING_BYTES: usize = 2 * PLAIN_BODY_CAP;

/// Accumulates a streamed answer from its events ([`SseEvent`]) into a [`ChatReply`], handing
/// out the text deltas as they come.
#[derive(Clone, Debug)]
pub struct StreamState {
    /// The provider whose events these are.
    api: &'static dyn Api,
    acc: Accum,
    /// A surrogate pair's first half held back from the last event (see [`Surrogates`]).
    surrogates: Surrogates,
}

impl StreamState {
    /// The state of a stream from the provider `api` (e.g. `&anthropic::Anthropic`).
    pub fn new(api: &'static dyn Api) -> Self {
        StreamState { api, acc: Accum::default(), surrogates: Surrogates::default() }
    }

    /// Whether the provider said the answer is complete (OpenAI `[DONE]` or a finish reason,
    /// Anthropic `message_stop` or a stop reason).
    pub fn is_done(&self) -> bool {
        self.acc.done
    }

    /// The answer so far (tool calls not included until [`StreamState::finish`]).
    pub fn reply(&self) -> &ChatReply {
        &self.acc.reply
    }

    /// Takes in one event; returns the text and reasoning it adds, in order. An error the
    /// provider streamed is `llm_unavailable` with its message.
    pub fn push(&mut self, ev: &SseEvent) -> Result<Vec<Piece>> {
        if self.acc.ended {
            return Ok(Vec::new());
        }
        let mended;
        let ev = match self.surrogates.mend(&ev.data) {
            Cow::Borrowed(_) => ev,
            Cow::Owned(data) => {
                mended = SseEvent { event: ev.event.clone(), data };
                &mended
            }
        };
        self.api.decode(&mut self.acc, ev)
    }

    /// The whole answer. A stream that ended before the provider said it was complete is
    /// `llm_unavailable`.
    pub fn finish(self) -> Result<ChatReply> {
        self.acc.finish()
    }
}

/// Why a stream was cut short from our side.
enum Stop {
    /// `on_delta` failed (the client went away): returned unchanged.
    Client(Error),
    /// The provider streamed an error or something unreadable.
    Provider(Error),
}

/// A streamed call in progress: the events decoded from the body, the text handed out, and
/// the raw body kept for an error message or a plain JSON answer.
struct Run<'a> {
    decoder: SseDecoder,
    state: StreamState,
    raw: String,
    raw_truncated: bool,
    events: usize,
    stop: Option<Stop>,
    on_delta: &'a mut dyn FnMut(&Piece) -> Result<()>,
}

impl Run<'_> {
    fn chunk(&mut self, chunk: &str) -> Result<()> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let cap = if self.events == 0 { PLAIN_BODY_CAP } else { RAW_CAP };
        if self.raw.len() < cap {
            let mut take = chunk.len().min(cap - self.raw.len());
            while !chunk.is_char_boundary(take) {
                take -= 1;
            }
            self.raw.push_str(&chunk[..take]);
            self.raw_truncated |= take < chunk.len();
        } else if !chunk.is_empty() {
            self.raw_truncated = true;
        }
        let events = self.decoder.push(chunk);
        self.take_events(events)?;
        if self.decoder.pending_bytes() > MAX_PENDING_BYTES {
            let e = unavailable(format!(
                "the model's stream holds an event of over {} MB",
                MAX_PENDING_BYTES / (1024 * 1024)
            ));
            self.stop = Some(Stop::Provider(e.clone()));
            return Err(e);
        }
        Ok(())
    }

    fn take_events(&mut self, events: Vec<SseEvent>) -> Result<()> {
        for ev in events {
            self.events += 1;
            match self.state.push(&ev) {
                Ok(pieces) => {
                    for piece in &pieces {
                        if let Err(e) = (self.on_delta)(piece) {
                            self.stop = Some(Stop::Client(e.clone()));
                            return Err(e);
                        }
                    }
                }
                Err(e) => {
                    self.stop = Some(Stop::Provider(e.clone()));
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn stopped(&self) -> Option<Error> {
        match &self.stop {
            Some(Stop::Client(e)) | Some(Stop::Provider(e)) => Some(e.clone()),
            None => None,
        }
    }

    fn end(mut self, sent: Result<u16>) -> Result<ChatReply> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let status = sent.map_err(|e| unavailable(e.message))?;
        if !(200..300).contains(&status) {
            return Err(http_failure(status, &self.raw));
        }
        let last = self.decoder.finish();
        self.take_events(last)?;
        if self.events > 0 {
            return self.state.finish();
        }
        // No event at all: a provider that ignored `stream: true` and answered plain JSON.
        if self.raw_truncated {
            return Err(unavailable(format!(
                "the model's answer is not a stream and is over {} MB",
                PLAIN_BODY_CAP / (1024 * 1024)
            )));
        }
        if serde_json::from_str::<Json>(&self.raw).is_err() {
            return Err(unavailable("the model's answer is neither server-sent events nor JSON").with_log(format!(
                "the model's answer is neither server-sent events nor JSON: {}",
                excerpt(&self.raw, 200)
            )));
        }
        let answer = http_answer(&HttpResponse { headers: Vec::new(), status, body: std::mem::take(&mut self.raw) })?;
        let reply = self.state.api.reply(answer)?;
        reply.hand_out(self.on_delta)?;
        Ok(reply)
    }
}

/// One streamed step: `call` (built by `api` for a streamed answer) sent over HTTP or run
/// through the binding, its events decoded by `api` as they arrive. (The binding has no
/// status: an answer it gives is a 200.)
pub(crate) async fn run(
    t: &dyn Transport,
    api: &'static dyn Api,
    call: Call,
    on_delta: &mut dyn FnMut(&Piece) -> Result<()>,
) -> Result<ChatReply> {
    let mut run = Run {
        decoder: SseDecoder::new(),
        state: StreamState::new(api),
        raw: String::new(),
        raw_truncated: false,
        events: 0,
        stop: None,
        on_delta,
    };
    let started = Cell::new(false);
    let sent = {
        let mut on_chunk = |chunk: &str| {
            started.set(true);
            run.chunk(chunk)
        };
        match call {
            Call::Http(http) => t.send_stream(http, &mut on_chunk).await,
            Call::Binding { model, input, timeout_ms } => {
                let call = std::pin::pin!(t.workers_ai_stream(&model, input, &mut on_chunk));
                within(t, timeout_ms, &started, call).await.map(|()| 200)
            }
        }
    };
    run.end(sent)
}
