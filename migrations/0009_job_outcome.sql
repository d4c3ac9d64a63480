-- How a job ended, in a word nobody can misread (format/outcome.h; docs/
-- api.md, "Outcomes"): target_reached, budget_exhausted, worse_than_start,
-- non_finite, cancelled or failed. A run whose relative gap ended above
-- its start's (1) is worse_than_start even when its state is succeeded.
-- NULL while a job is queued or running.
ALTER TABLE jobs ADD COLUMN outcome TEXT;

-- Jobs that ended before this column existed: from the stop reason and the
-- last stored relative gap (NULL when it was not finite), as
-- format/outcome.c decides for a new one.
UPDATE jobs SET outcome = CASE
        WHEN stop_reason = 'target_reached' THEN 'target_reached'
        WHEN stop_reason IN ('max_rounds', 'max_seconds') THEN
            CASE WHEN rel_gap IS NULL THEN 'non_finite'
                 WHEN rel_gap > 1 THEN 'worse_than_start'
                 ELSE 'budget_exhausted' END
        WHEN stop_reason = 'diverged' THEN
            CASE WHEN rel_gap > 1 THEN 'worse_than_start' ELSE 'non_finite' END
        WHEN stop_reason = 'cancelled' THEN 'cancelled'
        ELSE 'failed'
    END
    WHERE state NOT IN ('queued', 'running');
