#!/usr/bin/env bash
# Builds Debian's own Abseil, the version installed, with ThreadSanitizer, for the tsan suite
# of scripts/test-hardened.sh:
#   scripts/tsan-abseil.sh DIR    -> DIR/lib holds libabsl_*.so.20220623, instrumented
# Why: absl::Mutex and absl::CondVar tell ThreadSanitizer what they synchronize only when
# Abseil itself is compiled with -fsanitize=thread; against Debian's uninstrumented build
# every handoff through an absl::Mutex is reported as a race (normd, gRPC and protobuf all
# lock with it). Same source, same Debian patches (ABI options, SONAME), so putting DIR/lib
# on LD_LIBRARY_PATH swaps it in under gRPC and protobuf too. The source package comes from
# Debian's archive (deb-src, through a private apt list: the system's sources are left as
# they are). About 2 minutes on 2 cores; skipped when DIR/lib is already there.
set -euo pipefail
dir=${1:?usage: tsan-abseil.sh DIR}
[[ -f $dir/lib/libabsl_synchronization.so.20220623 ]] && exit 0
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
version=$(dpkg-query -W -f='${source:Version}' libabsl20220623)

apt_dir=$dir/apt
mkdir -p "$apt_dir/lists/partial"
cat >"$apt_dir/sources.list" <<'EOF'
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian bookworm-updates main
deb-src http://deb.debian.org/debian-security bookworm-security main
EOF
apt_opts=(-q -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt_dir/lists" -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update >/dev/null
rm -rf "$dir/src" "$dir/build"
(cd "$dir" && apt-get "${apt_opts[@]}" source --download-only "abseil=$version" >/dev/null)
# dpkg-source applies Debian's patches (debian/patches/series).
(cd "$dir" && dpkg-source -x --no-check abseil_*.dsc src >/dev/null)

export CC=${CC:-clang-14} CXX=${CXX:-clang++-14}
# Debian's own configuration (debian/rules): C++17, shared libraries.
cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_STANDARD=17 \
  -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF -DCMAKE_INSTALL_PREFIX="$dir" \
  -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_C_FLAGS=-fsanitize=thread \
  -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread >/dev/null
cmake --build "$dir/build" -j "$(nproc)" >"$dir/build.log" 2>&1 ||
  { tail -40 "$dir/build.log"; exit 1; }
cmake --install "$dir/build" >/dev/null
echo "tsan-abseil: Abseil $version with ThreadSanitizer in $dir/lib"
