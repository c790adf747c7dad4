#!/usr/bin/env bash
# The system programs the test suite uses, installed from Debian when they are missing.
#
#   scripts/system-packages.sh          check; as root, apt-get install what is missing
#   scripts/system-packages.sh --check  check only; exit 1 naming the install command
#
# Each line of NEEDED is "command package why". Run by `make test` before the tests, so that
# no test is skipped or errors because a program is missing on a machine that could install it.
# Not root and something missing: stop at once with the exact command to run.
set -euo pipefail
# nft and ip live in /usr/sbin, which a non-root PATH may lack
PATH="$PATH:/usr/sbin:/sbin"
NEEDED=(
  "chromium chromium the twin's report is opened in headless Chromium"
  "prometheus prometheus the forecasting sources query a real Prometheus server"
  "etcd etcd-server the real kube-apiserver (../shared/k8s) stores its objects in etcd"
  "openssl openssl ../shared/k8s/control-plane.sh makes the control plane's certificates"
  "curl curl ../shared/k8s/control-plane.sh waits for the control plane's health checks"
  "xz xz-utils ../shared/k8s holds the control plane's binaries xz-compressed"
  "nft nftables bosun federate bench drops and partitions packets between agents with nftables rules"
  "ip iproute2 bosun federate bench puts each agent in its own network namespace"
)
missing=(); why=()
for line in "${NEEDED[@]}"; do
  read -r cmd pkg reason <<<"$line"
  if ! command -v "$cmd" >/dev/null 2>&1; then missing+=("$pkg"); why+=("  $pkg ($cmd): $reason"); fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0
install="apt-get update && apt-get install -y ${missing[*]}"
if [ "${1:-}" = "--check" ] || [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "The tests need system packages that are not installed:" >&2
  printf '%s\n' "${why[@]}" >&2
  if command -v apt-get >/dev/null 2>&1; then
    echo "Install them (as root), then run make test again:" >&2
    echo "  sudo sh -c '$install'" >&2
  else
    echo "This is not a Debian-like system: install the programs named above with your package manager." >&2
  fi
  exit 1
fi
echo "Installing system packages for the tests: ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
for line in "${NEEDED[@]}"; do
  read -r cmd pkg reason <<<"$line"
  command -v "$cmd" >/dev/null 2>&1 || { echo "apt-get installed $pkg but '$cmd' is still not on the PATH" >&2; exit 1; }
done
