#!/usr/bin/env bash
# Benchmarks custom-scheduler on upstream scheduler_perf (test/bench): default profile vs our profile,
# our gangs vs in-tree GangScheduling, saturation, and the apiserver's binding ceiling. Prints one
# Markdown report (throughput avg/p50/p90, ratios, peak memory, saturation, per-plugin latency).
#
#   hack/bench.sh              full sizes (1000 nodes, 5000 pods), 3 repetitions, plus the plugins'
#                              Go micro-benchmarks
#   hack/bench.sh --reduced    half sizes (500 nodes), 3 repetitions
#   hack/bench.sh --large      5000 nodes / 25000 pods (Basic, BasicCustom, BasicCoscheduling,
#                              BasicLoadAware, Ceiling only: pass them with --cases), 3 repetitions
#   hack/bench.sh --smoke      10 nodes / 20 pods, 1 repetition, every workload (CI: a few minutes
#                              once the test binary is built)
# Options: --reps N, --cases 'Basic BasicCustom ...' (test cases to run; Case/Workload runs one workload
# of a case, e.g. Ceiling/5000Nodes_5000Pods, so that its CPU is counted alone), --out DIR (default
# bin/bench/results/<size>-<date>), --no-micro, --no-build, --keep-logs.
#
# Each test case runs in its own process (so each has its own peak RSS), repetitions interleaved
# (rep 1 of every case, then rep 2, ...), so a load change on a shared machine hits all cases alike.
# etcd's data goes to /dev/shm when it is writable.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

size=full
reps=""
micro=1
build=1
keep_logs=0
out=""
cases="Basic BasicCustom BasicCoscheduling BasicLoadAware BasicLoadAwareP95 BasicLoadAwareAvg GangsSmallInTree GangsSmallCustom BasicBatched BasicCustomBatched GangsSmallInTreeBatched GangsSmallCustomBatched GangsLargeInTree GangsLargeCustom GangGroupsInTree GangGroupsCustom DeviceGangsInTree DeviceGangsCustom DeviceGangsExtendedInTree DeviceGangsExtendedCustom DeviceChurnCustom TopologyInTree TopologyCustom TopologySaturationInTree TopologySaturationCustom TopologySaturationMixedInTree TopologySaturationMixedCustom SaturationInTree SaturationCustom PreemptionWaveInTree PreemptionWaveCustom StarvationInTree StarvationCustom StarvationNoReservation HopelessGangChurnCustom HopelessGangChurnCustomBaseline Ceiling"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) size=smoke ;;
    --reduced) size=reduced ;;
    --full) size=full ;;
    --large) size=large ;;
    --reps) reps="$2"; shift ;;
    --cases) cases="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-micro) micro=0 ;;
    --no-build) build=0 ;;
    --keep-logs) keep_logs=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

case "${size}" in
  smoke) label=smoke; reps="${reps:-1}"; timeout=10m; micro=0 ;;
  reduced) label=reduced; reps="${reps:-3}"; timeout=40m ;;
  full) label=performance; reps="${reps:-3}"; timeout=60m ;;
  large) label=large; reps="${reps:-3}"; timeout=120m ;;
esac
out="${out:-${root}/bin/bench/results/${size}-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "${out}"
out="$(cd "${out}" && pwd)"

# Same environment as the Makefile, so the build cache is shared.
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath"

bin="${root}/bin/bench"
mkdir -p "${bin}"
if [[ "${build}" == 1 || ! -x "${bin}/bench.test" ]]; then
  echo "building the scheduler_perf test binary (a cold build takes about 10 minutes)..." >&2
  go test -tags bench -c -o "${bin}/bench.test" ./test/bench
  go build -o "${bin}/benchtable" ./test/bench/cmd/benchtable
fi

# etcd from the go.mod pins (built by `make envtest` if missing).
if ! command -v etcd >/dev/null; then
  assets="$(hack/envtest-assets.sh | tail -n 1)"
  export PATH="${root}/${assets}:${PATH}"
fi

# etcd data and scheduler_perf's temporary files on tmpfs when possible (and big enough: containers
# often get a 64 MB /dev/shm).
shm_free_kb="$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')"
if [[ -d /dev/shm && -w /dev/shm && "${shm_free_kb:-0}" -ge 1048576 ]]; then
  tmp="$(mktemp -d /dev/shm/custom-scheduler-bench.XXXXXX)"
else
  tmp="$(mktemp -d)"
