//! `SESSION_CONFIG.tools`: tools the agent runs itself beside its own, today the tools of remote
//! MCP servers (`tools.mcp`). A server is reached only at the URL written here, with the header
//! value of a Worker secret named here: nothing a request carries names a server or holds its
//! key (docs/REFERENCE.md#mcp-tools).

use serde::Deserialize;

use super::blocks::is_label;
use crate::error::{Error, Result};

/// The most MCP servers one agent names.
pub const MAX_SERVERS: usize = 8;
/// A server's name joins its tools' names with this: `crm__lookup_customer`.
pub const SEPARATOR: &str = "__";
/// The most characters of a server's name.
pub const MAX_NAME_CHARS: usize = 24;
/// Default time one call to a server may take (`timeoutMs`), the whole exchange included.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Default most bytes of a tool's output (`maxOutputBytes`).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 32_768;
/// Secrets that never leave the Worker, whatever the config says: the admin token and the key
/// that signs scoped tokens.
const KEPT_SECRETS: [&str; 2] = ["API_TOKEN", "TOKEN_SECRET"];
/// Headers the client sets itself.
const OWN_HEADERS: [&str; 5] = ["content-type", "accept", "mcp-session-id", "mcp-protocol-version", "host"];

/// `SESSION_CONFIG.tools` `{mcp?}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// The remote MCP servers whose tools the agent's turns offer, in this order.
    pub mcp: Vec<McpServerConfig>,
}

/// One remote MCP server (the Streamable HTTP transport): `{name, url, secret?, header?,
/// allow?, timeoutMs?, maxOutputBytes?}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerConfig {
    /// What its tools are prefixed with (`<name>__<tool>`): 1-24 characters of `[A-Za-z0-9_-]`,
    /// neither `__` in it nor `_` at its ends, unique among the servers.
    pub name: String,
    /// Its endpoint, `https://…` (or `http://…`), the only address the agent sends to.
    pub url: String,
    /// The Worker secret (or var) whose value authenticates the agent: sent as
    /// `Authorization: Bearer <value>`, or as `header: <value>` when `header` is set.
    #[serde(default)]
    pub secret: Option<String>,
    /// The header that carries the secret's value as it is, instead of `Authorization: Bearer`.
    #[serde(default)]
    pub header: Option<String>,
    /// The server's tools offered (their own names); absent: every tool it lists.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// Time one call may take, the whole exchange included (100-120,000 ms, default 10,000).
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Most bytes of a tool's output the model is given (1-1,000,000, default 32,768); more is
    /// a tool error.
    #[serde(default = "default_max_output")]
    pub max_output_bytes: usize,
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn default_max_output() -> usize {
    DEFAULT_MAX_OUTPUT_BYTES
}

impl ToolsConfig {
    /// The values within their ranges (`tools.mcp[i].…` otherwise), the names unique.
    pub(crate) fn check(&self) -> Result<()> {
        if self.mcp.len() > MAX_SERVERS {
            return Err(Error::invalid(format!("tools.mcp names at most {MAX_SERVERS} servers")));
        }
        for (i, s) in self.mcp.iter().enumerate() {
            s.check().map_err(|e| Error::invalid(format!("tools.mcp[{i}].{}", e.message)))?;
            if self.mcp[..i].iter().any(|o| o.name == s.name) {
                return Err(Error::invalid(format!("tools.mcp: two servers are named \"{}\"", s.name)));
            }
        }
        Ok(())
    }
}

impl McpServerConfig {
    fn check(&self) -> Result<()> {
        let n = &self.name;
        let name_ok = n.len() <= MAX_NAME_CHARS
            && is_label(n)
            && !n.contains(SEPARATOR)
            && !n.starts_with('_')
            && !n.ends_with('_');
        if !name_ok {
            return Err(Error::invalid(format!(
                "name must be 1-{MAX_NAME_CHARS} characters of [A-Za-z0-9_-], without \"{SEPARATOR}\" and not \
                 starting or ending with \"_\""
            )));
        }
        check_url(&self.url)?;
        if let Some(s) = &self.secret {
            if !is_label(s) {
                return Err(Error::invalid("secret must name a Worker secret: 1-64 characters of [A-Za-z0-9_-]"));
            }
            if KEPT_SECRETS.contains(&s.as_str()) {
                return Err(Error::invalid(format!("secret: {s} never leaves the Worker")));
            }
        }
        if let Some(h) = &self.header {
            if self.secret.is_none() {
                return Err(Error::invalid("header needs secret (the value it carries)"));
            }
            let token = !h.is_empty() && h.len() <= 64 && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
            if !token || OWN_HEADERS.contains(&h.to_ascii_lowercase().as_str()) {
                return Err(Error::invalid(format!(
                    "header must be a header name of letters, digits and \"-\", not one of {}",
                    OWN_HEADERS.join(", ")
                )));
            }
        }
        if let Some(allow) = &self.allow {
            if allow.is_empty() || allow.iter().any(|t| t.is_empty() || t.len() > 128) {
                return Err(Error::invalid("allow must be a non-empty array of tool names (1-128 characters)"));
            }
        }
        if !(100..=120_000).contains(&self.timeout_ms) {
            return Err(Error::invalid("timeoutMs must be from 100 to 120000"));
        }
        if !(1..=1_000_000).contains(&self.max_output_bytes) {
            return Err(Error::invalid("maxOutputBytes must be from 1 to 1000000"));
        }
        Ok(())
    }

    /// Whether the server's tool `tool` may be offered.
    pub(crate) fn allows(&self, tool: &str) -> bool {
        self.allow.as_ref().is_none_or(|a| a.iter().any(|t| t == tool))
    }
}

/// `http://` or `https://`, a host, no credentials, no spaces, at most 2,048 characters.
fn check_url(url: &str) -> Result<()> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or_default());
    let ok = url.len() <= 2048
        && host.is_some_and(|h| !h.is_empty() && !h.contains('@'))
        && !url.chars().any(|c| c.is_whitespace() || c.is_control());
    match ok {
        true => Ok(()),
        false => Err(Error::invalid(
            "url must be an http:// or https:// URL with a host, no credentials and no spaces (at most 2048 characters)",
        )),
    }
}
