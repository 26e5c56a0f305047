-- Artifact safety scan (API.md "Artifact safety scan"): the report the scanner wrote for a
-- blob at upload (or at its last rescan), and per version the copy taken at its creation
-- (a rescan refreshes the copies of the versions citing the blob).

-- JSON as text: {"verdict":"clean|unsafe|unknown","scanner","findings":[…]}; NULL: stored
-- before the scanner existed, which no policy takes for clean.
ALTER TABLE blobs ADD COLUMN scan TEXT;
ALTER TABLE versions ADD COLUMN scan TEXT;
