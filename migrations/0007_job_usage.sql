-- What an ended job used, as sacct tells: cpu_seconds (user +
-- system of the coordinator and the workers it reaped), max_rss_bytes
-- (the largest peak resident set of any one of those processes) and
-- rss_sum_bytes (the sum of each one's peak, as the coordinator reported
-- it: an upper bound, since pages the workers share copy-on-write count in
-- each). NULL while a job runs, for a job that never ran, and for jobs
-- that ended before this.
ALTER TABLE jobs ADD COLUMN cpu_seconds REAL;
ALTER TABLE jobs ADD COLUMN max_rss_bytes INTEGER;
ALTER TABLE jobs ADD COLUMN rss_sum_bytes INTEGER;
