#!/usr/bin/env bash
# Regenerates deepcopy functions (pkg/apis/...) and the CRD YAML (manifests/crds, copied into the Helm
# chart's crds/) with controller-gen,
# built from hack/tools/go.mod into bin/.
set -euo pipefail
cd "$(dirname "$0")/.."

bin="$(pwd)/bin/controller-gen"
version="$(cd hack/tools && go list -m -f '{{.Version}}' sigs.k8s.io/controller-tools)"
if [[ ! -x "${bin}" || "$(cat "${bin}.version" 2>/dev/null)" != "${version}" ]]; then
  (cd hack/tools && go build -o "${bin}" sigs.k8s.io/controller-tools/cmd/controller-gen)
  echo "${version}" >"${bin}.version"
fi

"${bin}" object:headerFile=hack/boilerplate.go.txt paths=./pkg/apis/...
if compgen -G "pkg/apis/scheduling/*/" >/dev/null; then
  "${bin}" crd paths=./pkg/apis/scheduling/... output:crd:artifacts:config=manifests/crds
fi
# The Helm chart ships the same CRDs, byte for byte.
rm -f manifests/helm/custom-scheduler/crds/*.yaml
cp manifests/crds/*_*.yaml manifests/helm/custom-scheduler/crds/
