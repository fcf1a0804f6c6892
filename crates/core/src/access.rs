//! The agent's token revocation time: the one value scoped tokens need from storage (they are
//! verified by their signature, never looked up). A token issued before it is refused. And
//! [`Reach`]: which sessions a request may see through what searches across sessions (tools,
//! turns), so a token limited to some sessions never reads another one's messages or memories.

use crate::error::Result;
use crate::sql::Sql;

/// Which sessions a request may see beyond the one it names: every session of the agent (the
/// admin token, a Worker binding, a scoped token not limited to sessions), or only the sessions
/// its token lists. Searches across sessions (`session_search`, the searchable-history block) and
/// the memory tools (a `conversation` memory belongs to its session) keep to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Reach {
    #[default]
    All,
    /// Only these sessions (a token's `sessions` claim: 1–500 ids).
    Sessions(Vec<String>),
}

impl Reach {
    /// Whether session `sid` is within reach.
    pub(crate) fn sees(&self, sid: &str) -> bool {
        match self {
            Reach::All => true,
            Reach::Sessions(list) => list.iter().any(|s| s == sid),
        }
    }
}

/// The revocation time (milliseconds since the epoch), if the agent ever revoked its tokens.
pub fn revoked_before(sql: &dyn Sql) -> Result<Option<i64>> {
    sql.query_row("SELECT before_ms FROM revocation WHERE id = 1", &[])?.map(|r| r.int(0)).transpose()
}

/// Revokes every token issued before `before_ms`. The time only moves forward: an earlier
/// `before` than the stored one changes nothing (a revocation is never undone). Returns the time
/// now in force.
pub fn revoke(sql: &dyn Sql, before_ms: i64) -> Result<i64> {
    sql.execute(
        "INSERT INTO revocation (id, before_ms) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET before_ms = max(before_ms, excluded.before_ms)",
        &[before_ms.into()],
    )?;
    Ok(revoked_before(sql)?.unwrap_or(before_ms))
}

/// A per-agent request limit (`RATE_LIMIT` = `"<requests>/<seconds>"`, e.g. `"600/60"`): a fixed
/// window counted in the agent's memory (one Durable Object per agent, so the count is exact
/// and needs no storage; an evicted object starts a new window).
#[derive(Debug)]
pub struct RateLimit {
    limit: u32,
    period_ms: i64,
    window: std::cell::Cell<(i64, u32)>,
}

impl RateLimit {
    /// Reads `"<requests>/<seconds>"` (both at least 1).
    pub fn parse(text: &str) -> Result<RateLimit> {
        let bad = || {
            crate::error::Error::invalid(format!(
                "RATE_LIMIT must be \"<requests>/<seconds>\", e.g. \"600/60\" (got {text:?})"
            ))
        };
        let (n, s) = text.trim().split_once('/').ok_or_else(bad)?;
        let limit: u32 = n.trim().parse().ok().filter(|n| *n > 0).ok_or_else(bad)?;
        let secs: i64 = s.trim().parse().ok().filter(|s| (1..=86_400).contains(s)).ok_or_else(bad)?;
        Ok(RateLimit { limit, period_ms: secs * 1000, window: std::cell::Cell::new((0, 0)) })
    }

    /// The window's length in seconds.
    pub fn period_secs(&self) -> i64 {
        self.period_ms / 1000
    }

    /// Counts one request at `now_ms`: `None` when it is within the limit, else the seconds
    /// until the window ends (the `Retry-After` of the `429`).
    pub fn take(&self, now_ms: i64) -> Option<i64> {
        let (start, used) = self.window.get();
        let (start, used) =
            if used == 0 || now_ms >= start + self.period_ms || now_ms < start { (now_ms, 0) } else { (start, used) };
        if used >= self.limit {
            self.window.set((start, used));
            return Some(((start + self.period_ms - now_ms + 999) / 1000).max(1));
        }
        self.window.set((start, used + 1));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::RateLimit;

    #[test]
    fn a_window_allows_its_limit_then_says_when_to_retry() {
        let r = RateLimit::parse(" 2 / 10 ").unwrap();
        assert_eq!((r.take(1_000), r.take(1_500)), (None, None));
        assert_eq!(r.take(2_000), Some(9));
        assert_eq!(r.take(10_999), Some(1));
        assert_eq!(r.take(11_000), None, "a new window");
        for bad in ["", "10", "0/10", "10/0", "x/y", "-1/5", "5/100000"] {
            assert!(RateLimit::parse(bad).is_err(), "{bad}");
        }
    }
}
