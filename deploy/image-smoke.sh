#!/usr/bin/env bash
# Smoke test of the image in compose.yaml's layout, without compose: build it and, on top of it, the
# image with the example project installed (examples/support-desk/Dockerfile, as its compose
# override does); migrate once, start 2 API containers (--no-worker) and 2 worker containers of that
# image on the host network against PostgreSQL. Then, for a built-in agent (ops) and for the
# example's agent (support, found through its entry point): suspend a gated call through one API,
# approve it through the other, approve it again (expect 409 stale), and wait for the run to
# complete. Needs docker, curl and jq.
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
docker build -q ${PYTHON_IMAGE:+--build-arg PYTHON_IMAGE=$PYTHON_IMAGE} -f examples/support-desk/Dockerfile \
  -t sursis-support-desk:local . >/dev/null
IMAGE=sursis-support-desk:local
names=(sursis-smoke-api1 sursis-smoke-api2 sursis-smoke-w1 sursis-smoke-w2)
trap 'docker rm -f "${names[@]}" >/dev/null 2>&1 || true' EXIT
RUN=(docker run --network host -e "SURSIS_DATABASE_URL=$DB" -e SURSIS_MODEL=scripted)

"${RUN[@]}" --rm $IMAGE migrate
"${RUN[@]}" -d --name "${names[0]}" -e SURSIS_PORT=18781 $IMAGE serve --no-worker >/dev/null
"${RUN[@]}" -d --name "${names[1]}" -e SURSIS_PORT=18782 $IMAGE serve --no-worker >/dev/null
"${RUN[@]}" -d --name "${names[2]}" $IMAGE worker --concurrency 4 >/dev/null
"${RUN[@]}" -d --name "${names[3]}" $IMAGE worker --concurrency 4 >/dev/null
"${RUN[@]}" --rm $IMAGE demo seed --workspace default >/dev/null
KEY=$("${RUN[@]}" --rm $IMAGE keys create --role operator --workspace default --name smoke | sed -n 2p | tr -d ' ')
for port in 18781 18782; do
  for _ in $(seq 1 30); do curl -fs "localhost:$port/readyz" >/dev/null && break; sleep 1; done
done
[ "$(docker exec "${names[2]}" id -u)" != 0 ] || { echo "FAIL: the worker runs as root"; exit 1; }

AUTH="Authorization: Bearer $KEY"; JSON="content-type: application/json"
agents=$(curl -fs -H "$AUTH" localhost:18781/v1/agents | jq -r '[.[].name] | sort | join(",")')
case ",$agents," in *,ops,*support,*) ;; *) echo "FAIL: agents served: $agents"; exit 1 ;; esac

# approve_through_both AGENT SCRIPT: a conversation with AGENT through api1, a turn that suspends on
# one gated call, approved through api2, approved again through api1 (stale), the run completed.
approve_through_both() {
  local agent=$1 script=$2 cid body run_id corr status first second final
  cid=$(curl -fs -H "$AUTH" -H "$JSON" -XPOST localhost:18781/v1/conversations -d "{\"agent\":\"$agent\"}" | jq -r .id)
  body=$(jq -n --arg s "$script" '{content: ("please\nSCRIPT: " + $s)}')
  read -r run_id corr status < <(curl -fs -H "$AUTH" -H "$JSON" -XPOST \
    "localhost:18781/v1/conversations/$cid/messages?wait=10" -d "$body" | jq -r '[.id, .pending[0].correlation_id, .status] | @tsv')
  [ "$status" = suspended ] || { echo "FAIL: $agent run is $status, expected suspended"; exit 1; }
  first=$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" -H "$JSON" -XPOST "localhost:18782/v1/pending/$corr/resolve" -d '{"decision":"approve"}')
  second=$(curl -s -H "$AUTH" -H "$JSON" -XPOST "localhost:18781/v1/pending/$corr/resolve" -d '{"decision":"approve"}' | jq -r .code)
  final=$(curl -fs -H "$AUTH" "localhost:18782/v1/runs/$run_id?wait=20" | jq -r .status)
  echo "$agent: suspended via api1; approve via api2: $first; approve again via api1: $second; run: $final"
  [ "$first" = 200 ] && [ "$second" = stale ] && [ "$final" = completed ] || { echo FAIL; exit 1; }
}

approve_through_both ops "$(jq -cn '[[{tool:"replay_dlq_event",args:{event_id:"evt_1001",reason:"smoke"}}]]')"
approve_through_both support "$(jq -cn '[[{tool:"lookup_order",args:{order_id:"A1001"}}],
  [{tool:"refund_order",args:{order_id:"A1001",amount:20,reason:"smoke"}}], "Refunded."]')"
echo "image smoke test passed"
