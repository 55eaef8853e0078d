#!/usr/bin/env bash
# Pins k8s.io/kubernetes and every k8s.io staging module it replaces to the matching published version.
# The list of staging modules is read from kubernetes' own go.mod, so a version bump is one command:
#   hack/update-replace.sh v1.37.3
set -euo pipefail
cd "$(dirname "$0")/.."

KUBE_VERSION="${1:-$(go list -m -f '{{.Version}}' k8s.io/kubernetes 2>/dev/null || true)}"
if [[ ! "${KUBE_VERSION}" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "usage: $0 v1.MINOR.PATCH (got '${KUBE_VERSION}')" >&2
  exit 2
fi
STAGING_VERSION="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

gomod="$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')"
[[ -f "${gomod}" ]] || { echo "could not download k8s.io/kubernetes@${KUBE_VERSION}" >&2; exit 1; }

# Lines like "k8s.io/api => ./staging/src/k8s.io/api" inside kubernetes' replace block.
mapfile -t staging < <(awk '/^replace \(/{inblk=1; next} inblk && /^\)/{inblk=0} inblk && $2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "${gomod}")
[[ ${#staging[@]} -gt 0 ]] || { echo "no staging modules found in ${gomod}" >&2; exit 1; }

replaces=()
for m in "${staging[@]}"; do
  replaces+=("-replace=${m}=${m}@${STAGING_VERSION}")
done
go mod edit "-require=k8s.io/kubernetes@${KUBE_VERSION}" "${replaces[@]}"
# The chart tests' module (test/chart) builds against the same k8s.io pins.
(cd test/chart && go mod edit "${replaces[@]}")
# So do the operator interoperability tests (test/interop; not the operators' own pins under tools/).
(cd test/interop && go mod edit "${replaces[@]}")
echo "pinned k8s.io/kubernetes ${KUBE_VERSION} and ${#staging[@]} staging modules to ${STAGING_VERSION}"
