#!/usr/bin/env bash
# Builds the upstream Kubernetes control plane that the tests run against, into .tools/bin:
# kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes), etcd
# (go.etcd.io/etcd/server/v3) and kwok (sigs.k8s.io/kwok, which plays the kubelet), and puts the
# Gateway API standard-channel CRDs (sigs.k8s.io/gateway-api) and the Inference Extension's v1
# InferencePool CRD (sigs.k8s.io/gateway-api-inference-extension) into .tools/share/gateway-api and
# kwok's stages (how nodes and pods move through their lifecycle) and its Logs CRD (pod logs) into
# .tools/share/kwok.
#
# Everything comes from the Go module proxy through the ordinary `go` command; the versions are
# those pinned by the wrapper modules in testbed/controlplane (dependency declarations only).
# It rebuilds only when a wrapper's go.mod/go.sum or this script change (a content stamp), or a
# binary is missing. The compile runs at low priority: it takes a long time on two cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.tools/bin"
share="$root/.tools/share"
wrapper="$root/testbed/controlplane"
stamp="$bin/.control-plane.stamp"
binaries=(kube-apiserver kube-controller-manager kube-scheduler etcd kwok)
GATEWAY_API_VERSION=v1.6.3
INFERENCE_EXTENSION_VERSION=v1.6.0
POOL_CRD=inference.networking.k8s.io_inferencepools.yaml

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly  # never rewrite the wrappers
nice_cmd=(nice -n "${CONTROL_PLANE_NICE:-15}")

if ! command -v go >/dev/null; then
  echo "control-plane: the go command is not installed; install Go 1.26 to build the control plane" >&2
  exit 1
fi

wanted=$(cat "$wrapper/go.mod" "$wrapper/go.sum" "$wrapper/kwok/go.mod" "$wrapper/kwok/go.sum" \
  "$0" | sha256sum | cut -d' ' -f1)
all_built=true
for name in "${binaries[@]}"; do
  [ -x "$bin/$name" ] || all_built=false
done
if $all_built && [ -f "$share/gateway-api/$POOL_CRD" ] && [ -f "$share/kwok/stages.yaml" ] && [ -f "$share/kwok/logs-crd.yaml" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
  exit 0
fi
mkdir -p "$bin" "$share"
started=$(date +%s)

module_version() { (cd "$1" && go list -m -f '{{.Version}}' "$2"); }

kube_version=$(module_version "$wrapper" k8s.io/kubernetes)
kube_minor=$(echo "$kube_version" | cut -d. -f2)
version_pkg=k8s.io/component-base/version
kube_ldflags="-s -w -X $version_pkg.gitVersion=$kube_version -X $version_pkg.gitMajor=1"
kube_ldflags+=" -X $version_pkg.gitMinor=$kube_minor -X $version_pkg.gitTreeState=clean"
kube_ldflags+=" -X $version_pkg.buildDate=1970-01-01T00:00:00Z"
for component in kube-apiserver kube-controller-manager kube-scheduler; do
  echo "control-plane: building $component $kube_version"
  (cd "$wrapper" && "${nice_cmd[@]}" go build -trimpath -ldflags "$kube_ldflags" \
    -o "$bin/$component" "k8s.io/kubernetes/cmd/$component")
done

echo "control-plane: building etcd $(module_version "$wrapper" go.etcd.io/etcd/server/v3)"
(cd "$wrapper" && "${nice_cmd[@]}" go build -trimpath -ldflags "-s -w" -o "$bin/etcd" \
  go.etcd.io/etcd/server/v3)

echo "control-plane: building kwok $(module_version "$wrapper/kwok" sigs.k8s.io/kwok)"
(cd "$wrapper/kwok" && "${nice_cmd[@]}" go build -trimpath -ldflags "-s -w" -o "$bin/kwok" \
  sigs.k8s.io/kwok/cmd/kwok)

# kwok's own stages, as its release configures them: nodes turn Ready and renew leases; pods
# are created, start, turn Ready, complete and are deleted.
echo "control-plane: kwok stages"
kwok_dir=$(cd "$wrapper/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
mkdir -p "$share/kwok"
for stage in "$kwok_dir"/kustomize/stage/{node/fast,node/heartbeat-with-lease,pod/general}/*.yaml; do
  [ "$(basename "$stage")" = kustomization.yaml ] && continue
  echo "---"
  cat "$stage"
done >"$share/kwok/stages.yaml"
# kwok's Logs kind: its kubelet server serves a pod's log from the file a Logs object names
cp "$kwok_dir/kustomize/crd/bases/kwok.x-k8s.io_logs.yaml" "$share/kwok/logs-crd.yaml"
chmod u+w "$share/kwok/logs-crd.yaml"

echo "control-plane: Gateway API $GATEWAY_API_VERSION standard-channel CRDs"
# outside any module: a download only (checked against the checksum database), no go.mod edit
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
gateway_dir=$(cd "$scratch" && go mod download -json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" |
  sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
rm -rf "$share/gateway-api"
mkdir -p "$share/gateway-api"
for crd in "$gateway_dir"/config/crd/standard/*.yaml; do
  if grep -q '^kind: CustomResourceDefinition' "$crd"; then
    cp "$crd" "$share/gateway-api/"
    chmod u+w "$share/gateway-api/$(basename "$crd")"
  fi
done

echo "control-plane: Gateway API Inference Extension $INFERENCE_EXTENSION_VERSION InferencePool CRD"
inference_dir=$(cd "$scratch" &&
  go mod download -json "sigs.k8s.io/gateway-api-inference-extension@$INFERENCE_EXTENSION_VERSION" |
  sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
cp "$inference_dir/config/crd/bases/$POOL_CRD" "$share/gateway-api/"
chmod u+w "$share/gateway-api/$POOL_CRD"

"$bin/kube-apiserver" --version
"$bin/etcd" --version | sed -n 1p  # sed reads it all: head would SIGPIPE etcd (pipefail)
echo "$wanted" >"$stamp"
echo "control-plane: built in $(($(date +%s) - started)) s"
