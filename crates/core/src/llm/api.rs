//! What a provider is: the one trait, [`Api`], that each provider's type implements in its own
//! file, and the [`Accum`]ulator every provider decodes its stream events into. The client
//! (`chat`, `complete`, the streamed call, embeddings) does everything else the same way for
//! every provider, through this trait alone.

use serde_json::Value as Json;

use super::model::{ChatReply, ChatRequest, Delivery, Piece, ToolCall};
use super::sse::SseEvent;
use super::transport::{Call, Endpoint, Returned};
use super::wire::{event_json, parse_arguments, unavailable};
use crate::error::{Error, Result};
use crate::sort;

/// One provider's API: how a chat step and an embeddings request are put to it, and how its
/// answers read. Everything a provider does not share with the others is here, in its own
/// file: its endpoint, headers and request body ([`Api::chat_call`]), its answer
/// ([`Api::reply`]) and stream events ([`Api::decode`]) with the usage each reports, and its
/// embeddings. A provider is a unit type (`openai::OpenAi`), registered once in `registry.rs`.
///
/// A call goes over HTTP or through the `AI` binding, whichever [`Call`] the provider builds:
/// the client sends either, so a provider reached through the binding implements the same
/// trait as one reached over HTTP, and the events of either's stream come to [`Api::decode`].
pub trait Api: Sync + std::fmt::Debug {
    /// The endpoint root used when `LLM_BASE_URL` (`EMBEDDINGS_BASE_URL`) is not set: the
    /// provider's public API, or `""` for one with no default (a binding has no URL).
    fn default_base_url(&self) -> &'static str;

    /// The call of one chat step on `to`: the URL, headers and body of an HTTP request (asking
    /// for server-sent events when `delivery` is [`Delivery::Streamed`]), or the binding's
    /// input. A provider that cannot stream builds a call for a whole answer, which the client
    /// hands out as one piece.
    fn chat_call(&self, to: &Endpoint<'_>, req: &ChatRequest, delivery: Delivery) -> Result<Call>;

    /// A whole answer (the JSON of an HTTP body, or what the binding returned), already checked
    /// for an `error`: its text, reasoning, tool calls, finish reason and usage. An answer with
    /// neither text nor tool calls is returned as is.
    fn reply(&self, answer: Json) -> Result<ChatReply>;

    /// Takes in one event of a streamed answer: what it adds goes into `acc` (text, reasoning,
    /// tool calls, usage, whether the answer is complete), and the pieces to hand out live are
    /// returned in order. An error the provider streamed is `llm_unavailable`.
    fn decode(&self, acc: &mut Accum, ev: &SseEvent) -> Result<Vec<Piece>>;

    /// Whether the provider embeds text ([`Api::embeddings_call`], [`Api::vectors`]), so
    /// `EMBEDDINGS_PROVIDER` may name it. The default: it does not.
    fn has_embeddings(&self) -> bool {
        false
    }

    /// The call that embeds `texts`, one vector each.
    fn embeddings_call(&self, _to: &Endpoint<'_>, _texts: &[String]) -> Result<Call> {
        Err(Error::internal("this provider has no embeddings"))
    }

    /// The `n` vectors of an embeddings answer, in the order of the texts.
    fn vectors(&self, _answer: Returned<'_>, _n: usize) -> Result<Vec<Vec<f32>>> {
        Err(Error::internal("this provider has no embeddings"))
    }
}

/// A tool call being streamed.
#[derive(Clone, Debug, Default)]
pub(crate) struct PartialCall {
    /// The call's place in the reply: calls come out sorted by it. OpenAI numbers its calls
    /// (`index`); a provider that does not gives each the order it started in.
    pub(crate) index: u64,
    pub(crate) id: String,
    pub(crate) name: String,
    /// The arguments' JSON text as streamed so far.
    pub(crate) arguments: String,
    /// Set once the arguments are complete (Anthropic `content_block_stop`), or sent whole.
    pub(crate) input: Option<Json>,
}

impl PartialCall {
    fn into_call(self) -> ToolCall {
        let input = self.input.unwrap_or_else(|| parse_arguments(Some(&Json::String(self.arguments))));
        ToolCall { id: self.id, name: self.name, input }
    }
}

/// What every stream accumulates, whichever provider decodes it ([`Api::decode`]): the reply so
/// far, the calls being streamed, the content blocks announced, and whether the provider said
/// the answer is complete (`done`) or that nothing more follows (`ended`).
#[derive(Clone, Debug, Default)]
pub struct Accum {
    pub(crate) reply: ChatReply,
    pub(crate) calls: Vec<PartialCall>,
    /// The content blocks of a stream that announces them by index (Anthropic): each block's
    /// index and, for a block that streams a tool call, the call's position in `calls`.
    pub(crate) blocks: Vec<(u64, Option<usize>)>,
    pub(crate) done: bool,
    pub(crate) ended: bool,
}

impl Accum {
    /// The JSON of one event of an OpenAI-style stream (OpenAI-compatible servers, Workers AI):
    /// `None` for an event with no data, and for `[DONE]`, which ends the answer.
    pub(crate) fn event(&mut self, ev: &SseEvent) -> Result<Option<Json>> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            self.done = true;
            self.ended = true;
            return Ok(None);
        }
        if data.is_empty() {
            return Ok(None);
        }
        event_json(data).map(Some)
    }

    /// The position in `calls` of the tool call that block `index` streams, if it streams one.
    pub(crate) fn block_call(&self, index: u64) -> Option<usize> {
        self.blocks.iter().find(|(i, _)| *i == index).and_then(|(_, call)| *call)
    }

    /// Block `index` starts: it streams the call at position `call` in `calls`, or none.
    pub(crate) fn start_block(&mut self, index: u64, call: Option<usize>) {
        self.blocks.retain(|(i, _)| *i != index);
        self.blocks.push((index, call));
    }

    /// The whole reply: the tool calls put together, in their order. A stream that ended
    /// before the provider said it was complete is `llm_unavailable`.
    pub(crate) fn finish(self) -> Result<ChatReply> {
        if !self.done {
            return Err(unavailable("the model's stream ended before its answer was complete"));
        }
        let Accum { mut reply, mut calls, .. } = self;
        sort::by_key(&mut calls, |c| c.index);
        reply.tool_calls = calls.into_iter().map(PartialCall::into_call).collect();
        Ok(reply)
    }
}
