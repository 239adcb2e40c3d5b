#!/usr/bin/env bash
# Opt-in: jobs side by side with pgqueuer, procrastinate and oban, measured by the shared peer
# harness (../shared/bench/peers, read-only) in the same run, on the same PostgreSQL.
#
#   bench/peers.sh                       # RUNS=3 rounds, N=10,000: ~17 minutes on 2 cores
#   RUNS=1 BENCH_N=2000 bench/peers.sh   # a quick look
#   PEERS_BASELINE=/path/to/main-worktree bench/peers.sh   # + that tree's jobs, as "jobsmain"
#
# The peers are installed by the harness's setup_venvs.sh into throwaway virtualenvs under
# $BENCH_VENVS (default /tmp/benchvenvs; oban needs Python 3.12), never into the project.
# Results: bench/results/raw/peers-<stamp>/ (the harness's JSON per system and round, its
# summary.md, and jobs-vs-peers.md: same-round ratios of jobs against every peer, and the
# targets). Every BENCH_* variable of the harness README passes through.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HARNESS=${PEERS_HARNESS:-$ROOT/../shared/bench/peers}
if [ ! -f "$HARNESS/harness.py" ]; then
  echo "peers.sh: no harness at $HARNESS (set PEERS_HARNESS to the shared bench/peers folder)" >&2
  exit 2
fi
export BENCH_VENVS=${BENCH_VENVS:-/tmp/benchvenvs}
SYSTEMS=${PEERS:-"jobs pgqueuer awa procrastinate oban"}
stamp=$(date +%Y%m%d-%H%M%S)
OUT=${OUT:-$ROOT/bench/results/raw/peers-$stamp}
export BENCH_WORKDIR=${BENCH_WORKDIR:-$(mktemp -d /tmp/jobs-peers-XXXXXX)}
mkdir -p "$OUT"

# The peers' throwaway virtualenvs, made once (setup_venvs.sh reads the list from PEERS).
missing=""
for system in $SYSTEMS; do
  [ "$system" = jobs ] && continue
  [ "$system" = jobsmain ] && continue
  [ -x "$BENCH_VENVS/$system/bin/python" ] || missing="$missing $system"
done
if [ -n "$missing" ]; then
  echo "peers.sh: installing${missing} into $BENCH_VENVS" >&2
  PEERS="${missing# }" "$HARNESS/setup_venvs.sh"
fi

# jobs runs from the project's own environment, with its adapter kept in bench/.
# Byte-compiled as a deployment would be (and as pip compiles the peers at install): without it,
# each jobs worker process would compile its dependencies from source when it starts.
(cd "$ROOT" && uv sync --frozen --quiet && uv run --frozen python -c \
  'import pathlib; from bench.common import compile_bytecode; compile_bytecode(pathlib.Path.cwd())')
if [ -n "${PEERS_BASELINE:-}" ]; then
  BASE=$(cd "$PEERS_BASELINE" && pwd)
  [ -x "$BASE/.venv/bin/python" ] || { echo "peers.sh: no .venv in $BASE (uv sync there)" >&2; exit 2; }
  (cd "$BASE" && "$BASE/.venv/bin/python" -c \
    'import pathlib; from bench.common import compile_bytecode; compile_bytecode(pathlib.Path.cwd())')
  export JOBS_PEERS_BASELINE_TREE="$BASE" BENCH_PY_jobsmain="$BASE/.venv/bin/python"
  SYSTEMS="jobs jobsmain ${SYSTEMS#jobs }"
fi
BENCH_ADAPTERS="$ROOT/bench" BENCH_PY_jobs="$ROOT/.venv/bin/python" OUT="$OUT" \
  PEERS="$SYSTEMS" RUNS="${RUNS:-3}" "$HARNESS/run_all.sh"

(cd "$ROOT" && uv run --frozen python -m bench.peers_report "$OUT") > "$OUT/jobs-vs-peers.md"
cat "$OUT/jobs-vs-peers.md"
echo "peers.sh: results in $OUT" >&2
