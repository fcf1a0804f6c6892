// Generated from docs/openapi.yaml by openapi-typescript 7.13.0 (clients/ts/scripts/generate.mjs).
// Do not edit: change the spec and run `npm run generate --prefix clients/ts`.

export interface paths {
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Liveness check
         * @description Answers `200 ok` (plain text) without authentication, whether or not `API_TOKEN` is
         *     set. Served by the front door only (not by the DO). `GET` and `HEAD`; other methods
         *     are `405` (`Allow: GET, HEAD`).
         */
        get: operations["healthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The console
         * @description The console (`console/`, served from the `ASSETS` static assets: this page,
         *     `/console.js`, `/console.css`), served by the front door without authentication: the
         *     page holds no secret. Every
         *     answer carries `Content-Security-Policy: default-src 'none'; script-src 'self';
         *     style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none';
         *     form-action 'none'; frame-ancestors 'none'`, `X-Frame-Options: DENY`,
         *     `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`. The user gives it
         *     a scoped token (or opens `/#token=<token>`; the page stores it in `localStorage` and
         *     removes it from the address bar); it shows the agent's sessions (create, rename,
         *     delete, search), the conversation as a tree with a branch switcher, regenerate and
         *     edit-and-resend as branches, turns through the AI SDK's chat client (`POST …/chat`
         *     with the `useChat` body; stop aborts), the frozen prompt and context blocks, the
         *     memories and the compactions, and listens to the session's WebSocket
         *     (`GET /agents/{agent}/sessions/{sid}/ws?token=…`). Give it a scoped token
         *     (`POST /agents/{agent}/tokens`) that is not limited to sessions, of scope `write` to
         *     chat; never `API_TOKEN`.
         *
         *     Served unless the Worker variable `CHAT_PAGE` is `off`, `false` or `0` (then `404
         *     not_found`, as for any unknown path). `GET` and `HEAD`; other methods are `405`. Not
         *     served by the DO.
         */
        get: operations["chatPage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        /**
         * List the agent's sessions
         * @description The registered sessions of the agent, most recently updated first (`updatedAt`
         *     descending; ties: the later update first). With `limit`, one page of at most that many
         *     and the `nextCursor` of the page after it (`null` after the last page); pass it back as
         *     `cursor`. Without `limit`, every session after `cursor` (every session without one), and
         *     `nextCursor` is `null`. An agent with no sessions answers
         *     `{"sessions": [], "nextCursor": null}`. A session updated between two pages moves to the
         *     front of the list: a client that pages may miss it or see it twice.
         *
         *     `metadata.<key>=<value>` (repeatable) lists only the sessions whose metadata holds every
         *     such key with that value, compared as text (see **Metadata and filters**); a bad
         *     filter is `400`. Pages and `nextCursor` work the same, within those sessions.
         */
        get: operations["listSessions"];
        put?: never;
        /**
         * Create a session
         * @description Registers a new session under a fresh server-chosen id (a UUID v4). To use an id of
         *     your own, simply write to `/sessions/{sid}/…` (e.g. append a message): the first write
         *     registers `{sid}` with `name = sid`.
         *
         *     - `name` (required): 1–256 characters, no control characters.
         *     - `parentSessionId` (optional, string or `null`): must match the session id syntax; it
         *       is not required to exist.
         *     - `model`, `source` (optional, string or `null`): at most 256 characters.
         *     - `metadata` (optional, `Metadata` or `null`): the caller's own facts about the
         *       session (see **Metadata and filters**); absent or `null`: `{}`.
         *
         *     Answers `201` with the new SessionInfo (`messageCount` 0, usage 0, `endReason` null).
         */
        post: operations["createSession"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * Get one session
         * @description The SessionInfo of a registered session; `404` when `{sid}` is not registered (reads
         *     never register a session). `messageCount` counts the messages on **every** branch.
         */
        get: operations["getSession"];
        put?: never;
        post?: never;
        /**
         * Delete a session and everything stored for it
         * @description Removes, in one transaction, the session's messages, their search-index rows, its
         *     compaction overlays and cached token estimate, its context rows (the text of its
         *     writable blocks, the blocks added to it at run time and the tombstones of configured
         *     blocks removed from it), its frozen system prompt, its loaded-skill state, its
         *     `conversation` memories (those whose `source.sessionId` is `{sid}`; every socket of
         *     the agent gets a `memory` frame `op: "deleted"` for each), and its registry entry.
         *     What belongs to the agent rather than the session stays: the entries of `search`
         *     blocks, the skills in R2, and the `core` and `daily` memories, even those that came
         *     from this session. Other sessions (including forks of it, whose
         *     `parentSessionId` keeps pointing to it) are not touched. `204` on success; `404` when
         *     the session is not registered (so a second delete is `404`). A later write to the same
         *     `{sid}` starts afresh (configured blocks with their initial content).
         */
        delete: operations["deleteSession"];
        options?: never;
        head?: never;
        /**
         * Rename a session, or replace its metadata
         * @description `UpdateSessionRequest`: sets `name` (1–256 characters, no control characters), replaces
         *     `metadata` whole (`Metadata`; `{}` clears it), or both, and moves `updatedAt` to now.
         *     At least one of the two (not `null`) must be given (`400` otherwise); absent or `null`
         *     leaves a field as it is. Other fields of the body are ignored. `404` when the session
         *     is not registered (a change does not register it).
         */
        patch: operations["renameSession"];
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/fork": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Copy a path into a new session
         * @description Creates a new session (fresh UUID id) holding a copy of the raw path from the root to
         *     `atMessageId`, as one linear chain. Each copied message keeps its JSON verbatim except
         *     `id`, which is replaced by a fresh UUID. Compaction overlays whose both ends lie on the
         *     copied path come along, remapped to the new ids, so the fork reads exactly as the
         *     original did at `atMessageId`; other overlays do not.
         *
         *     The copy has `parentSessionId = {sid}` and the source's `model`, `source` and
         *     `metadata`; its usage figures start at 0. `name` is optional (1–256 characters, no control
         *     characters); it defaults to `"<source name> (fork)"`. The source session is not
         *     modified.
         *
         *     `404` when `{sid}` is not registered or `atMessageId` is not a message of it;
         *     `400` when `atMessageId` is missing or not a string. A token limited to some sessions
         *     gets `403` and nothing is copied: the copy's new id is in no token's list, so such a
         *     token could make sessions it cannot open (the admin token and agent-wide tokens fork).
         */
        post: operations["forkSession"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/usage": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Add token and cost figures to a session's totals
         * @description Adds `inputTokens`, `outputTokens` and `cost` to the session's `inputTokens`,
         *     `outputTokens` and `estimatedCost`. Each field is optional; absent or `null` adds 0
         *     (an empty body is accepted).
         *     Token counts must be whole, non-negative numbers (`2` and `2.0` are accepted, `1.5`,
         *     `-1` and `"3"` are `400`); `cost` must be a finite, non-negative number. Sums that
         *     would overflow are `400` and change nothing: token totals stay at most
         *     9,007,199,254,740,991 (2^53 - 1, exact as a JavaScript number) and `estimatedCost`
         *     finite. Registers the session (with `name = sid`) if it is not registered yet, and
         *     moves `updatedAt` to now.
         */
        post: operations["addUsage"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/storage": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * What a session holds in SQLite and in R2
         * @description The session's storage figures, counted from its rows when asked: `rows` (every row of
         *     `kinds`), `sqliteBytes` (the bytes those rows store: message JSON as stored, summaries,
         *     block texts and definitions, the frozen prompt, its messages' vectors; indexes, the
         *     full-text index and the database's page overhead are not counted, the whole database's
         *     size is the directory's `sqliteBytes`), `r2Bytes` and `r2Objects` (the message fields
         *     kept in R2 because their message passed the row limit: a fork shares its source's
         *     objects, counted in both), and `kinds`, the same by kind. `404` for a session that is
         *     not registered.
         */
        get: operations["getSessionStorage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/split": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * End a session and go on in a new one that starts from its summary
         * @description The reference's compact-and-split (docs/REFERENCE.md#split, with our differences in
         *     docs/REFERENCE.md#d-split), for a session that has grown too long: the session is
         *     marked ended (`endReason: "split"`) and a **new session** starts with one `assistant`
         *     message whose only part is the text `"[Context from previous session]\n\n"` followed
         *     by the summary. The new session has a fresh UUID id, `parentSessionId = {sid}`, the
         *     old session's `model`, `source` and `metadata`, and the `name` given (1–256 characters, no control
         *     characters) or else the old session's name; its usage starts at 0. The old session
         *     keeps all its messages (its `updatedAt` moves to now); nothing else is copied (blocks,
         *     prompt, loaded skills stay with it).
         *
         *     The summary is, in this order:
         *
         *     1. `summary` from the body, when given (a string that is not blank; kept as given);
         *     2. else the summary of a compaction of the session's latest branch, run now exactly as
         *        `POST …/compact` without `leafId` runs it (the configured LLM writes it, the overlay
         *        is stored in the old session, its usage added, its WebSockets hear `compacting`
         *        and `idle`). Without an LLM this is `503 not_configured`, a failing model or a
         *        blank or skeleton summary `503 llm_unavailable`, and nothing is split;
         *     3. else, when the branch is too short to compact (nothing to summarize without cutting
         *        its head or tail), the summary of the session's newest overlay, without a model
         *        call;
         *     4. else `409 conflict`: there is nothing to start from (pass a `summary`).
         *
         *     The old session's update and the new session with its message are written in one
         *     transaction; a compaction of step 2 was stored before it (and stays should the split
         *     then fail). The old session's sockets hear an `idle` status frame; the new session has
         *     none yet. A summary that makes the new message's JSON longer than 1,800,000 bytes is
         *     `413` (it is not moved to R2). `404` when `{sid}` is not registered. Unknown body
         *     fields, a blank `summary`, a `name` or `summary` that is not a string (or `null`) are
         *     `400`. A session may be split again: its `endReason` stays `split`. A token limited to
         *     some sessions gets `403` and nothing changes (no summary is made either): the new
         *     session would be outside its list (the admin token and agent-wide tokens split).
         */
        post: operations["splitSession"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/search": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        /**
         * Search across all the agent's sessions, by words and (with embeddings) meaning
         * @description Searches the messages of every session of the agent, best match (bm25) first; equal
         *     ranks put the newer message first. Its cost is bounded by the newest matches of each
         *     word, not by the number of messages (docs/REFERENCE.md#bounded-ranking). Each hit carries its `sessionId`. With embeddings
         *     configured (`EMBEDDINGS_*`), the messages nearest to the query by meaning are fused in
         *     by reciprocal rank (docs/REFERENCE.md#search-by-meaning); a message found by
         *     meaning alone has a cosine similarity of at least 0.42 to the query, so a query
         *     unrelated to everything finds nothing. Messages are embedded after the answer that
         *     stored them; until then they are found by their words. See the `q` parameter for
         *     the query syntax. A query with nothing to search for (blank, or only operators and
         *     punctuation) answers `{"results": []}`; no query is ever an FTS syntax error.
         *
         *     Only the `text` of `text` parts is indexed (reasoning and tool parts are not), so a
         *     message without text parts is never found. `content` is that indexed text (the text
         *     parts joined by one space) and `createdAt` the time the message was stored.
         *
         *     `metadata.<key>=<value>` (repeatable) searches only the sessions whose metadata holds
         *     every such key with that value, compared as text (see **Metadata and filters**); a bad
         *     filter is `400`.
         */
        get: operations["searchAllSessions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/messages": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Append one message to the tree
         * @description Stores `message` (a `UIMessage`, kept verbatim: unknown fields and key order survive a
         *     round trip). It must be an object with a string `id` (1–256 characters, no control
         *     characters), a non-empty string `role` and a `parts` array. A message over 1,800,000
         *     bytes of JSON keeps its largest fields in R2 and is read back whole (see Limits); only
         *     one that cannot be made to fit is `413 too_large`.
         *
         *     Where it attaches depends on `parentId`:
         *     - **absent**: child of the session's latest leaf (the most recently inserted message);
         *       a root when the session is empty;
         *     - **`null`**: a new root;
         *     - **a string**: child of that message, which must be in this session (`404
         *       not_found` otherwise; a message of another session does not count). An empty string,
         *       or one with control characters or over 256 characters, is `400`; any other type is
         *       `400`.
         *
         *     **Duplicates: first write wins.** If `message.id` already exists in the session,
         *     nothing changes: the answer is `200` with `inserted: false`, the **stored** message and
         *     its stored `parentId`; the request's content and `parentId` are ignored. An explicit
         *     `parentId` that is not in the session is still `404`: it is checked before this rule.
         *
         *     **Synthetic compaction messages are never stored.** A message whose id starts with
         *     `compaction_` is the stand-in that history reads put in place of an overlay's run; a
         *     client that sends its history back would otherwise store the summary as a real
         *     message. After the usual validation of `message` and of the type of `parentId`, such an
         *     append answers `200` with `{message: <the request's message>, parentId: null,
         *     inserted: false, synthetic: true}` and stores nothing (the session is not registered,
         *     `parentId` is not looked up).
         *
         *     A stored message registers the session (`name = sid`) if needed and moves its
         *     `updatedAt` to now. The new message becomes the session's latest leaf.
         *
         *     **Auto-compaction.** When `SESSION_CONFIG.compaction.after` is set, a `201` append then
         *     estimates the tokens of the new message's branch (overlays applied) plus the system
         *     prompt (the stored frozen one, else rendered without storing it). If the estimate is
         *     over `after`, the branch is compacted as by `POST …/compact` with `leafId` = the new
         *     message, and the answer carries a `compaction` report (see `CompactionReport`). The
         *     append itself always succeeds: a failed compaction is reported as
         *     `status: "failed"` with the error (and logged), never as an HTTP error. Below the
         *     threshold, or without `after`, there is no `compaction` field.
         */
        post: operations["appendMessage"];
        /**
         * Clear the session's messages
         * @description Deletes every message of the session, their search-index rows and the session's
         *     compaction overlays, and **forgets its loaded skills** (`unload_context` then has
         *     nothing to unload; the `unload_context` description says `No skills currently loaded.`).
         *     The frozen system prompt is then **rendered again** from the current blocks and stored
         *     (as the reference's `clearMessages`, which refreshes the prompt): the old prompt is
         *     dropped in the same transaction as the messages, and if the new one cannot be rendered
         *     at once (R2 unreachable) the answer is still `204` and the next `GET …/prompt` renders
         *     it. Context blocks themselves (writable texts, run-time blocks, search entries, skills)
         *     are kept. The session stays registered (with `messageCount` 0) and its `updatedAt`
         *     moves to now. Always `204`, also for a session id that is not registered (which stays
         *     unregistered, and gets no stored prompt). Spilled R2 objects of the messages are
         *     deleted.
         */
        delete: operations["clearMessages"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/messages/batch": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * Get the message whose id is `batch`
         * @description As `GET …/messages/{mid}` with `{mid}` = `batch`.
         */
        get: operations["getMessageNamedBatch"];
        /**
         * Replace the message whose id is `batch`
         * @description As `PUT …/messages/{mid}` with `{mid}` = `batch` (`message.id` must be `batch`).
         */
        put: operations["updateMessageNamedBatch"];
        /**
         * Append a chain of messages
         * @description Appends `messages` in order, each the child of the one before. The first one attaches
         *     by the same `parentId` rules as a single append (absent → child of the latest leaf,
         *     `null` → new root, a string → that message, `404` if it is not in the session).
         *
         *     **All or nothing.** Every message is validated before anything is stored; one invalid
         *     message (`400`, error message prefixed `messages[i]: `), an oversize one (`413`) or an
         *     unknown `parentId` (`404`, checked first, also for an empty list or a first message
         *     that is a duplicate) and nothing is stored. `messages` must be an array (`400`).
         *
         *     **Synthetic `compaction_…` messages are left out**: not stored, not in `ids`, and the
         *     chain goes on from the message before them (as for a single append, they are the
         *     stand-ins of overlays that a client may send back with its history).
         *
         *     **Duplicates are skipped.** A message whose id already exists in the session is left
         *     unchanged (first write wins) and the chain continues **from the existing message**: the
         *     next message becomes its child, wherever it is in the tree.
         *
         *     Always `201` with `ids` (every non-synthetic id of the request, in order, skipped
         *     duplicates included), `lastId` (the last of `ids`, i.e. where the chain ends) and
         *     `inserted` (how many were actually stored). For an empty list (or one of synthetic
         *     messages only) nothing is stored and `lastId` is the given `parentId` string, `null`
         *     for `parentId: null`, or the current latest leaf (`null` for an empty session) when
         *     `parentId` is absent. A batch that stores at least one message registers the session
         *     if needed and moves its `updatedAt` to now; one that stores none changes nothing. There
         *     is no count limit besides the 32 MiB body limit.
         *
         *     **Auto-compaction** runs after a batch that stored at least one message, on the branch
         *     ending at `lastId`, exactly as after a single append; its report is the optional
         *     `compaction` field.
         */
        post: operations["appendMessages"];
        /**
         * Delete the message whose id is `batch`
         * @description As `DELETE …/messages/{mid}` with `{mid}` = `batch`.
         */
        delete: operations["deleteMessageNamedBatch"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/messages/delete": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * Get the message whose id is `delete`
         * @description As `GET …/messages/{mid}` with `{mid}` = `delete`.
         */
        get: operations["getMessageNamedDelete"];
        /**
         * Replace the message whose id is `delete`
         * @description As `PUT …/messages/{mid}` with `{mid}` = `delete` (`message.id` must be `delete`).
         */
        put: operations["updateMessageNamedDelete"];
        /**
         * Delete several messages, all or nothing
         * @description Deletes the messages `ids` names (1 to 1,000 ids; an id named twice is deleted once) in
         *     one transaction, each as `DELETE …/messages/{mid}` deletes one: its index row and
         *     spilled fields go with it, **its children stay** and become roots (so deleting a
         *     message and its child leaves the grandchild a root), overlays that name it stay stored.
         *
         *     **All or nothing.** An id the session does not hold is `404` (its message names it) and
         *     nothing is deleted; a body that is not `{ids}` with 1 to 1,000 message ids (strings of
         *     1–256 characters without control characters; no other field) is `400` and nothing is
         *     deleted. Of two requests that name the same message at once, one deletes and the other
         *     is `404` having deleted nothing.
         *
         *     `200` with `deleted`, the ids deleted in the order first named. The session's
         *     `updatedAt` moves to now; its sockets get one `deleted` frame with those ids, then an
         *     `idle` status.
         */
        post: operations["deleteMessages"];
        /**
         * Delete the message whose id is `delete`
         * @description As `DELETE …/messages/{mid}` with `{mid}` = `delete`.
         */
        delete: operations["deleteMessageNamedDelete"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/messages/{mid}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
                 *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
                 *     `%` → `%25`, non-ASCII as UTF-8).
                 * @example m1
                 */
                mid: components["parameters"]["mid"];
            };
            cookie?: never;
        };
        /**
         * Get one message
         * @description The message exactly as stored (verbatim JSON); `404` when it is not in the session.
         */
        get: operations["getMessage"];
        /**
         * Replace a message's content
         * @description Replaces the stored JSON (and role) of an existing message and re-indexes it for
         *     search; its place in the tree (parent, children, latest-leaf order) does not change.
         *     `message` is validated as for an append; `message.id` must equal the decoded `{mid}`
         *     (`400` otherwise). `404` when the message is not in the session. Moves the session's
         *     `updatedAt` to now. Answers the message as now stored.
         */
        put: operations["updateMessage"];
        post?: never;
        /**
         * Delete one message
         * @description Deletes the message and its search-index row. Its children are **not** deleted: they
         *     are orphaned and become roots (paths through them now start at the child), and a
         *     message later appended under the same id does not adopt them. Compaction overlays that
         *     name it stay stored but no longer apply to paths it is not on. `404` when the message
         *     is not in the session. Moves the session's `updatedAt` to now.
         */
        delete: operations["deleteMessage"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/messages/{mid}/branches": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
                 *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
                 *     `%` → `%25`, non-ASCII as UTF-8).
                 * @example m1
                 */
                mid: components["parameters"]["mid"];
            };
            cookie?: never;
        };
        /**
         * The children of a message
         * @description The direct children of `{mid}`, oldest first (insertion order), as stored. A leaf has
         *     `{"messages": []}`. `404` when `{mid}` is not in the session.
         *
         *     **Pages** (`limit` or `before`), as history pages: at most `limit` children (100 with
         *     `before` alone), the newest ones, or with `before` (a child of `{mid}`, else `404`) the
         *     newest ones older than it, oldest first; and `nextBefore`, the page's oldest child when
         *     older ones remain (`null` otherwise). A page costs the same however many children
         *     there are. Without `limit` and `before`: every child, and no `nextBefore`.
         */
        get: operations["listBranches"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/history": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * The path from the root to a leaf
         * @description The messages from the root to `leaf` (default: the latest leaf), root first. The walk
         *     stops at a missing parent, so a deleted interior message cuts the path there. At most
         *     10,001 messages (the newest, nearest the leaf).
         *
         *     **Compaction overlays are applied unless `raw=1`**: at each position of the path, the
         *     newest overlay that starts there and ends on this same path replaces that run of
         *     messages by one synthetic assistant message
         *     `{"id": "compaction_<overlay id>", "role": "assistant", "parts": [{"type": "text",
         *     "text": <summary>}], "createdAt": <overlay createdAt>}` (repeated reads are identical);
         *     scanning resumes after the run. Overlays of other branches, and ones starting inside an
         *     applied run, do not apply. With `raw=1` the stored messages are returned as they are.
         *
         *     **`truncate=1`** shrinks older messages the way the agent turn does before sending
         *     them to a model (reference `truncateOlderMessages`); what is stored does not change.
         *     The newest `keepRecent` messages (default 4) stay whole; in every older one, each tool
         *     part's `output` is cut structurally to `maxToolOutputChars` (default 500) characters of
         *     JSON (long strings keep their start and end with `... [truncated N chars]`, arrays lose
         *     their last items and say so, objects their longest strings, and what still does not
         *     fit becomes `{"__truncated": true, "__truncatedChars": N, "note": …}`), and each `text`
         *     part longer than `maxTextChars` (default 10000) keeps that many characters plus
         *     `... [truncated N chars]`. Reasoning parts and inputs are kept. Lengths are JavaScript
         *     lengths (UTF-16 units). The three options are checked either way (`400` when out of
         *     range) but only take effect with `truncate=1`.
         *
         *     **Pages** (`limit`): at most `limit` messages of the path, root side first, and
         *     `nextBefore`: the id of the page's oldest stored message when older ones remain above
         *     it (`null` at the root). The first page ends at `leaf` (default: the latest leaf);
         *     pass `before=<nextBefore>` for the page above it, the `limit`
         *     messages before that message on its path. A page costs the same however long the
         *     path is (the walk stops after `limit + 1` messages), so a path of any length, beyond
         *     the 10,001 of a whole read too, can be read page by page. Overlays apply inside a page
         *     only (both their ends in it), as in `…/history/recent`; `truncate=1` applies to the
         *     page. `before` alone asks for a page of 100, and makes `leaf` irrelevant (the page's
         *     path is `before`'s); an unknown `before` is `404`. Without `limit` and `before` the
         *     answer is the whole path and has no `nextBefore`.
         *
         *     An empty or unregistered session answers `{"messages": []}`; an unknown `leaf` is `404`.
         */
        get: operations["getHistory"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/history/recent": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * A byte-budgeted recent window of the active path
         * @description The longest suffix of the active path (root → latest leaf) whose stored JSON sizes add
         *     up to at most `maxBytes`, except that the window **always holds the leaf and at least
         *     `minMessages` messages** (both even past the budget; fewer only when the path is
         *     shorter). Sizes are the UTF-8 bytes of each stored message JSON.
         *
         *     Compaction overlays are applied inside the window only (an overlay must start and end
         *     within it), so the answer may hold fewer items than `minMessages`. `truncated` says
         *     whether older messages of the path were left out; `totalContentBytes` is the stored
         *     size of the whole raw path. An empty or unregistered session answers
         *     `{"messages": [], "truncated": false, "totalContentBytes": 0, "nextBefore": null}`.
         *
         *     **Windows further up** (`before`): the window of the path that ends just above
         *     `before` (its parent and that parent's ancestors), with the same rules; `404` when
         *     `before` is not in the session, an empty window when it is a root. `nextBefore` is
         *     the window's oldest stored message when `truncated` (`null` otherwise): pass it as
         *     `before` to read the window above, so a long path can be read back from its leaf
         *     window by window. `totalContentBytes` is then the size of that shorter path.
         */
        get: operations["getRecentHistory"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/leaf": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * The latest leaf
         * @description The session's latest leaf: its most recently inserted message (always childless), as
         *     stored. This is where an append without `parentId` attaches. `404` when the session
         *     has no messages (or is not registered).
         */
        get: operations["getLatestLeaf"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/path-length": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * Number of messages on a path
         * @description The number of messages on the raw path (no overlays) from the root to `leaf` (default:
         *     the latest leaf); `0` for an empty or unregistered session; `404` for an unknown
         *     `leaf`. Capped at 10,001 like the path walk.
         */
        get: operations["getPathLength"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/search": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * Search in one session, by words and (with embeddings) meaning
         * @description Searches the messages of one session (all branches), best match (bm25) first; equal
         *     ranks put the newer message first. Hits have no `sessionId`. With embeddings, fused with the
         *     session's messages nearest by meaning, as the cross-session search. Same syntax, indexing and limits
         *     as the cross-session search: see the `q` parameter. An unregistered session answers
         *     `{"results": []}`.
         */
        get: operations["searchSession"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/compactions": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * List the session's compaction overlays
         * @description Every stored overlay of the session, oldest first (insertion order), including ones
         *     that no longer apply to any path. An unregistered session answers
         *     `{"compactions": []}`.
         */
        get: operations["listCompactions"];
        put?: never;
        /**
         * Store a compaction overlay
         * @description Stores an overlay: `summary` stands for the messages `fromMessageId … toMessageId` of a
         *     path when history is read (see `getHistory`). Nothing is deleted; `raw=1` reads still
         *     show the originals. All three fields are required strings.
         *
         *     `400 invalid_request` when `summary` is blank, when either id is not a message of this
         *     session, or when `fromMessageId` is not `toMessageId` or one of its ancestors (an
         *     overlay that could never apply is refused, not stored). `413 too_large` when `summary`
         *     exceeds 1,800,000 bytes. A newer overlay starting at the same message supersedes an
         *     older one at read time. Moves the session's `updatedAt` to now.
         */
        post: operations["addCompaction"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/compactions/{cid}/messages": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /** @description The overlay's id (as in `GET …/compactions`), or the id of the synthetic message that stands for it (`compaction_<id>`). */
                cid: string;
            };
            cookie?: never;
        };
        /**
         * The original messages behind a summary, paged
         * @description Compaction never deletes anything: this reads the stored messages an overlay stands
         *     for (the path to its `toMessageId`, from its `fromMessageId` on), oldest first, whole
         *     (spilled fields put back). The model reads the same pages through the
         *     `expand_compaction` tool (`docs/tools.md`). `404` for an overlay that is not in this
         *     session; `409 conflict` when a message at its ends was deleted since.
         */
        get: operations["expandCompaction"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/compact": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Summarize the middle of a branch with the configured LLM
         * @description Compacts the path from the root to `leafId` (default: the latest leaf), as the
         *     reference's `Session.compact`:
         *
         *     1. the path is read **with overlays applied** (so an earlier summary is part of it);
         *     2. the first `protectHead` messages (default 3) and a tail of at most
         *        `tailTokenBudget` estimated tokens (default 20000; the newest message always, and
         *        at least `minTailMessages`, default 2) are kept; a tool call and its results are
         *        never split. What lies between is the middle. These knobs come from
         *        `SESSION_CONFIG.compaction`;
         *     3. the configured LLM (`LLM_*`) is asked for a structured summary of the middle
         *        (`## Topic`, `## Key Points`, `## Current State`, `## Open Items`, about 20% of the
         *        middle's tokens, at least 100), updating the branch's previous summary if there is
         *        one;
         *     4. one overlay is stored: from where the branch's oldest visible overlay starts (else
         *        the first message of the middle) to the last message of the middle, so each branch
         *        has one growing overlay. The call's token usage is added to the session's
         *        `inputTokens` / `outputTokens` (this registers the session), and the frozen system
         *        prompt is rendered again (if R2 cannot be read at that moment, the stored prompt is
         *        dropped and the next `GET …/prompt` renders it).
         *
         *     Answers `200 {"compaction": <the stored overlay>}`, or `200 {"compaction": null}` when
         *     there is nothing to compact (an empty or unregistered session, a path no longer than
         *     `protectHead + minTailMessages`, or a tail that reaches the head); then nothing is
         *     stored and no LLM is called.
         *
         *     Nothing is ever deleted: `raw=1` reads still show the originals. `leafId` must be a
         *     string or `null` (`400` otherwise); an unknown `leafId` is `404`. Without an LLM, or
         *     when the model fails or answers a blank or skeleton summary (only the headings or
         *     placeholders of the prompt), the answer is `503` and nothing is stored. Should the path
         *     change while the model is writing so that the range is no longer valid, the overlay is
         *     refused with `409 conflict`.
         *
         *     The session's WebSockets hear it as an automatic compaction: a `status` frame with
         *     `phase: "compacting"`, then `idle` with `compacted: {tokensBefore}` (or
         *     `error: {code, message}`); no frame for an empty session.
         *
         *     Auto-compaction (`SESSION_CONFIG.compaction.after`) runs the same procedure after an
         *     append; see `appendMessage` and `CompactionReport`.
         */
        post: operations["compact"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/context": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * The session's context blocks with their content
         * @description Every block of the session **in prompt order**: the blocks of `SESSION_CONFIG.context`
         *     (minus those removed from this session, or replaced in it by a block added under the
         *     same label), then the `searchableHistory` block if configured, then the blocks added to
         *     this session at run time, oldest first. Each with its current content and token
         *     estimate (see `ContextBlock`).
         *
         *     Writable texts are per session (a block not yet written shows its configured initial
         *     `content`); `search` entries and skills belong to the agent and are the same in every
         *     session. Skills listings and `r2Key` texts are read from R2 on every call (`503` if the
         *     `SKILLS_BUCKET` binding is missing, `500` if R2 fails). A read: it does not register
         *     the session; an unregistered session shows the configured blocks.
         */
        get: operations["listContextBlocks"];
        put?: never;
        /**
         * Add a block to this session (runtime addContext)
         * @description Adds a block to this session only; it goes **last** in prompt order and is stored with
         *     the session, so it survives restarts. The body has the fields of a
         *     `SESSION_CONFIG.context[]` entry (`AddBlockRequest`); unknown fields, fields that do not
         *     belong to the kind, an invalid label, `maxTokens` < 1, both `content` and `r2Key`, or a
         *     `shared` skills prefix overlapping an `agent` one are `400`.
         *
         *     A block added at run time reaches only this agent's own space in `SKILLS_BUCKET`
         *     (`400` otherwise, nothing stored): a `skills` block of scope `agent` uses the prefix of
         *     a configured agent-scoped skills block (or `skills/`, the default, when none is
         *     configured); one of scope `shared` lies under the prefix of a configured shared
         *     library; an `r2Key` names an object under `<prefix><agent>/` of such a prefix, under a
         *     configured shared library, or a key the configuration itself names. Only the
         *     operator's `SESSION_CONFIG` opens a new key space, so no caller of one agent can list,
         *     load or write another agent's skills or spilled messages. Likewise only it makes the
         *     agent read outside: a block of kind `http` or `d1`, or with a `url`, `secret`,
         *     `timeoutMs`, `ops`, `binding`, `query` or `search`, is `400`, nothing stored. (The agent is the one that
         *     is actually served: the Durable Object's own `idFromName` name, after the runtime has
         *     resolved `..` and `%2e%2e` in the path.)
         *
         *     The label must be new in this session (`409 conflict` `Block "<label>" already
         *     exists`, also for the `searchableHistory` label); a configured block that was removed
         *     from this session (`DELETE …/context/{label}`) may be added again under its label,
         *     with the new definition. A writable block's initial `content` must fit its `maxTokens`
         *     (`422 over_budget`).
         *
         *     A `search` block's entries are keyed by its label and shared by all sessions of the
         *     agent; a `skills` block lists what is in R2 under its prefix. Adding a block does
         *     **not** change the frozen prompt (`POST …/prompt/refresh` does), but the tools change
         *     at once. Registers the session. Answers `201` with the block as
         *     `GET …/context/{label}` shows it.
         */
        post: operations["addContextBlock"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/context/{label}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        /**
         * One block with its content
         * @description The block as in `GET …/context`; `404 not_found` (`Block "<label>" not found`) when the session has no such block.
         */
        get: operations["getContextBlock"];
        /**
         * Replace a writable block's text
         * @description Replaces the text of a `writable` block for this session. `content` is required and
         *     must be a string (`400`). `404` when the session has no such block; `409 conflict`
         *     for a block the model may not write (`readonly`, shared `skills`, the
         *     `searchableHistory` block: `Block "<label>" is readonly`) and for keyed blocks
         *     (`search`, agent `skills`: their entries are written with the `set_context` tool);
         *     `422 over_budget` when the text's token estimate is over `maxTokens`.
         *
         *     Does **not** change the frozen prompt (as in the reference: only a refresh, a clear or a
         *     compaction re-render it). Registers the session. Answers the block as now stored.
         */
        put: operations["setContextBlock"];
        post?: never;
        /**
         * Remove a block from this session (runtime removeContext)
         * @description Removes the block from this session only: a block added at run time is deleted, a
         *     configured one is hidden in this session (other sessions keep it). The session's text
         *     of the block and the skills it had loaded from it go too; `search` entries and R2
         *     objects, which the agent's other sessions share, stay. Stored, so it survives
         *     restarts; the label may later be added again (`POST …/context`). Does not change the
         *     frozen prompt. Registers the session. `204`; `404` when the session has no such block.
         */
        delete: operations["removeContextBlock"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/context/{label}/append": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Append to a writable block's text
         * @description Appends `content` to the block's text: a newline goes between the old and the new
         *     text unless the old text is empty or the new one starts with `\n`. The `maxTokens`
         *     budget applies to the whole result (`422`). Same rules and errors as `PUT`; does not
         *     change the frozen prompt; registers the session. Answers the block as now stored.
         */
        post: operations["appendContextBlock"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/context/{label}/entries": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        /**
         * List a search block's entries
         * @description The entries of a `search` block in insertion order, a page at a time. Entries belong to
         *     the agent (every session with a search block of that label sees the same ones). `400`
         *     for a block that is not a search block (the `searchableHistory` block included), `404`
         *     for a label the session does not have.
         */
        get: operations["listSearchEntries"];
        put?: never;
        /**
         * Write many entries of a search block
         * @description Writes 1–1,000 entries in one transaction (all or none; an entry's `content` holds at
         *     most 1,000,000 UTF-8 bytes, `413` otherwise). Each entry's key is `key`, or
         *     the key `set_context` derives from `title` and `content`; an existing key is replaced
         *     (its old text leaves the index). Registers the session; the session's sockets get a
         *     `context` frame. Answers the keys in order.
         */
        post: operations["ingestSearchEntries"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/context/{label}/entries/{key}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
                /**
                 * @description Entry key of a search block, percent-decoded: 1–256 characters without control
                 *     characters (`400` otherwise).
                 * @example deploy
                 */
                key: components["parameters"]["key"];
            };
            cookie?: never;
        };
        /** Read one entry of a search block */
        get: operations["getSearchEntry"];
        put?: never;
        post?: never;
        /**
         * Delete one entry of a search block
         * @description The entry and its index row go; registers the session; a `context` frame follows.
         */
        delete: operations["deleteSearchEntry"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/prompt": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * The session's frozen system prompt
         * @description The system prompt rendered from the session's blocks, byte for byte as the reference
         *     renders it (see `Prompt.prompt`). With `cachedPrompt: true` (the default) it is
         *     **frozen**: the stored copy if there is one (an empty prompt counts), else rendered
         *     now, stored in SQLite and returned (`frozen: true`); it survives restarts. Block writes
         *     (`PUT`/append, `set_context`, adding or removing blocks, new skills or search entries)
         *     never change it, so the prompt stays cache-friendly; only `POST …/prompt/refresh`,
         *     `DELETE …/messages` (clear) and a successful compaction render it again. With
         *     `cachedPrompt: false` it is rendered on every call and not stored (`frozen: false`).
         *
         *     Storing it does not register the session. Rendering reads R2 for skills listings and
         *     `r2Key` blocks (`503` without the `SKILLS_BUCKET` binding, `500` if R2 fails).
         */
        get: operations["getPrompt"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/prompt/refresh": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Render the system prompt again and store it
         * @description Renders the prompt from the blocks as they stand now and, with `cachedPrompt: true`,
         *     stores it as the new frozen prompt (with `cachedPrompt: false` nothing is stored).
         *     Registers the session. No body is read.
         */
        post: operations["refreshPrompt"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/tools": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * The LLM tools of this session
         * @description The tools generated from the session's blocks, in this order: `set_context` if a block
         *     is writable by the model (a `writable` or `search` block, or a `skills` block of scope
         *     `agent`); `load_context` and `unload_context` if there is a `skills` block (either
         *     scope); `search_context` if there is a `search` block (the `searchableHistory` block
         *     included); then `session_search`, always; then, when `SESSION_CONFIG.memory` is set,
         *     `memory_store`, `memory_recall` and `memory_forget`. Descriptions name the blocks and, for
         *     `unload_context`, the skills loaded in this session (`label:key`), so the list changes
         *     with the blocks and the load state. Pass them to the model as they are; the exact texts
         *     are in `docs/tools.md`. Does not read R2 and does not register the session.
         */
        get: operations["listTools"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/tools/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Tool name, percent-decoded. A name the session does not offer (see `GET …/tools`) is
                 *     `404`.
                 */
                name: components["parameters"]["name"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run one tool as the model would
         * @description Runs tool `{name}` of this session with `input` (absent → `{}`) and answers
         *     `{"output": "<string>"}`: exactly the string the model would see, e.g.
         *     `Written to memory. Usage: 0% (5/1100 tokens)`, `Indexed "pirate-style" in skills.`,
         *     a loaded skill's text, or search results.
         *
         *     **HTTP errors** are only for calls that never reach the tool: `404` when the session
         *     does not offer a tool of that name (`no tool named "x" in this session`; e.g.
         *     `load_context` in a session without a skills block); `400` when `input` does not have
         *     the tool's shape (not an object; a required field missing or not a string; `action`
         *     not a string; `set_context`'s `metadata` not an object, or its `title` / `description`
         *     not strings); `500` if the session's blocks cannot be read.
         *
         *     **Everything the model can get wrong is an output**, never an HTTP error: an unknown or
         *     unsuitable label, a readonly block, a budget overrun, a storage or R2 failure inside the
         *     tool all answer `200` with an `Error: …` output, e.g. `Error: Block "soul" is readonly`.
         *     Labels are not checked against the schema's `enum` here: the tool's own error text
         *     answers them. Every output string is listed in `docs/tools.md`.
         *
         *     The memory tools (`memory_store`, `memory_recall`, `memory_forget`; offered only when
         *     `SESSION_CONFIG.memory` is set, `404` otherwise) work on the agent's memories as the
         *     `/memories` routes do, with this session as the source of what `memory_store` stores
         *     (a version `by: "tool"`), and send the same `memory` frames. Their `400`s are inputs of
         *     the wrong shape (`memory_store: input.content must be a string`, `tags` not an array
         *     of strings, `limit` not an integer); a value they refuse (an unknown category, blank
         *     content, a missing memory) is an `Error: …` output.
         *
         *     A `set_context`, `load_context`, `unload_context`, `memory_store` or `memory_forget`
         *     run whose output does not start with `Error: ` registers the session. `set_context`
         *     writes never change the frozen
         *     prompt. `unload_context` also rewrites the stored `load_context` result in history to
         *     `[skill unloaded: <key>]` (see `docs/tools.md`).
         */
        post: operations["runTool"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/mcp": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * The session's tools as an MCP server (Streamable HTTP, JSON-RPC 2.0)
         * @description A [Model Context Protocol](https://modelcontextprotocol.io) server over this session's
         *     tools (exactly those `GET …/tools` lists, memory tools included), so MCP clients (the
         *     official SDKs, desktop and IDE agents) connect with the URL and a bearer token. One
         *     JSON-RPC message per request, answered as `application/json`; stateless (no
         *     `Mcp-Session-Id`).
         *
         *     - `initialize`: `{protocolVersion, capabilities: {tools: {listChanged: false}},
         *       serverInfo: {name: "session-agent", version}, instructions}`; the version is the
         *       client's when it is one of `2025-11-25`, `2025-06-18`, `2025-03-26`, `2024-11-05`,
         *       else `2025-11-25`.
         *     - `ping`: `{}`. `tools/list`: `{tools: [{name, description, inputSchema}]}`.
         *     - `tools/call {name, arguments}`: runs the tool as `POST …/tools/{name}` does and
         *       answers `{content: [{type: "text", text: <output>}], isError}`; `isError` is true
         *       when the output is the tool's `Error: …`. An unknown tool or arguments of the wrong
         *       shape are the JSON-RPC error `-32602`.
         *     - Another method: `-32601`. A notification (no `id`, e.g. `notifications/initialized`):
         *       `202` with no body. A body that is not one JSON-RPC 2.0 object (not JSON, a batch,
         *       `jsonrpc` not `"2.0"`, no string `method`, `params` not an object, `id` neither a
         *       string nor an integer)
         *       is `400 invalid_request` with the API's error body, as on every route.
         *
         *     A scoped token of scope `read` may `initialize`, `ping` and `tools/list`; its
         *     `tools/call` is `403 forbidden` (an HTTP error, as everywhere). A token limited to
         *     other sessions is `403`.
         */
        post: operations["mcp"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/chat": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run one agent turn
         * @description Runs one **agent turn** on the configured model (`LLM_*`) and stores **one** assistant
         *     message. Three forms of body (`ChatRequest`):
         *
         *     - **A new turn**: `{message, parentId?, tools?, memory?}`. `message` is a new
         *       `UIMessage` with
         *       `role: "user"` (the id may not start with `compaction_`); `parentId` attaches it as
         *       for `POST …/messages` (absent → child of the latest leaf, `null` → a new root, a
         *       string → child of that message, `404` when it is not in the session). Unlike an
         *       append, an id that is **already in the session is `409 conflict`** (a turn is never
         *       silently skipped), unless it is a user message with no reply but stopped ones (or
         *       none, as a stop before the first piece leaves it): that message is answered again,
         *       the new reply a sibling of the stopped one (`parentId` is then ignored). To
         *       regenerate a reply, send the question again with a new id (a sibling branch), or
         *       continue from the user message (below).
         *     - **A continuation** after client-side tools: `{messages, tools?, memory?}`, the
         *       branch sent back with the pending tool calls answered (see *Client tools*).
         *       `parentId` is ignored.
         *     - **The AI SDK's `useChat` body**: `{id?, messages, trigger, messageId?, tools?,
         *       memory?}`, answered with the AI SDK's **UI message stream**, so `useChat` (or any
         *       `AbstractChat`) with `new DefaultChatTransport({api: ".../chat", headers})` works
         *       unchanged (see *The AI SDK's useChat*).
         *
         *     Giving both `message` and `messages`, or neither, is `400`. `memory` (optional
         *     boolean): `false` skips memory injection and extraction for this turn; `true` or
         *     absent uses them as `SESSION_CONFIG.memory` says (see *Long-term memory*); any other
         *     value is `400`.
         *
         *     **What the model is sent** (each call of the turn):
         *     - the session's **frozen system prompt** (`GET …/prompt`; if none is stored yet it is
         *       rendered now and stored with the turn's writes, only if the turn succeeds; with
         *       `cachedPrompt: false` it is rendered for every turn);
         *     - with memory injection on, the turn's `<user-memory>` block (see *Long-term memory*),
         *       as a system text of its own after the frozen prompt (OpenAI-compatible and Workers
         *       AI: a second system message; Anthropic: a second system block, outside the cached
         *       one), so the frozen prompt and the provider's prompt cache stay as they are;
         *     - the **branch** (root → the new user message, or the continuation's messages), with
         *       compaction overlays applied, then shrunk for the model only (nothing stored
         *       changes): in all but the newest 4 messages a tool output longer than 500 characters
         *       of JSON and a text longer than 10,000 characters are truncated; `reasoning` parts,
         *       `system` messages and user messages without text (files only) are left out; a
         *       multi-step assistant message is split into its steps (text and calls, then the
         *       results); dangling tool calls (no result, e.g. a pending client call) and orphan
         *       results are dropped; then at most `SESSION_CONFIG.chat.maxMessages` (default 50)
         *       messages are kept, never separating a tool call from its results: on a compacted
         *       branch everything up to and including the last compaction summary (the protected
         *       head and the summary) is always kept and the newest messages after it fill the rest
         *       (at least the last exchange); without a summary, the newest. When the cap leaves
         *       messages out and `SESSION_CONFIG.compaction` is set, the turn compacts the branch
         *       once the answer is sent (as an auto-compaction, with its `status` frames), so the
         *       next turn sees what was left out in a summary;
         *     - the **tools**: the session's tools as `GET …/tools` lists them (`docs/tools.md`),
         *       then the caller's `tools` in order;
         *     - `max_tokens` = `chat.maxTokens` (default 4096).
         *
         *     Providers: `openai` (any OpenAI-compatible `/chat/completions`, streamed with
         *     `stream_options.include_usage`; `prompt_cache_key` = the session id, so a session's
         *     calls share the provider's prompt cache), `anthropic` (Messages API, streamed;
         *     `cache_control: {type: "ephemeral"}` on the system prompt and on the last tool, which
         *     caches the prompt and the whole tool list; input tokens counted include cache reads
         *     and writes), `workers-ai` (binding `AI`, streamed with `stream: true`; the tools are
         *     offered to the models Workers AI documents as calling functions, or as `LLM_TOOLS`
         *     says: `auto` (default), `on`, `off`, and tool results go back as `role: "tool"`
         *     messages; any other model gets **text only**: no tools are offered and earlier tool
         *     results are sent as user text `Tool <name> returned: <output>`). Reasoning is kept when the provider sends it separately
         *     (`reasoning_content` / `reasoning` of OpenAI-compatible servers, Anthropic
         *     `thinking`). Each call is bounded by `LLM_TIMEOUT_MS` (default 60 s).
         *
         *     **The loop.** When the model calls **server tools** (the session's), they run at once
         *     (as `POST …/tools/{name}` would run them) and the model is called again with the
         *     results, up to `chat.maxSteps` calls (default 8); a turn whose model is still calling
         *     tools at that point ends there, its message ending with those tool parts. A call of a
         *     tool that neither side offers becomes an `output-error` part
         *     (`Error: there is no tool named "x"`) and the model is told so. A call of a **client
         *     tool** (one of `tools`) ends the turn after that step (see below). A model answer with
         *     neither text (other than white space) nor a tool call fails the turn
         *     (`503 llm_unavailable`).
         *
         *     **The stored assistant message** (`AssistantMessage`): `{id, role: "assistant",
         *     parts, createdAt, metadata: {model, usage: {inputTokens, outputTokens, cachedInputTokens?}, memories?}}`:
         *     a new UUID v4 id, the server's time, `LLM_MODEL`, the tokens of **all** the turn's
         *     model calls (`cachedInputTokens`: of the input, what the provider read from its prompt
         *     cache, when it read any; see `ChatCache`) and, when memory injection ran, the ids of the memories given to the model
         *     (`metadata.memories`, see *Long-term memory*). `parts` holds each step in order: its
         *     `reasoning` and `text` parts in the order they streamed (normally one of each, reasoning
         *     first; empty ones left out), then one `dynamic-tool` part per call with `toolName`, `toolCallId`,
         *     `input` and `state` `output-available` (a server tool ran; `output` is its string
         *     output, `Error: …` included), `output-error` (unknown tool; `errorText`) or
         *     `input-available` (a client tool call waiting for the caller). The message is a child
         *     of the new user message (new turn) or of the continuation's last message (a `useChat`
         *     continuation extends that message instead).
         *
         *     **Stop keeps what was shown.** A turn is stopped by the client that started it
         *     going away (a streamed request aborted: `useChat`'s `stop()`, a closed tab, a dropped
         *     connection) while `SESSION_CONFIG.chat.onDisconnect` is `"stop"` (the default), by
         *     the WebSocket `cancel` frame, or by `POST …/chat/stop` (a JSON request runs until
         *     the model is done unless stopped by the route). A stopped turn ends its model call
         *     at once (the connection is closed) and stores, in one transaction, the user message
         *     and the reply as far as it streamed under the id `start` announced (text and
         *     reasoning as streamed, finished tool calls with their results; a client tool's
         *     call that waits is dropped), with `metadata.stopped: true` and the usage the
         *     provider reported, or an estimate; no extraction. A stop before the first piece
         *     stores the user message alone (the JSON answer's `messages` is then empty; the
         *     stream ends with `[DONE]`, or `abort` in the UI message stream). The client may hold
         *     less than was stored: in its next request, a stopped reply whose parts are a prefix
         *     of the stored ones (the last text or reasoning part may be shorter) is accepted and
         *     the stored copy is cut back to it; an empty assistant message stands for none. The
         *     same user message sent again (same id) while its only replies are stopped ones is
         *     answered again, the new reply a sibling of the stopped one. With
         *     `chat.onDisconnect: "finish"` a turn whose client went away runs to its end and is
         *     stored whole (follow it with `GET …/chat/{chatId}/stream`); in that mode the user
         *     message is stored when the turn starts, and a turn that then fails leaves it without
         *     a reply.
         *
         *     **A failure changes nothing.** Nothing is written until the model is done. Then one transaction
         *     stores the user message (or the continuation's answered messages), the assistant
         *     message, the usage (added to the session's `inputTokens` / `outputTokens`; this
         *     registers the session and moves `updatedAt`) and, if needed, the frozen prompt. A
         *     provider failure, a tool that cannot run (the session's blocks cannot be read:
         *     `500 internal`), or any other error leaves
         *     the history, the session's usage and the frozen prompt exactly as they were (an
         *     unregistered session stays unregistered). **What a
         *     server tool already did stays done**: a `set_context` write, a skill loaded or
         *     unloaded, a memory stored or forgotten by a memory tool in a step that ran before the
         *     failure is not rolled back (those tools write as they run, as over
         *     `POST …/tools/{name}`). The same request can be retried as is:
         *     the user message was not stored, so its id is still free (the model may of course call
         *     the same tools again).
         *
         *     A server-tool call whose `input` does not have the tool's shape (a required field
         *     missing or not a string, `set_context.metadata` not an object…) is answered to the
         *     model as an `Error: …` output (`Error: <tool>: input.<field> must be a string`), as
         *     other tool mistakes are; only storage failures fail the turn.
         *
         *     **After the write**, every WebSocket of the session gets a `message` frame per stored
         *     message (the user message or the answered messages, then the reply). **Once the answer
         *     is sent** (the JSON answer, or the stream's last event), and never before it:
         *     unreferenced spilled objects are swept, auto-compaction runs as after an append
         *     (`SESSION_CONFIG.compaction.after`, with the reply as the leaf; its report is not part
         *     of this answer but reaches the session's sockets as `compacting` / `idle` `status`
         *     frames), then memory extraction. While the model writes, every socket of the
         *     session also gets `delta` frames (also for a turn that later fails, which then sends
         *     no `message` frame).
         *
         *     ## Long-term memory
         *
         *     With `SESSION_CONFIG.memory` set, a **new turn** (not a continuation) uses the agent's
         *     memories, unless the body says `memory: false`; a memory spec in the body (`memory:
         *     {inject?, extract?, tags?, categories?, limit?}`, `ChatMemorySpec`) overrides the
         *     configuration for this turn, and may turn inject or extract on for an agent without
         *     them:
         *     - **inject** (unless `memory.inject` is off): the memories recalled for the text of
         *       the user message (ranked as by `GET /memories/search`; only the configured
         *       `inject.categories` within the agent's `memory.categories`, with `memory.tags` only
         *       those holding one of its tags, and of the `conversation` memories only this
         *       session's; at most `inject.limit`) are sent to the model as a fenced block
         *       `<user-memory>…</user-memory>`, one `- <content>` line each after a short preamble,
         *       within `inject.tokenBudget` estimated tokens (over it, the memory with the lowest
         *       `score` is left out first, an unknown score counting lowest). Nothing is sent when
         *       nothing is recalled or not even one memory fits. The reply's `metadata.memories` lists the ids of the memories
         *       sent (an empty array when none), and their `recallCount` and `recalledAt` move with
         *       the turn's transaction (a failed turn counts nothing). Without injection (off, a
         *       continuation, `memory: false`) the reply has no `metadata.memories`;
         *     - **extract** (unless `memory.extract` is off): once the answer is sent (the JSON
         *       answer, the SSE stream's last event, or the `message` frames of a WebSocket `chat`),
         *       facts are distilled from the turn's exchange as by `POST …/memories/extract` with
         *       the reply as `leafId`, each stored fact given the scope's tags (`memory.tags`, or
         *       the call's `tags`) besides its own. It never delays or fails the turn: a failure is only logged;
         *       what it changes reaches every socket of the agent as `memory` frames.
         *
         *     The memory tools (`memory_store`, `memory_recall`, `memory_forget`) are offered
         *     whenever `SESSION_CONFIG.memory` is set, whatever `memory` says.
         *
         *     ## Client tools
         *
         *     Tools in `tools` (`ClientTool`: `name`, `description?`, `inputSchema?`) are offered to
         *     the model but run by the caller. When the model calls one, the turn stops after that
         *     step (server tools called in the same step have run) and the stored reply holds the
         *     call as a `dynamic-tool` part with `state: "input-available"` and its `input`. To
         *     continue, send `{messages, tools}` where `messages` is the branch **exactly as
         *     `GET …/history?leaf=<reply id>` answers it** (root → the reply, overlays applied)
         *     with each pending part changed to `state: "output-available"` plus `output` (any
         *     JSON; the model reads a string as is, anything else as JSON text) or to
         *     `state: "output-error"` plus a string `errorText`. Send `tools` again if the model may
         *     call them again. The answered messages are stored as sent (replacing the stored ones,
         *     as `PUT …/messages/{mid}` would) in the same transaction as the new reply, which
         *     becomes a child of the last message of `messages`. Parts in `approval-requested`
         *     state (stored by a client) may likewise come back `approval-responded`, with a
         *     boolean `approval.approved` (and optionally `approval.reason`) under the same
         *     `approval.id`.
         *
         *     (The `useChat` body continues the same way but inside the same assistant message; see
         *     *The AI SDK's useChat*.)
         *
         *     The continuation is checked against what is stored before anything else happens
         *     (the model is not called, nothing changes), and the first problem wins:
         *     - the last message's `id` must be in this session, and `messages` must have the
         *       stored branch's length and order; otherwise `409 not_a_prefix`;
         *     - each message must equal its stored counterpart (objects compare regardless of key
         *       order, numbers by value), except for pending tool parts filled in as above: only
         *       `state` and `output` / `errorText` may change; any other difference is
         *       `409 not_a_prefix`;
         *     - a result for a call that was not waiting for the client (it already has a result,
         *       it is not in the stored message, or it is a **server tool's** call) is
         *       `409 forged_tool_result`;
         *     - an `approval-responded` part where no `approval-requested` part with that
         *       `approval.id` is stored is `409 forged_approval`.
         *
         *     The error message names the code, the message index and the part, e.g.
         *     `not_a_prefix at message 0: message 0 (u1): part 0 differs from the stored message`.
         *     A continuation that answers nothing is allowed: the model is simply called again on
         *     that branch (pending calls are left out of what it sees), which also regenerates the
         *     reply to a user message when the branch ends there.
         *
         *     ## The AI SDK's useChat
         *
         *     A body with `trigger` is the AI SDK's chat request. `messages` is the branch as the
         *     client holds it (the history it loaded from `GET …/history`, plus what it streamed),
         *     and its last message says what to do:
         *     - a **new user message** (its id is not in the session; `trigger: "submit-message"`):
         *       it is stored with the reply, all or nothing, as a child of the message before it in
         *       `messages` (a new root when it is the only one);
         *     - a **stored user message**: the reply is one more answer under it. This is
         *       `trigger: "regenerate-message"` (the AI SDK drops the assistant message it
         *       regenerates and sends the branch up to the user message; its `messageId` is not
         *       needed): the new assistant message is a **sibling** of the old one, and
         *       `GET …/messages/{userId}/branches` lists both;
         *     - a **stored assistant message** with client tool results filled in
         *       (`submit-message`, as `useChat` sends after `addToolOutput`, e.g. with
         *       `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls`): the reply
         *       **extends that same message**: its new parts are appended to the stored ones, the
         *       stream's `start` carries its id (so `useChat` merges the chunks into the message it
         *       shows), its `createdAt` stays, and `metadata.usage` adds up the turns.
         *
         *     Everything before that must be the stored branch, compared as the AI SDK holds
         *     messages: `createdAt` and `metadata`, `step-start` parts, the `state`, `id` and
         *     `providerMetadata` of text and reasoning parts, and the `providerExecuted`, `title`,
         *     `preliminary` and provider metadata of tool parts are not differences; pending client
         *     tool calls may come back answered (and are stored so), as under *Client tools*. Any
         *     other difference is `409 not_a_prefix` (or `forged_tool_result` /
         *     `forged_approval`): **an edit of an earlier message**, which `useChat` sends with the
         *     same message id and new text, is refused; edit by sending a new message (new id)
         *     after the edited one's parent. The model always reads the stored messages, never the
         *     client's copies. `id` (the chat id) and `messageId` are not used; `regenerate-message`
         *     ending with anything but a stored user message is `400`.
         *
         *     The answer is `200 text/event-stream` with the header
         *     `x-vercel-ai-ui-message-stream: v1` (the `Accept` header does not matter), one chunk
         *     per `data:` line:
         *     1. `{"type":"start","messageId":"<id the reply is stored under>"}`;
         *     2. per model call: `{"type":"start-step"}`; `reasoning-start` / `reasoning-delta` /
         *        `reasoning-end` and `text-start` / `text-delta` / `text-end` (each with an `id`)
         *        in the order the model streams them; per tool call
         *        `{"type":"tool-input-available","toolCallId","toolName","input","dynamic":true}`,
         *        with `"providerExecuted":true` for tools the server answers (the session's, and
         *        unknown ones), followed by their `tool-output-available` (`output`) or
         *        `tool-output-error` (`errorText`); a client tool's call has no
         *        `providerExecuted`, so `useChat` hands it to `onToolCall`; then
         *        `{"type":"finish-step"}`;
         *     3. `{"type":"finish","finishReason":"stop" | "tool-calls","messageMetadata":{model,
         *        usage, memories?}}` once the reply is stored (`tool-calls` while a client tool call
         *        waits), the stored message's `metadata`;
         *     4. `data: [DONE]`.
         *
         *     The parts the client builds from these chunks are the stored message's parts. Chunks
         *     carry no field beyond the AI SDK's. An error **after** `start` (the model failing, say)
         *     is `{"type":"error","errorText":"<code>: <message>"}` and then `[DONE]`; nothing was
         *     stored. An error before it (bad body, `409 not_a_prefix`, no model configured…) is an
         *     ordinary JSON error answer with its status, which `DefaultChatTransport` raises as the
         *     chat's error. A client that aborts (`stop()`) stores nothing.
         *
         *     ## Server-sent events
         *
         *     With a request header `Accept` containing `text/event-stream`, the answer is
         *     `200 text/event-stream` instead of `201` JSON, and events are written as they happen.
         *     Each event is a single `data: <JSON>` line followed by a blank line (no `event:` or
         *     `id:` fields):
         *
         *     1. `data: {"type":"delta","messageId":"<reply id>","text":"…"}`: the next piece of
         *        the reply's text, as the provider streams it, across all steps (reasoning is not
         *        streamed). There may be none (a reply made only of tool calls);
         *     2. `data: {"type":"message","message":{…}}`: the stored assistant message, once it
         *        is written (the same `message` as the JSON answer);
         *     3. `data: [DONE]`.
         *
         *     An error **before the first event** is an ordinary JSON error answer with its status
         *     (`400`, `404`, `409`, `503`, …), exactly as without the header; that includes a model
         *     failure in a turn that had not produced any text yet. An error **after** the stream
         *     started is sent as `data: {"type":"error","code":"<error code>","message":"…"}` and the
         *     stream ends without `[DONE]`; nothing was stored. If the client goes away, the turn
         *     stops at the next event it cannot deliver and stores nothing; a client that leaves
         *     after the last `delta` may still find the reply stored.
         */
        post: operations["chat"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/chat/stop": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Stop the session's running turn
         * @description Stops the session's running turn (every one, if two run): it ends its model call at
         *     once and is stored as far as it streamed, `metadata.stopped: true` (see *Stop keeps
         *     what was shown* under `POST …/chat`). The way to stop a turn with
         *     `chat.onDisconnect: "finish"`, where the client going away does not. No body (a body
         *     that is not a JSON object is `400`).
         */
        post: operations["stopChat"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/chat/{chatId}/stream": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /** @description The chat's id as the AI SDK's client holds it (percent-encoded; not checked, as long as it decodes as UTF-8). */
                chatId: components["parameters"]["chatId"];
            };
            cookie?: never;
        };
        /**
         * Follow the session's running turn (the AI SDK's resume request)
         * @description The request `useChat({resume: true})` sends after a reload (`DefaultChatTransport`:
         *     `GET {api}/{chatId}/stream`). `{chatId}` is not checked (the client may have made a
         *     new one). When a turn of the session is running: `200`, the AI SDK's UI message
         *     stream of that turn, replayed from its `start` (text and reasoning pieces merged) and
         *     then followed live to `[DONE]`; it ends with `finish` (stored), `abort` (stopped) or
         *     `error` (failed). Several readers each get every chunk once; a reader going away
         *     never stops the turn. A running turn keeps at most 4 MiB of events for its readers;
         *     past that it is no longer replayed (`204`), and the readers it has go on live.
         *     `204` when no turn runs (or the session does not exist). Running turns live in the
         *     Durable Object's memory: a turn is followed on the object that runs it.
         */
        get: operations["resumeChat"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/chat": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run one agent turn in the default (or named) session
         * @description `POST …/sessions/{sid}/chat` for a session named by the body: `sessionId` (or
         *     `session_id`, as webhooks send it), else the `useChat` body's `id`, else `dashboard`.
         *     The session is registered (named after its id) by the turn's first write. A token
         *     limited to some sessions must open that session (`403` otherwise). Everything else,
         *     bodies and answers, is the session route's; its resume request is
         *     `GET …/chat/{chatId}/stream`.
         */
        post: operations["chatDefaultSession"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/chat/{chatId}/stream": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /** @description The chat's id, which is the session's (percent-encoded). */
                chatId: components["parameters"]["chatSession"];
            };
            cookie?: never;
        };
        /**
         * Follow the running turn of session `{chatId}` (the resume request of `POST …/chat`)
         * @description `GET …/sessions/{chatId}/chat/{chatId}/stream`: here `{chatId}` is the session (an
         *     invalid session id is `400`; a token limited to some sessions must open it).
         */
        get: operations["resumeDefaultChat"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/ws": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * Open the session's WebSocket
         * @description Upgrades to a WebSocket bound to session `{sid}` (`Upgrade: websocket`). A `GET`
         *     without the upgrade is `400 invalid_request` (`expected a WebSocket upgrade
         *     (Upgrade: websocket)`); a request with `Upgrade: websocket` that is not an actual
         *     handshake (a body, no `Sec-WebSocket-Key` / `Sec-WebSocket-Version`: for example a
         *     `POST`, which workerd would show the Worker as a `GET`) is `405`. Authentication as for every route, or with `?token=` (see the
         *     `token` parameter). OpenAPI cannot describe WebSocket messages, so the frames are
         *     described here; their JSON shapes are the schemas `ClientFrame` and `ServerFrame`.
         *
         *     A scoped token opens the socket only if it opens the session (`403` otherwise, `401`
         *     if it expired or was revoked); a `read` token may open it too. The DO accepts the
         *     socket with the **hibernation API**, tagged with the session id and with what the
         *     token allows (its scope, issue and expiry times, and whether it is limited to
         *     sessions): the object may be evicted from memory while sockets stay open, and is woken
         *     for the next frame. **Every frame is checked as the request it stands for would be**:
         *     with a `read` token only `history` and `ping` pass, `append` and `chat` are answered
         *     with a `forbidden` `error` frame; once the token has expired, the client's frames are
         *     answered with `unauthorized` `error` frames (`ping` excepted), and the socket is
         *     closed with code `1008` (reason `token expired`) the first time the server would push
         *     a frame to it (`message`, `delta`, `status`, `memory`, …). When the agent revokes its
         *     tokens (`POST …/tokens/revoke`, or an erase: `DELETE /agents/{agent}`), every socket
         *     opened with a revoked token is closed at once with code `1008` (reason
         *     `token revoked`). Sockets opened with the admin token or through a binding are never
         *     closed this way. Over `RATE_LIMIT`, a frame is answered with a `rate_limited` `error`
         *     frame.
         *
         *     A close from the client is answered with close code `1000`. The server sends no pings
         *     of its own; send `ping` frames to keep an idle connection alive (the console does
         *     every 30 s).
         *
         *     ### Client → server (text frames, one JSON object each)
         *
         *     Each frame stands for the HTTP request named; the frame's fields other than `type`
         *     are that request's body, so it does exactly what the route does (validation, errors,
         *     registration, auto-compaction).
         *     - `{"type":"append", "message": {…}, "parentId"?: …}` = `POST …/messages`. Nothing
         *       comes back to the sender on success: the stored message reaches every socket of
         *       the session (the sender's included) as a `message` frame. A duplicate id or a
         *       synthetic `compaction_…` message stores nothing and sends nothing.
         *     - `{"type":"history", "leafId"?: "<id>" | null}` = `GET …/history?leaf=<leafId>`
         *       (overlays applied; absent or `null`: the latest leaf). Answered with a `history`
         *       frame. A `leafId` that is not a string or `null` is an `error` frame.
         *     - `{"type":"chat", "message": {…}, "parentId"?: …, "tools"?: […], "memory"?: false}`,
         *       or `{"type":"chat", "messages": […], "tools"?: […]}` to continue after client tools
         *       = `POST …/chat` (JSON form; see `chat`). Nothing comes back to the sender on
         *       success: the `delta` frames, then the `message` frames of the stored messages,
         *       reach every socket of the session. A failed turn is an `error` frame to the sender
         *       (with the route's code: `conflict`, `not_a_prefix`, `forged_tool_result`,
         *       `forged_approval`, `llm_unavailable`, …).
         *     - `{"type":"cancel"}`: stops the turn this socket's `chat` frame is running, at once
         *       (its model call ends): it keeps what was shown, stored as far as it streamed with
         *       `metadata.stopped` (see `chat`), so its `message` frames and then `idle` follow; no
         *       error frame. Nothing comes back to the `cancel` frame itself; with no turn running it
         *       does nothing. Other sockets' turns are not affected.
         *     - `{"type":"ping"}`: answered with `{"type":"pong"}`.
         *
         *     A text frame over 16 MiB (16,777,216 bytes) is answered with a `too_large` `error`
         *     frame and the socket stays open; send bigger messages over HTTP (bodies up to 32 MiB).
         *     Over 32 MiB the runtime itself closes the socket (code `1009`) before the object sees
         *     the frame.
         *
         *     ### Server → the sending socket only
         *     - `{"type":"history", "sessionId", "messages": [UIMessage…]}`: the answer to `history`.
         *     - `{"type":"pong"}` (no `sessionId`): the answer to `ping`.
         *     - `{"type":"message", "sessionId", "message", "pending": true}`: the user message of
         *       this socket's `chat` frame, echoed at once, before the turn runs (not sent for a
         *       `messages` continuation, nor with a `read` token). It is stored with the reply, all or
         *       nothing: the turn's `message` frames follow (without `pending`), or an `error` frame
         *       says it failed and nothing was stored.
         *     - `{"type":"error", "sessionId", "code", "message"}`: the frame failed. `code` and
         *       `message` are those of the error answer the HTTP route would give (e.g.
         *       `invalid_request`, `not_found`, `conflict`, `too_large`, `not_a_prefix`,
         *       `llm_unavailable`; `forbidden`, `unauthorized` or `rate_limited` as above). A frame
         *       that is not a JSON object with a `type`, an unknown
         *       `type` (`unknown frame type "x": one of append, history, chat, cancel, ping`) and a binary
         *       frame (`frames must be text (JSON)`) are `invalid_request`. **The socket stays
         *       open** after any error.
         *
         *     ### Server → every socket of the session
         *     Whether the change came over HTTP, over a WebSocket (any socket of the session) or
         *     from a Worker calling the DO stub:
         *     - `{"type":"message", "sessionId", "message": UIMessage}`: a message was stored: an
         *       append, each message a batch inserted, and for an agent turn the user message (or
         *       the answered messages of a continuation, same ids, now with results) and then the
         *       reply, all sent once the turn's transaction is written; an update
         *       (`PUT …/messages/{mid}`) sends the new version.
         *     - `{"type":"deleted", "sessionId", "ids": [mid]}`: a message was deleted
         *       (`DELETE …/messages/{mid}`; its children stay, as roots).
         *     - `{"type":"cleared", "sessionId"}`: the session's messages and compactions are gone
         *       (`DELETE …/messages`, or `DELETE /sessions/{sid}`).
         *     - `{"type":"context", "sessionId", "label"}`: a context block of the session changed:
         *       `PUT`, `…/append`, `POST …/context` (added), `DELETE …/context/{label}` (removed),
         *       and every tool run that stored something for the block (`set_context`,
         *       `load_context`, `unload_context`; over HTTP or inside a turn). An `unload_context`
         *       that rewrote the stored output of the skill's `load_context` call also sends that
         *       message as a `message` frame, then an `idle` status.
         *     - `{"type":"delta", "sessionId", "messageId", "text"}`: the next piece of the text of
         *       a turn's reply being written, `messageId` being the id the reply will have. Sent
         *       while the model writes, so **before** the turn's `message` frames (and for a turn
         *       that then fails, with no `message` frame after it).
         *     - `{"type":"tool", "sessionId", "messageId", "toolCallId", "toolName", "state",
         *       "input", "output"? | "errorText"?}`: a tool call of a turn's reply as it happens:
         *       `state: "input-available"` when the model made the call, then `"output-available"`
         *       with the server tool's `output` (or `"output-error"` with `errorText` for a tool
         *       that does not exist). A client tool's call stays `input-available` (the caller
         *       answers it). Sent before the turn's `message` frames; the stored reply holds the
         *       same calls as its tool parts.
         *     - `{"type":"reasoning", "sessionId", "messageId", "text"}`: the model's reasoning of
         *       one step of the reply, when the model gives any, once the step is complete.
         *     - `{"type":"status", "sessionId", "phase", "tokenEstimate", "tokenThreshold",
         *       "compacted"?, "error"?}`, as the reference's status frames: after every append, batch,
         *       turn, update, delete and clear, `phase: "idle"` with the token estimate of the latest
         *       leaf's branch (messages with overlays applied, plus the system prompt; the prompt
         *       alone for an empty session) and `tokenThreshold` = `SESSION_CONFIG.compaction.after`
         *       (null without one). Around every compaction, automatic (the estimate passed the
         *       threshold, or a turn's message cap left messages out) or manual
         *       (`POST …/compact`): `phase: "compacting"` first, then `idle` with the new estimate
         *       and `compacted: {tokensBefore}`, or with `error: {code, message}` if it failed. No
         *       frame when the estimate itself cannot be computed (the HTTP answer's `compaction`
         *       report still says so).
         *
         *     ### Server → every socket of the agent not limited to sessions
         *     Sockets opened with the admin token, through a binding, or with a scoped token without
         *     `sessions` (whatever its scope); a socket whose token is limited to sessions never
         *     gets them.
         *     - `{"type":"memory", "op": "created" | "updated" | "deleted", "memory": Memory}` (no
         *       `sessionId`): a long-term memory changed, whoever changed it: `POST /memories`
         *       (`created`, or `updated` when it merged into a duplicate), `PATCH /memories/{memory}`
         *       (`updated`), `DELETE /memories/{memory}` and `DELETE /memories` (`deleted`, one frame
         *       per memory), the memory tools, extraction (`POST …/memories/extract` and after a
         *       turn), and `DELETE /sessions/{sid}` (`deleted`, for each of its `conversation`
         *       memories). `memory` is the memory as it is now (for `deleted`: as it was). A memory
         *       that expires disappears without a frame.
         *
         *     Frames go only to the sockets of the same session of the same agent, except `memory`
         *     frames, which go to every socket of the agent whose token is not limited to sessions,
         *     whatever its session.
         */
        get: operations["sessionSocket"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/memories": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        /**
         * List the agent's memories, newest first
         * @description The agent's live memories (expired ones are never returned), newest `createdAt` first
         *     (ties: the later stored first), one page at a time. The filters combine (see
         *     **Metadata and filters**): `category` (one or a comma list), `tag` (every one),
         *     `anyTag` (at least one), `createdAfter`, `createdBefore`, `updatedAfter`,
         *     `updatedBefore`, `metadata.<key>=<value>` and `sessionId` (memories whose
         *     `source.sessionId` is that session); a bad filter is `400`. Listing does not count as
         *     a recall (`recallCount` stays). An agent without memories answers
         *     `{"memories": [], "nextCursor": null}`.
         *
         *     Pages: `limit` memories (1–100, default 50); when there are more, `nextCursor` is the
         *     `cursor` of the next page (with the same filters), else `null`. A `cursor` this API
         *     did not give out is `400`. Memories stored after the first page was read do not appear
         *     on later pages.
         */
        get: operations["listMemories"];
        put?: never;
        /**
         * Store a memory
         * @description Stores one fact about the user (`CreateMemoryRequest`; unknown fields are `400`):
         *
         *     - `content` (required): 1–4,000 characters, not blank; stored as given.
         *     - `category`: `core` (the default: permanent), `daily` (expires: at `expiresAt`, else
         *       `SESSION_CONFIG.memory.dailyTtlDays` days from now, default 7) or `conversation`
         *       (belongs to the session `sessionId`, which it then requires, and is deleted with it).
         *     - `tags`: at most 16 strings of 1–64 characters once trimmed, without control
         *       characters; stored trimmed, duplicates dropped.
         *     - `metadata`: the caller's own facts about the memory (`Metadata`, see **Metadata and
         *       filters**); absent or `null`: `{}`.
         *     - `score`: the confidence that the fact is true and lasting, a number from 0 to 1;
         *       absent or `null`: unknown (recall then counts it as 0.5).
         *     - `sessionId`, `messageId`: where the fact came from (`source`); a `messageId` needs a
         *       `sessionId`. Syntax-checked only (the session id as in paths, the message id as
         *       message ids are): neither has to exist. A `conversation` memory registers its session
         *       (`name = id`, as any write into a session does, and as the `memory_store` tool does),
         *       so that deleting that session deletes the memory; for the other categories the source
         *       registers nothing.
         *     - `expiresAt`: an ISO-8601 UTC timestamp (`Z` or `+00:00`) **in the future** (`400`
         *       otherwise), stored with milliseconds. Absent or `null`: never (`daily`: the default
         *       lifetime above). An expired memory is never returned again and is deleted by the
         *       next write to the agent's memories.
         *
         *     **Duplicates merge.** When a live memory of the same category (and, for a
         *     `conversation` memory, of the same session) has the same text once
         *     both are trimmed, with runs of white space collapsed to one space and case ignored,
         *     nothing new is stored: the request's tags are added to that memory's (at most 16 kept),
         *     the request's `metadata` keys are set over that memory's (more than 16 keys in all is
         *     `400`), the higher `score` is kept (a known one over an unknown one), the request's `expiresAt`
         *     replaces the stored one if given, a version is recorded, and the answer is `200` with
         *     that memory (its `id`, `content`, `category` and `source` unchanged). Otherwise the
         *     answer is `201` with the new memory, whose first version is its creation.
         *
         *     `422 over_budget` when the agent already holds `SESSION_CONFIG.memory.maxMemories`
         *     memories (default 10,000): forget some first (a merge is always possible). With
         *     embeddings configured (`EMBEDDINGS_*`), the memory is embedded after the answer is
         *     sent (`embeddedAt` is `null` in the answer and set once its vector exists); if that
         *     fails it is kept and embedded after a later write or a restart (recall finds it by its text
         *     meanwhile). Every socket of the agent gets a `memory` frame (`created`, or `updated`
         *     for a merge).
         */
        post: operations["createMemory"];
        /**
         * Forget every memory a filter selects (forgetAll)
         * @description Deletes, in one transaction, every live memory that the filters select, with its
         *     versions and vector, and answers how many (`{"deleted": 0}` when none; expired memories
         *     are purged too but not counted). The filters are those of `GET /memories` (see
         *     **Metadata and filters**); they may come as query parameters or as a JSON body
         *     `DeleteMemoriesRequest` with the same names (a field of the body wins over the query
         *     parameters of the same name, its `metadata` object over every `metadata.<key>`;
         *     `null` counts as absent; other fields are `400`). **No filter forgets every memory of
         *     the agent.** Every socket of the agent gets a `memory` frame `op: "deleted"` per
         *     memory.
         *
         *     Query parameters are checked as in `GET /memories` (`400` otherwise) even where the
         *     body overrides them. A bad filter deletes nothing.
         */
        delete: operations["deleteMemories"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/memories/batch": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Store many memories
         * @description 1–1,000 memories, each as for `POST /memories` (`createMemory`), in one transaction:
         *     all are stored (or merged into a duplicate, also one earlier in the same batch) or
         *     none is; an error names the item (`memories[<i>]: …`). Answers the memories in order.
         *     With embeddings configured, the vectors are made after the answer is sent (recall finds
         *     the memories by their text meanwhile).
         */
        post: operations["createMemories"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/memories/search": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        /**
         * Recall memories by rank, with why
         * @description Ranked recall (docs/REFERENCE.md#memory-ranking), best first (ties: the later stored
         *     first), of the live memories the filters select (as in `GET /memories`; see
         *     **Metadata and filters**; both kinds of candidate keep to them):
         *
         *     - **candidates**: full text over the memories' `content` and `tags` (see `q`), and,
         *       with embeddings configured (`EMBEDDINGS_*`), the memories nearest by meaning (at
         *       most 50 of each): a memory no word matched needs a cosine similarity of at least 0.42
         *       to the query (a query unrelated to everything finds nothing), one the text found too
         *       counts its similarity from 0.2 (docs/REFERENCE.md#search-by-meaning);
         *     - **relevance**: the text match (bm25) relative to the best candidate's; with
         *       embeddings, the stronger of that and the similarity rescaled from [0.2, 1] to [0, 1],
         *       plus a tenth of the weaker when both agree (at most 1);
         *     - **score** = `0.70 · relevance + 0.15 · confidence + 0.10 · recency + 0.05 ·
         *       frequency`, rounded to 4 decimals, where confidence is the memory's `score` (0.5
         *       when unknown), recency halves every 30 days since its `updatedAt`, and frequency is
         *       `ln(1 + recallCount) / ln 11` (at most 1).
         *
         *     Each hit (`MemoryHit`) carries the memory, its `score`, `why` (the signals in words)
         *     and `signals` (the numbers). A search **is a recall**: each hit's `recallCount` goes up
         *     by one and its `recalledAt` becomes now, and the memories answered already show that
         *     (`why` and `frequency` describe the counts before). `{"results": []}` when nothing
         *     matches.
         */
        get: operations["searchMemories"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/memories/{memory}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        /**
         * Get one memory
         * @description The memory; `404` when there is none with that id or it has expired. Reading it does
         *     not count as a recall.
         */
        get: operations["getMemory"];
        /**
         * Store a memory under this id, or replace it
         * @description An upsert. When no memory of this id is stored (or it expired), the body is stored
         *     under it as `POST /memories` stores one (`201`): the id must be 1–128 characters of
         *     `[A-Za-z0-9._:-]` (`400` otherwise; `batch` and `search` are routes, so a `PUT` there
         *     is `405`), the memory cap applies (`422`), and a live memory of another id that says
         *     the same (same category and text once trimmed, white space collapsed, case ignored) is
         *     `409 conflict`: it is not merged, since the id asked for would not hold it.
         *
         *     When one is stored, it is replaced (`200`): its text, category, tags, metadata,
         *     score and expiry become the body's, a field the body leaves out its default (no tags,
         *     `{}`, no score, no expiry, or `dailyTtlDays` from now for `daily`), as a new version in
         *     its history; `createdAt`, its recall counts and its place in time stay. Its `source`
         *     and `validFrom` do not change: given, they must be the stored ones (`409` otherwise).
         *     A replacement that would make it the duplicate of another live memory is `409`.
         *
         *     The body is `POST /memories`'s without `supersedes` (`400`), unknown fields `400`.
         *     Either way nothing changes on an error. Every socket of the agent gets a `memory`
         *     frame, `op: "created"` or `"updated"`.
         */
        put: operations["putMemory"];
        post?: never;
        /**
         * Forget one memory
         * @description Deletes the memory with its versions and vector. `204` on success; `404` when there
         *     is none with that id or it has expired (so a second delete is `404`). Every socket of
         *     the agent gets a `memory` frame `op: "deleted"`.
         */
        delete: operations["deleteMemory"];
        options?: never;
        head?: never;
        /**
         * Change a memory (its earlier version stays in its history)
         * @description Changes the fields given (`UpdateMemoryRequest`; unknown fields are `400`); the others
         *     stay:
         *
         *     - `content`: the new text (1–4,000 characters, not blank); `null` leaves it;
         *     - `tags`: the new tags, replacing the old ones (the rules of `POST /memories`); `null`
         *       leaves them;
         *     - `metadata`: the new metadata, replacing the old whole (`{}` clears it); `null`
         *       leaves it;
         *     - `score`: a number from 0 to 1, or `null` to make it unknown;
         *     - `category`: `null` leaves it. `conversation` only for a memory with a `source`
         *       (`400` otherwise). A memory without an expiry that becomes `daily` expires
         *       `dailyTtlDays` days from now, unless `expiresAt` is given too;
         *     - `expiresAt`: a timestamp in the future (as in `POST /memories`), or `null`: never.
         *
         *     Every change (an empty or absent body too) records a version and moves `updatedAt` to now; a new
         *     text is embedded again when embeddings are configured. `404` when the memory does not
         *     exist or has expired. A change that would make it the duplicate of another live
         *     memory of its category (same text once trimmed, white space collapsed, case ignored)
         *     is `409 conflict` and changes nothing: change or forget that one instead. Every socket
         *     of the agent gets a `memory` frame `op: "updated"`.
         */
        patch: operations["updateMemory"];
        trace?: never;
    };
    "/agents/{agent}/memories/{memory}/history": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        /**
         * Every version of a memory
         * @description The memory's versions, oldest first: its creation, then one per change (`PATCH`, a
         *     merged duplicate, a memory tool, an extraction), each with what the memory was after
         *     it, when (`at`) and who made it (`by`: `api`, `tool` or `extract`). The last version
         *     is the memory as it is. `404` when the memory does not exist or has expired; a
         *     forgotten memory's versions are gone with it.
         */
        get: operations["getMemoryHistory"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/memories/extract": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Distill memories from the session's latest exchange
         * @description Runs memory extraction (docs/REFERENCE.md#memory-extract) on one exchange of the
         *     session, as a turn does after its answer when `SESSION_CONFIG.memory.extract` is on
         *     (this route works whether it is or not, with `memory.extract`'s `minScore` and `model`
         *     when set, else the defaults):
         *
         *     1. the exchange is the last user message on the raw path (no overlays) from the root
         *        to `leafId` (default: the latest leaf) and the assistant messages after it: the
         *        text of their `text` parts, each side cut to 8,000 characters. Without one (an
         *        empty or unregistered session, no user message, or a last user message without
         *        text) the answer is `200` with empty lists and no model is called;
         *     2. the configured LLM (`LLM_*`, or `memory.extract.model` on the same provider) is
         *        asked, in JSON mode, for the lasting facts about the user in it, each with a score
         *        and tags; at most 10 are taken, and those under `minScore` (default 0.7) dropped;
         *     3. for each fact, the stored memories most like it (up to 5, ranked as a recall would
         *        rank them, without counting as one) are shown to the model with their ids, and it
         *        decides: ADD the fact, UPDATE one of them (new text), DELETE one of them, or NONE
         *        (with no similar memory the fact is added without asking);
         *     4. only then, the decisions are written: an ADD stores a `core` memory with the fact's
         *        score and tags and `source` = this session and the user message (a duplicate merges
         *        and is reported as `updated`); an UPDATE replaces the memory's text and sets its
         *        score to the fact's; a DELETE forgets it. Each is a version `by: "extract"` and a
         *        `memory` frame. A write the store refuses (over `maxMemories`, an update that would
         *        duplicate another memory, a memory gone meanwhile) is skipped and logged, not an
         *        error.
         *
         *     Every model call comes before any write: a model failure, or an answer that is not
         *     the JSON asked for, is `503 llm_unavailable` and nothing is written. The model calls'
         *     tokens are not added to the session's usage, and the session is not registered.
         *     `leafId` must be a string or `null` (`400` otherwise); one that is not a message of
         *     this session is `404`.
         */
        post: operations["extractMemories"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/schedules": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        /**
         * List the agent's schedules
         * @description The schedules by `nextRunAt` ascending (ties by creation), those with none (one-shots
         *     that ran) last. A page of `limit` (1–100, default 50) with the `nextCursor` of the
         *     next page (`null` at the end). Agent-wide: a token limited to sessions gets `403`.
         */
        get: operations["listSchedules"];
        put?: never;
        /**
         * Schedule an agent turn
         * @description A schedule runs `prompt` as an agent turn on its own, by the agent's alarm, with a
         *     **fresh, empty history** each time (see the tag), or, with `sessionId`, as a turn of
         *     that session. Exactly one of `at` (an ISO-8601 time in the future: once), `every`
         *     (seconds, 60 to 31,622,400) and `cron` (five fields in UTC). `name` (1–256 characters)
         *     defaults to the prompt's first line; `prompt` is 1 to
         *     `SESSION_CONFIG.schedules.maxPromptChars` (default 8,000) characters, not blank.
         *     `reach` (`session` or `agent`) is what its runs read across sessions (see the tag): by
         *     default `session` with `sessionId` (that session only), `agent` without.
         *     `400` for a bad or past time, interval or expression, none or two of them, an unknown
         *     field; `422 over_budget` when the agent already has
         *     `SESSION_CONFIG.schedules.maxSchedules` (default 100). Nothing is stored then.
         */
        post: operations["createSchedule"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/schedules/{schedule}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Schedule id (`sch_` and a UUID v4, as the API gives them out), percent-decoded: `400`
                 *     when that is not UTF-8, longer than 256 characters or holds a control character. Any
                 *     other id is simply not found (`404`).
                 * @example sch_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                schedule: components["parameters"]["schedule"];
            };
            cookie?: never;
        };
        /** Get one schedule */
        get: operations["getSchedule"];
        put?: never;
        post?: never;
        /** Delete a schedule and its runs */
        delete: operations["deleteSchedule"];
        options?: never;
        head?: never;
        /**
         * Pause, resume or change a schedule
         * @description Changes the fields given (the rules of `POST /schedules`; `null` leaves a field). A new
         *     `at`, `every` or `cron` (at most one) replaces the timing and its `nextRunAt` is
         *     computed from now. `paused: true` stops its runs and keeps `nextRunAt`; resumed, a
         *     tick missed while paused runs once. `reach` changes what its next runs read across
         *     sessions; `sessionId` is kept. `404` when there is none.
         */
        patch: operations["updateSchedule"];
        trace?: never;
    };
    "/agents/{agent}/schedules/{schedule}/runs": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Schedule id (`sch_` and a UUID v4, as the API gives them out), percent-decoded: `400`
                 *     when that is not UTF-8, longer than 256 characters or holds a control character. Any
                 *     other id is simply not found (`404`).
                 * @example sch_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                schedule: components["parameters"]["schedule"];
            };
            cookie?: never;
        };
        /**
         * The recorded runs of a schedule
         * @description Newest first; the newest `SESSION_CONFIG.schedules.maxRuns` (default 100) are kept. A
         *     page of `limit` (1–100, default 50) with the `nextCursor` of the next page.
         */
        get: operations["listScheduleRuns"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/schedules/{schedule}/run": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Schedule id (`sch_` and a UUID v4, as the API gives them out), percent-decoded: `400`
                 *     when that is not UTF-8, longer than 256 characters or holds a control character. Any
                 *     other id is simply not found (`404`).
                 * @example sch_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                schedule: components["parameters"]["schedule"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run a schedule now
         * @description A manual tick: the schedule's prompt runs now, as the alarm would run it, and the run is
         *     answered when it ends (a failure of the model is the run's `error`, status `error`).
         *     `nextRunAt` is unchanged; `lastRunAt` moves to now. `409 conflict` while a run of it is
         *     going; `503 llm_unavailable` without a model (`LLM_PROVIDER`). Body: none, or `{}`.
         */
        post: operations["runSchedule"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/tokens": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Issue a scoped token (admin token only)
         * @description Answered by the front door itself, with the **admin token** (`API_TOKEN`) only: any
         *     scoped token is `403 forbidden` here. Signs a scoped token for agent `{agent}` (the
         *     agent need not have any data yet) with the Worker secret `TOKEN_SECRET`: a JWT
         *     (HS256) whose claims are `TokenClaims` (`sub` = `{agent}`, `iat` = now, `exp` = now +
         *     `ttlSeconds`). Without `TOKEN_SECRET` (secret, or a plain var in local development;
         *     an empty value counts as unset) this route is `503 not_configured`, whatever the
         *     body. Nothing is stored: a token is verified by its signature, limited by its `exp`,
         *     and withdrawn by revoking the agent's tokens (`POST …/tokens/revoke`) or by changing
         *     `TOKEN_SECRET` (every token of every agent).
         *
         *     - `scope` (required): `read` or `write` (see `bearerAuth` for what each allows);
         *     - `ttlSeconds` (required): an integer from 1 to 2,592,000 (30 days);
         *     - `sessions` (optional): 1–500 session ids; the token opens those sessions only and
         *       no agent-wide route (nor a fork or a split: the session made would be outside it).
         *       Absent or `null`: every session of the agent. The ids are in the token: 500 ids of
         *       the longest (128 characters) make a token of about 87 KB, within the 128 KB that
         *       Cloudflare allows a request's headers (and ids of a UUID's 36 characters, about
         *       26 KB). On a WebSocket, where browsers send the token as `?token=` in the URL
         *       (at most 16 KB on Cloudflare), ask for a token of the socket's session (or a few).
         *
         *     Anything else (another field, a wrong type, a value out of range, a body that is not
         *     a JSON object) is `400 invalid_request`. Hand the token to the browser or client that
         *     acts for the agent; keep `API_TOKEN` on the server. Not rate-limited.
         */
        post: operations["issueToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/tokens/revoke": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Revoke the agent's scoped tokens (admin token only)
         * @description Revokes every scoped token of the agent issued (`iat`) before `before` (default: now,
         *     the request's time). From then on such a token is `401 unauthorized` on every route
         *     of the agent, and every WebSocket of the agent that was opened with one is closed with
         *     code `1008` (reason `token revoked`); sockets opened with the admin token or through a
         *     binding stay open. Tokens issued at or after the time keep working, and so do other
         *     agents' tokens. To withdraw every token of every agent at once, change
         *     `TOKEN_SECRET`.
         *
         *     The time only moves forward: a `before` earlier than the time in force changes
         *     nothing, and the answer is always the time in force. A `before` in the future is
         *     `400` (it would revoke tokens not issued yet), as is one that is not an ISO-8601 UTC
         *     timestamp (`Z` or `+00:00`) or an unknown field. The agent stores this one time
         *     (nothing until its first revocation); tokens themselves are never stored.
         *
         *     Admin only: with a scoped token this is `403 forbidden` (at the front door, and in the
         *     DO). Through a binding, `POST /tokens/revoke` on the stub (without claims).
         */
        post: operations["revokeTokens"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/{sid}/export": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        /**
         * One session as a JSON document
         * @description Everything stored for session `{sid}`, as one JSON document of format
         *     `session-agent/3` (`SessionExport`; see **Export format**): its registry fields, every
         *     message of every branch **in the order they were written** (so a parent always comes
         *     before its children) as `{parentId, createdAt, message}` with oversize fields put back
         *     from R2, its compaction overlays, the texts of its writable blocks (not the
         *     agent-scoped ones), the blocks added to it at run time and the configured ones removed
         *     from it (`contextDefs`), its loaded skills (label and key; the skill's text belongs to
         *     the agent and is not in it), and its frozen system prompt. What belongs to the agent
         *     (search-block entries, agent-scoped block texts, memories, skills) is in the agent's
         *     export only. A spilled field whose R2 object is missing is exported as its placeholder
         *     (`[N bytes stored in R2; starts: …]`) and logged.
         *
         *     `POST …/sessions/import` takes the document back, here or in another agent; imported
         *     under its own id it exports again byte for byte the same. `404` when `{sid}` is not
         *     registered. Any token that opens the session may export it (scope `read` is enough).
         */
        get: operations["exportSession"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/sessions/import": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        /**
         * Get the session whose id is "import"
         * @description As `GET /agents/{agent}/sessions/{sid}` with `{sid}` = `import`.
         */
        get: operations["getSessionNamedImport"];
        put?: never;
        /**
         * Import a session document
         * @description Writes the document of `GET …/sessions/{sid}/export` (`SessionImport`, format
         *     `session-agent/3`) as a new session of this agent: under the document's own id, or
         *     under the id `as` when given. Everything is checked before anything is written, and
         *     any failure is `400 invalid_request` naming the problem (and the record:
         *     `messages[3]: …`), with nothing written:
         *
         *     - `format` must be `session-agent/3` (or `session-agent/2`, without
         *       `sharedBlockReads`, or `session-agent/1`, also without `metadata`); a newer version
         *       (`session-agent/4` and up) is refused saying so (see **Export
         *       format**), any other value or none as not an export;
         *     - no field the format does not have, at the top level or in any record (the `session`
         *       object may also carry `messageCount` and `totalMessages`, so a `SessionInfo` can be
         *       sent; they are ignored); each field of the type the export writes it with;
         *       timestamps exactly as the service writes them (`2026-11-22T11:00:00.000Z`: UTC,
         *       milliseconds, from 1970); token counts integers from 0 to 2^53 − 1 and numbers
         *       finite and not negative; nullable fields may be left out; the lists may be left out
         *       or `null` (nothing of that kind);
         *     - ids and names as everywhere (session id, `parentSessionId`, block labels; the name
         *       1–256 characters without control characters, and `model`, `source`, `endReason` at
         *       most 256); each `message` as an appended message is checked (`Message`), and no
         *       message id starts with `compaction_` (summaries are never stored); an overlay's
         *       `id`, `summary` and message ids are not blank;
         *     - the session's `metadata` as `POST /sessions` checks it (see **Metadata and
         *       filters**); left out or `null` (a version-1 document): `{}`;
         *     - within the document, what the API could have written: message ids unique, each
         *       `parentId` `null` or an earlier message of the document (a deleted message's
         *       children are exported as roots), each overlay's `fromMessageId` an ancestor-or-self
         *       of its `toMessageId` among the document's messages and its id unique, at most one
         *       frozen prompt, one record per block label (texts, definitions) and per loaded skill,
         *       each runtime block definition a valid block definition that stays inside this
         *       agent's R2 spaces (as `POST …/context` checks it), each block text of a writable
         *       block of this session (not readonly, search, skills, nor shared by the agent's
         *       sessions), each loaded skill of a skills block of this session.
         *
         *     Then a session with the target id must not exist (`409 conflict`, nothing written).
         *     Oversize message fields go to R2 under this agent's and this session's space (as for
         *     an append), and the session row, its messages (each with its `parentId` and
         *     `createdAt` as exported), overlays, block texts, block definitions, loaded skills and
         *     prompt are written in **one transaction**, with their search index (other derived
         *     values, such as token estimates, are computed when first needed). The session keeps its registry fields as exported (name, parent,
         *     model, source, usage, `endReason`, `createdAt`, `updatedAt`). Message ids are kept
         *     with `as` too (they are unique per session); overlay ids, which are unique per agent,
         *     are kept as exported without `as` and are new ones with it. A row that repeats another
         *     (an overlay id the agent already has, two texts of one block, a skill loaded twice)
         *     fails the transaction: `400`, nothing written. The session's sockets hear nothing of
         *     an import.
         *
         *     Answers `201` with the SessionInfo of the imported session. A token that is limited to
         *     sessions may not use this route (it names no session: `403`); scope `write` is
         *     needed.
         */
        post: operations["importSession"];
        /**
         * Delete the session whose id is "import"
         * @description As `DELETE /agents/{agent}/sessions/{sid}` with `{sid}` = `import`.
         */
        delete: operations["deleteSessionNamedImport"];
        options?: never;
        head?: never;
        /**
         * Rename the session whose id is "import"
         * @description As `PATCH /agents/{agent}/sessions/{sid}` with `{sid}` = `import`.
         */
        patch: operations["renameSessionNamedImport"];
        trace?: never;
    };
    "/agents/{agent}/export": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        /**
         * The whole agent as NDJSON (admin token only)
         * @description Everything the agent holds, as NDJSON of format `session-agent/3` (see **Export
         *     format**): `content-type: application/x-ndjson; charset=utf-8`,
         *     `cache-control: no-store`, one JSON object per line, every line ending in `\n`. The
         *     records, in this order:
         *
         *     1. `{"format": "session-agent/3", "kind": "agent"}`;
         *     2. for each session, in the order they were registered (created, first written or
         *        imported): `{"kind": "session", "session": {…}}` (the fields
         *        of `SessionExport.session`), then its `message` records
         *        `{"kind": "message", "sessionId", "parentId", "createdAt", "message"}` in the order
         *        they were written (oversize fields put back), then its other rows, each a record
         *        `{"kind", "sessionId", …the row's fields}`: `compaction` (`Compaction`),
         *        `contextBlock` (`ExportedContextBlock`), `contextDef` (`ExportedContextDef`),
         *        `loadedSkill` (`ExportedLoadedSkill`), `prompt` (`ExportedPrompt`),
         *        `sharedBlockRead` (`ExportedSharedBlockRead`: the version of a shared block of the
         *        agent's memory space the session last read, which its model's next replace names);
         *     3. the texts of the agent-scoped writable blocks (`scope: "agent"`), as
         *        `contextBlock` records with `"sessionId": ""`;
         *     4. `memory` records `{"kind": "memory", "id", "content", "category", "tags", "metadata",
         *        "score", "sessionId", "messageId", "createdAt", "updatedAt", "expiresAt",
         *        "recalledAt", "recallCount"}` (a memory's source is its `sessionId` and `messageId`;
         *        expired memories not purged yet are in it), then every version,
         *        `{"kind": "memoryVersion", "memoryId", "content", "tags", "metadata", "score",
         *        "category", "at", "by"}`, then the search-block entries, `{"kind": "entry", "label", "key",
         *        "createdAt", "updatedAt", "content"}` (those of a search block that exists,
         *        configured or added at run time by a session: entries left behind by a runtime block
         *        that was removed, or whose session was deleted, are read by no block and left out);
         *        then the schedules, `{"kind": "schedule", "id", "name", "prompt", "timing", "spec",
         *        "sessionId", "reach", "paused", "nextRunAt", "lastRunAt", "createdAt"}` (`timing`
         *        `at`, `every` or `cron`, `spec` its time, seconds or expression as stored), their
         *        recorded runs, `{"kind": "scheduleRun", "id", "scheduleId", "startedAt", "endedAt",
         *        "status", "reply", "usage", "error"}`, and the usage ledger, `{"kind": "usage", "at",
         *        "sessionId", "model", "inputTokens", "outputTokens", "estimated", "inputEstimate",
         *        "cachedInputTokens"}` (one per turn that called the model; `sessionId` `#schedule` for
         *        a scheduled run without a session; `inputEstimate` our estimate of the input the
         *        provider counted, `null` when it did not; `cachedInputTokens` what it read from its
         *        prompt cache), each in the order written;
         *     5. the admin's choice of space, if one was made (`PUT /agents/{agent}/space`):
         *        `{"kind": "spaceChoice", "space", "setAt"}` (`space` `null`: none, whatever the rule
         *        says);
         *     6. the agent's own skills in R2 (the objects under `<prefix><agent>/` for each
         *        `skills` block of scope `agent`, configured or added at run time, except those
         *        waiting for the deletion sweep):
         *        `{"kind": "skill", "prefix", "key", "description", "content"}`, `key` relative to
         *        `<prefix><agent>/`;
         *     7. last, `{"kind": "end", "counts": {"sessions", "messages", "memories",
         *        "memoryVersions", "entries", "skills", "schedules", "scheduleRuns", "usage"}}`: how
         *        many of each this export holds.
         *
         *     **Streamed.** The Durable Object writes the body as it reads it, chunk by chunk (the
         *     header; one session with all its records; the agent's block texts; memories, versions,
         *     entries, schedules, runs and ledger rows 2,000 at a time; the choice of space; the
         *     skills; the end), so its memory holds one chunk,
         *     not the agent. The status is `200` before the body is complete: an error midway (a
         *     storage or R2 failure) ends the body early **without** the `end` record and is
         *     logged; an import refuses such an export as cut off, so check for the `end` record
         *     before you trust one. A spilled field whose R2 object is missing is exported as its
         *     placeholder and logged.
         *
         *     **Not a snapshot.** The list of sessions is taken when the export starts; each chunk
         *     is read when its turn comes, and other requests are served between chunks. A session
         *     created meanwhile is not in the export, one deleted before its turn is left out, and a
         *     write that lands while the export streams may be in it or not. The `end` counts are
         *     always those of what was written. For an exact copy, export an agent nobody writes to.
         *
         *     Admin only: a scoped token is `403 forbidden`, even with scope `write`. Through a
         *     binding: `GET /export` on the stub. `POST /agents/{agent}/import` takes the body back
         *     into an empty agent.
         */
        get: operations["exportAgent"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/directory": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A page of the directory of agents (admin token only)
         * @description The objects that hold data (a session, a message, a memory or a schedule), with the
         *     figures of their last report, in name order (then kind), one page of at most `limit`
         *     and the `nextCursor` of the page after it (`null` after the last page); pass it back
         *     as `cursor`. Answered by the front door, which asks the 16 directory shards in
         *     parallel and merges their pages by name, so every entry comes once across the pages.
         *
         *     An agent reports itself a moment after its writes (by default 2 s after the first
         *     write of a burst; the var `DIRECTORY_REPORT_MS`), from its alarm, never on the answer
         *     path: a write shows up here shortly after its answer, an erased agent goes away the
         *     same way. A report that fails is retried 30 s later; a crash between a write and its
         *     report is repaired by the alarm the write set. Agents that hold data from before the
         *     `AGENT_DIRECTORY` binding appear after their next write.
         *
         *     Admin token only: a scoped token is `403 forbidden`, none or a wrong one `401`.
         *     Without the `AGENT_DIRECTORY` binding, `503 not_configured`.
         */
        get: operations["listDirectory"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/directory/usage": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A page of agents with their usage over a time range (admin token only)
         * @description A page of the directory's agents (as `GET /directory?kind=agent`: name order, `prefix`,
         *     `limit`, `cursor`), each with the sums of its usage ledger over `[from, to)` (its
         *     `GET /agents/{agent}/usage`, asked in parallel). An agent with no turn in the range
         *     is listed with zeros. Admin token only.
         */
        get: operations["directoryUsage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/directory/export": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Every agent's export, one after another, as NDJSON (admin token only)
         * @description For each agent of the directory in name order after `cursor` (with `prefix`), its
         *     `GET /agents/{agent}/export` (format `session-agent/3`), every line wrapped as
         *     `{"agent": "<name>", "record": <the line>}`; after each agent's `end` record a line
         *     `{"cursor": "agent:<name>"}`: an export that stops (a dropped connection, an error)
         *     is resumed with the last such cursor and goes on with the next agent, so every agent
         *     comes whole and once. Streamed one agent at a time, as it is read (the front door
         *     holds at most a line and a page of 20 names): an error midway ends the body early,
         *     without that agent's cursor line (logged). Admin token only.
         */
        get: operations["exportDirectory"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/usage": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        /**
         * The agent's usage ledger over a time range
         * @description The sums of the agent's usage ledger over `[from, to)`: one row per turn that ran
         *     (`POST …/chat`, the agent-level chat, a WebSocket chat frame, a scheduled run; a
         *     stopped turn too, with `estimated` counts when the provider had not said; a failed
         *     turn stores nothing and counts nothing), written in the transaction that stores the
         *     turn, at the turn's time (a scheduled run on a fresh history, which stores no turn, is
         *     recorded with its run, under the session id `#schedule`). `bySession`: the 100 sessions
         *     with the most tokens in the range. An erase (`DELETE /agents/{agent}`) empties the ledger. Agent-wide: a token
         *     limited to sessions is `403`; scope `read` is enough.
         */
        get: operations["agentUsage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/import": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Import an agent's NDJSON export into an empty agent (admin token only)
         * @description Writes the NDJSON of `GET /agents/{agent}/export` (of this agent or any other) into
         *     this agent, which must hold nothing yet. The body is the export's text, at most
         *     32 MiB (the body limit; `413` beyond); send it as `application/x-ndjson` (the content
         *     type is not checked). Blank lines are skipped; lines are counted from 1.
         *
         *     Everything is read and checked before anything is written; any failure is
         *     `400 invalid_request` naming the line (`line 7: …`) or the session, and nothing is
         *     written:
         *
         *     - the first record is `{"format", "kind": "agent"}` with `format`
         *       `session-agent/3` (or 2, or 1): a newer version is refused saying so (see
         *       **Export format**), a session document is pointed to `POST …/sessions/import`, a
         *       space's export to `POST /spaces/{space}/import`; a record only a space's export holds
         *       (`sharedBlock`, `sharedBlockFloor`) is refused;
         *     - every line is one JSON object with a known `kind`; every row, message and skill
         *       record has exactly the fields its kind has (as the export writes them, plus
         *       `sessionId` where the export writes one), of their types, checked as the session
         *       import checks them (timestamps, ids, labels, messages as appended, block
         *       definitions), memories as `POST /memories` checks content, category, tags (trimmed,
         *       distinct, as stored), score and `metadata` (and their `id`: `mem_…`, 1–256
         *       characters without control characters), no more memories than `memory.maxMemories` (`422
         *       over_budget`), versions with `by` one of `api`, `tool`, `extract` (and `metadata`
         *       checked so too); `metadata` left out or `null` (a version-1 export) is `{}`; an entry
         *       holds at most 1,000,000 bytes; a skill has string `prefix`, `key` and `content`
         *       (`key` non-empty, without `..` or control characters) and a `description` that is
         *       a string or `null`, and its `prefix` is one of this agent's skills prefixes of scope
         *       `agent` (configured, or of a `skills` block of scope `agent` that an imported
         *       session adds at run time), so that every imported skill is listed, exported and
         *       erased with the agent; a schedule as `POST /schedules` checks one (id `sch_…`, a
         *       name of 1–256 characters, a prompt within `schedules.maxPromptChars`, `reach`
         *       `session` or `agent`, `sessionId` a session id) with its `timing` and `spec` as the
         *       service writes them (`at` a time with milliseconds, `every` 60 seconds to a year,
         *       `cron` a valid expression as kept), no more schedules than `schedules.maxSchedules`
         *       (`422 over_budget`); a run of a schedule of the export, ids unique, `status` `ok`,
         *       `error` or `null`, no more runs of one schedule than `schedules.maxRuns` (`422`); a run
         *       still going when the export was taken (`status` `null`) is stored as the start-up
         *       recovery stores a run a restart cut short: `error`, ended at the import, never run
         *       again; a ledger row with non-negative token counts and a `sessionId` and `model` of
         *       1–256 characters; at most one `spaceChoice`, its `space` a space name or `null`; a
         *       `sharedBlockRead` of a writable block with `scope: "space"` of its session, one per
         *       label;
         *     - a session's `message` and other records come after its own `session` record and
         *       before the next one (their `sessionId` names it); a session appears once; within
         *       a session the rules of the session import hold (unique message ids, parents
         *       first, overlays on one path, one prompt); `contextBlock` records with
         *       `"sessionId": ""` (agent-scoped texts) and the agent-wide records may come anywhere;
         *     - what the API could have written across the records: overlay ids unique; agent-wide
         *       texts (`"sessionId": ""`) one per label, each of a writable block the agent's
         *       sessions share (`scope: "agent"`, configured or added at run time by an imported
         *       session); memory ids unique, no two memories of one category with the same
         *       normalized text (for `conversation` memories: of one session), a `conversation`
         *       memory naming a session of the export, a `messageId` only with a `sessionId`, a
         *       `supersededBy` only on a retired memory (`invalidAt`) and naming another memory of
         *       the export, the chain of replacements ending (a circle, A → B → A, would leave none
         *       of them holding);
         *       each `memoryVersion` of a memory of the export, none repeated; each entry of a search
         *       block (configured, or added at run time by an imported session), one per label and
         *       key; one skill per prefix and key;
         *     - the `end` record comes last, and its `counts` equal what the export holds. No `end`
         *       record (an export cut off, such as one whose streaming failed), other counts, or a
         *       record after it is `400`, so a partial export is never taken for a whole one.
         *
         *     Then the agent must **hold nothing**: no row of any kind the export carries (session,
         *     message, overlay, block text, block definition, prompt, loaded skill, shared-block
         *     version read, memory, memory version, search entry, schedule, run, ledger row, choice
         *     of space), and no R2
         *     object under `<prefix><agent>/` for the skill prefixes the export names (objects
         *     waiting for the deletion sweep, such as those an erase could not delete yet, do not
         *     count); else
         *     `409 conflict` (erase it first: `DELETE /agents/{agent}`). The token revocation time
         *     does not count. Oversize message fields go to R2 under this agent's space and the
         *     skills to `<prefix><agent>/<key>` with their description, under keys recorded as
         *     pending first; then every row is written in **one transaction**, with the search
         *     indexes (other derived values, such as token estimates, when first needed). If that
         *     transaction fails anyway, nothing is written and the objects already put in R2 are
         *     deleted again. With embeddings configured, the
         *     imported memories, messages and search entries are embedded after the answer. Sockets hear nothing of an import.
         *     As after every write, the agent's alarm is set after the answer for the next time it
         *     is needed: an imported schedule runs at its `nextRunAt` (one whose time passed while
         *     the agent was moved runs once, at once, as after any absence).
         *
         *     Answers `201 {sessions, messages, memories, memoryVersions, entries, skills, schedules,
         *     scheduleRuns, usage}`: what was written.
         *
         *     Admin only: a scoped token is `403 forbidden`. Through a binding: `POST /import` on the
         *     stub.
         */
        post: operations["importAgent"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Erase everything the agent holds (admin token only; Confirm erase)
         * @description The agent forgets everything: every row of every kind (sessions, messages, overlays,
         *     block texts and definitions, prompts, loaded skills, search entries, memories with
         *     their versions and vectors, and everything derived: indexes, estimates, spill
         *     records) goes in **one transaction**, which also hands every R2 object of the agent
         *     (its spilled fields, pending ones, and its skills under `<prefix><agent>/` of every
         *     `skills` block of scope `agent`, configured or added at run time) to the deletion
         *     sweep, and sets the agent's token revocation time to the moment of the erase. Then:
         *
         *     - every scoped token of the agent issued before the erase is refused (`401`), as
         *       after `POST …/tokens/revoke`, and every WebSocket opened with one is closed with code
         *       `1008` (reason `token revoked`); sockets opened with the admin token or through a
         *       binding stay open. Tokens issued afterwards work;
         *     - the objects are deleted from R2 before the answer; one R2 fails to delete stays
         *       listed for the sweep and is deleted by a later one (after a later write request),
         *       and the failure is logged. Meanwhile it is no longer the agent's: skills listings
         *       and exports leave it out, and a skill written again under its key (by `set_context`
         *       or an import) takes the key back from the sweep.
         *
         *     What stays: the Durable Object (the agent is empty, not gone: reads answer empty
         *     lists, and the next write starts afresh, configured blocks with their initial
         *     content), its schema, its revocation time, the shared skill libraries, and objects
         *     under a skills prefix the agent no longer configures. An empty agent may be erased
         *     again (`204`), and an erased agent takes an import (`POST /agents/{agent}/import`).
         *
         *     The header `Confirm: erase` (compared without regard to case) is required: without it,
         *     or with another value, the answer is `400` and nothing changes. As on every `DELETE`,
         *     a body that is not a JSON object (or empty) is `400`. Admin only: a scoped token is
         *     `403 forbidden`. Through a binding: `DELETE /` on the stub, with `Confirm: erase`.
         */
        delete: operations["eraseAgent"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}/memories": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        /**
         * Space: List the agent's memories, newest first
         * @description The agent's live memories (expired ones are never returned), newest `createdAt` first
         *     (ties: the later stored first), one page at a time. The filters combine (see
         *     **Metadata and filters**): `category` (one or a comma list), `tag` (every one),
         *     `anyTag` (at least one), `createdAfter`, `createdBefore`, `updatedAfter`,
         *     `updatedBefore`, `metadata.<key>=<value>` and `sessionId` (memories whose
         *     `source.sessionId` is that session); a bad filter is `400`. Listing does not count as
         *     a recall (`recallCount` stays). An agent without memories answers
         *     `{"memories": [], "nextCursor": null}`.
         *
         *     Pages: `limit` memories (1–100, default 50); when there are more, `nextCursor` is the
         *     `cursor` of the next page (with the same filters), else `null`. A `cursor` this API
         *     did not give out is `400`. Memories stored after the first page was read do not appear
         *     on later pages.
         */
        get: operations["listMemoriesInSpace"];
        put?: never;
        /**
         * Space: Store a memory
         * @description Stores one fact about the user (`CreateMemoryRequest`; unknown fields are `400`):
         *
         *     - `content` (required): 1–4,000 characters, not blank; stored as given.
         *     - `category`: `core` (the default: permanent) or `daily` (expires: at `expiresAt`, else
         *       `SESSION_CONFIG.memory.dailyTtlDays` days from now, default 7). A space has no
         *       sessions: `conversation` is `400`, nothing stored.
         *     - `tags`: at most 16 strings of 1–64 characters once trimmed, without control
         *       characters; stored trimmed, duplicates dropped.
         *     - `metadata`: the caller's own facts about the memory (`Metadata`, see **Metadata and
         *       filters**); absent or `null`: `{}`.
         *     - `score`: the confidence that the fact is true and lasting, a number from 0 to 1;
         *       absent or `null`: unknown (recall then counts it as 0.5).
         *     - `sessionId`, `messageId`: where the fact came from (`source`); a `messageId` needs a
         *       `sessionId`. Syntax-checked only (the session id as in paths, the message id as
         *       message ids are): neither has to exist, and the source registers nothing.
         *     - `expiresAt`: an ISO-8601 UTC timestamp (`Z` or `+00:00`) **in the future** (`400`
         *       otherwise), stored with milliseconds. Absent or `null`: never (`daily`: the default
         *       lifetime above). An expired memory is never returned again and is deleted by the
         *       next write to the agent's memories.
         *
         *     **Duplicates merge.** When a live memory of the same category has the same text once
         *     both are trimmed, with runs of white space collapsed to one space and case ignored,
         *     nothing new is stored: the request's tags are added to that memory's (at most 16 kept),
         *     the request's `metadata` keys are set over that memory's (more than 16 keys in all is
         *     `400`), the higher `score` is kept (a known one over an unknown one), the request's `expiresAt`
         *     replaces the stored one if given, a version is recorded, and the answer is `200` with
         *     that memory (its `id`, `content`, `category` and `source` unchanged). Otherwise the
         *     answer is `201` with the new memory, whose first version is its creation.
         *
         *     `422 over_budget` when the agent already holds `SESSION_CONFIG.memory.maxMemories`
         *     memories (default 10,000): forget some first (a merge is always possible). With
         *     embeddings configured (`EMBEDDINGS_*`), the memory is embedded after the answer is
         *     sent (`embeddedAt` is `null` in the answer and set once its vector exists); if that
         *     fails it is kept and embedded after a later write or a restart (recall finds it by its text
         *     meanwhile). Every socket of the agent gets a `memory` frame (`created`, or `updated`
         *     for a merge).
         */
        post: operations["createMemoryInSpace"];
        /**
         * Space: Forget every memory a filter selects (forgetAll)
         * @description Deletes, in one transaction, every live memory that the filters select, with its
         *     versions and vector, and answers how many (`{"deleted": 0}` when none; expired memories
         *     are purged too but not counted). The filters are those of `GET /memories` (see
         *     **Metadata and filters**); they may come as query parameters or as a JSON body
         *     `DeleteMemoriesRequest` with the same names (a field of the body wins over the query
         *     parameters of the same name, its `metadata` object over every `metadata.<key>`;
         *     `null` counts as absent; other fields are `400`). **No filter forgets every memory of
         *     the agent.** Every socket of the agent gets a `memory` frame `op: "deleted"` per
         *     memory.
         *
         *     Query parameters are checked as in `GET /memories` (`400` otherwise) even where the
         *     body overrides them. A bad filter deletes nothing.
         */
        delete: operations["deleteMemoriesInSpace"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}/memories/batch": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Space: Store many memories
         * @description 1–1,000 memories, each as for `POST /memories` (`createMemory`), in one transaction:
         *     all are stored (or merged into a duplicate, also one earlier in the same batch) or
         *     none is; an error names the item (`memories[<i>]: …`; a `conversation` one is `400`: a
         *     space has no sessions). Answers the memories in order.
         *     With embeddings configured, the vectors are made after the answer is sent (recall finds
         *     the memories by their text meanwhile).
         */
        post: operations["createMemoriesInSpace"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}/memories/search": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        /**
         * Space: Recall memories by rank, with why
         * @description Ranked recall (docs/REFERENCE.md#memory-ranking), best first (ties: the later stored
         *     first), of the live memories the filters select (as in `GET /memories`; see
         *     **Metadata and filters**; both kinds of candidate keep to them):
         *
         *     - **candidates**: full text over the memories' `content` and `tags` (see `q`), and,
         *       with embeddings configured (`EMBEDDINGS_*`), the memories nearest by meaning (at
         *       most 50 of each): a memory no word matched needs a cosine similarity of at least 0.42
         *       to the query (a query unrelated to everything finds nothing), one the text found too
         *       counts its similarity from 0.2 (docs/REFERENCE.md#search-by-meaning);
         *     - **relevance**: the text match (bm25) relative to the best candidate's; with
         *       embeddings, the stronger of that and the similarity rescaled from [0.2, 1] to [0, 1],
         *       plus a tenth of the weaker when both agree (at most 1);
         *     - **score** = `0.70 · relevance + 0.15 · confidence + 0.10 · recency + 0.05 ·
         *       frequency`, rounded to 4 decimals, where confidence is the memory's `score` (0.5
         *       when unknown), recency halves every 30 days since its `updatedAt`, and frequency is
         *       `ln(1 + recallCount) / ln 11` (at most 1).
         *
         *     Each hit (`MemoryHit`) carries the memory, its `score`, `why` (the signals in words)
         *     and `signals` (the numbers). A search **is a recall**: each hit's `recallCount` goes up
         *     by one and its `recalledAt` becomes now, and the memories answered already show that
         *     (`why` and `frequency` describe the counts before). `{"results": []}` when nothing
         *     matches.
         */
        get: operations["searchMemoriesInSpace"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}/memories/{memory}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        /**
         * Space: Get one memory
         * @description The memory; `404` when there is none with that id or it has expired. Reading it does
         *     not count as a recall.
         */
        get: operations["getMemoryInSpace"];
        /**
         * Space: Store a memory under this id, or replace it
         * @description An upsert. When no memory of this id is stored (or it expired), the body is stored
         *     under it as `POST /memories` stores one (`201`): the id must be 1–128 characters of
         *     `[A-Za-z0-9._:-]` (`400` otherwise; `batch` and `search` are routes, so a `PUT` there
         *     is `405`), the memory cap applies (`422`), and a live memory of another id that says
         *     the same (same category and text once trimmed, white space collapsed, case ignored) is
         *     `409 conflict`: it is not merged, since the id asked for would not hold it.
         *
         *     When one is stored, it is replaced (`200`): its text, category (`conversation` is `400` in a space: it has no sessions), tags, metadata,
         *     score and expiry become the body's, a field the body leaves out its default (no tags,
         *     `{}`, no score, no expiry, or `dailyTtlDays` from now for `daily`), as a new version in
         *     its history; `createdAt`, its recall counts and its place in time stay. Its `source`
         *     and `validFrom` do not change: given, they must be the stored ones (`409` otherwise).
         *     A replacement that would make it the duplicate of another live memory is `409`.
         *
         *     The body is `POST /memories`'s without `supersedes` (`400`), unknown fields `400`.
         *     Either way nothing changes on an error. Every socket of the agent gets a `memory`
         *     frame, `op: "created"` or `"updated"`.
         */
        put: operations["putMemoryInSpace"];
        post?: never;
        /**
         * Space: Forget one memory
         * @description Deletes the memory with its versions and vector. `204` on success; `404` when there
         *     is none with that id or it has expired (so a second delete is `404`). Every socket of
         *     the agent gets a `memory` frame `op: "deleted"`.
         */
        delete: operations["deleteMemoryInSpace"];
        options?: never;
        head?: never;
        /**
         * Space: Change a memory (its earlier version stays in its history)
         * @description Changes the fields given (`UpdateMemoryRequest`; unknown fields are `400`); the others
         *     stay:
         *
         *     - `content`: the new text (1–4,000 characters, not blank); `null` leaves it;
         *     - `tags`: the new tags, replacing the old ones (the rules of `POST /memories`); `null`
         *       leaves them;
         *     - `metadata`: the new metadata, replacing the old whole (`{}` clears it); `null`
         *       leaves it;
         *     - `score`: a number from 0 to 1, or `null` to make it unknown;
         *     - `category`: `null` leaves it. `conversation` is `400` (a space has no sessions). A
         *       memory without an expiry that becomes `daily` expires
         *       `dailyTtlDays` days from now, unless `expiresAt` is given too;
         *     - `expiresAt`: a timestamp in the future (as in `POST /memories`), or `null`: never.
         *
         *     Every change (an empty or absent body too) records a version and moves `updatedAt` to now; a new
         *     text is embedded again when embeddings are configured. `404` when the memory does not
         *     exist or has expired. A change that would make it the duplicate of another live
         *     memory of its category (same text once trimmed, white space collapsed, case ignored)
         *     is `409 conflict` and changes nothing: change or forget that one instead. Every socket
         *     of the agent gets a `memory` frame `op: "updated"`.
         */
        patch: operations["updateMemoryInSpace"];
        trace?: never;
    };
    "/spaces/{space}/memories/{memory}/history": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        /**
         * Space: Every version of a memory
         * @description The memory's versions, oldest first: its creation, then one per change (`PATCH`, a
         *     merged duplicate, a memory tool, an extraction), each with what the memory was after
         *     it, when (`at`) and who made it (`by`: `api`, `tool` or `extract`). The last version
         *     is the memory as it is. `404` when the memory does not exist or has expired; a
         *     forgotten memory's versions are gone with it.
         */
        get: operations["getMemoryHistoryInSpace"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}/tokens/revoke": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Space: Revoke the agent's scoped tokens (admin token only)
         * @description Revokes every scoped token of the agent issued (`iat`) before `before` (default: now,
         *     the request's time). From then on such a token is `401 unauthorized` on every route
         *     of the agent, and every WebSocket of the agent that was opened with one is closed with
         *     code `1008` (reason `token revoked`); sockets opened with the admin token or through a
         *     binding stay open. Tokens issued at or after the time keep working, and so do other
         *     agents' tokens. To withdraw every token of every agent at once, change
         *     `TOKEN_SECRET`.
         *
         *     The time only moves forward: a `before` earlier than the time in force changes
         *     nothing, and the answer is always the time in force. A `before` in the future is
         *     `400` (it would revoke tokens not issued yet), as is one that is not an ISO-8601 UTC
         *     timestamp (`Z` or `+00:00`) or an unknown field. The agent stores this one time
         *     (nothing until its first revocation); tokens themselves are never stored.
         *
         *     Admin only: with a scoped token this is `403 forbidden` (at the front door, and in the
         *     DO). Through a binding, `POST /tokens/revoke` on the stub (without claims).
         */
        post: operations["revokeTokensInSpace"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/space": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        /**
         * The memory space the agent uses (admin token only)
         * @description Which space the agent uses (`space`, `null` for none), where that comes from
         *     (`chosen`: `PUT`; `rule`: `SESSION_CONFIG.memory.space`'s separator; `none`), and
         *     `mode` (`alongside` or `instead`).
         */
        get: operations["getAgentSpace"];
        /**
         * Choose the agent's memory space (admin token only)
         * @description `{"space": "<name>"}` maps the agent to that space whatever the rule says; `{"space":
         *     null}` to none. A name that is not the agent name syntax, another field or another
         *     shape is `400`, nothing changed. Only the admin (or a binding) chooses: an agent's token
         *     is `403`. What the agent's turns extracted into a former space stays there.
         */
        put: operations["setAgentSpace"];
        post?: never;
        /** Forget the admin's choice; the rule decides again (admin token only) */
        delete: operations["forgetAgentSpace"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Erase the space's memories and shared blocks (admin token only; Confirm erase)
         * @description As `DELETE /agents/{agent}` for the space: its memories (with their versions and
         *     vectors) and its shared blocks go in one transaction, and its tokens are revoked. The
         *     agents mapped to it keep their own memories; their next turns find the space empty.
         *     Needs the header `Confirm: erase` (`400` otherwise).
         */
        delete: operations["eraseSpace"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}/export": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        /**
         * The whole memory space as NDJSON (admin token only)
         * @description Everything the space holds, as NDJSON of format `session-agent/3` (see **Export
         *     format**), as `GET /agents/{agent}/export` writes an agent's: `content-type:
         *     application/x-ndjson; charset=utf-8`, one JSON object per line. The records, in this
         *     order:
         *
         *     1. `{"format": "session-agent/3", "kind": "space"}`;
         *     2. `memory` records, then every `memoryVersion`, as in an agent's export (a space's
         *        memories carry `metadata.agent`, the agent they came from);
         *     3. its shared blocks, `{"kind": "sharedBlock", "label", "content", "version",
         *        "updatedAt", "updatedBy", "deletedAt"}`, in the order they were first written,
         *        deleted ones (tombstones: `deletedAt` set, no text) included, since a label's
         *        versions never repeat;
         *     4. the space's floor, if it has one (the version a label without a row reads as,
         *        raised by dropped tombstones and by an erase): `{"kind": "sharedBlockFloor",
         *        "version"}`;
         *     5. last, `{"kind": "end", "counts": {"memories", "memoryVersions", "sharedBlocks"}}`.
         *
         *     Answered whole, not streamed: a space holds at most `memory.maxMemories` memories and
         *     1,100 blocks. The versions each agent's sessions read travel with the agent's export
         *     (`sharedBlockRead`), so an agent and its space moved together go on replacing shared
         *     blocks at the versions they read.
         *
         *     Admin only: a token of the space is `403 forbidden`, even with scope `write`. `POST
         *     /spaces/{space}/import` takes the body back into an empty space.
         */
        get: operations["exportSpace"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}/import": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Import a memory space's NDJSON export into an empty space (admin token only)
         * @description Writes the NDJSON of `GET /spaces/{space}/export` (of this space or any other) into
         *     this space, as `POST /agents/{agent}/import` does an agent's, with the same body limit
         *     (32 MiB, `413` beyond), the same reading (blank lines skipped, lines counted from 1)
         *     and the same rule: everything is checked before anything is written, any failure is
         *     `400 invalid_request` naming the line, and nothing is written:
         *
         *     - the first record is `{"format", "kind": "space"}` (an agent's export is refused,
         *       pointed to `POST /agents/{agent}/import`), and a record only an agent's export
         *       holds (a session, a schedule, …) is refused;
         *     - memories and their versions as in an agent's import (no `conversation` memory: a
         *       space has no sessions), no more than `memory.maxMemories` (`422 over_budget`);
         *     - shared blocks: a label as block labels are, one record per label, a version from
         *       1, a text of at most 256 KiB, a deleted block (`deletedAt`) with no text and no
         *       `updatedBy`, at most 100 blocks with text and 1,000 deleted ones; at most one
         *       `sharedBlockFloor`;
         *     - the `end` record last, its `counts` equal to what the export holds.
         *
         *     Then the space must **hold nothing**: no memory, memory version or shared block
         *     (deleted ones included); else `409 conflict` (erase it first: `DELETE
         *     /spaces/{space}`). The floor an erase keeps does not count, and stays when it is higher
         *     than the export's. Every row is written in one transaction.
         *
         *     Answers `201 {memories, memoryVersions, sharedBlocks}`: what was written.
         *
         *     Admin only: a token of the space is `403 forbidden`.
         */
        post: operations["importSpace"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}/tokens": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Issue a scoped token of the space (admin token only)
         * @description As `POST /agents/{agent}/tokens`, for the space: the token's claims carry `kind:
         *     "space"`, so it opens this space only (never an agent, even one of the same name, and
         *     no other space); `sessions` is refused (`400`: a space has none). `read` reads the
         *     memories and blocks; `write` writes them too. Revoked with `POST
         *     /spaces/{space}/tokens/revoke`.
         */
        post: operations["issueSpaceToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}/blocks": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        /** The space's shared blocks (those that hold a text; deleted ones are left out) */
        get: operations["listSharedBlocks"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}/blocks/{label}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        /** One shared block (empty, `updatedAt` null, when never written or deleted) */
        get: operations["getSharedBlock"];
        /**
         * Replace a shared block's text, if no other write came since the version read
         * @description `{content, version, maxTokens?}`: `version` is the version read (a block never written
         *     reads as 0, or the space's floor); another write or a delete since is `409
         *     version_conflict`, nothing written: a label's versions never repeat. `maxTokens`
         *     (a positive integer): the text's token estimate over it is `422 over_budget`. At most
         *     262,144 bytes (`413`) and 100 blocks per space (`422`). Agents write their blocks of
         *     `scope: "space"` through `PUT /agents/{agent}/sessions/{sid}/context/{label}`.
         */
        put: operations["replaceSharedBlock"];
        post?: never;
        /**
         * Delete a shared block
         * @description The delete counts a version: the label keeps its row as a tombstone (no text), a read
         *     shows the delete's version, the next write the one after it, and a replace naming an
         *     earlier version is `409 version_conflict`. `404` when the label holds no text.
         */
        delete: operations["deleteSharedBlock"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/spaces/{space}/blocks/{label}/append": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Append to a shared block (concurrent appends all land)
         * @description `{content, maxTokens?}`: a newline goes between the old and new text unless the old
         *     text is empty or the new one starts with one; the budget applies to the whole. The
         *     space runs one write at a time, so two agents appending at once both land, in the order
         *     they arrived.
         */
        post: operations["appendSharedBlock"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/v1/models": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        /**
         * The configured models, as OpenAI's model list
         * @description The OpenAI-compatible face (`baseURL` = `…/agents/{agent}/v1`, the API key = a token):
         *     `LLM_MODEL`, then the other models `SESSION_CONFIG.chat.models` lets a request name
         *     (none when no model is configured). Errors under `/v1/`
         *     are OpenAI's shape (`OpenAiError`).
         */
        get: operations["openaiListModels"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/v1/chat/completions": {
        parameters: {
            query?: never;
            header?: {
                /**
                 * @description The session an OpenAI-compatible request talks to (before the body's own ways of naming
                 *     it): a session id, 1–128 characters of `[A-Za-z0-9._:-]`.
                 */
                "x-session-id"?: components["parameters"]["openaiSession"];
            };
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * One agent turn as an OpenAI chat completion
         * @description OpenAI's chat completion over the agent's turn (`POST …/chat`): the session's frozen
         *     prompt, memories, history, tools and compaction, and the client's function tools, which
         *     come back as `tool_calls` (the agent's own tools run inside and never show).
         *
         *     **The session**: the header `x-session-id`, else `metadata.session_id`, else `user`
         *     (each checked as a session id), else `dashboard`; a token limited to some sessions must
         *     open it. **The conversation**: `messages` without the system ones are matched with the
         *     session's newest branch by what they say (user text, assistant text with the client's
         *     tool calls, `tool` results). They end with the new user message (stored under the last
         *     message matched: the branch grows, or a sibling branch starts when an earlier message was
         *     edited) or with the results of the last assistant message's tool calls (stored in it;
         *     the turn continues). Before that, send the stored conversation from its first message,
         *     whole or in part, or nothing (the session's branch continues: the server holds the
         *     history); anything else is `409` and stores nothing. System and developer messages are
         *     sent after the frozen prompt for this call only. `model` chooses the model when
         *     `SESSION_CONFIG.chat.models` names it (on the configured provider; the answer's `model`,
         *     the reply's `metadata.model` and the usage ledger name it), and is ignored otherwise
         *     (`LLM_MODEL` answers); `temperature`, `max_tokens` and `max_completion_tokens` are
         *     checked and ignored (the configuration decides); `n` must be 1.
         *
         *     The answer's `id` is the stored assistant message's. With `stream: true`:
         *     `chat.completion.chunk` events (the first with `role`, then `content` pieces and
         *     `tool_calls`, then `finish_reason`; with `stream_options.include_usage` every chunk has
         *     `usage: null` and one more chunk with no choices carries it), then `data: [DONE]`; an
         *     error after the first event is a `data: {"error": …}` event.
         */
        post: operations["openaiChatCompletion"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/v1/responses": {
        parameters: {
            query?: never;
            header?: {
                /**
                 * @description The session an OpenAI-compatible request talks to (before the body's own ways of naming
                 *     it): a session id, 1–128 characters of `[A-Za-z0-9._:-]`.
                 */
                "x-session-id"?: components["parameters"]["openaiSession"];
            };
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * One agent turn as an OpenAI response
         * @description OpenAI's Responses API over the agent's turn. A response's `id` is the id of the
         *     assistant message it stored. **The session**: `conversation` (a session id, or `{id}`),
         *     else the session of `previous_response_id`, else the header `x-session-id`, else a new
         *     session, which the answer's `conversation.id` names. **The tree**:
         *     `previous_response_id` names the message the new input goes under (from the newest it
         *     extends the branch, from an older one it starts a sibling); without it the input is
         *     matched with the session's newest branch as `POST …/v1/chat/completions` matches
         *     `messages` (a string `input` is one new user message). `function_call_output` items
         *     answer the function calls of that response (the turn continues). `instructions` and
         *     system or developer items are sent after the frozen prompt for this call only.
         *     `tools` are the client's function tools (`{type: "function", name, description,
         *     parameters}`); the agent's own tools never show. `store: false` runs the turn and
         *     stores nothing (a server tool's own effect, such as a block write, stays). `model`
         *     chooses the model as in `POST …/v1/chat/completions`.
         *
         *     With `stream: true`: the Responses events (`event:` and `data:` lines, each with its
         *     `sequence_number`): `response.created`, `response.in_progress`, then per output item
         *     `response.output_item.added`, `response.content_part.added`,
         *     `response.output_text.delta`…, `response.output_text.done`,
         *     `response.content_part.done`, `response.output_item.done` (a function call:
         *     `response.function_call_arguments.delta` and `.done`), last `response.completed` (or
         *     `response.incomplete` for a stopped turn); an error after the first event is an `error`
         *     event.
         */
        post: operations["openaiCreateResponse"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/v1/responses/{mid}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
                 *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
                 *     `%` → `%25`, non-ASCII as UTF-8).
                 * @example m1
                 */
                mid: components["parameters"]["mid"];
            };
            cookie?: never;
        };
        /**
         * A stored response
         * @description The stored assistant message `{mid}` as a `response` (found in whichever session of
         *     the agent holds it that the token opens; `404` when none does): its text and the
         *     client's function calls, its usage, its conversation, the response before it on its
         *     branch. `instructions` and `tools` are not kept (`null`, `[]`).
         */
        get: operations["openaiGetResponse"];
        put?: never;
        post?: never;
        /**
         * Delete a stored response
         * @description Deletes the assistant message `{mid}` as `DELETE …/messages/{mid}` does (what was
         *     written after it stays, orphaned).
         */
        delete: operations["openaiDeleteResponse"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agents/{agent}/v1/responses/{mid}/input_items": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
                 *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
                 *     `%` → `%25`, non-ASCII as UTF-8).
                 * @example m1
                 */
                mid: components["parameters"]["mid"];
            };
            cookie?: never;
        };
        /**
         * The items that led to a stored response
         * @description The stored branch before response `{mid}` as Responses items (user messages, the
         *     assistant's text messages, its function calls and their outputs), newest first unless
         *     `order=asc`, `limit` at a time after the item `after`.
         */
        get: operations["openaiListInputItems"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** @description Our addition: the memory space an agent uses. */
        SpaceChoice: {
            space: string | null;
            /** @enum {string} */
            source: "rule" | "chosen" | "none";
            /** @enum {string} */
            mode: "alongside" | "instead";
        };
        /** @description Our addition: a memory space's shared block. */
        SharedBlock: {
            label: string;
            content: string;
            /**
             * @description One more with each write and each delete of the label, never repeated. A label
             *     never written reads as 0, or as the space's floor once it rose (dropping the oldest
             *     of its 1,000 tombstones raises it to the highest version gone; an erase, one past the
             *     highest version the space gave).
             */
            version: number;
            /**
             * Format: date-time
             * @description `null` when the label holds no text: never written, or deleted.
             */
            updatedAt: string | null;
            /** @description The agent that wrote it last; `null` for a write through the space's own routes. */
            updatedBy: string | null;
        };
        /**
         * @description A message id, unique per session. 1–256 characters, no control characters.
         * @example m1
         * @example tool/call #1
         */
        MessageId: string;
        /**
         * @description An AI SDK `UIMessage`. The server checks `id`, `role`, that `parts` is an array, and
         *     the parts it reads (see `MessagePart`; anything else is `400` and stores nothing), and
         *     stores the JSON verbatim: unknown fields, other part types and key order survive a
         *     round trip. A message whose JSON exceeds 1,800,000 bytes has its largest fields kept
         *     in R2 and is still stored whole. Only `text` parts are indexed for search.
         * @example {
         *       "id": "m2",
         *       "role": "assistant",
         *       "parts": [
         *         {
         *           "type": "text",
         *           "text": "Here are three itineraries."
         *         }
         *       ],
         *       "createdAt": "2026-11-22T11:00:00.000Z",
         *       "metadata": {
         *         "model": "gpt-4o-mini"
         *       }
         *     }
         */
        Message: {
            id: components["schemas"]["MessageId"];
            /**
             * @description Any non-empty string; the AI SDK uses `system`, `user` and `assistant`.
             * @example user
             * @example assistant
             * @example system
             */
            role: string;
            parts: components["schemas"]["MessagePart"][];
            /** @description Client-side timestamp, stored as given (the server does not read it). */
            createdAt?: unknown;
            /** @description Anything; stored as given. */
            metadata?: unknown;
        } & {
            [key: string]: unknown;
        };
        /**
         * @description One part of a `UIMessage`. Checked on every write, so what is stored always reads back
         *     as a valid part: an object with a non-empty string `type`; `text` and `reasoning`
         *     parts have a string `text`; tool parts (`type` `tool-<name>` or `dynamic-tool`) have a
         *     string `toolCallId`, a `state` of the AI SDK's tool states, a string `toolName` on
         *     `dynamic-tool` (and wherever a tool part gives one), and a string `errorText` when
         *     `state` is `output-error` (and wherever a tool part gives one). Other kinds (files,
         *     sources, `step-start`, data parts, …) and every other field, also on the kinds above,
         *     are stored as given: a field constrained here for one kind is free on the others.
         */
        MessagePart: ({
            /**
             * @description `text`, `reasoning`, `tool-<name>`, `dynamic-tool`, or any other AI SDK part type.
             * @example text
             * @example reasoning
             * @example tool-weather
             * @example dynamic-tool
             */
            type: string;
        } & {
            [key: string]: unknown;
        }) & (unknown & unknown & unknown & unknown);
        /**
         * @description The caller's own facts about a session or a memory (a user id, a channel, a
         *     priority): a flat object of at most 16 keys of 1–64 characters of `[A-Za-z0-9_.-]`,
         *     each value a string of at most 512 characters, a number or a boolean. A nested value,
         *     `null` as a value, a bad key, a 17th key or a longer string is `400` naming the key. A
         *     whole number is stored as an integer (`30.0` reads back as `30`). `{}` when none. See
         *     **Metadata and filters**.
         * @example {
         *       "userId": "u-42",
         *       "plan": "pro",
         *       "priority": 2,
         *       "vip": true
         *     }
         */
        Metadata: {
            [key: string]: string | number | boolean;
        };
        /** @description A session as the API shows it. Every field is always present. */
        SessionInfo: {
            /** @description The session id (a UUID v4 when created by `POST /sessions`). */
            id: string;
            /** @description The name (`= id` when the session was registered by a write). */
            name: string;
            /** @description The session it was forked from (or the value given at creation). */
            parentSessionId: string | null;
            model: string | null;
            source: string | null;
            metadata: components["schemas"]["Metadata"];
            /** @description Sum of the reported input tokens (`POST …/usage`, compactions and agent turns). */
            inputTokens: number;
            /** @description Sum of the reported output tokens (`POST …/usage`, compactions and agent turns). */
            outputTokens: number;
            /** @description Sum of the reported costs. */
            estimatedCost: number;
            /**
             * @description Why the session ended: `split` once `POST …/split` went on in a new session (an
             *     imported session has the value it was exported with); `null` otherwise.
             */
            endReason: string | null;
            /**
             * @description Messages on the session's active path, root to the latest leaf (the reference's
             *     `getMessageCount`, the `length` of `GET …/path-length`); 0 when empty.
             */
            messageCount: number;
            /** @description Messages stored in the session, on every branch. */
            totalMessages: number;
            /**
             * Format: date-time
             * @example 2026-11-22T11:00:00.000Z
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Time of the last write to the session (create or fork, new name or metadata, usage, append,
             *     batch, message update/delete, clear, new overlay, compaction, context-block write,
             *     add or remove, prompt refresh, a writing tool run, a completed agent turn, a
             *     split); an imported session has the time it was exported with.
             * @example 2026-11-22T11:05:00.000Z
             */
            updatedAt: string;
        };
        /** @description A stored overlay; `summary` stands for the messages `fromMessageId … toMessageId` of a path. */
        Compaction: {
            /**
             * Format: uuid
             * @description Server-chosen (UUID v4). The synthetic history message is `compaction_<id>`.
             */
            id: string;
            summary: string;
            fromMessageId: components["schemas"]["MessageId"];
            toMessageId: components["schemas"]["MessageId"];
            /** Format: date-time */
            createdAt: string;
        };
        /** @description One search hit. */
        SearchHit: {
            /** @description The hit's session. Present only in the cross-session search (`GET /search`). */
            sessionId?: string;
            id: components["schemas"]["MessageId"];
            role: string;
            /** @description The indexed text of the message (its `text` parts joined by one space). */
            content: string;
            /**
             * Format: date-time
             * @description When the message was stored (server time, not the message's own `createdAt`).
             */
            createdAt: string;
        };
        /** @description One object of the directory, as its last report gave it. */
        DirectoryEntry: {
            /** @enum {string} */
            kind: "agent" | "space";
            /** @description Its `idFromName` name (the agent). */
            name: string;
            sessions: number;
            /** @description Stored messages */
            messages: number;
            memories: number;
            /** @description The size of its SQLite database (the runtime's `databaseSize`). */
            sqliteBytes: number;
            /** @description The bytes of its message fields spilled to R2 (what its `spills` rows record); shared skill files are not counted. */
            r2Bytes: number;
            /**
             * Format: date-time
             * @description When it first reported holding data (else its oldest session or memory).
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Its last write.
             */
            lastActiveAt: string;
            /**
             * Format: date-time
             * @description When its shard took the report.
             */
            reportedAt: string;
        };
        DirectoryPage: {
            items: components["schemas"]["DirectoryEntry"][];
            /** @description The next page's `cursor`; `null` after the last page. */
            nextCursor: string | null;
        };
        UsageTotals: {
            turns: number;
            inputTokens: number;
            outputTokens: number;
            /** @description Turns whose counts were estimated (stopped before the provider said). */
            estimatedTurns: number;
            /** @description Of the input tokens, those the provider read from its prompt cache (Anthropic's cache reads, OpenAI's cached prompt tokens). */
            cachedInputTokens: number;
        };
        AgentUsage: components["schemas"]["UsageTotals"] & {
            /** Format: date-time */
            from: string;
            /** Format: date-time */
            to: string;
            /** @description How our token estimates (characters and words, the reference's heuristic) compare with what the configured model counted, over its newest 20 turns that the provider counted (whatever `from` and `to` say). Auto-compaction and compaction's tail budget use the estimate times `ratio` (docs/REFERENCE.md#token-calibration). */
            calibration: {
                model: string;
                /** @description Turns read (0 - none yet; the ratio is 1). */
                turns: number;
                /** @description Our estimate of their input tokens. */
                estimatedInputTokens: number;
                /** @description The provider's count of the same. */
                inputTokens: number;
                /** @description Tokens counted per token estimated (1 until a turn was counted; within [0.25, 4]). */
                ratio: number;
            };
            bySession: (components["schemas"]["UsageTotals"] & {
                sessionId: string;
            })[];
        };
        DirectoryUsagePage: {
            items: (components["schemas"]["UsageTotals"] & {
                name: string;
            })[];
            nextCursor: string | null;
        };
        /**
         * @description `type`: `invalid_request_error` (400, 404 of a route, 405, 409, 413),
         *     `authentication_error` (401), `permission_error` (403), `not_found_error` (404),
         *     `rate_limit_error` (429), `server_error` (5xx). `code` is this API's (`Error`); `param`
         *     the request field the message starts with, when it names one.
         */
        OpenAiError: {
            error: {
                message: string;
                /** @enum {string} */
                type: "invalid_request_error" | "authentication_error" | "permission_error" | "not_found_error" | "rate_limit_error" | "server_error";
                code: string | null;
                param: string | null;
            };
        };
        OpenAiModelList: {
            /** @constant */
            object: "list";
            data: {
                id: string;
                /** @constant */
                object: "model";
                created: number;
                owned_by: string;
            }[];
        };
        /** @description Text content; an array holds text parts only. */
        OpenAiText: string | {
            /** @enum {string} */
            type: "text" | "input_text" | "output_text";
            text: string;
        }[] | null;
        OpenAiChatMessage: {
            /** @enum {string} */
            role: "system" | "developer" | "user" | "assistant" | "tool";
            content?: components["schemas"]["OpenAiText"];
            tool_calls?: {
                id: string;
                type?: string;
                function: {
                    name: string;
                    arguments: string;
                };
            }[] | null;
            /** @description A `tool` message's call (required there). */
            tool_call_id?: string;
        };
        /** @description A chat completion's function tool. */
        OpenAiChatTool: {
            /** @constant */
            type: "function";
            function: {
                name: string;
                description?: string | null;
                parameters?: Record<string, unknown> | null;
            };
        };
        /** @description A Responses function tool. */
        OpenAiResponseTool: {
            /** @constant */
            type: "function";
            name: string;
            description?: string | null;
            parameters?: Record<string, unknown> | null;
        };
        OpenAiToolChoice: ("none" | "auto" | "required") | Record<string, unknown> | null;
        /** @description OpenAI's chat completion request; fields not listed are ignored. */
        OpenAiChatRequest: {
            model?: string | null;
            messages: components["schemas"]["OpenAiChatMessage"][];
            tools?: components["schemas"]["OpenAiChatTool"][] | null;
            tool_choice?: components["schemas"]["OpenAiToolChoice"];
            stream?: boolean | null;
            stream_options?: {
                include_usage?: boolean | null;
            } | null;
            temperature?: number | null;
            max_tokens?: number | null;
            max_completion_tokens?: number | null;
            n?: number | null;
            /** @description Names the session when neither `x-session-id` nor `metadata.session_id` does. */
            user?: string | null;
            metadata?: {
                session_id?: string;
            } | null;
        };
        OpenAiChatCompletion: {
            /** @description The stored assistant message's id. */
            id: string;
            /** @constant */
            object: "chat.completion";
            created: number;
            model: string;
            choices: {
                index: number;
                /** @enum {string} */
                finish_reason: "stop" | "tool_calls";
                message: {
                    /** @constant */
                    role: "assistant";
                    content: string;
                    tool_calls?: {
                        id: string;
                        /** @constant */
                        type: "function";
                        function: {
                            name: string;
                            arguments: string;
                        };
                    }[];
                };
            }[];
            usage: {
                prompt_tokens: number;
                completion_tokens: number;
                total_tokens: number;
            };
        };
        OpenAiInputItem: {
            /** @constant */
            type?: "message";
            /** @enum {string} */
            role: "system" | "developer" | "user" | "assistant";
            content?: components["schemas"]["OpenAiText"];
        } | {
            /** @constant */
            type: "function_call";
            call_id: string;
            name: string;
            arguments: string;
        } | {
            /** @constant */
            type: "function_call_output";
            call_id: string;
            output?: components["schemas"]["OpenAiText"];
        };
        /** @description OpenAI's Responses request; fields not listed are ignored. */
        OpenAiResponseRequest: {
            model?: string | null;
            input: string | components["schemas"]["OpenAiInputItem"][];
            instructions?: string | null;
            previous_response_id?: string | null;
            conversation?: string | {
                id: string;
            } | null;
            store?: boolean | null;
            stream?: boolean | null;
            tools?: components["schemas"]["OpenAiResponseTool"][] | null;
            tool_choice?: components["schemas"]["OpenAiToolChoice"];
            temperature?: number | null;
            max_output_tokens?: number | null;
        };
        /** @description A `message` item (`role`, `content` of `output_text` parts) or a `function_call` (`call_id`, `name`, `arguments`). */
        OpenAiOutputItem: {
            /** @enum {string} */
            type: "message" | "function_call" | "function_call_output";
            id: string;
            status: string;
            role?: string;
            content?: unknown[];
            call_id?: string;
            name?: string;
            arguments?: string;
            output?: string;
        };
        OpenAiResponse: {
            /** @description The stored assistant message's id. */
            id: string;
            /** @constant */
            object: "response";
            created_at: number;
            /** @enum {string} */
            status: "completed" | "incomplete" | "in_progress";
            model: string;
            output: components["schemas"]["OpenAiOutputItem"][];
            usage?: {
                input_tokens?: number;
                output_tokens?: number;
                total_tokens?: number;
            } | null;
            conversation: {
                id: string;
            };
            previous_response_id?: string | null;
            instructions?: string | null;
            store?: boolean;
        };
        OpenAiItemList: {
            /** @constant */
            object: "list";
            data: components["schemas"]["OpenAiOutputItem"][];
            first_id: string | null;
            last_id: string | null;
            has_more: boolean;
        };
        Error: {
            error: {
                /**
                 * @description `invalid_request` 400, `unauthorized` 401, `forbidden` 403, `not_found` 404,
                 *     `method_not_allowed` 405, `conflict` 409, `too_large` 413, `over_budget` 422,
                 *     `rate_limited` 429, `not_configured` / `llm_unavailable` / `space_unavailable`
                 *     503, `internal` 500; `not_a_prefix` / `forged_tool_result` / `forged_approval`
                 *     409 (rejected `POST …/chat` continuations only); `version_conflict` 409 (a shared
                 *     block's replace after another write).
                 * @enum {string}
                 */
                code: "invalid_request" | "unauthorized" | "not_found" | "method_not_allowed" | "conflict" | "too_large" | "over_budget" | "not_configured" | "llm_unavailable" | "space_unavailable" | "internal" | "not_a_prefix" | "version_conflict" | "forged_tool_result" | "forged_approval" | "forbidden" | "rate_limited";
                /** @description A human-readable explanation. */
                message: string;
            };
        };
        /**
         * @description Where an appended message attaches: **absent** → child of the latest leaf (a root in
         *     an empty session); **`null`** → a new root; **a string** → child of that message,
         *     which must be in this session (`404` otherwise).
         */
        ParentId: components["schemas"]["MessageId"] | null;
        AppendRequest: {
            message: components["schemas"]["Message"];
            parentId?: components["schemas"]["ParentId"];
        };
        AppendResult: {
            message: components["schemas"]["Message"];
            /** @description The parent of the stored message (`null` for a root). */
            parentId: string | null;
            /** @description `false` when the id already existed, or the message is synthetic; nothing changed. */
            inserted: boolean;
            /**
             * @description Present (and `true`) only when the message's id starts with `compaction_`: a
             *     synthetic overlay message, never stored. `parentId` is then `null` and `message`
             *     echoes the request.
             * @constant
             */
            synthetic?: true;
            compaction?: components["schemas"]["CompactionReport"];
        };
        BatchRequest: {
            messages: components["schemas"]["Message"][];
            parentId?: components["schemas"]["ParentId"];
        };
        BatchResult: {
            /** @description Every id of the request, in order (skipped duplicates included, synthetic `compaction_…` ids left out). */
            ids: components["schemas"]["MessageId"][];
            /** @description Where the chain ends (see the operation for an empty list). */
            lastId: string | null;
            /** @description How many messages were stored (duplicates are not counted). */
            inserted: number;
            compaction?: components["schemas"]["CompactionReport"];
        };
        DeleteMessagesRequest: {
            /** @description The messages to delete; an id named twice is deleted once. */
            ids: components["schemas"]["MessageId"][];
        };
        DeleteMessagesResult: {
            /** @description The ids deleted, each once, in the order first named. */
            deleted: components["schemas"]["MessageId"][];
        };
        StorageFigures: {
            rows: number;
            bytes: number;
        };
        SessionStorage: {
            sessionId: string;
            /** @description Every row of `kinds`. */
            rows: number;
            /** @description The bytes those rows store (indexes and page overhead not counted). */
            sqliteBytes: number;
            /** @description The bytes of its messages' fields kept in R2. */
            r2Bytes: number;
            /** @description The R2 objects holding them. */
            r2Objects: number;
            kinds: {
                /** @description Its messages on every branch, their JSON as stored (a spilled field counts as its placeholder). */
                messages: components["schemas"]["StorageFigures"];
                /** @description Its summary overlays, their summaries. */
                compactions: components["schemas"]["StorageFigures"];
                /** @description Its writable blocks' texts, blocks added or removed at run time, loaded skills. */
                context: components["schemas"]["StorageFigures"];
                /** @description Its frozen system prompt. */
                prompt: components["schemas"]["StorageFigures"];
                /** @description Its messages' vectors (with embeddings). */
                vectors: components["schemas"]["StorageFigures"];
                /** @description The rows that say where its spilled fields are (their bytes are `r2Bytes`). */
                spills: components["schemas"]["StorageFigures"];
            };
        };
        UpdateMessageRequest: {
            message: components["schemas"]["Message"];
        };
        MessageList: {
            messages: components["schemas"]["Message"][];
        };
        HistoryPage: {
            messages: components["schemas"]["Message"][];
            /**
             * @description Only for a page: the `before` of the page above this one (of a path: older
             *     messages; of a message's children: older children), `null` when there is none.
             */
            nextBefore?: string | null;
        };
        RecentHistory: {
            messages: components["schemas"]["Message"][];
            /** @description Whether older messages of the path were left out. */
            truncated: boolean;
            /** @description Stored bytes of the whole raw path. */
            totalContentBytes: number;
            /**
             * @description The window's oldest stored message when older ones were left out (the `before` of
             *     the window above), else `null`.
             */
            nextBefore?: string | null;
        };
        CreateSessionRequest: {
            /** @description 1–256 characters, no control characters. */
            name: string;
            /** @description Syntax-checked only; the session need not exist. */
            parentSessionId?: string | null;
            model?: string | null;
            source?: string | null;
            /** @description The session's metadata; absent or `null`: `{}`. */
            metadata?: components["schemas"]["Metadata"] | null;
        };
        /**
         * @description The body of `PATCH /sessions/{sid}`: a new name, new metadata, or both (at least one
         *     of them, not `null`). Other fields are ignored.
         */
        UpdateSessionRequest: {
            /** @description 1–256 characters, no control characters; absent or `null`: unchanged. */
            name?: string | null;
            /** @description Replaces the metadata whole (`{}` clears it); absent or `null`: unchanged. */
            metadata?: components["schemas"]["Metadata"] | null;
        } | {
            name: string;
        } | {
            metadata: Record<string, unknown>;
        };
        ForkRequest: {
            /** @description The last message to copy; the path root → it is copied. */
            atMessageId: string;
            /** @description Name of the copy; default `"<source name> (fork)"`. */
            name?: string | null;
        };
        UsageRequest: {
            /** @default 0 */
            inputTokens?: number | null;
            /** @default 0 */
            outputTokens?: number | null;
            /** @default 0 */
            cost?: number | null;
        };
        CreateCompactionRequest: {
            /** @description Not blank; at most 1,800,000 bytes (`413` above). */
            summary: string;
            /** @description First message of the run; `toMessageId` or one of its ancestors. */
            fromMessageId: string;
            /** @description Last message of the run. */
            toMessageId: string;
        };
        /**
         * @description What auto-compaction did after an append or a batch (the optional `compaction` field of
         *     their answers). Present only when `SESSION_CONFIG.compaction.after` is set **and** the
         *     estimate (the branch's messages, overlays applied, plus the system prompt) is over it,
         *     or when the estimate itself failed. Never makes the append fail.
         */
        CompactionReport: {
            /**
             * @description `compacted`: an overlay was stored (`compaction`) and the frozen prompt re-rendered;
             *     `nothing-to-do`: the branch is over the threshold but has nothing to summarize
             *     (too short for `protectHead` + `minTailMessages`, or the tail reaches the head);
             *     `failed`: the estimate or the compaction failed (`error`), nothing was stored.
             * @enum {string}
             */
            status: "compacted" | "nothing-to-do" | "failed";
            /** @description The estimate that was compared with the threshold (`0` when the estimate itself failed). */
            tokenEstimate: number;
            /** @description `SESSION_CONFIG.compaction.after`. */
            tokenThreshold: number;
            compaction?: components["schemas"]["Compaction"];
            /** @description With `status: failed`: the error, as the body of an error answer would carry it (e.g. `llm_unavailable`, `not_configured` when no LLM is configured). */
            error?: {
                code: string;
                message: string;
            };
        };
        /**
         * @description `readonly`: static `content`, or the text of the R2 object `r2Key`; the model cannot
         *     write it. `writable`: per-session text (initial text `content`), within `maxTokens`.
         *     `search`: keyed entries in SQLite FTS5, shared by all sessions of the agent
         *     (`N entries indexed.` in the prompt). `skills`: documents in R2 under `prefix`, listed
         *     in the prompt as `- key: description`, loaded with `load_context`. `http` (ours,
         *     `SESSION_CONFIG` only): the text, and as its `ops` say its search, writes and loads,
         *     from the operator's own service (docs/REFERENCE.md, "Blocks from the operator's own
         *     service"); when the service fails, the last text it gave. `d1` (ours, `SESSION_CONFIG`
         *     only): the rows of the operator's query on a D1 binding, searchable over named columns
         *     with `search` (docs/REFERENCE.md, "Blocks from the operator's D1 database").
         * @enum {string}
         */
        BlockKind: "readonly" | "writable" | "search" | "skills" | "http" | "d1";
        /**
         * @description A block with its current content, as the prompt renders it.
         * @example {
         *       "label": "memory",
         *       "description": "Learned facts",
         *       "content": "user likes coffee",
         *       "tokens": 5,
         *       "maxTokens": 1100,
         *       "kind": "writable",
         *       "writable": true
         *     }
         */
        ContextBlock: {
            label: string;
            description: string | null;
            /**
             * @description The block's current content: the text (readonly, writable), `N entries indexed.` or
             *     `""` (search), `N sessions available for search.` (the `searchableHistory` block),
             *     the listing `- key: description` / `- key` per skill, one per line in key order
             *     (skills; `""` when there are none), the service's text (http; the last one it gave
             *     when it cannot answer now, `""` before the first), the query's rows, one line each
             *     (d1; likewise the last ones read when the database fails). A readonly block whose `r2Key`
             *     object is missing is `""`.
             */
            content: string;
            /** @description The token estimate of `content` (the reference heuristic). */
            tokens: number;
            /** @description The budget of a writable block, else `null`. */
            maxTokens: number | null;
            kind: components["schemas"]["BlockKind"];
            /**
             * @description Whether the model may write it with `set_context`: `writable` and `search` blocks,
             *     `skills` blocks of scope `agent`, and `http` blocks whose `ops` hold `set`. Readonly blocks, shared skills and the
             *     `searchableHistory` block are not writable.
             */
            writable: boolean;
            /**
             * @description Blocks of `scope: "space"` only (our addition): the version of the shared text
             *     shown (0 until first written, when the block shows its configured `content`),
             *     which a replace names.
             */
            version?: number;
        };
        /**
         * @description A block for this session (the fields of a `SESSION_CONFIG.context[]` entry). Unknown
         *     fields are refused (`400`), and so is a field that does not belong to the kind. An
         *     optional field given as `null` counts as absent.
         */
        AddBlockRequest: {
            /** @description 1–64 characters of `[A-Za-z0-9_-]`; must not be a label the session already has. */
            label: string;
            /**
             * @description A `BlockKind` a session may add: not `http` or `d1`, which only `SESSION_CONFIG`
             *     configures (`400`, nothing stored: the agent reads outside only where the operator
             *     said; so are `url`, `secret`, `timeoutMs`, `ops`, `binding`, `query` and `search`,
             *     their fields).
             * @enum {string}
             */
            kind: "readonly" | "writable" | "search" | "skills";
            description?: string | null;
            /** @description Writable only. The initial `content` must fit (`422` otherwise). */
            maxTokens?: number | null;
            /** @description Readonly (the text) and writable (the initial text) only; not with `r2Key`. */
            content?: string | null;
            /**
             * @description Readonly only; the text is that object of `SKILLS_BUCKET` (bytes). At run time only
             *     a key in the agent's own space (see `POST …/context`).
             */
            r2Key?: string | null;
            /** @description Skills only; the R2 key prefix, default `skills/`. */
            prefix?: string | null;
            /**
             * @description Skills and writable blocks. Writable blocks may also be `space` (our addition): one
             *     text kept in the agent's memory space, read and written by every agent of it
             *     (**Memory spaces**; `space` on a skills block is `400`). Skills (default `agent`): `agent`: the objects under
             *     `<prefix><agent>/`, writable by this agent's model; `shared`: the whole `<prefix>`, a
             *     library common to all agents, readonly. Writable: `agent` makes the block one text
             *     shared by all the agent's sessions (kept when a session is deleted); absent, each
             *     session has its own (`shared` is `400`). A shared prefix that covers or is covered by the prefix of an agent-scoped
             *     skills block of the session is refused (`400`), and so is a prefix outside the
             *     agent's own space (see `POST …/context`).
             * @enum {string|null}
             */
            scope?: "agent" | "shared" | "space" | null;
        };
        BlockContentRequest: {
            content: string;
        };
        BlockReplaceRequest: {
            content: string;
            /**
             * @description Blocks of `scope: "space"` only (our addition; `400` on any other block): the
             *     `version` of the text read. A replace after another write is `409
             *     version_conflict`, nothing written. Absent: the version this session last read.
             */
            version?: number | null;
        };
        Prompt: {
            /**
             * @description The rendered system prompt: one part per block in prompt order (empty readonly
             *     blocks are skipped), each a line of 46 `═`, the header
             *     `LABEL (description) [pct% — tokens/max tokens] [tag]`, another line of `═` and the
             *     content; parts joined by a blank line, no trailing newline.
             */
            prompt: string;
            /** @description `true` with `cachedPrompt: true` (the default): the stored copy. `false` with `cachedPrompt: false`: rendered now, not stored. */
            frozen: boolean;
        };
        /** @description One tool as the model is offered it. */
        Tool: {
            /** @enum {string} */
            name: "set_context" | "load_context" | "unload_context" | "search_context" | "session_search" | "expand_compaction" | "memory_store" | "memory_recall" | "memory_forget";
            /** @description The text the model sees; it names the session's blocks (see `docs/tools.md`). */
            description: string;
            /** @description A JSON Schema (`type: object`, `properties`, `required`) of the tool's input. */
            inputSchema: Record<string, unknown>;
        };
        ToolRunRequest: {
            /**
             * @description The tool's input, as the model would send it. Absent → `{}`. Each tool takes some of
             *     the fields below (its own JSON Schema is in `GET …/tools`); a field another tool
             *     takes is ignored, but every field named here must have its type whichever tool runs
             *     (`400` otherwise; `null` counts as absent where the tool allows that).
             */
            input?: {
                /** @description The block (set_context, load_context, unload_context, search_context). */
                label?: string | null;
                /** @description What to write or store (set_context */
                content?: string | null;
                /** @description `replace` (default) or `append` (set_context). */
                action?: string | null;
                /** @description `{title?, description?}` of a keyed entry (set_context). */
                metadata?: Record<string, unknown> | null;
                /** @description The skill (load_context */
                key?: string | null;
                /** @description What to look for (search_context */
                query?: string | null;
                /** @description The memory to forget (memory_forget). */
                id?: string | null;
                /** @description `core`, `daily` or `conversation` (memory_store, memory_recall). */
                category?: string | null;
                /** @description Topic words (memory_store). */
                tags?: string[] | null;
                /** @description How many (memory_recall */
                limit?: number | null;
                /** @description The summary to expand (expand_compaction). */
                compactionId?: string | null;
                /** @description The first original to read (expand_compaction). */
                offset?: number | null;
            };
        };
        /**
         * @description A tool the caller offers the model and runs itself (see *Client tools* in `chat`).
         *     Unknown fields are ignored.
         * @example {
         *       "name": "get_location",
         *       "description": "The user's current city",
         *       "inputSchema": {
         *         "type": "object",
         *         "properties": {}
         *       }
         *     }
         */
        ClientTool: {
            /**
             * @description 1–64 characters of `[A-Za-z0-9_-]`; must differ from the session's own tools
             *     (`GET …/tools`) and from the other entries (`400` otherwise).
             */
            name: string;
            /** @description What the model reads about the tool. Absent or `null` → `""`. */
            description?: string | null;
            /** @description JSON Schema of the input. Absent or `null` → `{"type": "object", "properties": {}}`. */
            inputSchema?: Record<string, unknown> | null;
        };
        /**
         * @description The body of `POST …/chat` (and of a WebSocket `chat` frame, minus `type`): a new
         *     turn (`message`), a continuation after client tools (`messages`), or the AI SDK's
         *     `useChat` body (`messages` and `trigger`; HTTP only).
         */
        ChatRequest: {
            /**
             * @description The new user message: `role` must be `user` and the `id` must be new in the
             *     session (`409 conflict` otherwise) and must not start with `compaction_`.
             */
            message: components["schemas"]["Message"] & {
                /** @constant */
                role?: "user";
            };
            parentId?: components["schemas"]["ParentId"];
            /** @description Client tools offered to the model for this turn, after the session's own. */
            tools?: components["schemas"]["ClientTool"][];
            memory?: components["schemas"]["ChatMemory"];
            cache?: components["schemas"]["ChatCache"];
        } | {
            /**
             * @description The branch from the root to its last message exactly as
             *     `GET …/history?leaf=<last id>` answers it, with pending client tool calls
             *     answered (`output-available` + `output`, or `output-error` + `errorText`). The
             *     last message must have an `id` (`400` otherwise); see `chat` for the `409`
             *     checks.
             */
            messages: components["schemas"]["Message"][];
            /** @description Client tools offered to the model (send them again to let it call them again). */
            tools?: components["schemas"]["ClientTool"][];
            memory?: components["schemas"]["ChatMemory"];
            cache?: components["schemas"]["ChatCache"];
        } | {
            /** @description The AI SDK's chat id (not used). */
            id?: string;
            /**
             * @description The branch as the AI SDK's chat client holds it, ending with a new user message,
             *     a stored user message (answered again) or a stored assistant message with client
             *     tool results (continued inside it). See *The AI SDK's useChat* in `chat`.
             */
            messages: components["schemas"]["Message"][];
            /** @enum {string} */
            trigger: "submit-message" | "regenerate-message";
            /** @description The message the AI SDK regenerates (not used). */
            messageId?: string;
            /** @description Client tools offered to the model (pass them in the transport's `body`). */
            tools?: components["schemas"]["ClientTool"][];
            memory?: components["schemas"]["ChatMemory"];
            cache?: components["schemas"]["ChatCache"];
        };
        /**
         * @description What the provider's prompt cache keeps of this turn's model calls, instead of
         *     `SESSION_CONFIG.chat.cache` (docs/REFERENCE.md#prompt-cache): `false` marks nothing (no
         *     Anthropic `cache_control`, no OpenAI `prompt_cache_key`); `true`: the defaults; an object:
         *     `instructions` (the frozen system prompt, default true), `tools` (default true),
         *     `messages` (the N-th message from the end of the conversation sent closes the cached
         *     prefix; 0, the default, none; at most 100), `ttl` (`5m`, the default, or `1h`). Anything
         *     else, `null` included, is `400` and nothing is stored.
         */
        ChatCache: boolean | {
            /** @default true */
            instructions?: boolean;
            /** @default true */
            tools?: boolean;
            /** @default 0 */
            messages?: number;
            /**
             * @default 5m
             * @enum {string}
             */
            ttl?: "5m" | "1h";
        };
        /**
         * @description How this turn uses long-term memory (see *Long-term memory* in `chat`): `true` or
         *     absent, as `SESSION_CONFIG.memory` says (nothing without it; a continuation never
         *     injects or extracts); `false`, neither injection nor extraction; or a memory spec that
         *     overrides the configuration for this turn only. Any other value, `null` included, is
         *     `400`, as is a spec with an unknown field or a value out of range (nothing runs). The
         *     memory tools are offered, within the agent's configured scope, either way.
         */
        ChatMemory: boolean | components["schemas"]["ChatMemorySpec"];
        /**
         * @description A call's memory spec (the seeds' per-call `memory`). Each field absent or `null` is as
         *     configured.
         */
        ChatMemorySpec: {
            /**
             * @description Inject the memories recalled for the user message. `true` injects even when
             *     `SESSION_CONFIG.memory` or its `inject` is off (with `inject`'s defaults: 5 memories
             *     within 400 tokens).
             */
            inject?: boolean | null;
            /** @description Distill the exchange into memories once the answer is sent (`true` also when not configured). */
            extract?: boolean | null;
            /**
             * @description The scope by tags for this turn, instead of `memory.tags`: only memories holding at
             *     least one of them are injected (`[]`: every memory), and what extraction stores
             *     gets them all.
             */
            tags?: components["schemas"]["MemoryTag"][] | null;
            /** @description Inject only memories of these categories (instead of `memory.categories` and `memory.inject.categories`). */
            categories?: ("core" | "daily" | "conversation")[] | null;
            /** @description Inject at most this many (instead of `memory.inject.limit`). */
            limit?: number | null;
        };
        /** @description The assistant message one agent turn stores (and answers). */
        AssistantMessage: {
            /**
             * Format: uuid
             * @description Server-chosen (UUID v4); also the `messageId` of the turn's `delta` events and frames.
             */
            id: string;
            /** @constant */
            role: "assistant";
            /**
             * @description Each model call (step) in order: its `reasoning` and `text` parts as they streamed
             *     (normally one reasoning part, then one text part; each left out when empty), then
             *     one `dynamic-tool` part per tool call it made.
             */
            parts: ({
                /** @enum {string} */
                type: "reasoning" | "text";
                text: string;
            } | {
                /** @constant */
                type: "dynamic-tool";
                toolName: string;
                /** @description The provider's call id. */
                toolCallId: string;
                /**
                 * @description `output-available`: a server tool ran (`output`). `output-error`: the
                 *     model called a tool nobody offers (`errorText`). `input-available`: a
                 *     client tool call waiting for the caller's result.
                 * @enum {string}
                 */
                state: "output-available" | "output-error" | "input-available";
                /** @description The model's arguments (`{}` when it sent none or invalid JSON). */
                input: Record<string, unknown>;
                /** @description The server tool's output string (`Error: …` outputs included). */
                output?: string;
                /** @example Error: there is no tool named "weather" */
                errorText?: string;
            })[];
            /**
             * Format: date-time
             * @description Server time of the turn.
             */
            createdAt: string;
            metadata: {
                /** @description `LLM_MODEL`. */
                model: string;
                /**
                 * @description Tokens of all the turn's model calls together, as the provider reported them
                 *     (Anthropic input tokens include cache reads and writes). Also added to the
                 *     session's `inputTokens` / `outputTokens`.
                 */
                usage: {
                    inputTokens: number;
                    outputTokens: number;
                };
                /**
                 * @description The ids of the long-term memories given to the model in this turn's
                 *     `<user-memory>` block (an empty array when none was). Present only when the
                 *     turn injected memory: a new turn with `SESSION_CONFIG.memory` set with `inject`
                 *     on and no `memory: false` or `memory: {inject: false}`, or with `memory:
                 *     {inject: true}`.
                 * @example [
                 *       "mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b"
                 *     ]
                 */
                memories?: string[];
            };
        };
        ChatResult: {
            /** @description The one assistant message the turn stored. */
            messages: components["schemas"]["AssistantMessage"][];
        };
        /**
         * @description The JSON of one server-sent event of `POST …/chat` with `Accept: text/event-stream`
         *     (`data: <ChatEvent>`); the stream ends with `data: [DONE]` after the `message` event,
         *     or right after an `error` event (without `[DONE]`).
         */
        ChatEvent: {
            /** @constant */
            type: "delta";
            /** @description The id the reply will be stored under. */
            messageId: string;
            /** @description The next piece of the reply's text. */
            text: string;
        } | {
            /** @constant */
            type: "message";
            message: components["schemas"]["AssistantMessage"];
        } | {
            /** @constant */
            type: "error";
            /** @description An `error.code` (e.g. `llm_unavailable`, `internal`, `invalid_request`). */
            code: string;
            message: string;
        };
        /**
         * @description A text frame a client sends on `GET …/ws` (one JSON object). Fields other than
         *     `type` are the body of the HTTP request the frame stands for.
         */
        ClientFrame: {
            /** @constant */
            type: "append";
            message: components["schemas"]["Message"];
            parentId?: components["schemas"]["ParentId"];
        } | {
            /** @constant */
            type: "history";
            leafId?: string | null;
        } | ({
            /** @constant */
            type: "chat";
        } & components["schemas"]["ChatRequest"]) | {
            /** @constant */
            type: "ping";
        } | {
            /** @constant */
            type: "cancel";
        };
        /**
         * @description A text frame the server sends on `GET …/ws`. `history`, `pong`, `error` and the
         *     `pending` echo of a `chat` frame's message go to the socket that sent the frame;
         *     `message`, `deleted`, `cleared`, `context`, `delta`, `tool`, `reasoning` and `status`
         *     go to every socket of the session; `memory` and `schedule` go to every socket of the
         *     agent whose token is not limited to sessions.
         */
        ServerFrame: {
            /** @constant */
            type: "space";
            sessionId: string;
            space: string;
            /** @constant */
            status: "unreachable";
            message: string;
        } | {
            /** @constant */
            type: "history";
            sessionId: string;
            messages: components["schemas"]["Message"][];
        } | {
            /** @constant */
            type: "pong";
        } | {
            /** @constant */
            type: "error";
            sessionId: string;
            /**
             * @description The `error.code` the HTTP route would answer (`invalid_request` for a bad
             *     frame; `forbidden`, or `unauthorized` once the socket's token expired, for a
             *     frame its token does not allow; `rate_limited` over `RATE_LIMIT`).
             * @enum {string}
             */
            code: "invalid_request" | "unauthorized" | "not_found" | "method_not_allowed" | "conflict" | "too_large" | "over_budget" | "not_configured" | "llm_unavailable" | "internal" | "not_a_prefix" | "forged_tool_result" | "forged_approval" | "forbidden" | "rate_limited";
            message: string;
        } | {
            /** @constant */
            type: "message";
            sessionId: string;
            message: components["schemas"]["Message"];
            /**
             * @description Only on the echo a socket gets of its own `chat` frame's user message, at once:
             *     it is not stored yet (it is stored with the reply, all or nothing; the
             *     `message` frames after the turn have no `pending`).
             * @constant
             */
            pending?: true;
        } | {
            /** @constant */
            type: "deleted";
            sessionId: string;
            ids: string[];
        } | {
            /** @constant */
            type: "cleared";
            sessionId: string;
        } | {
            /** @constant */
            type: "context";
            sessionId: string;
            label: string;
        } | {
            /** @constant */
            type: "tool";
            sessionId: string;
            messageId: string;
            toolCallId: string;
            toolName: string;
            /** @enum {string} */
            state: "input-available" | "output-available" | "output-error";
            /** @description The call's input (any JSON). */
            input: unknown;
            output?: string;
            errorText?: string;
        } | {
            /** @constant */
            type: "reasoning";
            sessionId: string;
            messageId: string;
            text: string;
        } | {
            /** @constant */
            type: "delta";
            sessionId: string;
            messageId: string;
            text: string;
        } | {
            /** @constant */
            type: "status";
            sessionId: string;
            /** @enum {string} */
            phase: "idle" | "compacting";
            tokenEstimate: number;
            /** @description `SESSION_CONFIG.compaction.after`, null without one. */
            tokenThreshold: number | null;
            /** @description On the `idle` frame after an auto-compaction that stored an overlay. */
            compacted?: {
                tokensBefore?: number;
            };
            /** @description On the `idle` frame after an auto-compaction that failed. */
            error?: {
                code: string;
                message: string;
            };
        } | {
            /** @constant */
            type: "memory";
            /** @enum {string} */
            op: "created" | "updated" | "deleted";
            memory: components["schemas"]["Memory"];
        } | {
            /** @constant */
            type: "schedule";
            /** @enum {string} */
            op: "run";
            scheduleId: string;
            run: components["schemas"]["ScheduleRun"];
        };
        /**
         * @description A scheduled agent turn. Exactly one of `at`, `every` and `cron` is set; the other two
         *     are `null`. `nextRunAt` is `null` once a one-shot ran (it stays listed).
         * @example {
         *       "id": "sch_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b",
         *       "name": "Morning brief",
         *       "prompt": "Summarize what I should do today.",
         *       "at": null,
         *       "every": null,
         *       "cron": "30 7 * * 1-5",
         *       "sessionId": null,
         *       "reach": "agent",
         *       "paused": false,
         *       "nextRunAt": "2026-11-23T07:30:00.000Z",
         *       "lastRunAt": null,
         *       "createdAt": "2026-11-22T11:00:00.000Z"
         *     }
         */
        Schedule: {
            id: string;
            name: string;
            prompt: string;
            /** Format: date-time */
            at: string | null;
            every: number | null;
            cron: string | null;
            /** @description The session the runs are turns of; `null`, a fresh history each run. */
            sessionId: string | null;
            reach: components["schemas"]["ScheduleReach"];
            paused: boolean;
            /** Format: date-time */
            nextRunAt: string | null;
            /** Format: date-time */
            lastRunAt: string | null;
            /** Format: date-time */
            createdAt: string;
        };
        /**
         * @description One run of a schedule. `status` is `running` from its start (recorded before the model
         *     is called) to its end, then `ok` (with `reply` and `usage`) or `error` (with `error`;
         *     also for a run a restart cut short, which is never run again).
         */
        ScheduleRun: {
            id: string;
            /** Format: date-time */
            startedAt: string;
            /** Format: date-time */
            endedAt: string | null;
            /** @enum {string} */
            status: "ok" | "error" | "running";
            reply: string | null;
            usage: null | {
                inputTokens: number;
                outputTokens: number;
            };
            error: string | null;
        };
        /**
         * @description What a run reads across sessions (`session_search`, the history block's search, the
         *     memory tools, the memories injected into its prompt). `session`: the schedule's
         *     `sessionId` only, as a token limited to that session would (none for a run without
         *     one); `agent`: every session of the agent. A run in a session stores its turn there,
         *     where that session's tokens read it, so `agent` there is said explicitly.
         * @enum {string}
         */
        ScheduleReach: "session" | "agent";
        CreateScheduleRequest: {
            prompt: string;
            name?: string | null;
            /** Format: date-time */
            at?: string | null;
            every?: number | null;
            cron?: string | null;
            sessionId?: string | null;
            /** @description Absent or `null`: `session` with `sessionId`, `agent` without. */
            reach?: components["schemas"]["ScheduleReach"] | null;
        };
        UpdateScheduleRequest: {
            paused?: boolean | null;
            prompt?: string | null;
            name?: string | null;
            /** Format: date-time */
            at?: string | null;
            every?: number | null;
            cron?: string | null;
            reach?: components["schemas"]["ScheduleReach"] | null;
        };
        /**
         * @description `core`: a permanent fact (the default). `daily`: a note that expires (at its
         *     `expiresAt`, by default `SESSION_CONFIG.memory.dailyTtlDays` days after it was stored
         *     or became `daily`). `conversation`: belongs to the session of its `source` and is
         *     deleted with it; the turn injects only the current session's.
         * @enum {string}
         */
        MemoryCategory: "core" | "daily" | "conversation";
        /**
         * @description A tag: 1–64 characters once leading and trailing white space is trimmed, without
         *     control characters. Stored trimmed.
         * @example travel
         * @example food
         */
        MemoryTag: string;
        /**
         * @description One long-term memory, as the API shows it. Every field is always present. Only live
         *     memories are ever shown: one whose `expiresAt` has passed is gone.
         * @example {
         *       "id": "mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b",
         *       "content": "The user prefers trains to planes.",
         *       "category": "core",
         *       "tags": [
         *         "travel"
         *       ],
         *       "metadata": {},
         *       "score": 0.9,
         *       "source": {
         *         "sessionId": "chat-1",
         *         "messageId": "m1"
         *       },
         *       "createdAt": "2026-11-22T11:00:00.000Z",
         *       "updatedAt": "2026-11-22T11:00:00.000Z",
         *       "expiresAt": null,
         *       "recalledAt": null,
         *       "recallCount": 0,
         *       "validFrom": "2026-11-22T11:00:00.000Z",
         *       "invalidAt": null,
         *       "supersededBy": null,
         *       "embeddedAt": null
         *     }
         */
        Memory: {
            /**
             * @description `mem_` and a UUID v4 when the service chose it; the caller's own when stored with
             *     `PUT …/memories/{memory}` (1–128 characters of `[A-Za-z0-9._:-]`); as exported for an
             *     imported one.
             */
            id: string;
            /** @description The fact, as stored (1–4,000 characters, not blank). */
            content: string;
            category: components["schemas"]["MemoryCategory"];
            tags: components["schemas"]["MemoryTag"][];
            metadata: components["schemas"]["Metadata"];
            /** @description The confidence that the fact is true and lasting; `null` when unknown (recall counts it as 0.5). */
            score: number | null;
            /**
             * @description Where the memory came from: the `sessionId` (and `messageId`) it was stored with,
             *     the session of the memory tool that stored it, or the session and user message an
             *     extraction took it from. `null` for a memory stored over HTTP without a `sessionId`.
             */
            source: {
                sessionId: string;
                messageId: string | null;
            } | null;
            /**
             * Format: date-time
             * @example 2026-11-22T11:00:00.000Z
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Time of the last change (each version; a merged duplicate too). Recency counts from it.
             */
            updatedAt: string;
            /**
             * Format: date-time
             * @description When it expires; `null`: never.
             */
            expiresAt: string | null;
            /**
             * Format: date-time
             * @description When it was last recalled (`GET /memories/search`, `memory_recall`, a turn that injected it); `null`: never.
             */
            recalledAt: string | null;
            /** @description How many times it was recalled. */
            recallCount: number;
            /**
             * Format: date-time
             * @description When the fact became true: the `validFrom` it was stored with, else its `createdAt`.
             *     `asOf` reads compare with it.
             */
            validFrom: string;
            /**
             * Format: date-time
             * @description When the fact stopped being true (a memory that `supersedes` it was stored, or a
             *     consolidation updated or deleted it); `null` while it holds. A memory that no longer
             *     holds is kept, with its versions, but lists, searches, recall, injection and
             *     duplicate checks see it only with `asOf` (a time before `invalidAt`) or
             *     `includeSuperseded=1`; `GET /memories/{memory}` always answers it.
             */
            invalidAt: string | null;
            /** @description The memory that replaced it, if one did (`null` also after that one is deleted). */
            supersededBy: string | null;
            /**
             * Format: date-time
             * @description When the vector of its current text (by the embeddings model in use) was made;
             *     `null` until it exists, and always without embeddings. A write answers before the
             *     vector is made (after the answer), so a new or changed text shows `null` first;
             *     a failed embeddings call leaves it `null` until a later write or a restart catches up,
             *     and a change of model makes it `null` again until re-embedded in the background.
             */
            embeddedAt: string | null;
        };
        MemoryList: {
            /** @description Newest `createdAt` first. */
            memories: components["schemas"]["Memory"][];
            /** @description The `cursor` of the next page; `null` on the last page. */
            nextCursor: string | null;
        };
        /** @description One recalled memory, with its rank and why (docs/REFERENCE.md#memory-ranking). */
        MemoryHit: {
            memory: components["schemas"]["Memory"];
            /** @description `0.70 relevance + 0.15 confidence + 0.10 recency + 0.05 frequency`, rounded to 4 decimals. */
            score: number;
            /** @description The signals in words, e.g. `text match 0.82, confidence 0.90, changed 3 days ago (0.93), recalled 2 times before (0.46)`. */
            why: string;
            /** @description The numbers the rank was made of. */
            signals: {
                /** @description Full-text relevance (bm25) relative to the best candidate's; 0 when the text did not match. */
                text: number;
                /** @description Cosine similarity of the memory's vector to the query's; `null` without embeddings or when not a semantic candidate. */
                semantic: number | null;
                /** @description `text` without embeddings; with them, the stronger of `text` and the rescaled similarity, plus a tenth of the weaker (at most 1). */
                relevance: number;
                /** @description The memory's `score`, 0.5 when unknown. */
                confidence: number;
                /** @description Halves every 30 days since `updatedAt`. */
                recency: number;
                /** @description `ln(1 + recallCount) / ln 11`, at most 1 (the count before this recall). */
                frequency: number;
            };
        };
        /** @description A memory as one write left it. */
        MemoryVersion: {
            content: string;
            tags: components["schemas"]["MemoryTag"][];
            metadata: components["schemas"]["Metadata"];
            score: number | null;
            category: components["schemas"]["MemoryCategory"];
            /** Format: date-time */
            at: string;
            /**
             * @description `api`: the HTTP API; `tool`: the model, through a memory tool; `extract`: an extraction.
             * @enum {string}
             */
            by: "api" | "tool" | "extract";
        };
        /** @description What an extraction changed. */
        Extracted: {
            /** @description The memories it stored. */
            added: components["schemas"]["Memory"][];
            /** @description The memories it changed (or merged a fact into), as they now are. */
            updated: components["schemas"]["Memory"][];
            /** @description The ids of the memories it forgot. */
            deleted: string[];
        };
        SearchEntry: {
            key: string;
            content: string;
            /** Format: date-time */
            createdAt: string;
            /** Format: date-time */
            updatedAt: string;
        };
        SearchEntryList: {
            entries: components["schemas"]["SearchEntry"][];
            nextCursor: string | null;
        };
        IngestEntriesRequest: {
            entries: {
                /** @description The entry's key; absent, derived from `title` and `content` as `set_context` derives it. */
                key?: string;
                title?: string;
                content: string;
            }[];
        };
        /** @description The body of `PUT /memories/{memory}`: that of `POST /memories` without `supersedes`. */
        PutMemoryRequest: components["schemas"]["CreateMemoryRequest"] & unknown;
        /** @description The body of `POST /memories`. Unknown fields are refused (`400`). */
        CreateMemoryRequest: {
            /** @description The fact, 1–4,000 characters, not only white space. */
            content: string;
            /**
             * @description `conversation` needs a `sessionId`. Absent or `null`: `core`.
             * @default core
             * @enum {string|null}
             */
            category?: "core" | "daily" | "conversation" | null;
            tags?: components["schemas"]["MemoryTag"][] | null;
            /**
             * @description The memory's metadata; absent or `null`: `{}`. A duplicate merges it over the stored
             *     one's (at most 16 keys in all).
             */
            metadata?: components["schemas"]["Metadata"] | null;
            /** @description Confidence, 0 to 1; absent or `null`: unknown. */
            score?: number | null;
            /** @description The session the fact came from (required for `conversation`); need not exist. */
            sessionId?: string | null;
            /** @description The message the fact came from (needs `sessionId`); need not exist. */
            messageId?: string | null;
            /**
             * Format: date-time
             * @description An ISO-8601 UTC timestamp in the future (`400` otherwise). Absent or `null`: never,
             *     or `dailyTtlDays` from now for a `daily` memory.
             */
            expiresAt?: string | null;
            /**
             * Format: date-time
             * @description When the fact became true (ISO-8601 UTC, past or future). Absent or `null`: now.
             */
            validFrom?: string | null;
            /**
             * @description Ids of memories this fact replaces. Each must exist and hold now (`404` for an
             *     unknown one, `409` for one already superseded; nothing is stored either way); they
             *     stop holding at this memory's `validFrom` and name it as `supersededBy`.
             */
            supersedes?: string[] | null;
            /**
             * @description `true`: before storing, show the fact with the most similar memories that hold now to
             *     the model, as extraction does, and store it as the model decides (waits for the
             *     model; `503` without one): memories it updates or deletes stop holding, superseded by
             *     this one; when it finds the fact already said, the answer is `200` with that memory,
             *     unchanged. `supersedes` is checked first (`404`/`409` before the model is asked) and,
             *     when it names any memory, this one is stored superseding them (`201`) whatever the
             *     model answers.
             */
            consolidate?: boolean | null;
        } & (unknown & unknown);
        /**
         * @description The body of `PATCH /memories/{memory}`: the fields to change (absent: unchanged).
         *     Unknown fields are refused (`400`).
         */
        UpdateMemoryRequest: {
            /** @description The new text; `null`: unchanged. */
            content?: string | null;
            /** @description The new tags (replacing the old ones); `null`: unchanged. */
            tags?: components["schemas"]["MemoryTag"][] | null;
            /** @description The new metadata, replacing the old whole (`{}` clears it); `null`: unchanged. */
            metadata?: components["schemas"]["Metadata"] | null;
            /** @description The new confidence; `null`: unknown. */
            score?: number | null;
            /**
             * @description `null`: unchanged. `conversation` only for a memory with a `source`.
             * @enum {string|null}
             */
            category?: "core" | "daily" | "conversation" | null;
            /**
             * Format: date-time
             * @description A timestamp in the future; `null`: never expires.
             */
            expiresAt?: string | null;
        };
        /**
         * @description The optional body of `DELETE /memories`: the filters of the query, by the same names
         *     and with the same meaning (see **Metadata and filters**), each winning over its query
         *     parameters (`metadata` over every `metadata.<key>`); `null`: absent. Where the query
         *     repeats a parameter, the body gives an array. Unknown fields are refused (`400`).
         */
        DeleteMemoriesRequest: {
            /** @description A category or a comma list of them, or an array of such. */
            category?: components["schemas"]["CategoryFilter"] | components["schemas"]["CategoryFilter"][] | null;
            /** @description Every one of these tags. */
            tag?: components["schemas"]["TagFilter"] | components["schemas"]["TagFilter"][] | null;
            /** @description At least one of these tags. */
            anyTag?: components["schemas"]["TagFilter"] | components["schemas"]["TagFilter"][] | null;
            createdAfter?: components["schemas"]["TimeFilter"] | null;
            createdBefore?: components["schemas"]["TimeFilter"] | null;
            updatedAfter?: components["schemas"]["TimeFilter"] | null;
            updatedBefore?: components["schemas"]["TimeFilter"] | null;
            /**
             * @description `metadata.<key>=<value>` filters as an object: a string value is compared as
             *     itself, a number or a boolean as its JSON text (`{"n": 30}` is `metadata.n=30`).
             */
            metadata?: {
                [key: string]: string | number | boolean;
            } | null;
            sessionId?: string | null;
        };
        /**
         * @description A category, or a comma list of them (`core,daily`).
         * @example core
         * @example core,daily
         */
        CategoryFilter: string;
        /**
         * @description A tag as a filter names it: 1–64 characters without control characters, compared
         *     exactly with the stored (trimmed) tags.
         * @example travel
         */
        TagFilter: string;
        /**
         * @description An ISO-8601 UTC timestamp (`Z` or `+00:00`, fractions of a second optional), or a
         *     date (its midnight, UTC); it must exist and lie from 1970 on (`400` otherwise).
         * @example 2026-11-22T11:00:00.000Z
         * @example 2026-11-22
         */
        TimeFilter: string;
        /** @description The optional body of `POST …/memories/extract`. Unknown fields are refused (`400`). */
        ExtractMemoriesRequest: {
            /** @description The exchange ends on the path to this message; absent or `null` → the latest leaf. */
            leafId?: string | null;
        };
        /**
         * @description `read`: `GET` (and `HEAD`) routes, and on the WebSocket `history` and `ping` frames.
         *     `write`: every route that is not admin-only.
         * @enum {string}
         */
        TokenScope: "read" | "write";
        /**
         * @description The payload of a scoped token (a JWT signed with HS256 and `TOKEN_SECRET`). Informative:
         *     clients need not read it, and changing it invalidates the signature.
         * @example {
         *       "sub": "alice",
         *       "scope": "write",
         *       "sessions": [
         *         "chat-1"
         *       ],
         *       "iat": 1795345200,
         *       "exp": 1795348800
         *     }
         */
        TokenClaims: {
            /** @description The agent (or, with `kind`, the memory space) the token opens. */
            sub: string;
            /**
             * @description Our addition: `space` for a token of `POST /spaces/{space}/tokens`; absent for an agent's.
             * @enum {string}
             */
            kind?: "space";
            scope: components["schemas"]["TokenScope"];
            /** @description The only sessions the token opens; absent → every session of the agent. */
            sessions?: string[];
            /** @description Issued at, in seconds since the epoch with milliseconds as the fraction. */
            iat: number;
            /** @description Expires at, in the same unit; the token is refused from this instant on. */
            exp: number;
        };
        /** @description The body of `POST /agents/{agent}/tokens`. Unknown fields are refused (`400`). */
        IssueTokenRequest: {
            scope: components["schemas"]["TokenScope"];
            /** @description The token's life in seconds: 1 to 2,592,000 (30 days). A JSON integer (`60.0` is refused). */
            ttlSeconds: number;
            /**
             * @description 1–500 session ids (the session id syntax; the sessions need not exist); the token
             *     opens only these, and no agent-wide route. Duplicates are dropped. Absent or
             *     `null`: every session of the agent. The token carries them (see `issueToken` for
             *     its size).
             */
            sessions?: string[] | null;
        };
        IssuedToken: {
            /**
             * @description Our addition: what `agent` names, an agent or a memory space.
             * @enum {string}
             */
            kind: "agent" | "space";
            /** @description The scoped token: `Authorization: Bearer <token>`, or `?token=` on a WebSocket handshake. */
            token: string;
            /**
             * Format: date-time
             * @description When it expires (its `exp`).
             */
            expiresAt: string;
            /** @description The agent it opens (its `sub`). */
            agent: string;
            scope: components["schemas"]["TokenScope"];
            /** @description The sessions it is limited to, duplicates dropped; `null` → every session. */
            sessions: string[] | null;
        };
        /** @description The optional body of `POST …/tokens/revoke`. Unknown fields are refused (`400`). */
        RevokeTokensRequest: {
            /**
             * Format: date-time
             * @description An ISO-8601 UTC timestamp, not in the future (`400` otherwise): every scoped token
             *     of the agent issued before it is revoked. Absent or `null`: now.
             */
            before?: string | null;
        };
        Revocation: {
            /**
             * Format: date-time
             * @description The revocation time in force: scoped tokens of the agent issued (`iat`) before it
             *     are refused. It only moves forward, so it may be later than the `before` asked for.
             */
            before: string;
        };
        /** @description The optional body of `POST …/split`. Unknown fields are refused (`400`). */
        SplitRequest: {
            /** @description The new session's name; absent or `null` → the old session's name. */
            name?: string | null;
            /**
             * @description What the new session starts from, not blank (`400` for white space only); absent
             *     or `null` → the summary of a compaction run now, else of the newest overlay.
             */
            summary?: string | null;
        };
        /**
         * @description One session as `GET …/sessions/{sid}/export` answers it (format `session-agent/3`;
         *     see **Export format**). Every list is present, empty when the session has nothing of
         *     that kind; rows are in the order they were written.
         */
        SessionExport: {
            /** @constant */
            format: "session-agent/3";
            session: components["schemas"]["ExportedSession"];
            /** @description Every message of every branch, in the order they were written (a parent before its children). */
            messages: components["schemas"]["ExportedMessage"][];
            /** @description The session's overlays, oldest first. */
            compactions: components["schemas"]["Compaction"][];
            /** @description The texts of the session's writable blocks (agent-scoped texts are in the agent's export only). */
            contextBlocks: components["schemas"]["ExportedContextBlock"][];
            /** @description Blocks added to the session at run time, and configured blocks removed from it. */
            contextDefs: components["schemas"]["ExportedContextDef"][];
            /** @description The skills loaded in the session and not unloaded, in load order. */
            loadedSkills: components["schemas"]["ExportedLoadedSkill"][];
            /** @description The frozen system prompt, if the session has one. */
            prompts: components["schemas"]["ExportedPrompt"][];
            /** @description The version of each shared block (`scope: "space"`) the session last read. */
            sharedBlockReads: components["schemas"]["ExportedSharedBlockRead"][];
        };
        /**
         * @description The version of a shared block of the agent's memory space that a session last read
         *     (its prompt, a read, its own write): the model's next replace of the block names it.
         */
        ExportedSharedBlockRead: {
            label: string;
            version: number;
        };
        /**
         * @description A session's registry row as exported: the fields of `SessionInfo` without the
         *     message counts (they are derived).
         */
        ExportedSession: {
            id: string;
            name: string;
            parentSessionId: string | null;
            model: string | null;
            source: string | null;
            metadata: components["schemas"]["Metadata"];
            inputTokens: number;
            outputTokens: number;
            estimatedCost: number;
            endReason: string | null;
            /** Format: date-time */
            createdAt: string;
            /** Format: date-time */
            updatedAt: string;
        };
        /** @description One stored message with where it hangs and when it was stored. */
        ExportedMessage: {
            /**
             * @description Its parent; `null` for a root. May name a message deleted since (its children
             *     became roots): such a parent is in no export.
             */
            parentId: string | null;
            /**
             * Format: date-time
             * @description When the server stored it (not the message's own `createdAt`).
             */
            createdAt: string;
            message: components["schemas"]["Message"];
        };
        /**
         * @description The text of a writable block (`contextBlock` record). In an agent's NDJSON, the
         *     agent-scoped texts have `"sessionId": ""`.
         */
        ExportedContextBlock: {
            label: string;
            /** @description When it was last written (RFC 3339, UTC). */
            updatedAt: string;
            content: string;
        };
        /**
         * @description A block added to the session at run time (`removed: false`, `def` = its definition as
         *     `POST …/context` took it) or a configured block removed from it (`removed: true`,
         *     `def: null`) (`contextDef` record).
         */
        ExportedContextDef: {
            label: string;
            removed: boolean;
            /** @description The block definition (`AddBlockRequest` fields); must be a valid one on import. */
            def?: Record<string, unknown> | null;
        };
        /** @description A skill loaded in the session (`loadedSkill` record); its text is the agent's, in R2. */
        ExportedLoadedSkill: {
            label: string;
            key: string;
        };
        /** @description The session's frozen system prompt (`prompt` record). */
        ExportedPrompt: {
            /** @description When it was frozen (RFC 3339, UTC). */
            createdAt: string;
            prompt: string;
        };
        /**
         * @description The body of `POST …/sessions/import`: a `SessionExport` document. Unknown fields are
         *     refused here and in every record. The lists may be left out or `null`. Timestamps
         *     must be RFC 3339 in UTC (ending in `Z`), from 1970 (`400` otherwise); they are stored
         *     as given.
         */
        SessionImport: {
            /**
             * @description `session-agent/3`, `session-agent/2` (written before `sharedBlockReads`) or
             *     `session-agent/1` (also before metadata, which then is `{}`). A newer version is
             *     refused as newer, anything else as not an export (`400`).
             * @enum {string}
             */
            format: "session-agent/3" | "session-agent/2" | "session-agent/1";
            session: components["schemas"]["ImportedSession"];
            messages?: components["schemas"]["ImportedMessage"][] | null;
            compactions?: components["schemas"]["ImportedCompaction"][] | null;
            contextBlocks?: components["schemas"]["ExportedContextBlock"][] | null;
            contextDefs?: components["schemas"]["ExportedContextDef"][] | null;
            loadedSkills?: components["schemas"]["ExportedLoadedSkill"][] | null;
            prompts?: components["schemas"]["ExportedPrompt"][] | null;
            sharedBlockReads?: components["schemas"]["ExportedSharedBlockRead"][] | null;
        };
        /**
         * @description The `session` of an imported document: `ExportedSession`, whose nullable fields may be
         *     left out, and which may also carry the derived `messageCount` and `totalMessages` of a
         *     `SessionInfo` (ignored). `id` is checked as a session id when the session is imported
         *     under it (without `as`).
         */
        ImportedSession: {
            id: string;
            name: string;
            parentSessionId?: string | null;
            model?: string | null;
            source?: string | null;
            /** @description Checked as `POST /sessions` checks it; left out or `null` (version 1) is `{}`. */
            metadata?: components["schemas"]["Metadata"] | null;
            inputTokens: number;
            outputTokens: number;
            estimatedCost: number;
            endReason?: string | null;
            /** @description RFC 3339, UTC. */
            createdAt: string;
            /** @description RFC 3339, UTC. */
            updatedAt: string;
            /** @description Ignored. */
            messageCount?: unknown;
            /** @description Ignored. */
            totalMessages?: unknown;
        };
        /** @description An `ExportedMessage` to import; `parentId` may be left out (a root). */
        ImportedMessage: {
            parentId?: string | null;
            /** @description When it was stored (RFC 3339, UTC); kept. */
            createdAt: string;
            message: components["schemas"]["Message"];
        };
        /**
         * @description A `Compaction` to import: `fromMessageId` must be an ancestor-or-self of
         *     `toMessageId` among the document's messages. Its `id` is kept (new with `as`).
         */
        ImportedCompaction: {
            id: string;
            summary: string;
            fromMessageId: string;
            toMessageId: string;
            /** @description RFC 3339, UTC. */
            createdAt: string;
        };
        /** @description A JSON-RPC 2.0 response of the MCP endpoint. */
        JsonRpcResponse: {
            /** @enum {string} */
            jsonrpc: "2.0";
            /** @description The request's id (`null` when the request could not be read). */
            id: string | number | null;
            result?: Record<string, unknown>;
            error?: {
                code: number;
                message: string;
            };
        };
        /** @description What `POST /agents/{agent}/import` wrote (the same counts as the export's `end` record). */
        ImportCounts: {
            sessions: number;
            messages: number;
            memories: number;
            memoryVersions: number;
            /** @description Search-block entries. */
            entries: number;
            /** @description Agent-scoped skills written to R2. */
            skills: number;
            schedules: number;
            scheduleRuns: number;
            /** @description Rows of the usage ledger (one per turn that called the model). */
            usage: number;
        };
        /** @description What `POST /spaces/{space}/import` wrote (the same counts as the export's `end` record). */
        SpaceImportCounts: {
            memories: number;
            memoryVersions: number;
            /** @description Shared blocks, deleted ones (tombstones) included. */
            sharedBlocks: number;
        };
    };
    responses: {
        /**
         * @description An error under `/v1/`, in OpenAI's shape, with this API's status and `code` (so the
         *     `openai` package raises its `APIError` class of that status). Nothing changed.
         */
        OpenAiError: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                /**
                 * @example {
                 *       "error": {
                 *         "message": "messages must be a non-empty array",
                 *         "type": "invalid_request_error",
                 *         "code": "invalid_request",
                 *         "param": "messages"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["OpenAiError"];
            };
        };
        /** @description `invalid_request`: a bad path parameter, query parameter or body. Nothing changed. */
        BadRequest: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                /**
                 * @example {
                 *       "error": {
                 *         "code": "invalid_request",
                 *         "message": "session id must be 1-128 characters of [A-Za-z0-9._:-]"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["Error"];
            };
        };
        /**
         * @description `unauthorized`: the bearer token is missing or wrong (neither `API_TOKEN` nor a scoped
         *     token with a valid signature), or a scoped token expired or was revoked. Nothing
         *     changed.
         */
        Unauthorized: {
            headers: {
                /** @description Always `Bearer`. */
                "WWW-Authenticate"?: "Bearer";
                [name: string]: unknown;
            };
            content: {
                /**
                 * @example {
                 *       "error": {
                 *         "code": "unauthorized",
                 *         "message": "missing or wrong bearer token"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["Error"];
            };
        };
        /**
         * @description `forbidden`: the request came with a scoped token that does not allow it: the token is
         *     for another agent, does not name this session, is limited to sessions and the route
         *     is agent-wide (`/sessions` list and create, `POST /sessions/import`, `/search`,
         *     `/memories…`), has scope `read` and the route writes, or the route is admin-only
         *     (`POST /agents/{agent}/tokens`, `POST …/tokens/revoke`, `GET /agents/{agent}/export`,
         *     `POST /agents/{agent}/import`, `DELETE /agents/{agent}`). Never with the admin token or
         *     through a binding without claims. Nothing changed.
         */
        Forbidden: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /**
         * @description `rate_limited`: the agent is over its request limit: `RATE_LIMIT` (counted by the
         *     agent's Durable Object; `Retry-After` = the seconds until its window ends) or the
         *     front door's `RATE_LIMITER` binding (`Retry-After` = the seconds of `RATE_LIMIT` if
         *     set, else 60). Only when one of them is configured. Nothing changed.
         */
        RateLimited: {
            headers: {
                /** @description Seconds to wait before a retry. */
                "Retry-After"?: number;
                [name: string]: unknown;
            };
            content: {
                /**
                 * @example {
                 *       "error": {
                 *         "code": "rate_limited",
                 *         "message": "over this agent's request limit (RATE_LIMIT); retry in 42 s"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description `not_found`: the session, message, leaf, parent, context block or tool is not in this session, the memory does not exist or has expired (or no such route). */
        NotFound: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                /**
                 * @example {
                 *       "error": {
                 *         "code": "not_found",
                 *         "message": "message m9 not found in session chat-1"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description `method_not_allowed`: the path exists but not with this method. */
        MethodNotAllowed: {
            headers: {
                /** @description The methods of this path, e.g. `GET, POST`. */
                Allow?: string;
                [name: string]: unknown;
            };
            content: {
                /**
                 * @example {
                 *       "error": {
                 *         "code": "method_not_allowed",
                 *         "message": "allowed methods: GET, POST"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["Error"];
            };
        };
        /**
         * @description `conflict`: the block cannot be written this way. A block the model may not write
         *     (`readonly`, a `skills` block of scope `shared`, the `searchableHistory` block):
         *     `Block "<label>" is readonly`. A keyed block (`search`, `skills` of scope `agent`),
         *     whose entries are written with the `set_context` tool:
         *     `Block "<label>" is a keyed block: write its entries with the set_context tool`.
         *     Adding a label the session already has: `Block "<label>" already exists`. A memory
         *     change that would duplicate another live memory of its category (`PATCH
         *     /memories/{memory}`): `memory <id> already says this (category <category>)`. Nothing
         *     changed.
         */
        Conflict: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /**
         * @description `too_large`: the request body is over 32 MiB, a message's JSON is over 1,800,000
         *     bytes, or a compaction summary is over 1,800,000 bytes. Nothing changed.
         */
        TooLarge: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                /**
                 * @example {
                 *       "error": {
                 *         "code": "too_large",
                 *         "message": "message big is 1800043 bytes of JSON; the limit is 1800000"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["Error"];
            };
        };
        /**
         * @description `over_budget`: the block's new content (for an append: old text, separator and new
         *     text together; for an added block: its initial `content`) is estimated at more tokens
         *     than its `maxTokens`: `Block "<label>" exceeds maxTokens: <tokens> > <maxTokens>`. Or
         *     a new memory (`POST /memories`) while the agent already holds
         *     `SESSION_CONFIG.memory.maxMemories` memories; or a new schedule while the agent has
         *     `SESSION_CONFIG.schedules.maxSchedules`. Nothing changed.
         */
        OverBudget: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description `internal`: a storage failure (never caused by bad input). The failed request changed nothing. */
        Internal: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                /**
                 * @example {
                 *       "error": {
                 *         "code": "internal",
                 *         "message": "storage is not ready: ..."
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["Error"];
            };
        };
        /**
         * @description `not_configured`: the Worker secret `API_TOKEN` is not set, so every request under
         *     `/agents/` is refused (front door); or the DO's configuration is invalid
         *     (`SESSION_CONFIG` does not parse or validate, or an `LLM_*`, `EMBEDDINGS_*` or
         *     `RATE_LIMIT` variable is invalid), so every request to the DO is refused with the
         *     reason; or, on routes that read or write
         *     R2 (blocks of kind `skills`, readonly blocks with `r2Key`), the R2 binding
         *     `SKILLS_BUCKET` is missing.
         */
        ServiceUnavailable: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /**
         * @description `not_configured`: as for every route (`API_TOKEN`, an invalid configuration), or **no
         *     LLM is configured** (`LLM_PROVIDER` unset or `none`). `llm_unavailable`: the
         *     summarizer failed (transport error or timeout, a non-2xx answer, an answer that is not
         *     JSON or has no choices) or its summary was refused (empty, or only the section
         *     headings / placeholders of the prompt). Nothing was stored.
         */
        CompactUnavailable: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /**
         * @description `not_configured`: as for every route (`API_TOKEN`, an invalid configuration), or **no
         *     LLM is configured** (`LLM_PROVIDER` unset or `none`) while there is an exchange to
         *     read. `llm_unavailable`: a model call failed (transport error or timeout, a non-2xx
         *     answer) or its answer was not the JSON asked for (`{"facts": […]}`, then
         *     `{"memory": […]}` with known events). Nothing was written.
         */
        ExtractUnavailable: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /**
         * @description The turn was refused before the model was called; nothing changed. `error.code`:
         *     `conflict` (the new user message's id is already in the session), or, for a
         *     continuation that does not match what is stored, `not_a_prefix` (the branch sent back
         *     was rewritten, has messages added, dropped or reordered, or its last message is not in
         *     this session), `forged_tool_result` (a result for a call that was not waiting for the
         *     client: it already had one, it is not in the stored message, or it belongs to a server
         *     tool) or `forged_approval` (an approval response where no approval was requested).
         */
        ChatConflict: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /**
         * @description `not_configured`: as for every route (`API_TOKEN`, an invalid configuration, a missing
         *     `SKILLS_BUCKET` where R2 must be read), or **no LLM is configured** (`LLM_PROVIDER`
         *     unset or `none`). `llm_unavailable`: the model failed (transport error or timeout, a
         *     non-2xx answer, a streamed error, an unreadable or cut-off stream) or answered neither
         *     text nor a tool call. Nothing was stored (what server tools already wrote stays).
         *     With `Accept: text/event-stream`, this is the answer only when no event had been sent
         *     yet; later it is an `error` event.
         */
        ChatUnavailable: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
    };
    parameters: {
        /**
         * @description The session an OpenAI-compatible request talks to (before the body's own ways of naming
         *     it): a session id, 1–128 characters of `[A-Za-z0-9._:-]`.
         */
        openaiSession: string;
        /**
         * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
         *     namespace apart from the agents' (an agent and a space may share a name). The agent
         *     name syntax.
         * @example alice
         */
        space: string;
        /**
         * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
         *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
         *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
         * @example alice
         */
        agent: string;
        /** @description The chat's id as the AI SDK's client holds it (percent-encoded; not checked, as long as it decodes as UTF-8). */
        chatId: string;
        /** @description The chat's id, which is the session's (percent-encoded). */
        chatSession: string;
        /**
         * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
         *     (`400 invalid_request` otherwise).
         * @example chat-1
         */
        sid: string;
        /**
         * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
         *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
         *     `%` → `%25`, non-ASCII as UTF-8).
         * @example m1
         */
        mid: string;
        /**
         * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
         *     (`400 invalid_request` otherwise).
         * @example memory
         */
        label: string;
        /**
         * @description Tool name, percent-decoded. A name the session does not offer (see `GET …/tools`) is
         *     `404`.
         */
        name: "set_context" | "load_context" | "unload_context" | "search_context" | "session_search" | "expand_compaction" | "memory_store" | "memory_recall" | "memory_forget";
        /**
         * @description The message the path ends at (1–256 characters, no control characters); default and
         *     empty value: the latest leaf. `404` when it is not in the session.
         */
        leaf: string;
        /**
         * @description `1` (also `true`, or the bare `raw`) returns the stored messages without compaction
         *     overlays; `0`, `false` or absent applies them. Any other value is `400`.
         */
        raw: "1" | "0" | "true" | "false" | "";
        /**
         * @description The query (required, `400` when missing), in plain words: a question in natural
         *     language is fine (docs/REFERENCE.md#plain-queries). Syntax:
         *     - **any** word may match: hits are ranked by relevance (bm25) to the query's words,
         *       so more of them, and rarer ones, rank higher (`deploy friday` finds messages with
         *       either, those with both first; `when is my wife's birthday?` searches `wife` and
         *       `birthday`);
         *     - English stop words (`the`, `when`, `is`, `my`, …) are dropped unless nothing else is
         *       left; words are runs of letters and digits, so an apostrophe separates (`wife's` is
         *       `wife`, and contractions such as `what's`, `don't`, `I'm` are stop words);
         *     - text in double quotes is a **phrase** every hit must have: its words together, in
         *       order (`"deploy to production"`); an unclosed quote runs to the end of the text; the
         *       words beside it rank the hits;
         *     - a word ending in `*` is a **prefix** (`deploy*` finds "deployment"), ranked like a
         *       word;
         *     - at most 12 terms count (phrases first, then words, in the order written);
         *     - matching uses porter stemming and unicode61 tokenizing (`deploying` finds
         *       `deploy`), case-insensitive;
         *     - everything else is literal text: `OR`, `AND`, `NOT`, `NEAR(`, parentheses, `:`,
         *       `^`, `-`, `+` are not operators. Control characters (NUL included) separate words.
         *       Words without a letter or digit are dropped, so any user input is safe to pass; a
         *       query with nothing left answers no results.
         *     With embeddings configured, messages near the query by meaning are found too, without
         *     these words (docs/REFERENCE.md#search-by-meaning).
         */
        q: string;
        /** @description Most hits returned (integer 1–100; anything else is `400`). */
        limit: number;
        /**
         * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
         *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
         *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
         *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
         * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
         */
        memory: string;
        /**
         * @description Schedule id (`sch_` and a UUID v4, as the API gives them out), percent-decoded: `400`
         *     when that is not UTF-8, longer than 256 characters or holds a control character. Any
         *     other id is simply not found (`404`).
         * @example sch_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
         */
        schedule: string;
        /**
         * @description Entry key of a search block, percent-decoded: 1–256 characters without control
         *     characters (`400` otherwise).
         * @example deploy
         */
        key: string;
        /**
         * @description Only memories of this category, or of one of a comma list of them (`core,daily`); may
         *     be repeated (the lists add up). Anything else is `400`.
         */
        memoryCategory: components["schemas"]["CategoryFilter"];
        /**
         * @description Only memories carrying this tag (compared exactly with the stored tags, which are
         *     trimmed). Repeatable (at most 16): every one must be there. A value that is empty,
         *     over 64 characters or holds a control character is `400`.
         * @example [
         *       "travel"
         *     ]
         */
        memoryTag: components["schemas"]["TagFilter"][];
        /**
         * @description Only memories carrying at least one of these tags (repeatable, at most 16; checked as
         *     `tag`).
         * @example [
         *       "travel",
         *       "food"
         *     ]
         */
        memoryAnyTag: components["schemas"]["TagFilter"][];
        /** @description Only memories whose `createdAt` is strictly after this time (`TimeFilter`; once). */
        memoryCreatedAfter: components["schemas"]["TimeFilter"];
        /** @description Only memories whose `createdAt` is strictly before this time (`TimeFilter`; once). */
        memoryCreatedBefore: components["schemas"]["TimeFilter"];
        /** @description Only memories whose `updatedAt` is strictly after this time (`TimeFilter`; once). */
        memoryUpdatedAfter: components["schemas"]["TimeFilter"];
        /** @description Only memories whose `updatedAt` is strictly before this time (`TimeFilter`; once). */
        memoryUpdatedBefore: components["schemas"]["TimeFilter"];
        /**
         * @description Only memories whose `source.sessionId` is this session: 1–128 characters of
         *     `[A-Za-z0-9._:-]` (`400` otherwise; once). The session need not exist.
         * @example chat-1
         */
        memorySessionId: string;
        /**
         * @description Read the past: the memories that held at this ISO-8601 UTC time (`validFrom` at or
         *     before it, and `invalidAt` null or after it) instead of those that hold now. Not with
         *     `includeSuperseded` (`400`); a malformed time is `400`.
         * @example 2026-11-01T00:00:00.000Z
         */
        memoryAsOf: string;
        /** @description `1` (or `true`): superseded memories too. `0`, `false` or absent: only those that hold now. */
        memoryIncludeSuperseded: "0" | "1" | "true" | "false";
    };
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    healthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The Worker is up. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /** @example ok */
                    "text/plain": "ok";
                };
            };
            405: components["responses"]["MethodNotAllowed"];
        };
    };
    chatPage: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The page, with `cache-control: no-store`. */
            200: {
                headers: {
                    "Cache-Control"?: "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "text/html": string;
                };
            };
            404: components["responses"]["NotFound"];
        };
    };
    listSessions: {
        parameters: {
            query?: {
                /** @description At most this many sessions (1–100; `400` otherwise). Absent: all of them. */
                limit?: number;
                /**
                 * @description Where the page starts: the `nextCursor` of the previous page, as given (opaque;
                 *     anything else is `400`). Absent: the most recently updated session.
                 * @example 2026-11-22T11:00:00.000Z~42
                 */
                cursor?: string;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The sessions. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "sessions": [
                     *         {
                     *           "id": "chat-1",
                     *           "name": "chat-1",
                     *           "parentSessionId": null,
                     *           "model": null,
                     *           "source": null,
                     *           "metadata": {},
                     *           "inputTokens": 0,
                     *           "outputTokens": 0,
                     *           "estimatedCost": 0,
                     *           "endReason": null,
                     *           "messageCount": 3,
                     *           "createdAt": "2026-11-22T11:00:00.000Z",
                     *           "updatedAt": "2026-11-22T11:05:00.000Z"
                     *         }
                     *       ],
                     *       "nextCursor": null
                     *     }
                     */
                    "application/json": {
                        sessions: components["schemas"]["SessionInfo"][];
                        /** @description The `cursor` of the next page; `null` when there is none (or without `limit`). */
                        nextCursor: string | null;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    createSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateSessionRequest"];
            };
        };
        responses: {
            /** @description The new session. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "id": "3f1c9a52-6f0e-4a7b-9d51-0c2e8b7f4a10",
                     *       "name": "Trip planning",
                     *       "parentSessionId": null,
                     *       "model": "gpt-4o-mini",
                     *       "source": "web",
                     *       "metadata": {},
                     *       "inputTokens": 0,
                     *       "outputTokens": 0,
                     *       "estimatedCost": 0,
                     *       "endReason": null,
                     *       "messageCount": 0,
                     *       "createdAt": "2026-11-22T11:00:00.000Z",
                     *       "updatedAt": "2026-11-22T11:00:00.000Z"
                     *     }
                     */
                    "application/json": components["schemas"]["SessionInfo"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The session. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionInfo"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    renameSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateSessionRequest"];
            };
        };
        responses: {
            /** @description The changed session. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionInfo"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    forkSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ForkRequest"];
            };
        };
        responses: {
            /** @description The SessionInfo of the copy (`messageCount` = length of the copied path). */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "id": "9b7e4c1d-2a3f-4e5b-8c6d-7e8f9a0b1c2d",
                     *       "name": "What if we fly instead",
                     *       "parentSessionId": "chat-1",
                     *       "model": "gpt-4o-mini",
                     *       "source": "web",
                     *       "metadata": {},
                     *       "inputTokens": 0,
                     *       "outputTokens": 0,
                     *       "estimatedCost": 0,
                     *       "endReason": null,
                     *       "messageCount": 3,
                     *       "createdAt": "2026-11-22T11:10:00.000Z",
                     *       "updatedAt": "2026-11-22T11:10:00.000Z"
                     *     }
                     */
                    "application/json": components["schemas"]["SessionInfo"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    addUsage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                /**
                 * @example {
                 *       "inputTokens": 1200,
                 *       "outputTokens": 340,
                 *       "cost": 0.0042
                 *     }
                 */
                "application/json": components["schemas"]["UsageRequest"];
            };
        };
        responses: {
            /** @description The session with the new sums. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionInfo"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getSessionStorage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The figures. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "sessionId": "chat-1",
                     *       "rows": 14,
                     *       "sqliteBytes": 9120,
                     *       "r2Bytes": 3000034,
                     *       "r2Objects": 1,
                     *       "kinds": {
                     *         "messages": {
                     *           "rows": 10,
                     *           "bytes": 7400
                     *         },
                     *         "compactions": {
                     *           "rows": 1,
                     *           "bytes": 320
                     *         },
                     *         "context": {
                     *           "rows": 1,
                     *           "bytes": 200
                     *         },
                     *         "prompt": {
                     *           "rows": 1,
                     *           "bytes": 1200
                     *         },
                     *         "vectors": {
                     *           "rows": 0,
                     *           "bytes": 0
                     *         },
                     *         "spills": {
                     *           "rows": 1,
                     *           "bytes": 0
                     *         }
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["SessionStorage"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    splitSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["SplitRequest"];
            };
        };
        responses: {
            /** @description The SessionInfo of the new session (`messageCount` 1). */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "id": "5d2b8f0a-1c3e-4b7d-9e6f-8a0b1c2d3e4f",
                     *       "name": "Trip planning (2)",
                     *       "parentSessionId": "chat-1",
                     *       "model": "gpt-4o-mini",
                     *       "source": "web",
                     *       "metadata": {},
                     *       "inputTokens": 0,
                     *       "outputTokens": 0,
                     *       "estimatedCost": 0,
                     *       "endReason": null,
                     *       "messageCount": 1,
                     *       "totalMessages": 1,
                     *       "createdAt": "2026-11-22T12:00:00.000Z",
                     *       "updatedAt": "2026-11-22T12:00:00.000Z"
                     *     }
                     */
                    "application/json": components["schemas"]["SessionInfo"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /**
             * @description `conflict`: no summary to start from: none given, the latest branch too short to
             *     compact and no overlay in the session (or, as for `POST …/compact`, the path
             *     changed while the model was writing). Nothing changed.
             */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": {
                     *         "code": "conflict",
                     *         "message": "nothing to summarize yet: the session is too short to compact (or pass a summary)"
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["Error"];
                };
            };
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["CompactUnavailable"];
        };
    };
    searchAllSessions: {
        parameters: {
            query: {
                /**
                 * @description The query (required, `400` when missing), in plain words: a question in natural
                 *     language is fine (docs/REFERENCE.md#plain-queries). Syntax:
                 *     - **any** word may match: hits are ranked by relevance (bm25) to the query's words,
                 *       so more of them, and rarer ones, rank higher (`deploy friday` finds messages with
                 *       either, those with both first; `when is my wife's birthday?` searches `wife` and
                 *       `birthday`);
                 *     - English stop words (`the`, `when`, `is`, `my`, …) are dropped unless nothing else is
                 *       left; words are runs of letters and digits, so an apostrophe separates (`wife's` is
                 *       `wife`, and contractions such as `what's`, `don't`, `I'm` are stop words);
                 *     - text in double quotes is a **phrase** every hit must have: its words together, in
                 *       order (`"deploy to production"`); an unclosed quote runs to the end of the text; the
                 *       words beside it rank the hits;
                 *     - a word ending in `*` is a **prefix** (`deploy*` finds "deployment"), ranked like a
                 *       word;
                 *     - at most 12 terms count (phrases first, then words, in the order written);
                 *     - matching uses porter stemming and unicode61 tokenizing (`deploying` finds
                 *       `deploy`), case-insensitive;
                 *     - everything else is literal text: `OR`, `AND`, `NOT`, `NEAR(`, parentheses, `:`,
                 *       `^`, `-`, `+` are not operators. Control characters (NUL included) separate words.
                 *       Words without a letter or digit are dropped, so any user input is safe to pass; a
                 *       query with nothing left answers no results.
                 *     With embeddings configured, messages near the query by meaning are found too, without
                 *     these words (docs/REFERENCE.md#search-by-meaning).
                 */
                q: components["parameters"]["q"];
                /** @description Most hits returned (integer 1–100; anything else is `400`). */
                limit?: components["parameters"]["limit"];
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The hits, best first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "results": [
                     *         {
                     *           "sessionId": "chat-1",
                     *           "id": "m1",
                     *           "role": "user",
                     *           "content": "We deploy to production on Friday",
                     *           "createdAt": "2026-11-22T11:00:00.000Z"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": {
                        results: (components["schemas"]["SearchHit"] & unknown)[];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    appendMessage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AppendRequest"];
            };
        };
        responses: {
            /**
             * @description Nothing changed: the id already existed (first write wins), or the message is a
             *     synthetic `compaction_…` message, which is never stored (`synthetic: true`).
             */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AppendResult"];
                };
            };
            /** @description Stored (with a `compaction` report when auto-compaction ran). */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AppendResult"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    clearMessages: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Cleared. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getMessageNamedBatch: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The message. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    updateMessageNamedBatch: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "message": {
                 *         "id": "batch",
                 *         "role": "user",
                 *         "parts": [
                 *           {
                 *             "type": "text",
                 *             "text": "A message called batch."
                 *           }
                 *         ]
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["UpdateMessageRequest"] & {
                    message?: {
                        /** @constant */
                        id?: "batch";
                    };
                };
            };
        };
        responses: {
            /** @description The message as stored now. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    appendMessages: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["BatchRequest"];
            };
        };
        responses: {
            /** @description The chain as appended. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BatchResult"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteMessageNamedBatch: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getMessageNamedDelete: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The message. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    updateMessageNamedDelete: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "message": {
                 *         "id": "delete",
                 *         "role": "user",
                 *         "parts": [
                 *           {
                 *             "type": "text",
                 *             "text": "A message called delete."
                 *           }
                 *         ]
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["UpdateMessageRequest"] & {
                    message?: {
                        /** @constant */
                        id?: "delete";
                    };
                };
            };
        };
        responses: {
            /** @description The message as stored now. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteMessages: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "ids": [
                 *         "m3",
                 *         "m4"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["DeleteMessagesRequest"];
            };
        };
        responses: {
            /** @description Deleted. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "deleted": [
                     *         "m3",
                     *         "m4"
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["DeleteMessagesResult"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteMessageNamedDelete: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getMessage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
                 *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
                 *     `%` → `%25`, non-ASCII as UTF-8).
                 * @example m1
                 */
                mid: components["parameters"]["mid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The message. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    updateMessage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
                 *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
                 *     `%` → `%25`, non-ASCII as UTF-8).
                 * @example m1
                 */
                mid: components["parameters"]["mid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "message": {
                 *         "id": "m2",
                 *         "role": "assistant",
                 *         "parts": [
                 *           {
                 *             "type": "text",
                 *             "text": "Here are four itineraries."
                 *           }
                 *         ]
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["UpdateMessageRequest"];
            };
        };
        responses: {
            /** @description The message as stored now. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteMessage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
                 *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
                 *     `%` → `%25`, non-ASCII as UTF-8).
                 * @example m1
                 */
                mid: components["parameters"]["mid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    listBranches: {
        parameters: {
            query?: {
                /** @description A page of at most this many children (see *Pages*). */
                limit?: number;
                /** @description The page holds children older than this one (a `nextBefore`; 1–256 characters, no control characters; empty is absent); 100 unless `limit` says otherwise. */
                before?: string;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
                 *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
                 *     `%` → `%25`, non-ASCII as UTF-8).
                 * @example m1
                 */
                mid: components["parameters"]["mid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The children (or a page of them). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HistoryPage"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getHistory: {
        parameters: {
            query?: {
                /**
                 * @description The message the path ends at (1–256 characters, no control characters); default and
                 *     empty value: the latest leaf. `404` when it is not in the session.
                 */
                leaf?: components["parameters"]["leaf"];
                /**
                 * @description `1` (also `true`, or the bare `raw`) returns the stored messages without compaction
                 *     overlays; `0`, `false` or absent applies them. Any other value is `400`.
                 */
                raw?: components["parameters"]["raw"];
                /** @description A page of at most this many messages (see *Pages*). */
                limit?: number;
                /** @description The page ends just before this message (a `nextBefore`; 1–256 characters, no control characters; empty is absent); 100 messages unless `limit` says otherwise. */
                before?: string;
                /** @description `1` (also `true`) truncates older messages as described; `0`, `false` or absent does not. */
                truncate?: "1" | "0" | "true" | "false" | "";
                /** @description Newest messages left whole (with `truncate=1`). */
                keepRecent?: number;
                /** @description Longest tool output, as JSON, of an older message (with `truncate=1`). */
                maxToolOutputChars?: number;
                /** @description Longest `text` part of an older message (with `truncate=1`). */
                maxTextChars?: number;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The path (or the page), root first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "messages": [
                     *         {
                     *           "id": "compaction_0b6f3e0e-8a1d-4a55-9e3c-2f1d7a9c4b11",
                     *           "role": "assistant",
                     *           "parts": [
                     *             {
                     *               "type": "text",
                     *               "text": "The user is planning a trip to Lisbon in May."
                     *             }
                     *           ],
                     *           "createdAt": "2026-11-22T11:20:00.000Z"
                     *         },
                     *         {
                     *           "id": "m5",
                     *           "role": "user",
                     *           "parts": [
                     *             {
                     *               "type": "text",
                     *               "text": "Book the hotel."
                     *             }
                     *           ]
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["HistoryPage"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getRecentHistory: {
        parameters: {
            query: {
                /**
                 * @description Byte budget of the window (integer ≥ 0; missing or invalid → `400`).
                 * @example 65536
                 */
                maxBytes: number;
                /** @description Least number of path messages in the window, even past the budget. */
                minMessages?: number;
                /** @description The window ends just above this message (a `nextBefore`; 1–256 characters, no control characters; empty is absent). */
                before?: string;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The window, oldest first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "messages": [
                     *         {
                     *           "id": "m8",
                     *           "role": "assistant",
                     *           "parts": [
                     *             {
                     *               "type": "text",
                     *               "text": "Done."
                     *             }
                     *           ]
                     *         },
                     *         {
                     *           "id": "m9",
                     *           "role": "user",
                     *           "parts": [
                     *             {
                     *               "type": "text",
                     *               "text": "Thanks!"
                     *             }
                     *           ]
                     *         }
                     *       ],
                     *       "truncated": true,
                     *       "totalContentBytes": 4182,
                     *       "nextBefore": "m8"
                     *     }
                     */
                    "application/json": components["schemas"]["RecentHistory"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getLatestLeaf: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The latest leaf. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getPathLength: {
        parameters: {
            query?: {
                /**
                 * @description The message the path ends at (1–256 characters, no control characters); default and
                 *     empty value: the latest leaf. `404` when it is not in the session.
                 */
                leaf?: components["parameters"]["leaf"];
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The length. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "length": 12
                     *     }
                     */
                    "application/json": {
                        length: number;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    searchSession: {
        parameters: {
            query: {
                /**
                 * @description The query (required, `400` when missing), in plain words: a question in natural
                 *     language is fine (docs/REFERENCE.md#plain-queries). Syntax:
                 *     - **any** word may match: hits are ranked by relevance (bm25) to the query's words,
                 *       so more of them, and rarer ones, rank higher (`deploy friday` finds messages with
                 *       either, those with both first; `when is my wife's birthday?` searches `wife` and
                 *       `birthday`);
                 *     - English stop words (`the`, `when`, `is`, `my`, …) are dropped unless nothing else is
                 *       left; words are runs of letters and digits, so an apostrophe separates (`wife's` is
                 *       `wife`, and contractions such as `what's`, `don't`, `I'm` are stop words);
                 *     - text in double quotes is a **phrase** every hit must have: its words together, in
                 *       order (`"deploy to production"`); an unclosed quote runs to the end of the text; the
                 *       words beside it rank the hits;
                 *     - a word ending in `*` is a **prefix** (`deploy*` finds "deployment"), ranked like a
                 *       word;
                 *     - at most 12 terms count (phrases first, then words, in the order written);
                 *     - matching uses porter stemming and unicode61 tokenizing (`deploying` finds
                 *       `deploy`), case-insensitive;
                 *     - everything else is literal text: `OR`, `AND`, `NOT`, `NEAR(`, parentheses, `:`,
                 *       `^`, `-`, `+` are not operators. Control characters (NUL included) separate words.
                 *       Words without a letter or digit are dropped, so any user input is safe to pass; a
                 *       query with nothing left answers no results.
                 *     With embeddings configured, messages near the query by meaning are found too, without
                 *     these words (docs/REFERENCE.md#search-by-meaning).
                 */
                q: components["parameters"]["q"];
                /** @description Most hits returned (integer 1–100; anything else is `400`). */
                limit?: components["parameters"]["limit"];
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The hits, best first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "results": [
                     *         {
                     *           "id": "m1",
                     *           "role": "user",
                     *           "content": "We deploy to production on Friday",
                     *           "createdAt": "2026-11-22T11:00:00.000Z"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": {
                        results: components["schemas"]["SearchHit"][];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    listCompactions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The overlays. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        compactions: components["schemas"]["Compaction"][];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    addCompaction: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "summary": "The user is planning a trip to Lisbon in May and prefers trains.",
                 *       "fromMessageId": "m1",
                 *       "toMessageId": "m4"
                 *     }
                 */
                "application/json": components["schemas"]["CreateCompactionRequest"];
            };
        };
        responses: {
            /** @description The stored overlay. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "id": "0b6f3e0e-8a1d-4a55-9e3c-2f1d7a9c4b11",
                     *       "summary": "The user is planning a trip to Lisbon in May and prefers trains.",
                     *       "fromMessageId": "m1",
                     *       "toMessageId": "m4",
                     *       "createdAt": "2026-11-22T11:20:00.000Z"
                     *     }
                     */
                    "application/json": components["schemas"]["Compaction"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    expandCompaction: {
        parameters: {
            query?: {
                /** @description Index of the first message, 0 = the oldest covered message. */
                offset?: number;
                limit?: number;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /** @description The overlay's id (as in `GET …/compactions`), or the id of the synthetic message that stands for it (`compaction_<id>`). */
                cid: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        compaction: components["schemas"]["Compaction"];
                        /** @description How many messages the overlay covers. */
                        total: number;
                        offset: number;
                        messages: components["schemas"]["Message"][];
                        /** @description Where the next page starts; null on the last page. */
                        nextOffset: number | null;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    compact: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": {
                    /** @description The leaf of the branch to compact; absent or `null` → the latest leaf. */
                    leafId?: string | null;
                };
            };
        };
        responses: {
            /** @description The stored overlay, or `null` when there was nothing to compact. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        compaction: components["schemas"]["Compaction"] | null;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["CompactUnavailable"];
        };
    };
    listContextBlocks: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The blocks. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "blocks": [
                     *         {
                     *           "label": "soul",
                     *           "description": null,
                     *           "content": "You are a helpful assistant.",
                     *           "tokens": 7,
                     *           "maxTokens": null,
                     *           "kind": "readonly",
                     *           "writable": false
                     *         },
                     *         {
                     *           "label": "memory",
                     *           "description": "Learned facts",
                     *           "content": "user likes coffee",
                     *           "tokens": 5,
                     *           "maxTokens": 1100,
                     *           "kind": "writable",
                     *           "writable": true
                     *         },
                     *         {
                     *           "label": "knowledge",
                     *           "description": "Searchable knowledge base",
                     *           "content": "2 entries indexed.",
                     *           "tokens": 5,
                     *           "maxTokens": null,
                     *           "kind": "search",
                     *           "writable": true
                     *         },
                     *         {
                     *           "label": "skills",
                     *           "description": null,
                     *           "content": "- style-guide: How we write\n- deploy-checklist",
                     *           "tokens": 12,
                     *           "maxTokens": null,
                     *           "kind": "skills",
                     *           "writable": true
                     *         },
                     *         {
                     *           "label": "history",
                     *           "description": "Cross-session conversation history",
                     *           "content": "3 sessions available for search.",
                     *           "tokens": 8,
                     *           "maxTokens": null,
                     *           "kind": "search",
                     *           "writable": false
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": {
                        blocks: components["schemas"]["ContextBlock"][];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    addContextBlock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AddBlockRequest"];
            };
        };
        responses: {
            /** @description The new block. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "label": "notes",
                     *       "description": "Scratch notes for this task",
                     *       "content": "",
                     *       "tokens": 0,
                     *       "maxTokens": 500,
                     *       "kind": "writable",
                     *       "writable": true
                     *     }
                     */
                    "application/json": components["schemas"]["ContextBlock"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getContextBlock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The block. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ContextBlock"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    setContextBlock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "content": "user likes coffee"
                 *     }
                 */
                "application/json": components["schemas"]["BlockReplaceRequest"];
            };
        };
        responses: {
            /** @description The block. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ContextBlock"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    removeContextBlock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Removed. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    appendContextBlock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "content": "prefers window seats"
                 *     }
                 */
                "application/json": components["schemas"]["BlockContentRequest"];
            };
        };
        responses: {
            /** @description The block. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "label": "memory",
                     *       "description": "Learned facts",
                     *       "content": "user likes coffee\nprefers window seats",
                     *       "tokens": 10,
                     *       "maxTokens": 1100,
                     *       "kind": "writable",
                     *       "writable": true
                     *     }
                     */
                    "application/json": components["schemas"]["ContextBlock"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    listSearchEntries: {
        parameters: {
            query?: {
                limit?: number;
                /** @description `nextCursor` of the previous page. */
                cursor?: string;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of entries. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "entries": [
                     *         {
                     *           "key": "deploy",
                     *           "content": "We deploy on Fridays.",
                     *           "createdAt": "2026-11-22T11:00:00.000Z",
                     *           "updatedAt": "2026-11-22T11:00:00.000Z"
                     *         }
                     *       ],
                     *       "nextCursor": null
                     *     }
                     */
                    "application/json": components["schemas"]["SearchEntryList"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    ingestSearchEntries: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "entries": [
                 *         {
                 *           "key": "deploy",
                 *           "content": "We deploy on Fridays."
                 *         },
                 *         {
                 *           "title": "Rollback plan",
                 *           "content": "Roll back with the previous tag."
                 *         }
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["IngestEntriesRequest"];
            };
        };
        responses: {
            /** @description The keys written. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "keys": [
                     *         "deploy",
                     *         "rollback-plan-5d41402a"
                     *       ]
                     *     }
                     */
                    "application/json": {
                        keys: string[];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getSearchEntry: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
                /**
                 * @description Entry key of a search block, percent-decoded: 1–256 characters without control
                 *     characters (`400` otherwise).
                 * @example deploy
                 */
                key: components["parameters"]["key"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The entry. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SearchEntry"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteSearchEntry: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
                /**
                 * @description Entry key of a search block, percent-decoded: 1–256 characters without control
                 *     characters (`400` otherwise).
                 * @example deploy
                 */
                key: components["parameters"]["key"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getPrompt: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The prompt. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "frozen": true,
                     *       "prompt": "══════════════════════════════════════════════\nSOUL [readonly]\n══════════════════════════════════════════════\nYou are a helpful assistant.\n\n══════════════════════════════════════════════\nMEMORY (Learned facts) [0% — 5/1100 tokens] [writable]\n══════════════════════════════════════════════\nuser likes coffee"
                     *     }
                     */
                    "application/json": components["schemas"]["Prompt"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    refreshPrompt: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The new prompt. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        prompt: string;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    listTools: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The tools. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "tools": [
                     *         {
                     *           "name": "set_context",
                     *           "description": "Write to a context block. Available blocks:\n- \"memory\" (writable, this conversation only): Learned facts\n\nWrites are durable for this conversation; other conversations do not see them.",
                     *           "inputSchema": {
                     *             "type": "object",
                     *             "required": [
                     *               "label",
                     *               "content"
                     *             ],
                     *             "properties": {
                     *               "label": {
                     *                 "type": "string",
                     *                 "enum": [
                     *                   "memory"
                     *                 ],
                     *                 "description": "Block label to write to"
                     *               },
                     *               "content": {
                     *                 "type": "string",
                     *                 "description": "The main content to write to the block."
                     *               },
                     *               "action": {
                     *                 "type": "string",
                     *                 "enum": [
                     *                   "replace",
                     *                   "append"
                     *                 ],
                     *                 "description": "replace (default) or append"
                     *               }
                     *             }
                     *           }
                     *         },
                     *         {
                     *           "name": "session_search",
                     *           "description": "Search past conversations for relevant context. Searches across all sessions.",
                     *           "inputSchema": {
                     *             "type": "object",
                     *             "properties": {
                     *               "query": {
                     *                 "type": "string",
                     *                 "description": "Search query"
                     *               }
                     *             },
                     *             "required": [
                     *               "query"
                     *             ]
                     *           }
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": {
                        tools: components["schemas"]["Tool"][];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    runTool: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /**
                 * @description Tool name, percent-decoded. A name the session does not offer (see `GET …/tools`) is
                 *     `404`.
                 */
                name: components["parameters"]["name"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ToolRunRequest"];
            };
        };
        responses: {
            /** @description The tool's output (tool errors are `Error: …` outputs). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        output: string;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    mcp: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @enum {string} */
                    jsonrpc: "2.0";
                    id?: string | number;
                    method: string;
                    params?: Record<string, unknown>;
                };
            };
        };
        responses: {
            /** @description The JSON-RPC response (a `result`, or an `error` for an unknown method or tool). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JsonRpcResponse"];
                };
            };
            /** @description A notification was received; nothing to answer. */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    chat: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ChatRequest"];
            };
        };
        responses: {
            /**
             * @description With `Accept: text/event-stream`: the turn as server-sent events (`delta` events,
             *     then `message`, then `[DONE]`; or an `error` event). Headers
             *     `content-type: text/event-stream; charset=utf-8` and `cache-control: no-cache`.
             *     Each event's JSON is a `ChatEvent`. For a `useChat` body (with `trigger`): the AI
             *     SDK's UI message stream (header `x-vercel-ai-ui-message-stream: v1`; chunks as
             *     described above).
             */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": {
                        data: string;
                        /**
                         * @description The SSE default; never sent.
                         * @constant
                         */
                        event?: "message";
                    };
                };
            };
            /**
             * @description The turn is done and stored. `messages` holds the one new assistant message (the
             *     user message and any answered messages are stored too, as sent).
             */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChatResult"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["ChatConflict"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ChatUnavailable"];
        };
    };
    stopChat: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Whether a turn was running (`false` also for an unknown session). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        stopped: boolean;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
        };
    };
    resumeChat: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
                /** @description The chat's id as the AI SDK's client holds it (percent-encoded; not checked, as long as it decodes as UTF-8). */
                chatId: components["parameters"]["chatId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The running turn as a UI message stream. */
            200: {
                headers: {
                    /** @description Bytes of events the running turn keeps for its readers (at most 4 MiB). */
                    "x-replay-bytes"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": {
                        data: string;
                    };
                };
            };
            /** @description No turn is running. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
        };
    };
    chatDefaultSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ChatRequest"] & {
                    sessionId?: string;
                    session_id?: string;
                    /** @description The `useChat` body's chat id, which names the session when `sessionId` does not. */
                    id?: string;
                };
            };
        };
        responses: {
            /** @description The turn streamed (as `POST …/sessions/{sid}/chat`). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": {
                        data: string;
                    };
                };
            };
            /** @description The stored assistant message (as `POST …/sessions/{sid}/chat`). */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChatResult"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["ChatConflict"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ChatUnavailable"];
        };
    };
    resumeDefaultChat: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /** @description The chat's id, which is the session's (percent-encoded). */
                chatId: components["parameters"]["chatSession"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The running turn as a UI message stream. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": {
                        data: string;
                    };
                };
            };
            /** @description No turn is running. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
        };
    };
    sessionSocket: {
        parameters: {
            query?: {
                /**
                 * @description The token (a scoped token, or the admin token on a server), for clients that
                 *     cannot set an `Authorization` header (browsers).
                 *     Honoured by the front door only on an actual WebSocket handshake of this route
                 *     without an `Authorization` header; removed from the URL before the request reaches
                 *     the DO. On every other route and request it authenticates nothing.
                 *     Prefer the header where you can: query strings may end up in logs.
                 */
                token?: string;
            };
            header: {
                /**
                 * @description `websocket` (case-insensitive).
                 * @example websocket
                 */
                Upgrade: string;
            };
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /**
             * @description Switching Protocols: the WebSocket is open and bound to the session. Frames are
             *     described above (`ClientFrame`, `ServerFrame`).
             */
            101: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            405: components["responses"]["MethodNotAllowed"];
            429: components["responses"]["RateLimited"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    listMemories: {
        parameters: {
            query?: {
                /**
                 * @description Only memories of this category, or of one of a comma list of them (`core,daily`); may
                 *     be repeated (the lists add up). Anything else is `400`.
                 */
                category?: components["parameters"]["memoryCategory"];
                /**
                 * @description Only memories carrying this tag (compared exactly with the stored tags, which are
                 *     trimmed). Repeatable (at most 16): every one must be there. A value that is empty,
                 *     over 64 characters or holds a control character is `400`.
                 * @example [
                 *       "travel"
                 *     ]
                 */
                tag?: components["parameters"]["memoryTag"];
                /**
                 * @description Only memories carrying at least one of these tags (repeatable, at most 16; checked as
                 *     `tag`).
                 * @example [
                 *       "travel",
                 *       "food"
                 *     ]
                 */
                anyTag?: components["parameters"]["memoryAnyTag"];
                /** @description Only memories whose `createdAt` is strictly after this time (`TimeFilter`; once). */
                createdAfter?: components["parameters"]["memoryCreatedAfter"];
                /** @description Only memories whose `createdAt` is strictly before this time (`TimeFilter`; once). */
                createdBefore?: components["parameters"]["memoryCreatedBefore"];
                /** @description Only memories whose `updatedAt` is strictly after this time (`TimeFilter`; once). */
                updatedAfter?: components["parameters"]["memoryUpdatedAfter"];
                /** @description Only memories whose `updatedAt` is strictly before this time (`TimeFilter`; once). */
                updatedBefore?: components["parameters"]["memoryUpdatedBefore"];
                /**
                 * @description Only memories whose `source.sessionId` is this session: 1–128 characters of
                 *     `[A-Za-z0-9._:-]` (`400` otherwise; once). The session need not exist.
                 * @example chat-1
                 */
                sessionId?: components["parameters"]["memorySessionId"];
                /**
                 * @description Read the past: the memories that held at this ISO-8601 UTC time (`validFrom` at or
                 *     before it, and `invalidAt` null or after it) instead of those that hold now. Not with
                 *     `includeSuperseded` (`400`); a malformed time is `400`.
                 * @example 2026-11-01T00:00:00.000Z
                 */
                asOf?: components["parameters"]["memoryAsOf"];
                /** @description `1` (or `true`): superseded memories too. `0`, `false` or absent: only those that hold now. */
                includeSuperseded?: components["parameters"]["memoryIncludeSuperseded"];
                /** @description Most memories on the page (integer 1–100; anything else is `400`). */
                limit?: number;
                /**
                 * @description Where the page starts: the `nextCursor` of the previous page, as given (opaque;
                 *     anything else is `400`). Absent: the newest memory.
                 * @example 2026-11-22T11:00:00.000Z~42
                 */
                cursor?: string;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of memories. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "memories": [
                     *         {
                     *           "id": "mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b",
                     *           "content": "The user prefers trains to planes.",
                     *           "category": "core",
                     *           "tags": [
                     *             "travel"
                     *           ],
                     *           "metadata": {},
                     *           "score": 0.9,
                     *           "source": {
                     *             "sessionId": "chat-1",
                     *             "messageId": "m1"
                     *           },
                     *           "createdAt": "2026-11-22T11:00:00.000Z",
                     *           "updatedAt": "2026-11-22T11:00:00.000Z",
                     *           "expiresAt": null,
                     *           "recalledAt": "2026-11-22T11:05:00.000Z",
                     *           "recallCount": 2,
                     *           "validFrom": "2026-11-22T11:00:00.000Z",
                     *           "invalidAt": null,
                     *           "supersededBy": null,
                     *           "embeddedAt": null
                     *         }
                     *       ],
                     *       "nextCursor": null
                     *     }
                     */
                    "application/json": components["schemas"]["MemoryList"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    createMemory: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateMemoryRequest"];
            };
        };
        responses: {
            /**
             * @description A duplicate: merged into the live memory of the same category and text, which is
             *     answered as it now is.
             */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "id": "mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b",
                     *       "content": "The user prefers trains to planes.",
                     *       "category": "core",
                     *       "tags": [
                     *         "travel",
                     *         "transport"
                     *       ],
                     *       "metadata": {},
                     *       "score": 0.95,
                     *       "source": {
                     *         "sessionId": "chat-1",
                     *         "messageId": "m1"
                     *       },
                     *       "createdAt": "2026-11-22T11:00:00.000Z",
                     *       "updatedAt": "2026-11-22T11:30:00.000Z",
                     *       "expiresAt": null,
                     *       "recalledAt": null,
                     *       "recallCount": 0,
                     *       "validFrom": "2026-11-22T11:00:00.000Z",
                     *       "invalidAt": null,
                     *       "supersededBy": null,
                     *       "embeddedAt": null
                     *     }
                     */
                    "application/json": components["schemas"]["Memory"];
                };
            };
            /** @description The new memory. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "id": "mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b",
                     *       "content": "The user prefers trains to planes.",
                     *       "category": "core",
                     *       "tags": [
                     *         "travel"
                     *       ],
                     *       "metadata": {},
                     *       "score": 0.9,
                     *       "source": {
                     *         "sessionId": "chat-1",
                     *         "messageId": "m1"
                     *       },
                     *       "createdAt": "2026-11-22T11:00:00.000Z",
                     *       "updatedAt": "2026-11-22T11:00:00.000Z",
                     *       "expiresAt": null,
                     *       "recalledAt": null,
                     *       "recallCount": 0,
                     *       "validFrom": "2026-11-22T11:00:00.000Z",
                     *       "invalidAt": null,
                     *       "supersededBy": null,
                     *       "embeddedAt": null
                     *     }
                     */
                    "application/json": components["schemas"]["Memory"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description A memory of `supersedes` does not exist (or is not reachable); nothing is stored. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": {
                     *         "code": "not_found",
                     *         "message": "memory mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b not found (supersedes)"
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description A memory of `supersedes` no longer holds (another memory superseded it); nothing is stored. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": {
                     *         "code": "conflict",
                     *         "message": "memory mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b no longer holds (superseded by mem_1d2e3f4a-5b6c-4d7e-8f9a-0b1c2d3e4f5a)"
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["Error"];
                };
            };
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteMemories: {
        parameters: {
            query?: {
                /**
                 * @description Only memories of this category, or of one of a comma list of them (`core,daily`); may
                 *     be repeated (the lists add up). Anything else is `400`.
                 */
                category?: components["parameters"]["memoryCategory"];
                /**
                 * @description Only memories carrying this tag (compared exactly with the stored tags, which are
                 *     trimmed). Repeatable (at most 16): every one must be there. A value that is empty,
                 *     over 64 characters or holds a control character is `400`.
                 * @example [
                 *       "travel"
                 *     ]
                 */
                tag?: components["parameters"]["memoryTag"];
                /**
                 * @description Only memories carrying at least one of these tags (repeatable, at most 16; checked as
                 *     `tag`).
                 * @example [
                 *       "travel",
                 *       "food"
                 *     ]
                 */
                anyTag?: components["parameters"]["memoryAnyTag"];
                /** @description Only memories whose `createdAt` is strictly after this time (`TimeFilter`; once). */
                createdAfter?: components["parameters"]["memoryCreatedAfter"];
                /** @description Only memories whose `createdAt` is strictly before this time (`TimeFilter`; once). */
                createdBefore?: components["parameters"]["memoryCreatedBefore"];
                /** @description Only memories whose `updatedAt` is strictly after this time (`TimeFilter`; once). */
                updatedAfter?: components["parameters"]["memoryUpdatedAfter"];
                /** @description Only memories whose `updatedAt` is strictly before this time (`TimeFilter`; once). */
                updatedBefore?: components["parameters"]["memoryUpdatedBefore"];
                /**
                 * @description Only memories whose `source.sessionId` is this session: 1–128 characters of
                 *     `[A-Za-z0-9._:-]` (`400` otherwise; once). The session need not exist.
                 * @example chat-1
                 */
                sessionId?: components["parameters"]["memorySessionId"];
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["DeleteMemoriesRequest"];
            };
        };
        responses: {
            /** @description How many memories were forgotten. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "deleted": 3
                     *     }
                     */
                    "application/json": {
                        deleted: number;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    createMemories: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "memories": [
                 *         {
                 *           "content": "The user prefers trains to planes."
                 *         },
                 *         {
                 *           "content": "The user has a cat named Miso.",
                 *           "tags": [
                 *             "pets"
                 *           ],
                 *           "score": 0.9
                 *         }
                 *       ]
                 *     }
                 */
                "application/json": {
                    memories: components["schemas"]["CreateMemoryRequest"][];
                };
            };
        };
        responses: {
            /** @description The memories, in the order given. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        memories: components["schemas"]["Memory"][];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description A memory of some item's `supersedes` does not exist (or is not reachable); nothing is stored. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description A memory of some item's `supersedes` no longer holds; nothing is stored. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    searchMemories: {
        parameters: {
            query: {
                /**
                 * @description What to recall (required, `400` when missing; may be empty), in plain words as
                 *     every search takes them (the `q` of message search, docs/REFERENCE.md#plain-queries):
                 *     **any** word may match, looked up in the text and tags with porter stemming,
                 *     case-insensitive; English stop words (`the`, `where`, `does`, `what's`, …) and `user`
                 *     are dropped unless nothing else is left; `"phrases"` and `prefix*` as there. A word
                 *     of 3 or more characters that no memory has is looked up as a prefix (a word typed in
                 *     part). Nothing else is an operator, so any text is safe to pass. A query without a letter or digit finds nothing by
                 *     text (only by meaning, with embeddings).
                 */
                q: string;
                /**
                 * @description Only memories of this category, or of one of a comma list of them (`core,daily`); may
                 *     be repeated (the lists add up). Anything else is `400`.
                 */
                category?: components["parameters"]["memoryCategory"];
                /**
                 * @description Only memories carrying this tag (compared exactly with the stored tags, which are
                 *     trimmed). Repeatable (at most 16): every one must be there. A value that is empty,
                 *     over 64 characters or holds a control character is `400`.
                 * @example [
                 *       "travel"
                 *     ]
                 */
                tag?: components["parameters"]["memoryTag"];
                /**
                 * @description Only memories carrying at least one of these tags (repeatable, at most 16; checked as
                 *     `tag`).
                 * @example [
                 *       "travel",
                 *       "food"
                 *     ]
                 */
                anyTag?: components["parameters"]["memoryAnyTag"];
                /** @description Only memories whose `createdAt` is strictly after this time (`TimeFilter`; once). */
                createdAfter?: components["parameters"]["memoryCreatedAfter"];
                /** @description Only memories whose `createdAt` is strictly before this time (`TimeFilter`; once). */
                createdBefore?: components["parameters"]["memoryCreatedBefore"];
                /** @description Only memories whose `updatedAt` is strictly after this time (`TimeFilter`; once). */
                updatedAfter?: components["parameters"]["memoryUpdatedAfter"];
                /** @description Only memories whose `updatedAt` is strictly before this time (`TimeFilter`; once). */
                updatedBefore?: components["parameters"]["memoryUpdatedBefore"];
                /**
                 * @description Only memories whose `source.sessionId` is this session: 1–128 characters of
                 *     `[A-Za-z0-9._:-]` (`400` otherwise; once). The session need not exist.
                 * @example chat-1
                 */
                sessionId?: components["parameters"]["memorySessionId"];
                /**
                 * @description Read the past: the memories that held at this ISO-8601 UTC time (`validFrom` at or
                 *     before it, and `invalidAt` null or after it) instead of those that hold now. Not with
                 *     `includeSuperseded` (`400`); a malformed time is `400`.
                 * @example 2026-11-01T00:00:00.000Z
                 */
                asOf?: components["parameters"]["memoryAsOf"];
                /** @description `1` (or `true`): superseded memories too. `0`, `false` or absent: only those that hold now. */
                includeSuperseded?: components["parameters"]["memoryIncludeSuperseded"];
                /** @description Most hits returned (integer 1–50; anything else is `400`). */
                limit?: number;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The hits, best first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "results": [
                     *         {
                     *           "memory": {
                     *             "id": "mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b",
                     *             "content": "The user prefers trains to planes.",
                     *             "category": "core",
                     *             "tags": [
                     *               "travel"
                     *             ],
                     *             "metadata": {},
                     *             "score": 0.9,
                     *             "source": {
                     *               "sessionId": "chat-1",
                     *               "messageId": "m1"
                     *             },
                     *             "createdAt": "2026-11-22T11:00:00.000Z",
                     *             "updatedAt": "2026-11-22T11:00:00.000Z",
                     *             "expiresAt": null,
                     *             "recalledAt": "2026-11-22T11:10:00.000Z",
                     *             "recallCount": 1,
                     *             "validFrom": "2026-11-22T11:00:00.000Z",
                     *             "invalidAt": null,
                     *             "supersededBy": null,
                     *             "embeddedAt": null
                     *           },
                     *           "score": 0.935,
                     *           "why": "text match 1.00, confidence 0.90, changed less than an hour ago (1.00), recalled 0 times before (0.00)",
                     *           "signals": {
                     *             "text": 1,
                     *             "semantic": null,
                     *             "relevance": 1,
                     *             "confidence": 0.9,
                     *             "recency": 1,
                     *             "frequency": 0
                     *           }
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": {
                        results: components["schemas"]["MemoryHit"][];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getMemory: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The memory. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Memory"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    putMemory: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "content": "The user edits in Vim.",
                 *       "tags": [
                 *         "tools"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["PutMemoryRequest"];
            };
        };
        responses: {
            /** @description The memory replaced. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Memory"];
                };
            };
            /** @description The memory stored under this id. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Memory"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteMemory: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Forgotten. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    updateMemory: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["UpdateMemoryRequest"];
            };
        };
        responses: {
            /** @description The changed memory. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "id": "mem_2d4e6f80-1a3c-4b5d-8e7f-9a0b1c2d3e4f",
                     *       "content": "The user lives in Berlin.",
                     *       "category": "core",
                     *       "tags": [
                     *         "home"
                     *       ],
                     *       "metadata": {},
                     *       "score": 0.95,
                     *       "source": {
                     *         "sessionId": "chat-1",
                     *         "messageId": "m3"
                     *       },
                     *       "createdAt": "2026-11-22T11:00:00.000Z",
                     *       "updatedAt": "2026-11-22T12:00:00.000Z",
                     *       "expiresAt": null,
                     *       "recalledAt": null,
                     *       "recallCount": 0,
                     *       "validFrom": "2026-11-22T11:00:00.000Z",
                     *       "invalidAt": null,
                     *       "supersededBy": null,
                     *       "embeddedAt": null
                     *     }
                     */
                    "application/json": components["schemas"]["Memory"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getMemoryHistory: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The versions, oldest first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "versions": [
                     *         {
                     *           "content": "The user lives in Paris.",
                     *           "tags": [
                     *             "home"
                     *           ],
                     *           "metadata": {},
                     *           "score": 0.9,
                     *           "category": "core",
                     *           "at": "2026-11-22T11:00:00.000Z",
                     *           "by": "extract"
                     *         },
                     *         {
                     *           "content": "The user lives in Berlin.",
                     *           "tags": [
                     *             "home"
                     *           ],
                     *           "metadata": {},
                     *           "score": 0.95,
                     *           "category": "core",
                     *           "at": "2026-11-22T12:00:00.000Z",
                     *           "by": "api"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": {
                        versions: components["schemas"]["MemoryVersion"][];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    extractMemories: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["ExtractMemoriesRequest"];
            };
        };
        responses: {
            /** @description What the extraction changed (empty lists when nothing). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Extracted"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ExtractUnavailable"];
        };
    };
    listSchedules: {
        parameters: {
            query?: {
                /** @description Most items on the page (integer 1–100; anything else is `400`). */
                limit?: number;
                /** @description The `nextCursor` of the page before (empty is absent; anything else is `400`). */
                cursor?: string;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of schedules. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        schedules: components["schemas"]["Schedule"][];
                        nextCursor: string | null;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    createSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateScheduleRequest"];
            };
        };
        responses: {
            /** @description The schedule. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Schedule"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Schedule id (`sch_` and a UUID v4, as the API gives them out), percent-decoded: `400`
                 *     when that is not UTF-8, longer than 256 characters or holds a control character. Any
                 *     other id is simply not found (`404`).
                 * @example sch_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                schedule: components["parameters"]["schedule"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The schedule. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Schedule"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Schedule id (`sch_` and a UUID v4, as the API gives them out), percent-decoded: `400`
                 *     when that is not UTF-8, longer than 256 characters or holds a control character. Any
                 *     other id is simply not found (`404`).
                 * @example sch_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                schedule: components["parameters"]["schedule"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted, with its runs. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    updateSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Schedule id (`sch_` and a UUID v4, as the API gives them out), percent-decoded: `400`
                 *     when that is not UTF-8, longer than 256 characters or holds a control character. Any
                 *     other id is simply not found (`404`).
                 * @example sch_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                schedule: components["parameters"]["schedule"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["UpdateScheduleRequest"];
            };
        };
        responses: {
            /** @description The changed schedule. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Schedule"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    listScheduleRuns: {
        parameters: {
            query?: {
                /** @description Most items on the page (integer 1–100; anything else is `400`). */
                limit?: number;
                /** @description The `nextCursor` of the page before (empty is absent; anything else is `400`). */
                cursor?: string;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Schedule id (`sch_` and a UUID v4, as the API gives them out), percent-decoded: `400`
                 *     when that is not UTF-8, longer than 256 characters or holds a control character. Any
                 *     other id is simply not found (`404`).
                 * @example sch_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                schedule: components["parameters"]["schedule"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of runs. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        runs: components["schemas"]["ScheduleRun"][];
                        nextCursor: string | null;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    runSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Schedule id (`sch_` and a UUID v4, as the API gives them out), percent-decoded: `400`
                 *     when that is not UTF-8, longer than 256 characters or holds a control character. Any
                 *     other id is simply not found (`404`).
                 * @example sch_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                schedule: components["parameters"]["schedule"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The run. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ScheduleRun"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    issueToken: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["IssueTokenRequest"];
            };
        };
        responses: {
            /** @description The token and what it allows. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSIsInNjb3BlIjoicmVhZCIsInNlc3Npb25zIjpbImNoYXQtMSJdLCJpYXQiOjE3OTUzNDUyMDAuMCwiZXhwIjoxNzk1MzQ4ODAwLjB9.fvLdbWQd5jLBZHwpiLENFe1rDz_6fyDuhguvXTS0QXo",
                     *       "expiresAt": "2026-11-22T12:00:00.000Z",
                     *       "agent": "alice",
                     *       "scope": "read",
                     *       "sessions": [
                     *         "chat-1"
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["IssuedToken"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description `forbidden`: the request came with a scoped token; only the admin token issues tokens. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": {
                     *         "code": "forbidden",
                     *         "message": "only the admin token issues tokens"
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["Error"];
                };
            };
            405: components["responses"]["MethodNotAllowed"];
            413: components["responses"]["TooLarge"];
            500: components["responses"]["Internal"];
            /**
             * @description `not_configured`: `API_TOKEN` is not set (as for every route), or `TOKEN_SECRET`
             *     is not set, so no scoped token can be issued.
             */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    revokeTokens: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["RevokeTokensRequest"];
            };
        };
        responses: {
            /** @description The revocation time in force. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "before": "2026-11-22T11:00:00.000Z"
                     *     }
                     */
                    "application/json": components["schemas"]["Revocation"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    exportSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Session id: 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example chat-1
                 */
                sid: components["parameters"]["sid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The session's document. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionExport"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getSessionNamedImport: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The session. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionInfo"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    importSession: {
        parameters: {
            query?: {
                /**
                 * @description Import under this session id instead of the document's (1–128 characters of
                 *     `[A-Za-z0-9._:-]`; `400` otherwise); the overlays get new ids.
                 * @example chat-1-copy
                 */
                as?: string;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SessionImport"];
            };
        };
        responses: {
            /** @description The imported session. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "id": "chat-1-copy",
                     *       "name": "Trip planning",
                     *       "parentSessionId": null,
                     *       "model": "gpt-4o-mini",
                     *       "source": "web",
                     *       "metadata": {},
                     *       "inputTokens": 1200,
                     *       "outputTokens": 340,
                     *       "estimatedCost": 0.0042,
                     *       "endReason": null,
                     *       "messageCount": 3,
                     *       "totalMessages": 3,
                     *       "createdAt": "2026-11-22T11:00:00.000Z",
                     *       "updatedAt": "2026-11-22T11:05:00.000Z"
                     *     }
                     */
                    "application/json": components["schemas"]["SessionInfo"];
                };
            };
            /**
             * @description `invalid_request`: the body is not a session document of format
             *     `session-agent/3` (see the description), or `as` is not a session id. Nothing
             *     changed.
             */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description `conflict`: a session with that id exists. Nothing changed. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": {
                     *         "code": "conflict",
                     *         "message": "session chat-1 exists (import it under another id with ?as=)"
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["Error"];
                };
            };
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteSessionNamedImport: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    renameSessionNamedImport: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "Imports to check"
                 *     }
                 */
                "application/json": components["schemas"]["UpdateSessionRequest"];
            };
        };
        responses: {
            /** @description The renamed session. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionInfo"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    exportAgent: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The agent's export, streamed. */
            200: {
                headers: {
                    "Cache-Control"?: "no-store";
                    [name: string]: unknown;
                };
                content: {
                    "application/x-ndjson": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    listDirectory: {
        parameters: {
            query?: {
                /** @description Only this kind (`agent` or `space`; `400` otherwise). Absent, both. */
                kind?: "agent" | "space";
                /** @description Only names that start with this (compared as bytes; an agent name's characters, `400` otherwise). */
                prefix?: string;
                /** @description Only entries whose `lastActiveAt` is at or after this time (`TimeFilter`; `400` if it is none). */
                activeAfter?: components["schemas"]["TimeFilter"];
                /** @description Only entries whose `lastActiveAt` is before this time (`TimeFilter`; `400` if it is none). */
                activeBefore?: components["schemas"]["TimeFilter"];
                /** @description At most this many entries (1–1,000, default 50; `400` otherwise). */
                limit?: number;
                /**
                 * @description Where the page starts: the `nextCursor` of the previous page, as given
                 *     (`<kind>:<name>`; anything else is `400`). Absent: the first name.
                 * @example agent:alice
                 */
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of the directory. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DirectoryPage"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            405: components["responses"]["MethodNotAllowed"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    directoryUsage: {
        parameters: {
            query?: {
                /** @description The range's start (`TimeFilter`; inclusive). Absent, the epoch. */
                from?: components["schemas"]["TimeFilter"];
                /** @description The range's end (`TimeFilter`; exclusive; not before `from`, `400` otherwise). Absent, now. */
                to?: components["schemas"]["TimeFilter"];
                /** @description Only agents whose names start with this. */
                prefix?: string;
                /** @description At most this many agents (1–1,000, default 50; `400` otherwise). */
                limit?: number;
                /** @description The `nextCursor` of the previous page, as given (anything else is `400`). */
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The page's agents with their usage. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DirectoryUsagePage"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            405: components["responses"]["MethodNotAllowed"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    exportDirectory: {
        parameters: {
            query?: {
                /** @description Only agents whose names start with this. */
                prefix?: string;
                /**
                 * @description A `cursor` line's value, as given (anything else is `400`). Absent, the first agent.
                 * @example agent:alice
                 */
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The agents' exports, streamed. */
            200: {
                headers: {
                    "Cache-Control"?: "no-store";
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {"agent":"alice","record":{"format":"session-agent/3","kind":"agent"}}
                     *     {"agent":"alice","record":{"kind":"end","counts":{"sessions":0,"messages":0,"memories":0,"memoryVersions":0,"entries":0,"skills":0}}}
                     *     {"cursor":"agent:alice"}
                     */
                    "application/x-ndjson": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            405: components["responses"]["MethodNotAllowed"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    agentUsage: {
        parameters: {
            query?: {
                /** @description The range's start (`TimeFilter`; inclusive). Absent, the epoch. */
                from?: components["schemas"]["TimeFilter"];
                /** @description The range's end (`TimeFilter`; exclusive; not before `from`, `400` otherwise). Absent, now. */
                to?: components["schemas"]["TimeFilter"];
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The usage over the range. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "from": "2026-11-01T00:00:00.000Z",
                     *       "to": "2026-12-01T00:00:00.000Z",
                     *       "turns": 2,
                     *       "inputTokens": 200,
                     *       "outputTokens": 40,
                     *       "estimatedTurns": 0,
                     *       "cachedInputTokens": 120,
                     *       "bySession": [
                     *         {
                     *           "sessionId": "s1",
                     *           "turns": 2,
                     *           "inputTokens": 200,
                     *           "outputTokens": 40,
                     *           "estimatedTurns": 0,
                     *           "cachedInputTokens": 120
                     *         }
                     *       ],
                     *       "calibration": {
                     *         "model": "gpt-4o-mini",
                     *         "turns": 2,
                     *         "estimatedInputTokens": 160,
                     *         "inputTokens": 200,
                     *         "ratio": 1.25
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["AgentUsage"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            405: components["responses"]["MethodNotAllowed"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    importAgent: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/x-ndjson": string;
                "text/plain": string;
            };
        };
        responses: {
            /** @description What was written. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "sessions": 1,
                     *       "messages": 2,
                     *       "memories": 1,
                     *       "memoryVersions": 1,
                     *       "entries": 1,
                     *       "skills": 1,
                     *       "schedules": 1,
                     *       "scheduleRuns": 0,
                     *       "usage": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ImportCounts"];
                };
            };
            /**
             * @description `invalid_request`: the body is not a whole agent export of format
             *     `session-agent/3` (see the description). Nothing changed.
             */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /**
             * @description `conflict`: the agent holds data (rows, or skills in R2 under a prefix the export
             *     names). Erase it first (`DELETE /agents/{agent}`). Nothing changed.
             */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            413: components["responses"]["TooLarge"];
            /** @description `over_budget`: the export holds more memories than this agent keeps (`memory.maxMemories`), more schedules (`schedules.maxSchedules`) or more runs of one schedule (`schedules.maxRuns`). Nothing changed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    eraseAgent: {
        parameters: {
            query?: never;
            header: {
                /**
                 * @description `erase`, to mean it (compared without regard to case).
                 * @example erase
                 */
                Confirm: string;
            };
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Erased. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /**
             * @description `invalid_request`: no `Confirm: erase` header (or a body that is not a JSON
             *     object). Nothing changed.
             */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": {
                     *         "code": "invalid_request",
                     *         "message": "erasing an agent deletes everything it holds: send the header Confirm: erase to mean it"
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    listMemoriesInSpace: {
        parameters: {
            query?: {
                /**
                 * @description Only memories of this category, or of one of a comma list of them (`core,daily`); may
                 *     be repeated (the lists add up). Anything else is `400`.
                 */
                category?: components["parameters"]["memoryCategory"];
                /**
                 * @description Only memories carrying this tag (compared exactly with the stored tags, which are
                 *     trimmed). Repeatable (at most 16): every one must be there. A value that is empty,
                 *     over 64 characters or holds a control character is `400`.
                 * @example [
                 *       "travel"
                 *     ]
                 */
                tag?: components["parameters"]["memoryTag"];
                /**
                 * @description Only memories carrying at least one of these tags (repeatable, at most 16; checked as
                 *     `tag`).
                 * @example [
                 *       "travel",
                 *       "food"
                 *     ]
                 */
                anyTag?: components["parameters"]["memoryAnyTag"];
                /** @description Only memories whose `createdAt` is strictly after this time (`TimeFilter`; once). */
                createdAfter?: components["parameters"]["memoryCreatedAfter"];
                /** @description Only memories whose `createdAt` is strictly before this time (`TimeFilter`; once). */
                createdBefore?: components["parameters"]["memoryCreatedBefore"];
                /** @description Only memories whose `updatedAt` is strictly after this time (`TimeFilter`; once). */
                updatedAfter?: components["parameters"]["memoryUpdatedAfter"];
                /** @description Only memories whose `updatedAt` is strictly before this time (`TimeFilter`; once). */
                updatedBefore?: components["parameters"]["memoryUpdatedBefore"];
                /**
                 * @description Only memories whose `source.sessionId` is this session: 1–128 characters of
                 *     `[A-Za-z0-9._:-]` (`400` otherwise; once). The session need not exist.
                 * @example chat-1
                 */
                sessionId?: components["parameters"]["memorySessionId"];
                /**
                 * @description Read the past: the memories that held at this ISO-8601 UTC time (`validFrom` at or
                 *     before it, and `invalidAt` null or after it) instead of those that hold now. Not with
                 *     `includeSuperseded` (`400`); a malformed time is `400`.
                 * @example 2026-11-01T00:00:00.000Z
                 */
                asOf?: components["parameters"]["memoryAsOf"];
                /** @description `1` (or `true`): superseded memories too. `0`, `false` or absent: only those that hold now. */
                includeSuperseded?: components["parameters"]["memoryIncludeSuperseded"];
                /** @description Most memories on the page (integer 1–100; anything else is `400`). */
                limit?: number;
                /**
                 * @description Where the page starts: the `nextCursor` of the previous page, as given (opaque;
                 *     anything else is `400`). Absent: the newest memory.
                 * @example 2026-11-22T11:00:00.000Z~42
                 */
                cursor?: string;
            };
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of memories. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "memories": [
                     *         {
                     *           "id": "mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b",
                     *           "content": "The user prefers trains to planes.",
                     *           "category": "core",
                     *           "tags": [
                     *             "travel"
                     *           ],
                     *           "metadata": {},
                     *           "score": 0.9,
                     *           "source": {
                     *             "sessionId": "chat-1",
                     *             "messageId": "m1"
                     *           },
                     *           "createdAt": "2026-11-22T11:00:00.000Z",
                     *           "updatedAt": "2026-11-22T11:00:00.000Z",
                     *           "expiresAt": null,
                     *           "recalledAt": "2026-11-22T11:05:00.000Z",
                     *           "recallCount": 2,
                     *           "validFrom": "2026-11-22T11:00:00.000Z",
                     *           "invalidAt": null,
                     *           "supersededBy": null,
                     *           "embeddedAt": null
                     *         }
                     *       ],
                     *       "nextCursor": null
                     *     }
                     */
                    "application/json": components["schemas"]["MemoryList"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    createMemoryInSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateMemoryRequest"];
            };
        };
        responses: {
            /**
             * @description A duplicate: merged into the live memory of the same category and text, which is
             *     answered as it now is.
             */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "id": "mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b",
                     *       "content": "The user prefers trains to planes.",
                     *       "category": "core",
                     *       "tags": [
                     *         "travel",
                     *         "transport"
                     *       ],
                     *       "metadata": {},
                     *       "score": 0.95,
                     *       "source": {
                     *         "sessionId": "chat-1",
                     *         "messageId": "m1"
                     *       },
                     *       "createdAt": "2026-11-22T11:00:00.000Z",
                     *       "updatedAt": "2026-11-22T11:30:00.000Z",
                     *       "expiresAt": null,
                     *       "recalledAt": null,
                     *       "recallCount": 0,
                     *       "validFrom": "2026-11-22T11:00:00.000Z",
                     *       "invalidAt": null,
                     *       "supersededBy": null,
                     *       "embeddedAt": null
                     *     }
                     */
                    "application/json": components["schemas"]["Memory"];
                };
            };
            /** @description The new memory. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "id": "mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b",
                     *       "content": "The user prefers trains to planes.",
                     *       "category": "core",
                     *       "tags": [
                     *         "travel"
                     *       ],
                     *       "metadata": {},
                     *       "score": 0.9,
                     *       "source": {
                     *         "sessionId": "chat-1",
                     *         "messageId": "m1"
                     *       },
                     *       "createdAt": "2026-11-22T11:00:00.000Z",
                     *       "updatedAt": "2026-11-22T11:00:00.000Z",
                     *       "expiresAt": null,
                     *       "recalledAt": null,
                     *       "recallCount": 0,
                     *       "validFrom": "2026-11-22T11:00:00.000Z",
                     *       "invalidAt": null,
                     *       "supersededBy": null,
                     *       "embeddedAt": null
                     *     }
                     */
                    "application/json": components["schemas"]["Memory"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description A memory of `supersedes` does not exist (or is not reachable); nothing is stored. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": {
                     *         "code": "not_found",
                     *         "message": "memory mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b not found (supersedes)"
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description A memory of `supersedes` no longer holds (another memory superseded it); nothing is stored. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": {
                     *         "code": "conflict",
                     *         "message": "memory mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b no longer holds (superseded by mem_1d2e3f4a-5b6c-4d7e-8f9a-0b1c2d3e4f5a)"
                     *       }
                     *     }
                     */
                    "application/json": components["schemas"]["Error"];
                };
            };
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteMemoriesInSpace: {
        parameters: {
            query?: {
                /**
                 * @description Only memories of this category, or of one of a comma list of them (`core,daily`); may
                 *     be repeated (the lists add up). Anything else is `400`.
                 */
                category?: components["parameters"]["memoryCategory"];
                /**
                 * @description Only memories carrying this tag (compared exactly with the stored tags, which are
                 *     trimmed). Repeatable (at most 16): every one must be there. A value that is empty,
                 *     over 64 characters or holds a control character is `400`.
                 * @example [
                 *       "travel"
                 *     ]
                 */
                tag?: components["parameters"]["memoryTag"];
                /**
                 * @description Only memories carrying at least one of these tags (repeatable, at most 16; checked as
                 *     `tag`).
                 * @example [
                 *       "travel",
                 *       "food"
                 *     ]
                 */
                anyTag?: components["parameters"]["memoryAnyTag"];
                /** @description Only memories whose `createdAt` is strictly after this time (`TimeFilter`; once). */
                createdAfter?: components["parameters"]["memoryCreatedAfter"];
                /** @description Only memories whose `createdAt` is strictly before this time (`TimeFilter`; once). */
                createdBefore?: components["parameters"]["memoryCreatedBefore"];
                /** @description Only memories whose `updatedAt` is strictly after this time (`TimeFilter`; once). */
                updatedAfter?: components["parameters"]["memoryUpdatedAfter"];
                /** @description Only memories whose `updatedAt` is strictly before this time (`TimeFilter`; once). */
                updatedBefore?: components["parameters"]["memoryUpdatedBefore"];
                /**
                 * @description Only memories whose `source.sessionId` is this session: 1–128 characters of
                 *     `[A-Za-z0-9._:-]` (`400` otherwise; once). The session need not exist.
                 * @example chat-1
                 */
                sessionId?: components["parameters"]["memorySessionId"];
            };
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["DeleteMemoriesRequest"];
            };
        };
        responses: {
            /** @description How many memories were forgotten. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "deleted": 3
                     *     }
                     */
                    "application/json": {
                        deleted: number;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    createMemoriesInSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "memories": [
                 *         {
                 *           "content": "The user prefers trains to planes."
                 *         },
                 *         {
                 *           "content": "The user has a cat named Miso.",
                 *           "tags": [
                 *             "pets"
                 *           ],
                 *           "score": 0.9
                 *         }
                 *       ]
                 *     }
                 */
                "application/json": {
                    memories: components["schemas"]["CreateMemoryRequest"][];
                };
            };
        };
        responses: {
            /** @description The memories, in the order given. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        memories: components["schemas"]["Memory"][];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description A memory of some item's `supersedes` does not exist (or is not reachable); nothing is stored. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description A memory of some item's `supersedes` no longer holds; nothing is stored. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    searchMemoriesInSpace: {
        parameters: {
            query: {
                /**
                 * @description What to recall (required, `400` when missing; may be empty), in plain words as
                 *     every search takes them (the `q` of message search, docs/REFERENCE.md#plain-queries):
                 *     **any** word may match, looked up in the text and tags with porter stemming,
                 *     case-insensitive; English stop words (`the`, `where`, `does`, `what's`, …) and `user`
                 *     are dropped unless nothing else is left; `"phrases"` and `prefix*` as there. A word
                 *     of 3 or more characters that no memory has is looked up as a prefix (a word typed in
                 *     part). Nothing else is an operator, so any text is safe to pass. A query without a letter or digit finds nothing by
                 *     text (only by meaning, with embeddings).
                 */
                q: string;
                /**
                 * @description Only memories of this category, or of one of a comma list of them (`core,daily`); may
                 *     be repeated (the lists add up). Anything else is `400`.
                 */
                category?: components["parameters"]["memoryCategory"];
                /**
                 * @description Only memories carrying this tag (compared exactly with the stored tags, which are
                 *     trimmed). Repeatable (at most 16): every one must be there. A value that is empty,
                 *     over 64 characters or holds a control character is `400`.
                 * @example [
                 *       "travel"
                 *     ]
                 */
                tag?: components["parameters"]["memoryTag"];
                /**
                 * @description Only memories carrying at least one of these tags (repeatable, at most 16; checked as
                 *     `tag`).
                 * @example [
                 *       "travel",
                 *       "food"
                 *     ]
                 */
                anyTag?: components["parameters"]["memoryAnyTag"];
                /** @description Only memories whose `createdAt` is strictly after this time (`TimeFilter`; once). */
                createdAfter?: components["parameters"]["memoryCreatedAfter"];
                /** @description Only memories whose `createdAt` is strictly before this time (`TimeFilter`; once). */
                createdBefore?: components["parameters"]["memoryCreatedBefore"];
                /** @description Only memories whose `updatedAt` is strictly after this time (`TimeFilter`; once). */
                updatedAfter?: components["parameters"]["memoryUpdatedAfter"];
                /** @description Only memories whose `updatedAt` is strictly before this time (`TimeFilter`; once). */
                updatedBefore?: components["parameters"]["memoryUpdatedBefore"];
                /**
                 * @description Only memories whose `source.sessionId` is this session: 1–128 characters of
                 *     `[A-Za-z0-9._:-]` (`400` otherwise; once). The session need not exist.
                 * @example chat-1
                 */
                sessionId?: components["parameters"]["memorySessionId"];
                /**
                 * @description Read the past: the memories that held at this ISO-8601 UTC time (`validFrom` at or
                 *     before it, and `invalidAt` null or after it) instead of those that hold now. Not with
                 *     `includeSuperseded` (`400`); a malformed time is `400`.
                 * @example 2026-11-01T00:00:00.000Z
                 */
                asOf?: components["parameters"]["memoryAsOf"];
                /** @description `1` (or `true`): superseded memories too. `0`, `false` or absent: only those that hold now. */
                includeSuperseded?: components["parameters"]["memoryIncludeSuperseded"];
                /** @description Most hits returned (integer 1–50; anything else is `400`). */
                limit?: number;
            };
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The hits, best first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "results": [
                     *         {
                     *           "memory": {
                     *             "id": "mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b",
                     *             "content": "The user prefers trains to planes.",
                     *             "category": "core",
                     *             "tags": [
                     *               "travel"
                     *             ],
                     *             "metadata": {},
                     *             "score": 0.9,
                     *             "source": {
                     *               "sessionId": "chat-1",
                     *               "messageId": "m1"
                     *             },
                     *             "createdAt": "2026-11-22T11:00:00.000Z",
                     *             "updatedAt": "2026-11-22T11:00:00.000Z",
                     *             "expiresAt": null,
                     *             "recalledAt": "2026-11-22T11:10:00.000Z",
                     *             "recallCount": 1,
                     *             "validFrom": "2026-11-22T11:00:00.000Z",
                     *             "invalidAt": null,
                     *             "supersededBy": null,
                     *             "embeddedAt": null
                     *           },
                     *           "score": 0.935,
                     *           "why": "text match 1.00, confidence 0.90, changed less than an hour ago (1.00), recalled 0 times before (0.00)",
                     *           "signals": {
                     *             "text": 1,
                     *             "semantic": null,
                     *             "relevance": 1,
                     *             "confidence": 0.9,
                     *             "recency": 1,
                     *             "frequency": 0
                     *           }
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": {
                        results: components["schemas"]["MemoryHit"][];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getMemoryInSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The memory. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Memory"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    putMemoryInSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "content": "The user edits in Vim.",
                 *       "tags": [
                 *         "tools"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["PutMemoryRequest"];
            };
        };
        responses: {
            /** @description The memory replaced. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Memory"];
                };
            };
            /** @description The memory stored under this id. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Memory"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteMemoryInSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Forgotten. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    updateMemoryInSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["UpdateMemoryRequest"];
            };
        };
        responses: {
            /** @description The changed memory. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "id": "mem_2d4e6f80-1a3c-4b5d-8e7f-9a0b1c2d3e4f",
                     *       "content": "The user lives in Berlin.",
                     *       "category": "core",
                     *       "tags": [
                     *         "home"
                     *       ],
                     *       "metadata": {},
                     *       "score": 0.95,
                     *       "source": {
                     *         "sessionId": "chat-1",
                     *         "messageId": "m3"
                     *       },
                     *       "createdAt": "2026-11-22T11:00:00.000Z",
                     *       "updatedAt": "2026-11-22T12:00:00.000Z",
                     *       "expiresAt": null,
                     *       "recalledAt": null,
                     *       "recallCount": 0,
                     *       "validFrom": "2026-11-22T11:00:00.000Z",
                     *       "invalidAt": null,
                     *       "supersededBy": null,
                     *       "embeddedAt": null
                     *     }
                     */
                    "application/json": components["schemas"]["Memory"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getMemoryHistoryInSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Memory id (`mem_` and a UUID v4 as the API gives them out, or the caller's own given to
                 *     `PUT`), percent-decoded: `400` when that is not UTF-8, longer than 256 characters or
                 *     holds a control character. Any other id is simply not found (`404`), or for `PUT`
                 *     stored (1–128 characters of `[A-Za-z0-9._:-]`, `400` otherwise).
                 * @example mem_8c1f4e2a-5b3d-4f6e-9a7b-0c1d2e3f4a5b
                 */
                memory: components["parameters"]["memory"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The versions, oldest first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "versions": [
                     *         {
                     *           "content": "The user lives in Paris.",
                     *           "tags": [
                     *             "home"
                     *           ],
                     *           "metadata": {},
                     *           "score": 0.9,
                     *           "category": "core",
                     *           "at": "2026-11-22T11:00:00.000Z",
                     *           "by": "extract"
                     *         },
                     *         {
                     *           "content": "The user lives in Berlin.",
                     *           "tags": [
                     *             "home"
                     *           ],
                     *           "metadata": {},
                     *           "score": 0.95,
                     *           "category": "core",
                     *           "at": "2026-11-22T12:00:00.000Z",
                     *           "by": "api"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": {
                        versions: components["schemas"]["MemoryVersion"][];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    revokeTokensInSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["RevokeTokensRequest"];
            };
        };
        responses: {
            /** @description The revocation time in force. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "before": "2026-11-22T11:00:00.000Z"
                     *     }
                     */
                    "application/json": components["schemas"]["Revocation"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getAgentSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The agent's space. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SpaceChoice"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    setAgentSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    space: string | null;
                };
            };
        };
        responses: {
            /** @description The agent's space now. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SpaceChoice"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    forgetAgentSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The agent's space now. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SpaceChoice"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    eraseSpace: {
        parameters: {
            query?: never;
            header: {
                confirm: "erase";
            };
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Erased. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    exportSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The space's export. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/x-ndjson": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    importSpace: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/x-ndjson": string;
                "text/plain": string;
            };
        };
        responses: {
            /** @description What was written. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "memories": 1,
                     *       "memoryVersions": 1,
                     *       "sharedBlocks": 2
                     *     }
                     */
                    "application/json": components["schemas"]["SpaceImportCounts"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    issueSpaceToken: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["IssueTokenRequest"];
            };
        };
        responses: {
            /** @description The token. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["IssuedToken"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    listSharedBlocks: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The blocks, by label. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        blocks: components["schemas"]["SharedBlock"][];
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    getSharedBlock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The block. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SharedBlock"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    replaceSharedBlock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    content: string;
                    version: number;
                    maxTokens?: number | null;
                };
            };
        };
        responses: {
            /** @description The block as written. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SharedBlock"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    deleteSharedBlock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    appendSharedBlock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The memory space: picks the `MemorySpace` Durable Object (`idFromName(space)`), a
                 *     namespace apart from the agents' (an agent and a space may share a name). The agent
                 *     name syntax.
                 * @example alice
                 */
                space: components["parameters"]["space"];
                /**
                 * @description Block label: 1–64 characters of `[A-Za-z0-9_-]`, checked after percent-decoding
                 *     (`400 invalid_request` otherwise).
                 * @example memory
                 */
                label: components["parameters"]["label"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    content: string;
                    maxTokens?: number | null;
                };
            };
        };
        responses: {
            /** @description The block as written. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SharedBlock"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["TooLarge"];
            422: components["responses"]["OverBudget"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["ServiceUnavailable"];
        };
    };
    openaiListModels: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The model list. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OpenAiModelList"];
                };
            };
            400: components["responses"]["OpenAiError"];
            401: components["responses"]["OpenAiError"];
            403: components["responses"]["OpenAiError"];
            429: components["responses"]["OpenAiError"];
        };
    };
    openaiChatCompletion: {
        parameters: {
            query?: never;
            header?: {
                /**
                 * @description The session an OpenAI-compatible request talks to (before the body's own ways of naming
                 *     it): a session id, 1–128 characters of `[A-Za-z0-9._:-]`.
                 */
                "x-session-id"?: components["parameters"]["openaiSession"];
            };
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "model": "any",
                 *       "messages": [
                 *         {
                 *           "role": "user",
                 *           "content": "Hello"
                 *         }
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["OpenAiChatRequest"];
            };
        };
        responses: {
            /** @description The completion, or its events with `stream`. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OpenAiChatCompletion"];
                    "text/event-stream": {
                        data: string;
                    };
                };
            };
            400: components["responses"]["OpenAiError"];
            401: components["responses"]["OpenAiError"];
            403: components["responses"]["OpenAiError"];
            404: components["responses"]["OpenAiError"];
            409: components["responses"]["OpenAiError"];
            413: components["responses"]["OpenAiError"];
            429: components["responses"]["OpenAiError"];
            500: components["responses"]["OpenAiError"];
            503: components["responses"]["OpenAiError"];
        };
    };
    openaiCreateResponse: {
        parameters: {
            query?: never;
            header?: {
                /**
                 * @description The session an OpenAI-compatible request talks to (before the body's own ways of naming
                 *     it): a session id, 1–128 characters of `[A-Za-z0-9._:-]`.
                 */
                "x-session-id"?: components["parameters"]["openaiSession"];
            };
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "model": "any",
                 *       "input": "Hello"
                 *     }
                 */
                "application/json": components["schemas"]["OpenAiResponseRequest"];
            };
        };
        responses: {
            /** @description The response, or its events with `stream`. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OpenAiResponse"];
                    "text/event-stream": {
                        data: string;
                    };
                };
            };
            400: components["responses"]["OpenAiError"];
            401: components["responses"]["OpenAiError"];
            403: components["responses"]["OpenAiError"];
            404: components["responses"]["OpenAiError"];
            409: components["responses"]["OpenAiError"];
            413: components["responses"]["OpenAiError"];
            429: components["responses"]["OpenAiError"];
            500: components["responses"]["OpenAiError"];
            503: components["responses"]["OpenAiError"];
        };
    };
    openaiGetResponse: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
                 *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
                 *     `%` → `%25`, non-ASCII as UTF-8).
                 * @example m1
                 */
                mid: components["parameters"]["mid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The response. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OpenAiResponse"];
                };
            };
            400: components["responses"]["OpenAiError"];
            401: components["responses"]["OpenAiError"];
            403: components["responses"]["OpenAiError"];
            404: components["responses"]["OpenAiError"];
            429: components["responses"]["OpenAiError"];
        };
    };
    openaiDeleteResponse: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
                 *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
                 *     `%` → `%25`, non-ASCII as UTF-8).
                 * @example m1
                 */
                mid: components["parameters"]["mid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        id: string;
                        /** @constant */
                        object: "response";
                        /** @constant */
                        deleted: true;
                    };
                };
            };
            400: components["responses"]["OpenAiError"];
            401: components["responses"]["OpenAiError"];
            403: components["responses"]["OpenAiError"];
            404: components["responses"]["OpenAiError"];
            429: components["responses"]["OpenAiError"];
        };
    };
    openaiListInputItems: {
        parameters: {
            query?: {
                /** @description Items per page, 1–100 (default 20). */
                limit?: number;
                order?: "asc" | "desc";
                /** @description The id of the item the page starts after (`404` when it is not one of them). */
                after?: string;
            };
            header?: never;
            path: {
                /**
                 * @description The agent: picks the Durable Object (`idFromName(agent)`), so each agent has its own
                 *     database. 1–128 characters of `[A-Za-z0-9._:-]`, checked after percent-decoding
                 *     (`400` otherwise). Front door only; absent when calling the DO stub directly.
                 * @example alice
                 */
                agent: components["parameters"]["agent"];
                /**
                 * @description Message id: 1–256 characters, no control characters (`400` otherwise), checked after
                 *     percent-decoding. Percent-encode it (`/` → `%2F`, `?` → `%3F`, `#` → `%23`,
                 *     `%` → `%25`, non-ASCII as UTF-8).
                 * @example m1
                 */
                mid: components["parameters"]["mid"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of items. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OpenAiItemList"];
                };
            };
            400: components["responses"]["OpenAiError"];
            401: components["responses"]["OpenAiError"];
            403: components["responses"]["OpenAiError"];
            404: components["responses"]["OpenAiError"];
            429: components["responses"]["OpenAiError"];
        };
    };
}
