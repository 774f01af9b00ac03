-- Schema version 7: governance (docs/governance.md). The audit log says where a call came from and
-- whose tenant it concerns, and can be searched without reading it whole; tokens have a scope.
ALTER TABLE audit ADD COLUMN source TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN tenant TEXT COLLATE "C" NOT NULL DEFAULT '';

-- The searches of GET /api/v1/audit: by time, actor, object (exact or by prefix), action and
-- tenant, each in seq order.
CREATE INDEX audit_by_time ON audit (at_ms);
CREATE INDEX audit_by_actor ON audit (actor, seq);
CREATE INDEX audit_by_target ON audit (target, seq);
CREATE INDEX audit_by_action ON audit (action, seq);
CREATE INDEX audit_by_tenant ON audit (tenant, seq);

-- A token's scope: 'full' (what its role allows) or 'read-only' (GET and HEAD only).
ALTER TABLE tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'full';
