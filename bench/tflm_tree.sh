#!/usr/bin/env bash
# Prepare a TFLM tree for bench part 25 (`bench/tflm.py`) without the network:
# tflite-micro at the commit issue 43 measured, with the downloads its Makefile
# pins placed where the Makefile looks, so that `make ... microlite` downloads
# nothing. Every source comes from a git repository (a mirror or a clone) the
# caller names; nothing of it is copied into this repository.
#
#   bench/tflm_tree.sh DEST MIRRORS
#
# MIRRORS holds one git directory per project, named as `fetch` names them:
#   tensorflow+tflite-micro ARM-software+CMSIS-NN ARM-software+CMSIS_6
#   ARM-software+Cortex_DFP google+flatbuffers google+gemmlowp google+ruy
#   mborgerding+kissfft   (each MIRRORS/NAME/repo or MIRRORS/NAME, bare or not)
# Then: MLF_BENCH_TFLM=DEST/tflite-micro python bench/run.py --only tflm
set -euo pipefail

TFLM_COMMIT=${TFLM_COMMIT:-90b983c2b}
if [[ $# -ne 2 ]]; then
  echo "usage: bench/tflm_tree.sh DEST MIRRORS" >&2
  exit 2
fi
dest=$1 mirrors=$2

gitdir() {
  local d
  for d in "$mirrors/$1/repo" "$mirrors/$1" "$mirrors/$1/.git"; do
    if git --git-dir="$d" rev-parse --git-dir >/dev/null 2>&1; then
      echo "$d"
      return
    fi
  done
  echo "tflm_tree: no git repository for $1 under $mirrors" >&2
  exit 2
}

# extract NAME REV DIR: the tree of NAME at REV into DIR (replaced).
extract() {
  local g
  g=$(gitdir "$1")
  rm -rf "$3"
  mkdir -p "$3"
  git --git-dir="$g" archive --format=tar "$2" | tar -x -C "$3"
}

tree=$dest/tflite-micro
extract tensorflow+tflite-micro "$TFLM_COMMIT" "$tree"
make_dir=$tree/tensorflow/lite/micro/tools/make
dl=$make_dir/downloads
mkdir -p "$dl"

# The revisions the Makefile pins (third_party_downloads.inc, ext_libs/*_download.sh,
# flatbuffers_download.sh) are read from the tree itself, so a different TFLM_COMMIT
# takes its own pins.
pin() { grep -ho -E "$1" "$make_dir/$2" | head -1 | grep -o -E '[0-9a-f]{40}'; }
gemmlowp=$(pin 'gemmlowp/archive/[0-9a-f]{40}' third_party_downloads.inc)
ruy=$(pin 'ruy/archive/[0-9a-f]{40}' third_party_downloads.inc)
kissfft=$(sed -n -E 's|.*kissfft/archive/refs/tags/(v[0-9.]*[0-9])\.zip.*|\1|p' "$make_dir/third_party_downloads.inc" | head -1)
flatbuffers=$(grep -o -E '^ *ZIP_PREFIX="v[0-9.]+"' "$make_dir/flatbuffers_download.sh" | grep -o -E 'v[0-9.]+')
cmsis_nn=$(grep -o -E 'ZIP_PREFIX_NN="[0-9a-f]{40}"' "$make_dir/ext_libs/cmsis_nn_download.sh" | grep -o -E '[0-9a-f]{40}')
mapfile -t cmsis < <(grep -o -E 'ZIP_PREFIX="[0-9a-f]{40}"' "$make_dir/ext_libs/cmsis_download.sh" | grep -o -E '[0-9a-f]{40}')

extract google+gemmlowp "$gemmlowp" "$dl/gemmlowp"
extract google+ruy "$ruy" "$dl/ruy"
extract google+flatbuffers "$flatbuffers" "$dl/flatbuffers"
find "$dl/flatbuffers" \( -name BUILD -o -name BUILD.bazel \) -delete
patch -s -p1 -d "$dl/flatbuffers" <"$make_dir/flatbuffers.patch"
extract mborgerding+kissfft "$kissfft" "$dl/kissfft"
patch -s -p1 -d "$dl/kissfft" <"$tree/third_party/kissfft/kissfft.patch"
extract ARM-software+CMSIS_6 "${cmsis[0]}" "$dl/cmsis"
extract ARM-software+Cortex_DFP "${cmsis[1]}" "$dl/cmsis/Cortex_DFP"
extract ARM-software+CMSIS-NN "$cmsis_nn" "$dl/cmsis_nn"
# Pigweed serves TFLM's own tests only; the library build just needs the folder.
mkdir -p "$dl/pigweed"

cat >"$dest/tflm_tree.txt" <<INFO
tflite-micro $TFLM_COMMIT
gemmlowp $gemmlowp
ruy $ruy
flatbuffers $flatbuffers
kissfft $kissfft
CMSIS_6 ${cmsis[0]}
Cortex_DFP ${cmsis[1]}
CMSIS-NN $cmsis_nn
INFO
echo "$tree"
