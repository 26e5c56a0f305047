-- 007_gateway_names: every object name a gateway derives for an alias (nginx variable and
-- include file, upstreams, HAProxy backend) belongs to one (model, alias): a second alias
-- that would produce the same name on the same gateway is refused, never shared.
-- alias '*' marks a name owned by a model whatever the alias (a version's upstream).
CREATE TABLE gateway_names (
    gateway TEXT NOT NULL,
    name    TEXT NOT NULL,
    model   TEXT NOT NULL,
    alias   TEXT NOT NULL,
    PRIMARY KEY (gateway, name)
) WITHOUT ROWID;
