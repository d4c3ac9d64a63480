-- ECLK's end record (api/report-format.md, "final"): the JSON object
-- {delta_eff, inflation, delta_min, delta_max, updates, restarts,
-- restart_rounds} its coordinator reported as it ended. NULL for other
-- algorithms, while a job runs, and for jobs that ended before this.
ALTER TABLE jobs ADD COLUMN eclk TEXT;

-- Each metric row counts ECLK's guard restarts so far (a row where the
-- count grows marks a restart). Rows stored with a document keep it
-- there; rows stored before have none: 0 when read.
ALTER TABLE metrics ADD COLUMN restarts INTEGER;

DROP VIEW metric_numbers;
CREATE VIEW metric_numbers AS
SELECT job_seq, round,
       coalesce(json_extract(doc, '$.bits_up'), bits_up) AS bits_up,
       coalesce(json_extract(doc, '$.bits_down'), bits_down) AS bits_down,
       coalesce(json_extract(doc, '$.paper_bits'), paper_bits) AS paper_bits,
       coalesce(json_extract(doc, '$.P'), P) AS P,
       coalesce(json_extract(doc, '$.gap'), gap) AS gap,
       coalesce(json_extract(doc, '$.rel_gap'), rel_gap) AS rel_gap,
       coalesce(json_extract(doc, '$.grad_norm'), grad_norm) AS grad_norm,
       coalesce(json_extract(doc, '$.seconds'), seconds) AS seconds,
       coalesce(json_extract(doc, '$.wire_up'), wire_up) AS wire_up,
       coalesce(json_extract(doc, '$.wire_down'), wire_down) AS wire_down,
       coalesce(json_extract(doc, '$.time'), time) AS time,
       coalesce(json_extract(doc, '$.restarts'), restarts, 0) AS restarts
FROM metrics;
