#!/usr/bin/env bash
# Fails when generated files are stale: deepcopy code, CRD YAML (also the Helm chart's copy), the PodGroup
# clientset, listers and informers (pkg/generated), the k8s.io
# replace block, the main module tidy, or the test modules (test/chart, test/interop: tidy, and the same k8s.io pins as the main
# module; test/interop/tools/*: the operator pins, tidy).
set -euo pipefail
cd "$(dirname "$0")/.."

hack/update-codegen.sh
go run ./hack/aliasconfig/gen
hack/update-replace.sh "$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" >/dev/null
if ! git diff --quiet -- pkg/apis pkg/generated manifests/crds manifests/helm/custom-scheduler/crds manifests/components go.mod test/chart/go.mod test/interop/go.mod; then
  git diff --stat -- pkg/apis pkg/generated manifests/crds manifests/helm/custom-scheduler/crds manifests/components go.mod test/chart/go.mod test/interop/go.mod
  echo "generated files are out of date: run 'make generate' (and hack/update-replace.sh) and commit the result" >&2
  exit 1
fi
if [[ -n "$(git status --porcelain -- manifests/helm/custom-scheduler/crds pkg/generated)" ]]; then
  git status --short -- manifests/helm/custom-scheduler/crds pkg/generated
  echo "the chart's crds/ or pkg/generated is out of date: run 'make generate' and commit the result" >&2
  exit 1
fi
if ! diff <(grep '^replace k8s.io/' go.mod) <(grep '^replace k8s.io/' test/chart/go.mod); then
  echo "test/chart/go.mod pins k8s.io modules differently from go.mod: copy go.mod's replace lines" >&2
  exit 1
fi
if ! go mod tidy -diff; then
  echo "go.mod is not tidy: run 'go mod tidy'" >&2
  exit 1
fi
if ! (cd test/chart && go mod tidy -diff); then
  echo "test/chart/go.mod is not tidy: run 'cd test/chart && go mod tidy'" >&2
  exit 1
fi
if ! diff <(grep '^replace k8s.io/' go.mod) <(grep '^replace k8s.io/' test/interop/go.mod); then
  echo "test/interop/go.mod pins k8s.io modules differently from go.mod: copy go.mod's replace lines" >&2
  exit 1
fi
for dir in test/interop test/interop/tools/*/; do
  if ! (cd "${dir}" && go mod tidy -diff); then
    echo "${dir%/}/go.mod is not tidy: run 'cd ${dir%/} && go mod tidy'" >&2
    exit 1
  fi
done
echo "generated files are up to date"
