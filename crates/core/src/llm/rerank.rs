//! The re-ranker (`RERANK_*`, off unless `RERANK_PROVIDER` is set; docs/REFERENCE.md#re-ranking):
//! a model that reads the query beside each of the best hits of a search and scores how well the
//! hit answers it; the scores then re-order those hits. Two shapes of model:
//!
//! - `workers-ai`: `@cf/baai/bge-reranker-base` (or `RERANK_MODEL`) through the `AI` binding,
//!   `{query, contexts: [{text}], top_k}` in, `{response: [{id, score}]}` out;
//! - `http`: an endpoint of the common Cohere / Jina shape, `POST {RERANK_BASE_URL}/rerank`
//!   `{model, query, documents: [string], top_n}` in, `{results: [{index, relevance_score}]}` out
//!   (`Authorization: Bearer RERANK_API_KEY` when the secret is set).
//!
//! It only re-orders (`order`, `put_in_order`): the first [`RerankConfig::candidates`] hits of
//! an answer are put in the order of their scores, best first, and the hits after them stay
//! below in their order. Nothing is dropped or added, so what the words found (an exact match) is still in the
//! answer. A hit the model did not score (an answer with fewer results than asked, an index out
//! of range or given twice) follows the scored ones in its old order. Every call is bounded in
//! time (`RERANK_TIMEOUT_MS`, the whole call, answer read included) and in size (an HTTP answer
//! is read up to [`MAX_ANSWER_BYTES`]); a call that fails, is late, or answers something that
//! is not a list of scores leaves the order as it was, with a warning.

use futures::future::{select, Either};
use serde_json::{json, Value as Json};

use super::model::Delivery;
use super::transport::{HttpRequest, Transport};
use super::wire::{excerpt, unavailable};
use crate::error::{Error, Result, Warned};

/// The Workers AI re-ranker, `RERANK_MODEL`'s default with `RERANK_PROVIDER=workers-ai`.
pub const WORKERS_AI_MODEL: &str = "@cf/baai/bge-reranker-base";

/// Hits re-ordered by default (`RERANK_CANDIDATES`).
pub const DEFAULT_CANDIDATES: usize = 30;

/// Most hits one call may re-order.
pub const MAX_CANDIDATES: usize = 100;

/// Default time allowed for one call, answer included (`RERANK_TIMEOUT_MS`): a search waits for it.
pub const DEFAULT_RERANK_TIMEOUT_MS: u64 = 3_000;

/// Most bytes of an HTTP answer read: an endpoint that echoes the documents back stays well
/// under it (at most [`MAX_CANDIDATES`] texts, each cut to its first 2,000 bytes by the caller);
/// a longer answer is not used.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

/// Which model re-ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RerankProvider {
    /// A model run through the `AI` binding.
    WorkersAi,
    /// An endpoint of the Cohere / Jina shape.
    Http,
    /// None: the order of every search is the order it ranked.
    None,
}

/// The `RERANK_*` settings.
#[derive(Clone, Debug, PartialEq)]
pub struct RerankConfig {
    pub provider: RerankProvider,
    /// The endpoint root, e.g. `https://api.cohere.com/v2` (`/rerank` is added; empty for the binding).
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// How many of an answer's first hits are re-ordered.
    pub candidates: usize,
    /// Time allowed for one call as a whole.
    pub timeout_ms: u64,
}

impl RerankConfig {
    /// No re-ranker.
    pub fn none() -> Self {
        RerankConfig {
            provider: RerankProvider::None,
            base_url: String::new(),
            model: String::new(),
            api_key: None,
            candidates: DEFAULT_CANDIDATES,
            timeout_ms: DEFAULT_RERANK_TIMEOUT_MS,
        }
    }

    /// Whether searches are re-ranked.
    pub fn is_on(&self) -> bool {
        self.provider != RerankProvider::None
    }

