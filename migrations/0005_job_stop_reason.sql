-- Why a job ended, as a word a program can match on (target_reached,
-- max_rounds, max_seconds, diverged, cancelled, worker_failed,
-- start_failed, coordinator_died, interrupted, failed), beside the
-- sentence in reason. NULL while a job is queued or running.
ALTER TABLE jobs ADD COLUMN stop_reason TEXT;

-- Jobs that ended before this column existed: what their state says.
-- A succeeded job then may have reached its target or its round budget;
-- its reason says which, in words.
UPDATE jobs SET stop_reason = CASE state
        WHEN 'cancelled' THEN 'cancelled'
        WHEN 'interrupted' THEN 'interrupted'
        WHEN 'failed' THEN 'failed'
        WHEN 'succeeded' THEN CASE WHEN reason LIKE 'target%' THEN 'target_reached'
                                   ELSE 'max_rounds' END
    END
    WHERE state NOT IN ('queued', 'running');

CREATE INDEX jobs_stop_reason ON jobs (stop_reason, seq)
    WHERE stop_reason IS NOT NULL;
