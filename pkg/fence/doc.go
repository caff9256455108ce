// Package fence is the resource side of a FencedLease: it checks a write's fencing token
// against the highest token the resource has accepted, and records it, in the same atomic
// step as the write itself. The resource, not the hopeful client, is the final authority.
//
// # Guarantees
//
//   - SQL (PostgreSQL, SQLite, MySQL/MariaDB): Accept runs inside the caller's transaction, so the token
//     check and the business write commit or roll back together. A token lower than the
//     stored one gets a *StaleTokenError (errors.Is(err, ErrStaleToken)); an equal token is
//     accepted (retries within one generation); a higher one raises the stored token.
//     Concurrent transactions on one resource are serialized by the row lock the upsert
//     takes (PostgreSQL and InnoDB, at any isolation level from READ COMMITTED up) or by
//     SQLite's single writer: the stored token never goes down and no write with a lower
//     token ever commits.
//   - etcd (package etcdfence) and Redis (package redisfence): the check and the caller's
//     operations in one transaction of that store; see their docs for what each store
//     cannot promise (Redis loses a token on a restart without the AOF, or a failover).
//   - S3-compatible object storage (package s3fence): a pointer object per fenced key,
//     replaced by a conditional PUT; Kafka (package kafkafence): one transactional ID per
//     resource, and the token checked on a fence topic in each transaction.
//   - Kubernetes objects: the ValidatingAdmissionPolicy in config/fence rejects an update of
//     an object labeled fencing.fencedlease.io/fenced=true, through the object or any
//     subresource, whose token annotation is lower than the one it carries; Stamp sets the
//     annotation on a write. Status subresources that drop metadata changes carry no token:
//     UpdateStatus stamps first and writes the status with the resourceVersion the stamp
//     returned, so a newer generation's write in between fails it with a Conflict.
//   - HTTP: Middleware rejects a request whose Fencing-Token header is older than the
//     Store's, with 409 Conflict, and runs the handler inside Store.Do: no other request for
//     the resource is admitted until the handler returns, so an older token's effect never
//     lands after a newer one's.
//
// # What it does not do
//
// Tokens do not make retries within one generation idempotent: two writes with the same
// token are both accepted. Pair the token with an idempotency key (a unique constraint on
// the business row). Only writes that go through a fence are protected; deletes of
// Kubernetes objects are not fenced (a delete carries no token). A fence is no access
// control: whoever may write the resource may offer any token.
package fence