    /// Reads `RERANK_PROVIDER` (`workers-ai`, `http`, `none`), `RERANK_BASE_URL` (`http`: required,
    /// `http://` or `https://`), `RERANK_MODEL` (`http`: required; `workers-ai`:
    /// [`WORKERS_AI_MODEL`] by default), the secret `RERANK_API_KEY` (never another key: the
    /// re-ranker may be another party), `RERANK_CANDIDATES` (1 to [`MAX_CANDIDATES`], default
    /// [`DEFAULT_CANDIDATES`]) and `RERANK_TIMEOUT_MS` (default [`DEFAULT_RERANK_TIMEOUT_MS`]).
    /// A value that does not fit is `invalid_request` naming the variable.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| var(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let Some(name) = get("RERANK_PROVIDER") else { return Ok(RerankConfig::none()) };
        let provider = match name.as_str() {
            "workers-ai" => RerankProvider::WorkersAi,
            "http" => RerankProvider::Http,
            "none" => return Ok(RerankConfig::none()),
            _ => return Err(Error::invalid(format!("RERANK_PROVIDER {name:?} is not one of workers-ai, http, none"))),
        };
        let number = |k: &str, max: u64, default: u64| match get(k) {
            None => Ok(default),
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| Error::invalid(format!("{k} must be an integer from 1 to {max}"))),
        };
        let candidates = number("RERANK_CANDIDATES", MAX_CANDIDATES as u64, DEFAULT_CANDIDATES as u64)? as usize;
        let timeout_ms = number("RERANK_TIMEOUT_MS", 600_000, DEFAULT_RERANK_TIMEOUT_MS)?;
        let (base_url, model) = match provider {
            RerankProvider::Http => {
                let url = get("RERANK_BASE_URL").ok_or_else(|| Error::invalid("RERANK_BASE_URL is not set"))?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(Error::invalid("RERANK_BASE_URL must start with http:// or https://"));
                }
                let model = get("RERANK_MODEL").ok_or_else(|| Error::invalid("RERANK_MODEL is not set"))?;
                (url.trim_end_matches('/').to_owned(), model)
            }
            _ => (String::new(), get("RERANK_MODEL").unwrap_or_else(|| WORKERS_AI_MODEL.to_owned())),
        };
        Ok(RerankConfig { provider, base_url, model, api_key: get("RERANK_API_KEY"), candidates, timeout_ms })
    }
}

/// The order the re-ranker gives to `texts` for `query` (both as the model should read them, cut
/// to what it reads): every index once, best first; none, for the order as it is. Without a
/// re-ranker, a query or two texts to order: none, without a call. When the call fails: none,
/// with a warning. An answer with entries that name no candidate (an index out of range, one
/// given twice, a score that is not a number) is used without them, with a warning. The caller
/// sends the first [`RerankConfig::candidates`] texts of its hits and puts them in this order
/// ([`put_in_order`]).
pub(crate) async fn order(t: &dyn Transport, cfg: &RerankConfig, query: &str, texts: &[&str]) -> Warned<Vec<usize>> {
    let query = query.trim();
    if !cfg.is_on() || query.is_empty() || texts.len() < 2 {
        return Warned::clean(Vec::new());
    }
    match bounded(t, cfg, query, texts).await {
        Ok(Ranked { order, ignored: 0 }) => Warned::clean(order),
        Ok(Ranked { order, ignored }) => Warned {
            value: order,
            warnings: vec![format!("re-ranking: {ignored} entries of the answer name no candidate (left out)")],
        },
        Err(e) => {
            let why = e.log.unwrap_or(e.message);
            Warned { value: Vec::new(), warnings: vec![format!("re-ranking: {why} (the order is as ranked before)")] }
        }
    }
}

/// `items` with their first `order.len()` in `order` (the indexes of [`order`]), the rest below
/// as they were.
pub(crate) fn put_in_order<T>(items: Vec<T>, order: &[usize]) -> Vec<T> {
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    let mut out: Vec<T> = order.iter().filter_map(|&i| slots.get_mut(i).and_then(Option::take)).collect();
    out.extend(slots.into_iter().flatten());
    out
}

