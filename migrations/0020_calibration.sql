-- 0020: two more figures per turn in the usage ledger (crates/core/src/directory/usage.rs):
-- `input_estimate`, our estimate of the input tokens the provider counted (NULL for a turn it
-- did not count, stopped, and for rows before this migration): the newest rows of a model
-- calibrate the object's token estimates for it (auto-compaction, compaction's tail budget,
-- status frames); `cached_input_tokens`, of the input, what the provider read from its prompt
-- cache (Anthropic's cache reads, OpenAI's cached prompt tokens).
ALTER TABLE usage_ledger ADD COLUMN input_estimate INTEGER;
ALTER TABLE usage_ledger ADD COLUMN cached_input_tokens INTEGER NOT NULL DEFAULT 0;
CREATE INDEX usage_ledger_model ON usage_ledger (model, seq);
