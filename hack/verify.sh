#!/usr/bin/env bash
# Fails when generated files are stale: deepcopy code, CRD YAML, or the k8s.io replace block.
set -euo pipefail
cd "$(dirname "$0")/.."

hack/update-codegen.sh
hack/update-replace.sh "$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" >/dev/null
if ! git diff --quiet -- pkg/apis manifests/crds go.mod; then
  git diff --stat -- pkg/apis manifests/crds go.mod
  echo "generated files are out of date: run 'make generate' (and hack/update-replace.sh) and commit the result" >&2
  exit 1
fi
echo "generated files are up to date"
