-- Each metric row counts the gradient evaluations (of one row's loss)
-- a worker made so far, the oracle calls (docs/algorithms.md, "Counting
-- gradient evaluations"). Rows stored before have none: NULL here, null in
-- their documents' place.
ALTER TABLE metrics ADD COLUMN grad_evals REAL;

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
       coalesce(json_extract(doc, '$.grad_evals'), grad_evals) AS grad_evals
FROM metrics;
