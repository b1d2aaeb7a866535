#!/usr/bin/env bash
# The Kubernetes manifests: the base and every overlay render with `kubectl kustomize`,
# every rendered object validates against the Kubernetes schemas (tests/k8s/validate.js,
# npm kubernetes-models), and yamllint passes on the repository's YAML.
#   tests/k8s/manifests_test.sh REPO_DIR
set -euo pipefail
repo=$(cd "$1" && pwd)
cd "$repo"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
node tests/k8s/validate.js --self-test
kubectl version --client 2>/dev/null | head -1 || true
for k in deploy/k8s/base deploy/k8s/overlays/*/; do
  name=$(basename "$k")
  kubectl kustomize "$k" >"$out/$name.yaml" 2>"$out/$name.err" ||
    { cat "$out/$name.err"; echo "manifests_test: $k does not render"; exit 1; }
  echo "manifests_test: $k renders $(grep -c '^kind:' "$out/$name.yaml") objects"
  node tests/k8s/validate.js "$out/$name.yaml"
done
yamllint -s deploy proto/buf.yaml .dockerfilelintrc .yamllint
echo "manifests_test: yamllint passed"
