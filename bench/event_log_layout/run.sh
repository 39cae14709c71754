#!/bin/bash
# The event log's PostgreSQL cost per create, by layout (pgbench, 16 clients, prepared; a second pgbench
# runs the sequencer's pass every PASS_MS ms, 20 by default: what a busy server waits since `dbe658a`; the
# figures before 2026-11-28 used 3). Each run prints its tps and the machine's busy CPU per transaction
# (user + system + interrupts of every core, /proc/stat, pgbench's own included). Variants:
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
#   update-counterupdate  the whole statement, its counter bumped by a plain UPDATE of seeded slots
#                       instead of INSERT … ON CONFLICT DO UPDATE
#   update-noorder      the whole statement on a table without the list's default-order index (created_at, id)
#   update-returned     the whole statement, the document's JSON made once in its RETURNING (since 2026-11-28 evening)
#   update-optimistic   update-returned without the row lock: the row found by its ctid, its version required
# usage: [PASS_MS=20] bench/event_log_layout/run.sh VARIANT [SECONDS]   (after: python -m bench.event_log_layout.schema)
# The first four create variants record unnumbered rows in core_events: they need a schema.sql made before
# the migration core_0007 (its event_id NOT NULL); pending and the update variants run on today's.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
V=$1; S=${2:-15}; DB=eventlog_$(echo "$V" | tr - _); PASS_MS=${PASS_MS:-20}
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
  update-counterupdate)
    $PSQL $DB -c "INSERT INTO core_event_counters SELECT 'database.Item', s, 0 FROM generate_series(0, 15) s" >/dev/null ;;
  update-noorder) SCRIPT=update.sql
    $PSQL $DB -c "DO \$\$ BEGIN EXECUTE (SELECT 'DROP INDEX ' || indexname FROM pg_indexes WHERE tablename = 'dbdoc_item'
      AND indexdef LIKE '%(created_at, id)'); END \$\$" >/dev/null ;;
esac
PASS=$(mktemp); trap 'rm -f "$PASS"' EXIT
[ -n "$NUMBER" ] && sed "s/sleep 3 ms/sleep $PASS_MS ms/" "$HERE/$NUMBER" > "$PASS"
busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
[ -n "$NUMBER" ] && $PGB -h 127.0.0.1 -U postgres -n -c 1 -T $((S + 2)) -f "$PASS" $DB > /dev/null 2>&1 &
BEFORE=$(busy)
TPS=$($PGB -h 127.0.0.1 -U postgres -n -M prepared -c 16 -j 1 -T $S -f "$HERE/$SCRIPT" $DB 2>&1 | awk '/^tps/ {print $3}')
AFTER=$(busy); TICKS=$(getconf CLK_TCK)
awk -v v="$V" -v t="$TPS" -v b=$((AFTER - BEFORE)) -v k="$TICKS" -v s="$S" \
  'BEGIN { printf "%s: tps %.0f, busy CPU %.0f µs per transaction\n", v, t, b / k * 1e6 / (t * s) }'
wait
echo "events: $($PSQL $DB -Atc "select count(*) || ' rows, ' || count(event_id) || ' numbered, max ' || coalesce(max(event_id), 0) from core_events")"
$PSQL -c "DROP DATABASE $DB" >/dev/null
