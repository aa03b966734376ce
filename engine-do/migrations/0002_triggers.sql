-- Triggers and delivery (engine-do/src/core/queues): keep the trace of a dead-lettered message so a
-- redrive continues it, and index lookups by message id within a queue (redrive_message/discard).
ALTER TABLE dead_letters ADD COLUMN traceparent TEXT;
CREATE INDEX IF NOT EXISTS dead_letters_by_id ON dead_letters (namespace, queue, id);
