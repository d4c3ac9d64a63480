-- Datasets are versions with owners. A name's row now says who
-- may move it: owner is the token that uploaded it, NULL for a file found
-- in the data directory (the administrators'). A job records the version
-- (SHA-256) of its dataset at submit; it runs on those bytes and no other.
ALTER TABLE datasets ADD COLUMN owner TEXT;
ALTER TABLE jobs ADD COLUMN dataset_sha256 TEXT;
