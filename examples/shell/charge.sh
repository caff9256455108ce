#!/bin/sh
# A singleton job in shell, fenced. Run it as
#
#   fencedlease-agent hold -- sh charge.sh
#
# in a pod labeled fencing.fencedlease.io/lease: <name> (or with hold's --lease,
# --namespace and --identity). It charges each customer once for a period. Every charge is
# one transaction that first offers $FENCING_TOKEN to the fencing_tokens table — the same
# conditional upsert as pkg/fence's SQL fence — and commits only if no newer holder wrote
# there: a run that was paused past its lease, revoked and then woke up has its late write
# refused (psql exits 3), however late it wakes. The (customer, period) key makes a retry
# by the next holder harmless: tokens order holders, they do not deduplicate retries.
#
# Needs psql and DSN (a PostgreSQL URL). CUSTOMERS and PERIOD say what to charge;
# STEP_SECONDS, a pause between customers (to watch it being paused).
set -eu
: "${DSN:?set DSN to a PostgreSQL URL}"
case "${FENCING_TOKEN:-}" in
'' | *[!0-9]*)
	echo "charge: no FENCING_TOKEN: run me under fencedlease-agent hold" >&2
	exit 2
	;;
esac
period=${PERIOD:-2026-11}
echo "charge: started as pid $$ with token $FENCING_TOKEN"
resource="invoices/${FENCING_LEASE_NAMESPACE:-default}/${FENCING_LEASE_NAME:-invoices}"

psql "$DSN" -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE TABLE IF NOT EXISTS fencing_tokens (resource TEXT PRIMARY KEY, token BIGINT NOT NULL CHECK (token >= 0));
CREATE TABLE IF NOT EXISTS charges (customer TEXT, period TEXT, token BIGINT NOT NULL, PRIMARY KEY (customer, period));
SQL

for customer in ${CUSTOMERS:-acme globex initech}; do
	# The values are a number checked above and names from this script: safe to inline.
	psql "$DSN" -q -v ON_ERROR_STOP=1 <<SQL
BEGIN;
DO \$\$BEGIN
  INSERT INTO fencing_tokens (resource, token) VALUES ('$resource', $FENCING_TOKEN)
    ON CONFLICT (resource) DO UPDATE SET token = excluded.token
    WHERE fencing_tokens.token <= excluded.token;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'stale fencing token $FENCING_TOKEN for $resource: a newer holder has written';
  END IF;
END\$\$;
INSERT INTO charges (customer, period, token) VALUES ('$customer', '$period', $FENCING_TOKEN)
  ON CONFLICT (customer, period) DO NOTHING;
COMMIT;
SQL
	echo "charged $customer for $period with token $FENCING_TOKEN"
	sleep "${STEP_SECONDS:-0}"
done
