-- 0020: our estimate of a turn's input tokens beside what the provider counted
-- (crates/core/src/directory/usage.rs, `calibration`): NULL for a turn the provider did not
-- count (stopped) and for rows before this migration. The newest rows of a model calibrate the
-- object's token estimates for it (auto-compaction, compaction's tail budget, status frames).
ALTER TABLE usage_ledger ADD COLUMN input_estimate INTEGER;
CREATE INDEX usage_ledger_model ON usage_ledger (model, seq);