/// A re-ranker's answer, read: every candidate's index once, best first.
#[derive(Debug, PartialEq)]
struct Ranked {
    order: Vec<usize>,
    /// Entries left out: not an index of a candidate, one already given, or no score.
    ignored: usize,
}

/// The call for `texts`, bounded by `RERANK_TIMEOUT_MS` as a whole.
async fn bounded(t: &dyn Transport, cfg: &RerankConfig, query: &str, texts: &[&str]) -> Result<Ranked> {
    let call = Box::pin(call(t, cfg, query, texts));
    match select(call, t.sleep(cfg.timeout_ms)).await {
        Either::Left((ranked, _)) => ranked,
        Either::Right(_) => Err(unavailable(format!("the re-ranker did not answer within {} ms", cfg.timeout_ms))),
    }
}

async fn call(t: &dyn Transport, cfg: &RerankConfig, query: &str, texts: &[&str]) -> Result<Ranked> {
    let n = texts.len();
    match cfg.provider {
        RerankProvider::None => Err(Error::internal("no re-ranker is configured")),
        RerankProvider::WorkersAi => {
            let contexts: Vec<Json> = texts.iter().map(|t| json!({ "text": t })).collect();
            let input = json!({ "query": query, "contexts": contexts, "top_k": n });
            let answer = t.workers_ai(&cfg.model, input).await?;
            ranked(&answer, ["response", "id", "score"], n)
        }
        RerankProvider::Http => {
            let body = json!({ "model": cfg.model, "query": query, "documents": texts, "top_n": n });
            let url = format!("{}/rerank", cfg.base_url);
            let mut req = HttpRequest::json(url, body.to_string(), Delivery::Whole, cfg.timeout_ms);
            if let Some(key) = &cfg.api_key {
                req.headers.push(("authorization".into(), format!("Bearer {key}")));
            }
            let (status, body) = read_capped(t, req, MAX_ANSWER_BYTES)
                .await
                .map_err(|e| e.over(|cap| unavailable(format!("the re-ranker's answer is over {cap} bytes"))))?;
            if !(200..300).contains(&status) {
                return Err(unavailable(format!("the re-ranker answered HTTP {status}"))
                    .with_log(format!("the re-ranker answered HTTP {status}: {}", excerpt(&body, 200))));
            }
            let answer: Json = serde_json::from_str(&body).map_err(|_| {
                unavailable("the re-ranker's answer is not JSON")
                    .with_log(format!("the re-ranker's answer is not JSON: {}", excerpt(&body, 200)))
            })?;
            ranked(&answer, ["results", "index", "relevance_score"], n)
        }
    }
}

/// How reading an answer up to a cap failed.
pub(crate) enum Unread {
    /// The transport's error (unreachable, late, …).
    Failed(Error),
    /// The answer went past this many bytes: the reading stopped there.
    Over(usize),
}

impl Unread {
    /// The transport's error, or `over(cap)` for an answer past the cap.
    pub(crate) fn over(self, over: impl FnOnce(usize) -> Error) -> Error {
        match self {
            Unread::Failed(e) => e,
            Unread::Over(cap) => over(cap),
        }
    }
}

/// The status and body of `req`'s answer, read up to `cap` bytes (a longer one stops the
/// reading: [`Unread::Over`]).
pub(crate) async fn read_capped(
    t: &dyn Transport,
    req: HttpRequest,
    cap: usize,
) -> std::result::Result<(u16, String), Unread> {
    let mut body = String::new();
    let mut over = false;
    let sent = {
        let mut keep = |chunk: &str| {
            if body.len() + chunk.len() > cap {
                over = true;
                return Err(unavailable("too long"));
            }
            body.push_str(chunk);
            Ok(())
        };
        t.send_stream(req, &mut keep).await
    };
    match sent {
        Ok(status) => Ok((status, body)),
        Err(_) if over => Err(Unread::Over(cap)),
        Err(e) => Err(Unread::Failed(e)),
    }
}

