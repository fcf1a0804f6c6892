//! `SESSION_CONFIG.tools`: tools the agent runs itself beside its own, today the tools of remote
//! MCP servers (`tools.mcp`). A server is reached only at the URL written here, with the header
//! value of a Worker secret named here: nothing a request carries names a server or holds its
//! key (docs/REFERENCE.md#mcp-tools).

use serde::{Deserialize, Deserializer};
use serde_json::Value as Json;

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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolsConfig {
    /// The remote MCP servers whose tools the agent's turns offer, in this order.
    pub mcp: Vec<McpServerConfig>,
}

/// One remote MCP server (the Streamable HTTP transport): `{name, url, secret?, header?,
/// allow?, timeoutMs?, maxOutputBytes?}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServerConfig {
    /// What its tools are prefixed with (`<name>__<tool>`): 1-24 characters of `[A-Za-z0-9_-]`,
    /// neither `__` in it nor `_` at its ends, unique among the servers.
    pub name: String,
    /// Its endpoint, `https://…` (or `http://…`), the only address the agent sends to.
    pub url: String,
    /// The Worker secret (or var) whose value authenticates the agent: sent as
    /// `Authorization: Bearer <value>`, or as `header: <value>` when `header` is set.
    pub secret: Option<String>,
    /// The header that carries the secret's value as it is, instead of `Authorization: Bearer`.
    pub header: Option<String>,
    /// The server's tools offered (their own names); absent: every tool it lists.
    pub allow: Option<Vec<String>>,
    /// Time one call may take, the whole exchange included (100-120,000 ms, default 10,000).
    pub timeout_ms: u64,
    /// Most bytes of a tool's output the model is given (1-1,000,000, default 32,768); more is
    /// a tool error.
    pub max_output_bytes: usize,
}

/// The keys of a server, as written.
const SERVER_KEYS: [&str; 7] = ["name", "url", "secret", "header", "allow", "timeoutMs", "maxOutputBytes"];

/// Reads `SESSION_CONFIG.tools` (an object, or `null` for none) as the other parts are read:
/// unknown keys refused, `null` fields as absent. By hand rather than serde's derive, which,
/// read from a JSON value, cost the wasm 6 KB.
pub(super) fn read<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<ToolsConfig, D::Error> {
    use serde::de::Error as _;
    parse(&Json::deserialize(d)?).map_err(|e| D::Error::custom(e.message))
}

fn parse(v: &Json) -> Result<ToolsConfig> {
    let obj = match v {
        Json::Null => return Ok(ToolsConfig::default()),
        Json::Object(o) => o,
        _ => return Err(Error::invalid("tools must be an object")),
    };
    if let Some(k) = obj.keys().find(|k| *k != "mcp") {
        return Err(Error::invalid(format!("tools: unknown field `{k}`, expected `mcp`")));
    }
    let list = match obj.get("mcp") {
        None | Some(Json::Null) => return Ok(ToolsConfig::default()),
        Some(Json::Array(a)) => a,
        Some(_) => return Err(Error::invalid("tools.mcp must be an array")),
    };
    let mcp = list
        .iter()
        .enumerate()
        .map(|(i, s)| server(s).map_err(|e| Error::invalid(format!("tools.mcp[{i}]: {}", e.message))));
    Ok(ToolsConfig { mcp: mcp.collect::<Result<_>>()? })
}

fn server(v: &Json) -> Result<McpServerConfig> {
    let obj = v.as_object().ok_or_else(|| Error::invalid("must be an object"))?;
    if let Some(k) = obj.keys().find(|k| !SERVER_KEYS.contains(&k.as_str())) {
        return Err(Error::invalid(format!("unknown field `{k}`, expected one of {}", SERVER_KEYS.join(", "))));
    }
    let field = |k: &str| obj.get(k).filter(|v| !v.is_null());
    let text = |k: &str| match field(k) {
        None => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::invalid(format!("{k} must be a string"))),
    };
    let number = |k: &str, default: u64| match field(k) {
        None => Ok(default),
        Some(n) => n.as_u64().ok_or_else(|| Error::invalid(format!("{k} must be a positive integer"))),
    };
    let required = |k: &str| text(k)?.ok_or_else(|| Error::invalid(format!("{k} is required")));
    let allow = match field("allow") {
        None => None,
        Some(a) => {
            let list = a.as_array().filter(|l| l.iter().all(Json::is_string));
            let list = list.ok_or_else(|| Error::invalid("allow must be an array of strings"))?;
            Some(list.iter().filter_map(Json::as_str).map(str::to_owned).collect())
        }
    };
    Ok(McpServerConfig {
        name: required("name")?,
        url: required("url")?,
        secret: text("secret")?,
        header: text("header")?,
        allow,
        timeout_ms: number("timeoutMs", DEFAULT_TIMEOUT_MS)?,
        max_output_bytes: usize::try_from(number("maxOutputBytes", DEFAULT_MAX_OUTPUT_BYTES as u64)?)
            .unwrap_or(usize::MAX),
    })
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