fi
trap 'rm -rf "${tmp}"' EXIT
export TMPDIR="${tmp}"
# The test binary is built with -trimpath; the in-process test apiserver finds its serving
# certificates through these (the variables it reads under bazel).
TEST_SRCDIR="$(go env GOMODCACHE)"
export TEST_SRCDIR TEST_WORKSPACE=.

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "size: ${size} (label ${label}), repetitions: ${reps}"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty tree)')"
  echo "go: $(go version)"
  echo "cpu: $(nproc) x $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)"
  echo "memory: $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
  echo "etcd data: ${TMPDIR}"
} >"${out}/conditions.txt"

# children_cpu sets cpu_now to the CPU seconds (user + system) of the processes this shell has waited
# for: the benchmark processes, with the etcd each started and reaped. (`times` runs in this shell:
# in a subshell it would see only the subshell's children.)
children_cpu() {
  times >"${tmp}/times"
  cpu_now="$(awk 'NR == 2 {
    total = 0
    for (i = 1; i <= 2; i++) { split($i, t, "m"); sub("s", "", t[2]); total += t[1] * 60 + t[2] }
    printf "%.2f\n", total
  }' "${tmp}/times")"
}

status=0
for rep in $(seq 1 "${reps}"); do
  for tc in ${cases}; do
    dir="${out}/rep${rep}/${tc}"
    mkdir -p "${dir}"
    load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
    start=$(date +%s)
    children_cpu
    cpu_before="${cpu_now}"
    echo "rep ${rep}/${reps}: ${tc} (${label}), load ${load_before}" >&2
    rc=0
    # A case may name one workload of its test case (Ceiling/5000Nodes_5000Pods): each process's CPU
    # is one workload's.
    tc_name="${tc%%/*}"
    pattern="^BenchmarkPerfScheduling\$/^${tc_name}\$/"
    if [[ "${tc}" == */* ]]; then
      pattern="${pattern}^${tc#*/}\$"
    fi
    (cd test/bench && "${bin}/bench.test" -test.run '^$' -test.bench "${pattern}" \
      -test.benchtime 1x -test.timeout "${timeout}" -perf-scheduling-label-filter="${label}" \
      -data-items-dir "${dir}") >"${dir}/log.txt" 2>&1 || rc=$?
    secs=$(( $(date +%s) - start ))
    children_cpu
    cpu="$(awk -v a="${cpu_before}" -v b="${cpu_now}" 'BEGIN { printf "%.2f", b - a }')"
    workload="$(grep -oE "BenchmarkPerfScheduling/${tc_name}/[A-Za-z0-9_]+" "${dir}/log.txt" | head -n 1 | cut -d/ -f3 || true)"
    printf '%s/%s\t%s\t%s\t%s\n' "${tc_name}" "${workload:-unknown}" "${rc}" "${secs}" "${cpu}" >>"${dir}/status.tsv"
    echo "rep ${rep} ${tc_name}/${workload:-?}: exit ${rc}, ${secs}s, ${cpu} CPU-s, load before ${load_before}, after $(cut -d' ' -f1-3 /proc/loadavg)" >>"${out}/conditions.txt"
    if [[ "${rc}" != 0 ]]; then
      status=1
      echo "FAILED: ${tc} (rep ${rep}); last lines of ${dir}/log.txt:" >&2
      grep -E -- '--- FAIL|FATAL|Error|error running' "${dir}/log.txt" | grep -v '^[IW][0-9]' | tail -n 15 >&2 || true
    elif [[ "${keep_logs}" == 0 ]]; then
      gzip -f "${dir}/log.txt"
    fi
  done
done

if [[ "${micro}" == 1 ]]; then
  echo "running the plugins' Go micro-benchmarks..." >&2
  go test -run '^$' -bench . -benchmem -count 3 ./pkg/loadaware ./pkg/coscheduling >"${out}/micro.txt" 2>&1 || status=1
fi

{
  echo "## scheduler_perf (${size}, ${reps} repetition(s))"
  echo
  "${bin}/benchtable" "${out}"
  echo
  echo "Conditions:"
  echo
  echo '```'
  cat "${out}/conditions.txt"
  echo '```'
  if [[ -f "${out}/micro.txt" ]]; then
    echo
    echo "## Go micro-benchmarks"
    echo
    echo '```'
    grep -E '^(Benchmark|goos|goarch|pkg|cpu|ok|FAIL|---)' "${out}/micro.txt" || true
    echo '```'
  fi
} | tee "${out}/report.md"
echo "report: ${out}/report.md" >&2
exit "${status}"
