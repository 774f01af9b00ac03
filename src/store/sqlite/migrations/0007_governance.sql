-- Schema version 7: governance (docs/governance.md). The audit log says where a call came from and
-- whose tenant it concerns, and can be searched without reading it whole; tokens have a scope.
--
-- `source`: the client's address as the HTTP layer saw it ('' for the server's own records and
-- for records written before this version). `tenant`: the tenant of the object acted on (or of the
-- caller), which lets a tenant admin read its tenant's records; '' for cluster-wide records.
ALTER TABLE audit ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN tenant TEXT NOT NULL DEFAULT '';

-- The searches of GET /api/v1/audit: by time, actor, object (exact or by prefix), action and
-- tenant, each in seq order. One B-tree insert each per record: audit records are written
-- with the change they describe and never waited for on their own.
CREATE INDEX audit_by_time ON audit (at_ms);
CREATE INDEX audit_by_actor ON audit (actor, seq);
CREATE INDEX audit_by_target ON audit (target, seq);
CREATE INDEX audit_by_action ON audit (action, seq);
CREATE INDEX audit_by_tenant ON audit (tenant, seq);

-- A token's scope: 'full' (what its role allows) or 'read-only' (GET and HEAD only).
ALTER TABLE tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'full';
