#!/usr/bin/env bash
# The container image, built and run for real with Debian's podman (no Docker engine or
# registry is reachable here):
#   1. a debian:12 base made locally (debootstrap minbase, imported and tagged 12-slim too);
#   2. `podman build --format docker` (OCI image configs drop HEALTHCHECK) of the
#      Dockerfile (vfs storage, chroot isolation, host network, no pulls) in a scratch
#      storage root;
#   3. the image's root filesystem mounted, and normd started from it as the image's user
#      (chroot --userspec; `podman run` cannot set resource limits on this machine);
#   4. a health check, a normctl call, and the image's own HEALTHCHECK command, all run
#      from the image against it.
# Everything it makes (about 4 GB of vfs layers) is removed at the end.
#   tests/container/image_test.sh REPO_DIR
set -euo pipefail
repo=$(cd "$1" && pwd)
work=$(mktemp -d /var/tmp/normd-image.XXXXXX)
podman=(podman --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
mnt=""
server=""
cleanup() {
  local rc=$?
  # A failure after normd started shows what normd said.
  if [[ $rc != 0 && -s $work/normd.log ]]; then
    echo "image_test: failed (exit $rc); normd's log:"
    tail -40 "$work/normd.log"
    if [[ -n $server ]] && ! kill -0 "$server" 2>/dev/null; then
      wait "$server" && echo "image_test: normd had exited 0" ||
        echo "image_test: normd had exited $?"
      server=""
    fi
  fi
  [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  if [[ -n $mnt ]]; then
    umount "$mnt/proc" "$mnt/dev" 2>/dev/null || true
    "${podman[@]}" image unmount normd:test >/dev/null 2>&1 || true
  fi
  "${podman[@]}" rmi -a -f >/dev/null 2>&1 || true
  rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT
step() { echo "image_test: $*"; }

mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
step "debian:12 base from $mirror (debootstrap --variant=minbase bookworm)"
debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -20 "$work/debootstrap.log"; exit 1; }
tar -C "$work/rootfs" -c . | "${podman[@]}" import - docker.io/library/debian:12 >/dev/null
"${podman[@]}" tag docker.io/library/debian:12 docker.io/library/debian:12-slim
rm -rf "$work/rootfs"

step "podman build (vfs, chroot isolation)"
start=$(date +%s)
"${podman[@]}" build --format docker --isolation chroot --network host --pull=never -t normd:test \
  -f "$repo/Dockerfile" "$repo" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
step "built in $(( $(date +%s) - start )) s"

config=$("${podman[@]}" image inspect normd:test --format '{{json .Config}}')
user=$(jq -r .User <<<"$config")
healthcheck=$("${podman[@]}" image inspect normd:test --format '{{json .HealthCheck}}' 2>/dev/null)
[[ $healthcheck != null && -n $healthcheck ]] || { echo "the image has no HEALTHCHECK"; exit 1; }
step "user $user; healthcheck $healthcheck"
[[ $user == 10001:10001 ]] || { echo "image user is '$user', expected 10001:10001"; exit 1; }
jq -e '.Labels["org.opencontainers.image.title"] == "normd"' <<<"$config" >/dev/null

mnt=$("${podman[@]}" image mount normd:test)
mount --bind /proc "$mnt/proc"
mount --bind /dev "$mnt/dev"
# Port 0: normd binds a free port itself and logs it, so no other process can take a port
# picked beforehand. chroot execs normd, so $server is normd's pid.
: >"$work/normd.log"
chroot --userspec="$user" "$mnt" /usr/local/bin/normd --listen 127.0.0.1:0 \
  --cpu-threads 1 >"$work/normd.log" 2>&1 &
server=$!
port=""
for _ in $(seq 600); do
  port=$(sed -n '/normd listening on/{s/.*(port \([0-9]*\)).*/\1/p;q}' "$work/normd.log")
  [[ -n $port ]] && break
  if ! kill -0 "$server" 2>/dev/null; then
    wait "$server" && code=0 || code=$?
    server=""
    echo "normd from the image exited $code before listening"
    exit 1
  fi
  sleep 0.1
done
[[ -n $port ]] || { echo "normd from the image did not listen within 60 s"; exit 1; }
step "normd from the image as $user on port $port"
in_image() { chroot --userspec="$user" "$mnt" "$@"; }
# Runs a command up to N times while it fails with UNAVAILABLE (a connection attempt that
# failed: CI once saw "UNAVAILABLE: ... ipv4:127.0.0.1:PORT: No such file or directory" from
# one probe after four calls had succeeded); each failure is shown, and any other failure,
# or the last, ends the test with normd's state.
unavailable_retried() {
  local n=$1 attempt out
  shift
  for attempt in $(seq "$n"); do
    out=$("$@" 2>&1) && { [[ -z $out ]] || echo "$out"; return 0; }
    echo "$out"
    if ! kill -0 "$server" 2>/dev/null; then
      echo "image_test: normd has exited"
      return 1
    fi
    grep -q UNAVAILABLE <<<"$out" && ((attempt < n)) || return 1
    step "attempt $attempt of $n failed UNAVAILABLE; normd is running; again in 1 s"
    sleep 1
  done
}
for _ in $(seq 50); do
  in_image /usr/local/bin/normctl --target "127.0.0.1:$port" --timeout-ms 500 health >/dev/null 2>&1 && break
  sleep 0.2
done
unavailable_retried 3 in_image /usr/local/bin/normctl --target "127.0.0.1:$port" health
info=$(unavailable_retried 3 in_image /usr/local/bin/normctl --target "127.0.0.1:$port" info)
grep -q 'ops: "rms_norm"' <<<"$info" || { echo "$info"; exit 1; }
# A real op through the image's normctl: the spec's RMSNorm example.
python3 - "$mnt/tmp/x.npy" <<'PY'
import struct, sys
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }"
header += " " * (63 - len(header)) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<4f", 3, -1, 4, -2))
PY
chmod a+rw "$mnt/tmp/x.npy"
unavailable_retried 3 in_image /usr/local/bin/normctl --target "127.0.0.1:$port" rms-norm \
  --input /tmp/x.npy --eps 0 --output /tmp/y.npy
python3 - "$mnt/tmp/y.npy" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
y = struct.unpack("<4f", data[-16:])
want = (1.0954451, -0.3651484, 1.4605935, -0.7302967)
assert all(abs(a - b) < 1e-6 for a, b in zip(y, want)), y
print("image_test: rms-norm from the image:", y)
PY
# The image's own HEALTHCHECK command, as the container runtime would run it. Its target
# is the image's default port: rewritten to this test's port.
mapfile -t hc < <(jq -r '.Test[1:][]' <<<"$healthcheck")
[[ ${hc[0]} == /usr/local/bin/normctl ]] || { echo "unexpected HEALTHCHECK ${hc[*]}"; exit 1; }
hc=("${hc[@]/127.0.0.1:50051/127.0.0.1:$port}")
# The runtime marks a container unhealthy after Retries probes fail in a row, not one: the
# probe is run the same way here (a second apart, each failure shown).
retries=$(jq -r '.Retries // 1' <<<"$healthcheck")
unavailable_retried "$retries" in_image "${hc[@]}"
step "HEALTHCHECK passed: ${hc[*]}"
kill "$server"
wait "$server" && code=0 || code=$?
server=""
[[ $code == 0 ]] || { cat "$work/normd.log"; echo "normd exited $code on SIGTERM"; exit 1; }
step "passed"
