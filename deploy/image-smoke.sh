#!/usr/bin/env bash
# Smoke test of the image in compose.yaml's layout, without compose: build it, migrate once, start
# 2 API containers (--no-worker) and 2 worker containers on the host network against PostgreSQL,
# then suspend a gated call through one API, approve it through the other, approve it again
# (expect 409 stale), and wait for the run to complete. Needs docker, curl and jq.
#
#   SMOKE_PG_URL   database to use (emptied first)  default postgresql+asyncpg://postgres@127.0.0.1:5432/sursis_smoke
#   PYTHON_IMAGE   base image passed to the build   default: the Dockerfile's (python:3.12-slim)
set -euo pipefail
cd "$(dirname "$0")/.."

DB=${SMOKE_PG_URL:-postgresql+asyncpg://postgres@127.0.0.1:5432/sursis_smoke}
ADMIN_DSN=$(echo "$DB" | sed -e 's#+asyncpg##' -e 's#/[^/]*$#/postgres#')
DB_NAME=${DB##*/}
psql "$ADMIN_DSN" -qc "drop database if exists $DB_NAME" -c "create database $DB_NAME" 2>/dev/null

docker build -q ${PYTHON_IMAGE:+--build-arg PYTHON_IMAGE=$PYTHON_IMAGE} -t sursis:local . >/dev/null
names=(sursis-smoke-api1 sursis-smoke-api2 sursis-smoke-w1 sursis-smoke-w2)
trap 'docker rm -f "${names[@]}" >/dev/null 2>&1 || true' EXIT
RUN=(docker run --network host -e "SURSIS_DATABASE_URL=$DB" -e SURSIS_MODEL=scripted)

"${RUN[@]}" --rm sursis:local migrate
"${RUN[@]}" -d --name "${names[0]}" -e SURSIS_PORT=18781 sursis:local serve --no-worker >/dev/null
"${RUN[@]}" -d --name "${names[1]}" -e SURSIS_PORT=18782 sursis:local serve --no-worker >/dev/null
"${RUN[@]}" -d --name "${names[2]}" sursis:local worker --concurrency 4 >/dev/null
"${RUN[@]}" -d --name "${names[3]}" sursis:local worker --concurrency 4 >/dev/null
"${RUN[@]}" --rm sursis:local demo seed --workspace default >/dev/null
KEY=$("${RUN[@]}" --rm sursis:local keys create --role operator --workspace default --name smoke | sed -n 2p | tr -d ' ')
for port in 18781 18782; do
  for _ in $(seq 1 30); do curl -fs "localhost:$port/readyz" >/dev/null && break; sleep 1; done
done
[ "$(docker exec "${names[2]}" id -u)" != 0 ] || { echo "FAIL: the worker runs as root"; exit 1; }

AUTH="Authorization: Bearer $KEY"; JSON="content-type: application/json"
CID=$(curl -fs -H "$AUTH" -H "$JSON" -XPOST localhost:18781/v1/conversations -d '{"agent":"ops"}' | jq -r .id)
SCRIPT=$(jq -cn '[[{tool:"replay_dlq_event",args:{event_id:"evt_1001",reason:"smoke"}}]]')
BODY=$(jq -n --arg s "$SCRIPT" '{content: ("replay\nSCRIPT: " + $s)}')
read -r RUN_ID CORR STATUS < <(curl -fs -H "$AUTH" -H "$JSON" -XPOST \
  "localhost:18781/v1/conversations/$CID/messages?wait=10" -d "$BODY" | jq -r '[.id, .pending[0].correlation_id, .status] | @tsv')
[ "$STATUS" = suspended ] || { echo "FAIL: run is $STATUS, expected suspended"; exit 1; }
first=$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" -H "$JSON" -XPOST "localhost:18782/v1/pending/$CORR/resolve" -d '{"decision":"approve"}')
second=$(curl -s -H "$AUTH" -H "$JSON" -XPOST "localhost:18781/v1/pending/$CORR/resolve" -d '{"decision":"approve"}' | jq -r .code)
final=$(curl -fs -H "$AUTH" "localhost:18782/v1/runs/$RUN_ID?wait=20" | jq -r .status)
echo "suspended via api1; approve via api2: $first; approve again via api1: $second; run: $final"
[ "$first" = 200 ] && [ "$second" = stale ] && [ "$final" = completed ] || { echo FAIL; exit 1; }
echo "image smoke test passed"
