#!/usr/bin/env bash
# Jobs of three roles (8 + 16 + 2 members) under a gang CompositePodGroup, placed by custom-scheduler
# (the shipped profile) and by in-tree kube-scheduler 1.37.2's own CompositePodGroup cycle (the default
# profile, its alpha gates on), on the same objects against a real kube-apiserver that serves
# scheduling.k8s.io/v1alpha3 (envtest); see BenchmarkGangGroupsAgainstInTree in
# test/integration/bench_gang_groups_test.go. scheduler_perf v1.37.2 cannot run this case (its
# apiserver serves no v1alpha3), so it lives beside the integration tests.
#
#   hack/bench-gang-groups.sh                 # 1000 nodes, 100 jobs, 3 repetitions (about 5 minutes)
#   GANG_GROUPS_BENCH_REPS=5 hack/bench-gang-groups.sh
#   GANG_GROUPS_BENCH_NODES=50 GANG_GROUPS_BENCH_JOBS=5 GANG_GROUPS_BENCH_REPS=1 hack/bench-gang-groups.sh
#
# Needs KUBEBUILDER_ASSETS and the binary (make bench-gang-groups sets both). Run it alone on the
# machine: both schedulers share its two cores with the apiserver and etcd. The output lands in
# bin/bench/gang-groups-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
[[ -n "${KUBEBUILDER_ASSETS:-}" ]] || { echo "bench-gang-groups.sh: KUBEBUILDER_ASSETS is not set (make bench-gang-groups sets it)" >&2; exit 2; }
export CUSTOM_SCHEDULER_BINARY="${CUSTOM_SCHEDULER_BINARY:-${root}/bin/custom-scheduler}"
mkdir -p bin/bench
out="${root}/bin/bench/gang-groups-$(date -u +%Y%m%d-%H%M%S).txt"
go test -c -o bin/integration.test ./test/integration/
{ echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (dirty)'), $(date -u), load $(cut -d' ' -f1-3 /proc/loadavg)"
  env | grep '^GANG_GROUPS_BENCH_' || true; } | tee "${out}"
cd test/integration
"${root}/bin/integration.test" -test.run '^$' -test.bench '^BenchmarkGangGroupsAgainstInTree$' -test.benchtime 1x -test.v -test.timeout 90m 2>&1 |
  grep -v '^I[0-9]\{4\} ' | tee -a "${out}"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "${out}"
