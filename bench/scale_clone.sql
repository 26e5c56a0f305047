-- scale_clone.sql - for bench/scale.sh on PostgreSQL: models m<first>..m<last> made as
-- copies of the model :template that scale_gen created through the store API, with
-- INSERT ... SELECT (generating a million versions one API call at a time takes an hour
-- there). Each copy has the template's rows in every table the measured reads touch
-- (model, versions, their datasets, metrics and signature bundles, datasets raw-<i> and
-- train-<i> with their lineage, alias production with its history, the model's epoch),
-- with its own names, ids and dataset digests, exactly as the store would write them;
-- only the audit log holds no entries for them, and their bundles are the template's
-- bytes (no read here verifies them).
--
--   psql -v template=m00000 -v first=1 -v last=999 -f bench/scale_clone.sql URL
\set ON_ERROR_STOP 1
BEGIN;

SELECT m.id AS tpl_id,
       (SELECT vd.digest FROM version_datasets vd JOIN versions v ON v.id = vd.version_id
         WHERE v.model_id = m.id AND vd.role = 'train' LIMIT 1) AS tpl_train
  FROM models m WHERE m.name = :'template' \gset
SELECT parent AS tpl_raw FROM dataset_parents WHERE child = :'tpl_train' \gset

CREATE TEMP TABLE clone ON COMMIT DROP AS
SELECT i, 'm' || lpad(i::text, 5, '0') AS name,
       'raw-' || lpad(i::text, 5, '0') AS raw_name,
       'train-' || lpad(i::text, 5, '0') AS train_name
  FROM generate_series(:first, :last) i;
ALTER TABLE clone ADD COLUMN raw text, ADD COLUMN train text;
UPDATE clone SET raw = 'sha256:' || encode(sha256(convert_to(raw_name, 'UTF8')), 'hex'),
                 train = 'sha256:' || encode(sha256(convert_to(train_name, 'UTF8')), 'hex');

INSERT INTO datasets (digest, name, uri, description, created_at, created_by)
SELECT c.raw, c.raw_name, d.uri, d.description, d.created_at, d.created_by
  FROM clone c, datasets d WHERE d.digest = :'tpl_raw' ORDER BY c.i;
INSERT INTO datasets (digest, name, uri, description, created_at, created_by)
SELECT c.train, c.train_name, d.uri, d.description, d.created_at, d.created_by
  FROM clone c, datasets d WHERE d.digest = :'tpl_train' ORDER BY c.i;
INSERT INTO dataset_parents (child, parent) SELECT train, raw FROM clone ORDER BY i;

INSERT INTO models (name, description, tags, created_at, created_by, latest_version, owners)
SELECT c.name, m.description, m.tags, m.created_at, m.created_by, m.latest_version, m.owners
  FROM clone c, models m WHERE m.id = :tpl_id ORDER BY c.i;
CREATE TEMP TABLE clone_model ON COMMIT DROP AS
SELECT c.*, m.id AS model_id FROM clone c JOIN models m ON m.name = c.name;

INSERT INTO versions (model_id, version, artifact, image, run_id, source, params, tags, smoke,
                      resources, description, created_at, created_by)
SELECT cm.model_id, v.version, v.artifact, v.image, v.run_id, v.source, v.params, v.tags,
       v.smoke, v.resources, v.description, v.created_at, v.created_by
  FROM clone_model cm, versions v WHERE v.model_id = :tpl_id ORDER BY cm.i, v.version;
CREATE TEMP TABLE clone_version ON COMMIT DROP AS
SELECT cm.i, cm.train, cm.train_name, nv.id AS new_id, tv.id AS tpl_version_id
  FROM clone_model cm JOIN versions nv ON nv.model_id = cm.model_id
  JOIN versions tv ON tv.model_id = :tpl_id AND tv.version = nv.version;

INSERT INTO version_datasets (version_id, ord, digest, name, uri, role)
SELECT cv.new_id, vd.ord,
       CASE WHEN vd.digest = :'tpl_train' THEN cv.train ELSE vd.digest END,
       CASE WHEN vd.digest = :'tpl_train' AND vd.name IS NOT NULL THEN cv.train_name
            ELSE vd.name END,
       vd.uri, vd.role
  FROM clone_version cv JOIN version_datasets vd ON vd.version_id = cv.tpl_version_id
 ORDER BY cv.new_id, vd.ord;
INSERT INTO version_metrics (version_id, name, value, by, at)
SELECT cv.new_id, vm.name, vm.value, vm.by, vm.at
  FROM clone_version cv JOIN version_metrics vm ON vm.version_id = cv.tpl_version_id
 ORDER BY cv.new_id, vm.seq;
INSERT INTO version_signatures (version_id, keyid, bundle)
SELECT cv.new_id, s.keyid, s.bundle
  FROM clone_version cv JOIN version_signatures s ON s.version_id = cv.tpl_version_id
 ORDER BY cv.new_id;

INSERT INTO aliases (model_id, name, generation, routes, deleted, promotion, updated_at,
                     updated_by)
SELECT cm.model_id, a.name, a.generation, a.routes, a.deleted, a.promotion, a.updated_at,
       a.updated_by
  FROM clone_model cm, aliases a WHERE a.model_id = :tpl_id ORDER BY cm.i, a.name;
INSERT INTO alias_history (alias_id, generation, routes, kind, reason, promotion, at, by)
SELECT na.id, h.generation, h.routes, h.kind, h.reason, h.promotion, h.at, h.by
  FROM clone_model cm JOIN aliases na ON na.model_id = cm.model_id
  JOIN aliases ta ON ta.model_id = :tpl_id AND ta.name = na.name
  JOIN alias_history h ON h.alias_id = ta.id
 ORDER BY na.id, h.generation;
INSERT INTO model_epochs (model, epoch, seq)
SELECT c.name, e.epoch, 0 FROM clone c, model_epochs e WHERE e.model = :'template' ORDER BY c.i;

COMMIT;
