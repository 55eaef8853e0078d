#!/usr/bin/env bash
# Regenerates deepcopy functions (pkg/apis/...) and the CRD YAML (manifests/crds, copied into the Helm
# chart's crds/) with controller-gen, and the PodGroup clientset, listers and informers (pkg/generated)
# with k8s.io/code-generator, all built from hack/tools/go.mod into bin/.
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

# The PodGroup clientset, listers and informers (pkg/generated), with k8s.io/code-generator's
# generators, built from hack/tools/go.mod like controller-gen.
module=github.com/custom-scheduler/custom-scheduler
gen="${module}/pkg/generated"
for tool in client-gen lister-gen informer-gen; do
  (cd hack/tools && go build -o "$(pwd)/../../bin/${tool}" "k8s.io/code-generator/cmd/${tool}")
done
rm -rf pkg/generated
bin/client-gen --go-header-file hack/boilerplate.go.txt --clientset-name versioned \
  --input-base "${module}/pkg/apis" --input scheduling/v1alpha1 \
  --output-dir pkg/generated/clientset --output-pkg "${gen}/clientset"
bin/lister-gen --go-header-file hack/boilerplate.go.txt \
  --output-dir pkg/generated/listers --output-pkg "${gen}/listers" \
  "${module}/pkg/apis/scheduling/v1alpha1"
bin/informer-gen --go-header-file hack/boilerplate.go.txt \
  --versioned-clientset-package "${gen}/clientset/versioned" --listers-package "${gen}/listers" \
  --output-dir pkg/generated/informers --output-pkg "${gen}/informers" \
  "${module}/pkg/apis/scheduling/v1alpha1"
