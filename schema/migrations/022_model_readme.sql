-- A model card (Markdown, at most 64 KiB, rendered by the server with cmark) and which
-- way is better for each metric ({"auc":"higher","p95_ms":"lower"}), for pages that
-- compare versions without a policy to say so.
ALTER TABLE models ADD COLUMN readme TEXT NOT NULL DEFAULT '';
ALTER TABLE models ADD COLUMN metric_directions TEXT NOT NULL DEFAULT '{}';

-- Who made each promotion event (a token's name, or "modelgated" for release control), so
-- a finished promotion says who ended it.
ALTER TABLE promotion_events ADD COLUMN actor TEXT;
