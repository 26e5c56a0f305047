-- 012_routing: see the SQLite migration of the same number.
ALTER TABLE aliases ADD COLUMN match_rules TEXT;
ALTER TABLE aliases ADD COLUMN shadow TEXT;
ALTER TABLE alias_history ADD COLUMN match_rules TEXT;
ALTER TABLE alias_history ADD COLUMN shadow TEXT;
ALTER TABLE promotions ADD COLUMN phase TEXT;
UPDATE promotions SET phase = 'steps' WHERE step_index >= 0;
