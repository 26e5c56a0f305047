-- 012_routing: an alias's routing strategies beyond weights (header match rules and a
-- shadow) are part of every generation, and a promotion records its rollout phase.

-- match_rules: JSON [{"header","value","version"}], NULL when none.
-- shadow: JSON {"version","percent"}, NULL when none.
ALTER TABLE aliases ADD COLUMN match_rules TEXT;
ALTER TABLE aliases ADD COLUMN shadow TEXT;
ALTER TABLE alias_history ADD COLUMN match_rules TEXT;
ALTER TABLE alias_history ADD COLUMN shadow TEXT;

-- phase: shadow, internal or steps once the rollout began; NULL before.
ALTER TABLE promotions ADD COLUMN phase TEXT;
UPDATE promotions SET phase = 'steps' WHERE step_index >= 0;
