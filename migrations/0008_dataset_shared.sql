-- Datasets are private to their owner (and the administrators) unless
-- shared: shared = 1 lets every token list, read and run jobs on it.
-- Uploads from now on are private unless asked; every dataset stored
-- before this was visible to every token, and stays so (shared = 1), so
-- that nothing anyone sees today disappears. A file found in the data
-- directory (owner NULL, the administrators') is visible to all whatever
-- this says.
ALTER TABLE datasets ADD COLUMN shared INTEGER NOT NULL DEFAULT 1
    CHECK (shared IN (0, 1));
