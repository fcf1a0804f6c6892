-- 0022: messages found by their id alone, whatever the session. An OpenAI response id is a
-- message id (crates/api/src/openai.rs): `GET /v1/responses/{id}`, its input items, its DELETE and
-- every `POST /v1/responses` with `previous_response_id` look it up among the sessions the token
-- opens (store/tree.rs `sessions_of`). The table's only other key is (session_id, id), so that
-- lookup read every message of the agent.
CREATE INDEX messages_by_id ON messages (id);
