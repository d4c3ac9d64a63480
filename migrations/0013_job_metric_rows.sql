-- How many metric rows each job holds, kept by the writer as it stores
-- them (a row stored again for its round is not counted twice), so that a
-- token's rows against --quota-metric-rows are a sum over its jobs and not
-- a count over every row they hold: at the default quota of 5 million rows
-- that count took seconds of each submission.
ALTER TABLE jobs ADD COLUMN metric_rows INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET metric_rows = (SELECT count(*) FROM metrics WHERE job_seq = jobs.seq);