/// The order an answer gives to `n` candidates: its list `keys[0]` of entries with an index
/// `keys[1]` and a score `keys[2]`, by score (the higher first; equal scores in the old order),
/// then the candidates it did not score in their old order. No list, or no usable entry in it
/// while there were candidates, is an error.
fn ranked(answer: &Json, [list, index, score]: [&str; 3], n: usize) -> Result<Ranked> {
    let entries = answer.get(list).and_then(Json::as_array).ok_or_else(|| {
        unavailable(format!("the re-ranker's answer has no {list} list"))
            .with_log(format!("the re-ranker's answer has no {list} list: {}", excerpt(&answer.to_string(), 200)))
    })?;
    let mut seen = vec![false; n];
    let mut scored: Vec<(usize, f64)> = Vec::with_capacity(n);
    let mut ignored = 0;
    for e in entries {
        let i = e.get(index).and_then(Json::as_u64).and_then(|i| usize::try_from(i).ok()).filter(|&i| i < n);
        let s = e.get(score).and_then(Json::as_f64).filter(|s| s.is_finite());
        match (i, s) {
            (Some(i), Some(s)) if !seen[i] => {
                seen[i] = true;
                // Kept in order as they come (at most MAX_CANDIDATES: a sort of the standard
                // library would weigh more in the wasm than this loop costs).
                let at = scored.iter().position(|&(j, t)| s.total_cmp(&t).then(j.cmp(&i)).is_gt());
                scored.insert(at.unwrap_or(scored.len()), (i, s));
            }
            _ => ignored += 1,
        }
    }
    if scored.is_empty() && n > 0 {
        return Err(unavailable(format!("the re-ranker's answer scores none of the {n} candidates")));
    }
    let mut order: Vec<usize> = scored.into_iter().map(|(i, _)| i).collect();
    order.extend((0..n).filter(|&i| !seen[i]));
    Ok(Ranked { order, ignored })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{put_in_order, ranked, Ranked};

    const HTTP: [&str; 3] = ["results", "index", "relevance_score"];

    #[test]
    fn scores_order_the_candidates_and_the_unscored_follow_in_their_order() {
        let a = json!({"results": [{"index": 2, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]});
        assert_eq!(ranked(&a, HTTP, 4).unwrap(), Ranked { order: vec![2, 0, 1, 3], ignored: 0 });
        // Equal scores keep the old order; the answer's own order counts for nothing.
        let a = json!({"results": [{"index": 3, "relevance_score": 0.5}, {"index": 1, "relevance_score": 0.5}]});
        assert_eq!(ranked(&a, HTTP, 4).unwrap().order, vec![1, 3, 0, 2]);
    }

    #[test]
    fn entries_that_name_no_candidate_are_left_out() {
        let a = json!({"response": [
            {"id": 7, "score": 1.0}, {"id": -1, "score": 1.0}, {"id": 1.5, "score": 1.0}, {"id": "0", "score": 1.0},
            {"id": 1, "score": 0.2}, {"id": 1, "score": 0.9}, {"id": 0, "score": "high"}, {"id": 0}, {"score": 3},
            {"id": 0, "score": 0.1}
        ]});
        assert_eq!(ranked(&a, ["response", "id", "score"], 3).unwrap(), Ranked { order: vec![1, 0, 2], ignored: 8 });
    }

    #[test]
    fn the_order_moves_the_first_items_and_leaves_the_rest_below() {
        assert_eq!(put_in_order(vec!["a", "b", "c", "d"], &[2, 0, 1]), ["c", "a", "b", "d"]);
        assert_eq!(put_in_order(vec!["a", "b"], &[]), ["a", "b"]);
    }

    #[test]
    fn an_answer_without_scores_is_an_error() {
        for a in [
            json!({}),
            json!({"results": {}}),
            json!({"results": []}),
            json!({"results": [{"index": 9, "relevance_score": 1}]}),
        ] {
            assert!(ranked(&a, HTTP, 2).is_err(), "{a}");
        }
    }
}
