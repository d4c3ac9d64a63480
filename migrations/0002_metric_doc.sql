-- Each metric row as the JSON document the API serves, exactly as the
-- coordinator wrote it: pages are then joined, not formatted again.
-- NULL for rows stored before this column existed; they are formatted
-- from their numbers as before.
ALTER TABLE metrics ADD COLUMN doc TEXT;
