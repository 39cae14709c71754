#!/bin/bash
# The event log's PostgreSQL cost per create, by layout (pgbench, 16 clients, prepared; a second pgbench
# runs the sequencer's pass every 3 ms). Variants:
#   plain      the document INSERT alone (what Parse writes)
#   nonumber   + the event row and the counter bump, never numbered
#   nocounter  + numbering, without the counter bump
#   current    what Trellis runs today: one statement (document, event row, counter), then the pass's UPDATE
#   pending    the event row goes to a small pending table; the pass moves it into core_events numbered
# and, on 100,000 seeded Items, the PATCH of one price (what Trellis runs since the pending table):
#   update-parse        Parse's own UPDATE of its Item table (plain columns, price indexed)
#   update-plain        Trellis's UPDATE alone (no event log)
#   update-counteronly  + the counter bump, no event row
#   update-nopass       + the pending event row and the counter bump, never numbered
#   update-nocounter    the pending event row, numbered by the pass, no counter bump
#   update              the whole statement, numbered by the pass (the pass unprepared: pgbench cannot
#                       prepare two statements)
# usage: bench/event_log_layout/run.sh VARIANT [SECONDS]   (after: python -m bench.event_log_layout.schema)
# The first four create variants record unnumbered rows in core_events: they need a schema.sql made before
# the migration core_0007 (its event_id NOT NULL); pending and the update variants run on today's.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
V=$1; S=${2:-15}; DB=eventlog_$(echo "$V" | tr - _)
case $V in update*) UPDATE=1 ;; *) UPDATE= ;; esac
PSQL="psql -h 127.0.0.1 -U postgres -q"
PGB=$(ls /usr/lib/postgresql/*/bin/pgbench | tail -1)
$PSQL -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null 2>&1
$PSQL $DB -f "$HERE/schema.sql" >/dev/null 2>&1
if [ "$V" = pending ] || [ -n "$UPDATE" ]; then
  $PSQL $DB -c "SET client_min_messages = warning" -c "CREATE TABLE IF NOT EXISTS core_events_pending (id bigint PRIMARY KEY DEFAULT nextval('core_events_id_seq'),
    topic varchar(200) NOT NULL, family varchar(200) NOT NULL, payload text NOT NULL, created_at timestamptz NOT NULL)" \
    -c "DROP INDEX IF EXISTS ix_core_events_unsequenced" >/dev/null
fi
SCRIPT=create.sql; NUMBER=number.sql
if [ -n "$UPDATE" ]; then
  $PSQL $DB -c "INSERT INTO dbdoc_item (id, data, created_at, updated_at, version) SELECT md5(i::text),
    jsonb_build_object('title', 'Item ' || i, 'price', i % 1000, 'owner', 'user' || (i % 50)), now(), now(), 0
    FROM generate_series(1, 100000) i" -c "VACUUM ANALYZE" >/dev/null
  $PSQL $DB -c 'CREATE TABLE parse_item ("objectId" text PRIMARY KEY, "createdAt" timestamptz, "updatedAt" timestamptz,
    title text, price double precision, tags jsonb, owner text, _rperm text[], _wperm text[])' \
    -c "CREATE INDEX price_1 ON parse_item (price)" \
    -c "INSERT INTO parse_item SELECT left(md5(i::text), 10), now(), now(), 'Item ' || i, i % 1000, '[]', 'user' || (i % 50)
    FROM generate_series(1, 100000) i" -c "VACUUM ANALYZE" >/dev/null
  SCRIPT=$(echo "$V" | tr - _).sql; NUMBER=number_pending.sql
fi
case $V in
  plain) SCRIPT=plain.sql; NUMBER= ;;
  nonumber) NUMBER= ;;
  nocounter) SCRIPT=nocounter.sql ;;
  pending) SCRIPT=pending.sql; NUMBER=number_pending.sql ;;
  update-parse|update-plain|update-counteronly) NUMBER= ;;
  update-nopass) SCRIPT=update.sql; NUMBER= ;;
esac
[ -n "$NUMBER" ] && $PGB -h 127.0.0.1 -U postgres -n -c 1 -T $((S + 2)) -f "$HERE/$NUMBER" $DB > /dev/null 2>&1 &
$PGB -h 127.0.0.1 -U postgres -n -M prepared -c 16 -j 1 -T $S -f "$HERE/$SCRIPT" $DB 2>&1 | grep -E "^tps"
wait
echo "events: $($PSQL $DB -Atc "select count(*) || ' rows, ' || count(event_id) || ' numbered, max ' || coalesce(max(event_id), 0) from core_events")"
$PSQL -c "DROP DATABASE $DB" >/dev/null
