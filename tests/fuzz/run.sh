#!/usr/bin/env bash
# run.sh FUZZER CORPUS_DIR: runs one libFuzzer target for FUZZ_SECONDS
# (default 3) on a scratch copy of its seed corpus (the repo's corpus is
# never written), and prints the executions reached. Exit status: libFuzzer's
# (non-zero on a crash, a leak, a timeout or an out-of-memory; the input is
# left in FUZZ_ARTIFACTS, default a temp dir, and named in the output), 1
# when the fuzzer binary or the corpus is missing: never a silent pass.
set -euo pipefail
fuzzer=${1:?usage: run.sh FUZZER CORPUS_DIR}
corpus=${2:?usage: run.sh FUZZER CORPUS_DIR}
seconds=${FUZZ_SECONDS:-3}
[ -x "$fuzzer" ] || { echo "run.sh: $fuzzer not built (the kiln_fuzzers target builds it)" >&2; exit 1; }
[ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ] || { echo "run.sh: no seed corpus in $corpus" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$corpus" "$scratch/corpus"
artifacts=${FUZZ_ARTIFACTS:-$scratch/artifacts}
mkdir -p "$artifacts"
set +e
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 -artifact_prefix="$artifacts/" "$scratch/corpus" >"$scratch/log" 2>&1
rc=$?
set -e
grep -E "stat::number_of_executed_units|stat::peak_rss_mb|^#[0-9]+ *DONE" "$scratch/log" || true
echo "corpus: $(ls "$scratch/corpus" | wc -l) inputs after the run (seeds: $(ls "$corpus" | wc -l))"
if [ "$rc" -ne 0 ]; then
  tail -60 "$scratch/log"
  if [ -z "${FUZZ_ARTIFACTS:-}" ]; then
    mkdir -p /tmp/kiln-fuzz-artifacts && cp -r "$artifacts"/. /tmp/kiln-fuzz-artifacts/ 2>/dev/null || true
    echo "run.sh: crashing inputs copied to /tmp/kiln-fuzz-artifacts" >&2
  fi
fi
exit "$rc"
