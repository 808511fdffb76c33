-- The trace a turn's spans belong to, stored with its execution (W3C `traceparent` of the
-- turn's span, whose parent is the request that sent the message when it carried one), so
-- every attempt, in any process, continues the same trace. NULL: no trace context
-- (executions accepted before this version; their attempts start a fresh trace).
ALTER TABLE executions ADD COLUMN trace_context TEXT;
