#!/usr/bin/env bash
# Runs the integration package (test/integration) as parallel shards, each a process with its own
# kube-apiserver, etcd and (when a test needs it) kube-controller-manager. The tests inside one process
# run one after another (the in-process scheduler owns process-wide state, and nodes are cluster-wide),
# and most of their time is waiting on the apiserver and the scheduler's back-offs, so separate control
# planes run side by side on two cores without competing much.
#
# Tests are given to shards by their last measured duration (hack/integration-durations.tsv, longest
# first onto the least-loaded shard); a test missing from it counts as 20 s.
#
# Usage: hack/test-integration.sh [-v] [-run REGEX] [-skip REGEX] [-shards N] [-record] [-count N] [-timeout D]
#   -v        verbose test output (every shard's lines, prefixed with its number)
#   -run      only tests whose name matches (as go test -run)
#   -skip     skip tests whose name matches (as go test -skip)
#   -shards   number of shards (default $INTEGRATION_SHARDS or 4)
#   -record   rewrite hack/integration-durations.tsv from this run
#   -count    run each test N times in its shard's process (as go test -count; default 1)
# Needs KUBEBUILDER_ASSETS (absolute, or relative to the module root). Logs: bin/test-logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

verbose="" run="" skip="" shards="${INTEGRATION_SHARDS:-4}" record="" timeout="40m" count=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    -v|-test.v) verbose="-test.v" ;;
    -run) run="$2"; shift ;;
    -run=*) run="${1#-run=}" ;;
    -skip) skip="$2"; shift ;;
    -skip=*) skip="${1#-skip=}" ;;
    -shards) shards="$2"; shift ;;
    -shards=*) shards="${1#-shards=}" ;;
    -record) record=1 ;;
    -timeout) timeout="$2"; shift ;;
    -timeout=*) timeout="${1#-timeout=}" ;;
    -count) count="$2"; shift ;;
    -count=*) count="${1#-count=}" ;;
    *) echo "test-integration.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -n "${KUBEBUILDER_ASSETS:-}" ]] || { echo "test-integration.sh: KUBEBUILDER_ASSETS is not set (make test sets it)" >&2; exit 2; }
[[ "${KUBEBUILDER_ASSETS}" = /* ]] || KUBEBUILDER_ASSETS="${root}/${KUBEBUILDER_ASSETS}"
export KUBEBUILDER_ASSETS

logs="${root}/bin/test-logs"
mkdir -p "${logs}"
bin="${root}/bin/integration.test"
go test -c -o "${bin}" ./test/integration/

# The tests to run, in the order of their expected duration.
list_args=(-test.list "${run:-.}")
mapfile -t tests < <("${bin}" "${list_args[@]}" | grep '^Test' || true)
if [[ -n "${skip}" ]]; then
  mapfile -t tests < <(printf '%s\n' "${tests[@]}" | grep -Ev -- "${skip}" || true)
fi
if [[ ${#tests[@]} -eq 0 ]]; then
  echo "test-integration.sh: no test matches -run '${run}'" >&2
  exit 1
fi
durations="${root}/hack/integration-durations.tsv"
declare -A weight=()
if [[ -f "${durations}" ]]; then
  while IFS=$'\t' read -r name secs; do
    [[ "${name}" == \#* || -z "${name}" ]] && continue
    weight["${name}"]="${secs%.*}"
  done <"${durations}"
fi
mapfile -t ordered < <(for t in "${tests[@]}"; do echo "${weight[$t]:-20} $t"; done | sort -k1,1nr -k2 | awk '{print $2}')

(( shards > ${#ordered[@]} )) && shards=${#ordered[@]}
(( shards < 1 )) && shards=1
declare -a load=() members=()
for ((i = 0; i < shards; i++)); do load[i]=0; members[i]=""; done
for t in "${ordered[@]}"; do
  best=0
  for ((i = 1; i < shards; i++)); do (( load[i] < load[best] )) && best=$i; done
  load[best]=$(( load[best] + ${weight[$t]:-20} ))
  members[best]+="${members[best]:+|}${t}"
done

echo "integration: ${#ordered[@]} tests in ${shards} shards (expected seconds per shard: ${load[*]}); logs in ${logs}"
pids=()
start=$(date +%s)
for ((i = 0; i < shards; i++)); do
  log="${logs}/integration-$((i + 1)).log"
  (
    cd "${root}/test/integration"
    set +e
    "${bin}" -test.run "^(${members[i]})\$" -test.count "${count}" -test.timeout "${timeout}" -test.v >"${log}" 2>&1
    echo $? >"${log}.rc"
  ) &
  pids+=($!)
  if [[ -n "${verbose}" ]]; then
    # Stream the shard's lines as they come, prefixed with its number.
    (tail -n +1 -F --pid=$! "${log}" 2>/dev/null | sed -u "s/^/[$((i + 1))] /") &
  fi
done
for pid in "${pids[@]}"; do wait "${pid}" || true; done
sleep 0.5 # let the tails flush
elapsed=$(( $(date +%s) - start ))

failed=0
echo
echo "integration shards (${elapsed}s):"
for ((i = 0; i < shards; i++)); do
  log="${logs}/integration-$((i + 1)).log"
  rc="$(cat "${log}.rc" 2>/dev/null || echo 1)"
  n_pass=$(grep -c '^--- PASS' "${log}" || true)
  n_fail=$(grep -c '^--- FAIL' "${log}" || true)
  n_skip=$(grep -c '^--- SKIP' "${log}" || true)
  echo "  shard $((i + 1)): exit ${rc}, ${n_pass} passed, ${n_fail} failed, ${n_skip} skipped (${log})"
  if [[ "${rc}" != 0 ]]; then
    failed=1
    if [[ -z "${verbose}" ]]; then
      echo "----- shard $((i + 1)) log (failures and their output) -----"
      cat "${log}"
      echo "----- end of shard $((i + 1)) -----"
    fi
    grep '^--- FAIL' "${log}" | sed 's/^/    /' || true
    if ! grep -q '^--- \(PASS\|FAIL\|SKIP\)' "${log}"; then
      echo "    (no test result: the process failed before or between tests, see the log)"
    fi
  fi
done

# Durations of this run, to balance the next one.
cat "${logs}"/integration-*.log | sed -n 's/^--- \(PASS\|FAIL\|SKIP\): \(Test[^ ]*\) (\([0-9.]*\)s)$/\2\t\3/p' | sort >"${logs}/durations.tsv"
if [[ -n "${record}" && ${failed} -eq 0 ]]; then
  { echo "# seconds per integration test, measured by hack/test-integration.sh -record (balances the shards)"; cat "${logs}/durations.tsv"; } >"${durations}"
  echo "recorded ${durations}"
fi
if [[ ${failed} -ne 0 ]]; then
  echo "integration: FAILED" >&2
  exit 1
fi
echo "integration: ok"
