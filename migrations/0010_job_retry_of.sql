-- The job a retry was made from (POST /v1/jobs/{id}/retry): its id, kept
-- as text so that the origin may be deleted and the retry still says where
-- it came from. NULL for a job submitted as itself.
ALTER TABLE jobs ADD COLUMN retry_of TEXT;
