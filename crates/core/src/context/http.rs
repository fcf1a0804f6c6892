//! Blocks kept by the operator's own service (`kind: "http"`, docs/REFERENCE.md#http-blocks): the
//! block's text and, as its `ops` say, its search, writes and loads come from one JSON `POST` per
//! operation to the `url` that `SESSION_CONFIG` gives (never a request or the model: a block added
//! at run time cannot be one), with `Authorization: Bearer <value>` when the config names a
//! Worker secret. Every call is bounded in time (`timeoutMs`, the answer's reading included) and
//! in size ([`MAX_ANSWER_BYTES`]). A `get` that fails shows the last text the service gave
//! (`fetched_block_texts`), with a warning in the log; a tool call that fails is the model's
//! `Error: …`, its cause in the log. No call to the service fails a turn.

use futures::future::{select, Either};
use serde_json::{json, Map, Value as Json};

use crate::blobs::BoxFuture;
use crate::config::{BlockConfig, HttpOp};
use crate::context::entries::SEARCH_LIMIT;
use crate::context::fetched::{failed, remember, Caller};
use crate::error::{Error, Result};
use crate::llm::rerank::{read_capped, Unread};
use crate::llm::wire::excerpt;
use crate::llm::HttpRequest;

/// Most bytes of a service's answer read: a longer one stops the reading and is not used.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// How much later than `timeoutMs` the transport's own bound comes (see [`call`]).
const TRANSPORT_GRACE_MS: u64 = 1_000;

/// Most characters of a service's `error` text the model reads.
pub const MAX_ERROR_CHARS: usize = 500;

/// One operation of the protocol, with the fields its request carries beside `op`, `label`,
/// `agent` and `sessionId`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op<'a> {
    /// The block's text (the prompt, `GET …/context`).
    Get,
    /// `search_context`: `query`.
    Search { query: &'a str },
    /// `set_context`: `content`, `action` (`replace` or `append`), and `metadata` when the model
    /// gave one.
    Set { content: &'a str, action: &'a str, metadata: Option<&'a Json> },
    /// `load_context`: `key`.
    Load { key: &'a str },
}

impl Op<'_> {
    fn name(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Search { .. } => "search",
            Op::Set { .. } => "set",
            Op::Load { .. } => "load",
        }
    }

    /// The request's JSON body.
    fn body(self, ctx: &Caller<'_>, b: &BlockConfig) -> Json {
        let mut body = json!({ "op": self.name(), "label": &b.label, "agent": ctx.agent, "sessionId": ctx.session });
        match self {
            Op::Get => {}
            Op::Search { query } => body["query"] = query.into(),
            Op::Set { content, action, metadata } => {
                body["content"] = content.into();
                body["action"] = action.into();
                if let Some(m) = metadata {
                    body["metadata"] = m.clone();
                }
            }
            Op::Load { key } => body["key"] = key.into(),
        }
        body
    }
}

/// Sends `op` to `b`'s service and reads its answer: a JSON object, without `error`.
fn call<'a>(ctx: &'a Caller<'a>, b: &'a BlockConfig, op: Op<'a>) -> BoxFuture<'a, Result<Map<String, Json>>> {
    Box::pin(async move {
        let cfg = b;
        let url = cfg.url.clone().unwrap_or_default();
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("accept".to_owned(), "application/json".to_owned()),
        ];
        if let Some(name) = &cfg.secret {
            let Some(value) = ctx.secrets.secret(name) else {
                return Err(failed(
                    "the block's service is not reachable now",
                    format!("the secret {name} is not set"),
                ));
            };
            headers.push(("authorization".to_owned(), format!("Bearer {value}")));
        }
        let timeout = cfg.http_timeout_ms();
        // The call is bounded here, its answer's reading included; the transport's own bound (on
        // the answer's headers) comes a moment later, a backstop that never decides.
        let backstop = timeout + TRANSPORT_GRACE_MS;
        let req = HttpRequest { url, headers, body: op.body(ctx, b).to_string(), timeout_ms: backstop };
        let t = ctx.transport;
        let (status, body) = match select(Box::pin(read_capped(t, req, MAX_ANSWER_BYTES)), t.sleep(timeout)).await {
            Either::Left((Ok(answer), _)) => answer,
            Either::Left((Err(Unread::Over(cap)), _)) => {
                return Err(failed(
                    "the block's service answered too much",
                    format!("the answer is over {cap} bytes (not used)"),
                ))
            }
            Either::Left((Err(Unread::Failed(e)), _)) => {
                let log = e.log.unwrap_or_default();
                return Err(failed("the block's service could not be reached", format!("{} {log}", e.message)));
            }
            Either::Right(_) => {
                return Err(failed(
                    format!("the block's service did not answer within {timeout} ms"),
                    format!("no answer within {timeout} ms"),
                ))
            }
        };
        let answer = serde_json::from_str::<Json>(&body).ok();
        if let Some(e) = answer.as_ref().and_then(|a| a.get("error")).and_then(Json::as_str) {
            return Err(failed(excerpt(e, MAX_ERROR_CHARS), format!("the service refused (HTTP {status})")));
        }
        if !(200..300).contains(&status) {
            return Err(failed(format!("the block's service answered HTTP {status}"), excerpt(&body, 200)));
        }
        match answer {
            Some(Json::Object(a)) => Ok(a),
            _ => Err(failed(
                "the block's service answered something that is not a JSON object",
                format!("its answer: {}", excerpt(&body, 200)),
            )),
        }
    })
}

