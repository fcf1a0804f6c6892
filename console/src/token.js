// The token field of the header: only a scoped token is taken (a JWT, whose claims are shown
// beside the field); anything else, such as the admin token API_TOKEN, is emptied from the
// field, never stored and never sent.
import { store } from "./state.js";

export const NOT_SCOPED = "That is not a scoped token. Paste a token minted with POST /agents/{agent}/tokens (a JWT); never the admin token (API_TOKEN): the console keeps its token in this browser.";

/** `el`: {token, agent, tokenInfo}; `auth`: state.js's Auth; `status(text, err)`: the status line. */
export function createToken({ el, auth, status }) {
  /** Takes `t` as the token if it is a scoped one (its `sub` becomes the agent); true when there is a token now. */
  function set(t) {
    const ok = auth.set(t);
    el.token.value = auth.token;
    const c = auth.claims;
    if (c && c.sub !== auth.agent()) { el.agent.value = c.sub; store.set("sa-agent", c.sub); }
    showInfo();
    if (!ok) status(NOT_SCOPED, true);
    return !!auth.token;
  }

  /** The token's scope, agent, session limit and expiry beside the field. */
  function showInfo() {
    const c = auth.claims;
    el.tokenInfo.className = "";
    if (!c) { el.tokenInfo.textContent = ""; return; }
    const left = c.exp * 1000 - Date.now();
    const exp = left <= 0 ? "expired" : left < 3600e3 ? "expires in " + Math.ceil(left / 60e3) + " min" : "expires " + new Date(c.exp * 1000).toISOString().slice(0, 16).replace("T", " ");
    el.tokenInfo.textContent = c.scope + " · " + c.sub + (c.sessions ? " · " + c.sessions.length + " session(s) only" : "") + " · " + exp;
    if (left <= 0 || c.sessions) el.tokenInfo.className = "warn";
  }

  setInterval(showInfo, 60000);
  return { set, showInfo };
}
