#!/usr/bin/env bash
# Builds the control-plane binaries the tests need (kube-apiserver and etcd for envtest,
# kube-controller-manager for the Job/ReplicaSet controllers) and, with --all, the playground tools
# (kubectl, kwok) from this module's go.mod pins, into bin/k8s/<version>-<os>-<arch>/.
# Nothing is downloaded as a binary. A binary already built for these pins is not rebuilt.
# Prints the assets folder (usable as KUBEBUILDER_ASSETS) on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

kube_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
dir="bin/k8s/${kube_version#v}-$(go env GOOS)-$(go env GOARCH)"
mkdir -p "${dir}"

# Stamp kube binaries with the Kubernetes version they are built from: component-base derives the
# emulation version from it.
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${kube_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"${kube_version}")"
etcd_ldflags="-s -w"

build() { # name package ldflags
  local name="$1" pkg="$2" ldflags="$3"
  local stamp="${dir}/.${name}.pin"
  local want="${pkg} ${ldflags}"
  if [[ -x "${dir}/${name}" && -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]]; then
    return
  fi
  echo "building ${name} from ${pkg} (a cold build takes several minutes)..." >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${dir}/${name}.tmp" "${pkg}"
  mv "${dir}/${name}.tmp" "${dir}/${name}"
  echo "${want}" >"${stamp}"
}

build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${kube_ldflags}"
build etcd go.etcd.io/etcd/server/v3 "${etcd_ldflags}"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "${kube_ldflags}"
if [[ "${1:-}" == "--all" ]]; then
  build kubectl k8s.io/kubernetes/cmd/kubectl "${kube_ldflags}"
  build kwok sigs.k8s.io/kwok/cmd/kwok "-s -w"
fi
echo "${dir}"
