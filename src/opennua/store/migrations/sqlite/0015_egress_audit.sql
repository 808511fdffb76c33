-- The egress proxy's connections in the gateway's audit (issue 29; docs/gateway.md, "The
-- egress proxy"): server 'egress', the host and port asked for, and the bytes each way
-- (NULL for a tool call).
ALTER TABLE gateway_audit ADD COLUMN port INTEGER;
ALTER TABLE gateway_audit ADD COLUMN bytes_up INTEGER;
ALTER TABLE gateway_audit ADD COLUMN bytes_down INTEGER;
