"""A singleton job in Python, fenced. Run it as

    fencedlease-agent hold -- python3 charge.py

in a pod labeled fencing.fencedlease.io/lease: <name> (or with hold's --lease, --namespace
and --identity), or with the agent sidecar, which injects the same FENCING_TOKEN. It charges
each customer once for a period. Every charge is one transaction that first offers the
token to the fencing_tokens table with the same conditional upsert as pkg/fence's SQL
fence, and commits only if no newer holder wrote there: a run that was paused past its
lease, revoked and then woke up has its late write refused (exit 3). The (customer, period)
key makes a retry by the next holder harmless: tokens order holders, they do not
deduplicate retries.

Needs psycopg2 and DSN (a PostgreSQL URL). CUSTOMERS and PERIOD say what to charge;
STEP_SECONDS, a pause between customers.
"""

import os
import sys
import time

import psycopg2

ACCEPT = """
INSERT INTO fencing_tokens (resource, token) VALUES (%s, %s)
ON CONFLICT (resource) DO UPDATE SET token = excluded.token
WHERE fencing_tokens.token <= excluded.token
RETURNING token
"""


class StaleToken(Exception):
    pass


def main():
    raw = os.environ.get("FENCING_TOKEN", "")
    if not raw.isdigit() or int(raw) < 1:
        print("charge: no FENCING_TOKEN: run me under fencedlease-agent hold", file=sys.stderr)
        return 2
    token = int(raw)
    period = os.environ.get("PERIOD", "2026-11")
    resource = "invoices/%s/%s" % (os.environ.get("FENCING_LEASE_NAMESPACE", "default"),
                                   os.environ.get("FENCING_LEASE_NAME", "invoices"))
    print("charge: started as pid %d with token %d" % (os.getpid(), token), flush=True)
    db = psycopg2.connect(os.environ["DSN"])
    with db, db.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS fencing_tokens (resource TEXT PRIMARY KEY, token BIGINT NOT NULL CHECK (token >= 0))")
        cur.execute("CREATE TABLE IF NOT EXISTS charges (customer TEXT, period TEXT, token BIGINT NOT NULL, PRIMARY KEY (customer, period))")
    for customer in os.environ.get("CUSTOMERS", "acme globex initech").split():
        try:
            with db, db.cursor() as cur:  # one transaction: the check commits with the write
                cur.execute(ACCEPT, (resource, token))
                if cur.fetchone() is None:
                    raise StaleToken("stale fencing token %d for %s: a newer holder has written" % (token, resource))
                cur.execute("INSERT INTO charges (customer, period, token) VALUES (%s, %s, %s) "
                            "ON CONFLICT (customer, period) DO NOTHING", (customer, period, token))
        except StaleToken as e:
            print("charge: %s" % e, file=sys.stderr, flush=True)
            return 3
        print("charged %s for %s with token %d" % (customer, period, token), flush=True)
        time.sleep(float(os.environ.get("STEP_SECONDS", "0")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