/// `answer.content`: a string, or (with `absent` allowed) `None` for `null` or no field.
fn content(answer: &Map<String, Json>, op: &str, absent: Absent) -> Result<Option<String>> {
    match answer.get("content") {
        Some(Json::String(s)) => Ok(Some(s.clone())),
        None | Some(Json::Null) if absent == Absent::Allowed => Ok(None),
        other => Err(failed(
            "the block's service answered something that is not a text",
            format!("{op}: content is {}", other.map_or("missing".to_owned(), |v| excerpt(&v.to_string(), 100))),
        )),
    }
}

/// Whether an answer may leave `content` out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Absent {
    Allowed,
    Refused,
}

/// The block's text: the service's answer to `get`, kept as the last text read; when the call
/// fails, the last text read (empty if there never was one), with a warning.
pub(crate) fn text<'a>(ctx: &'a Caller<'a>, b: &'a BlockConfig) -> BoxFuture<'a, Result<String>> {
    Box::pin(async move {
        let got = match call(ctx, b, Op::Get).await {
            Ok(answer) => content(&answer, "get", Absent::Refused).map(Option::unwrap_or_default),
            Err(e) => Err(e),
        };
        ctx.text_or_last(b, got)
    })
}

/// Runs `op` (not `get`) and hands its answer to `read`; a failure is logged and comes back as
/// the error the model reads.
async fn tool_call<T>(
    ctx: &Caller<'_>,
    b: &BlockConfig,
    op: Op<'_>,
    read: impl FnOnce(&Map<String, Json>) -> Result<T>,
) -> Result<T> {
    let out = match call(ctx, b, op).await {
        Ok(answer) => read(&answer),
        Err(e) => Err(e),
    };
    if let Err(e) = &out {
        ctx.warn(b, op.name(), e, "");
    }
    out
}

/// `search_context` on `b`: the service's `results` (the first [`SEARCH_LIMIT`]), as
/// `[key]\ncontent` (or the content alone, without a key) joined by a blank line; `None` when
/// there are none.
pub(crate) fn search<'a>(
    ctx: &'a Caller<'a>,
    b: &'a BlockConfig,
    query: &'a str,
) -> BoxFuture<'a, Result<Option<String>>> {
    Box::pin(async move {
        tool_call(ctx, b, Op::Search { query }, |answer| {
            let shape = || failed("the block's service answered something that is not a list of results", "search");
            let results = answer.get("results").and_then(Json::as_array).ok_or_else(shape)?;
            let mut found = Vec::new();
            for r in results.iter().take(SEARCH_LIMIT as usize) {
                let text = r.get("content").and_then(Json::as_str).ok_or_else(shape)?;
                match r.get("key") {
                    None | Some(Json::Null) => found.push(text.to_owned()),
                    Some(Json::String(key)) => found.push(format!("[{key}]\n{text}")),
                    Some(_) => return Err(shape()),
                }
            }
            Ok((!found.is_empty()).then(|| found.join("\n\n")))
        })
        .await
    })
}

/// `set_context` on `b`: the write goes to the service; the text it answers with (if any) is
/// kept as the last text read.
pub(crate) fn set<'a>(
    ctx: &'a Caller<'a>,
    b: &'a BlockConfig,
    content: &'a str,
    action: &'a str,
    metadata: Option<&'a Json>,
) -> BoxFuture<'a, Result<String>> {
    Box::pin(async move {
        if !b.answers(HttpOp::Set) {
            return Err(Error::conflict(format!("Block \"{}\" is readonly", &b.label)));
        }
        let op = Op::Set { content, action, metadata };
        let text = tool_call(ctx, b, op, |answer| self::content(answer, "set", Absent::Allowed)).await?;
        if let Some(text) = text {
            remember(ctx.sql, ctx.session, &b.label, &text)?;
        }
        Ok(format!("Written to {}.", &b.label))
    })
}

/// `load_context` on `b`: the document `key` from the service, `None` when it has none.
pub(crate) fn load<'a>(ctx: &'a Caller<'a>, b: &'a BlockConfig, key: &'a str) -> BoxFuture<'a, Result<Option<String>>> {
    Box::pin(
        async move { tool_call(ctx, b, Op::Load { key }, |answer| content(answer, "load", Absent::Allowed)).await },
    )
}
