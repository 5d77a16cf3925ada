#!/bin/sh
# Makes DIR a data folder the programs read (OVSGPU_DATA=DIR): the
# repository's ClassBench files, linked, and the Snort community rules,
# unpacked (gpu_ids's loader and ovs-vswitchd read a plain rules file).
# "make" does the same in the build tree (data/automake.mk); the GPU
# machine's scripts, which build without autotools, use this.
#
#   unpack-data.sh DIR
set -e
SRC=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:?usage: unpack-data.sh DIR}
mkdir -p "$DIR/snort-community"
ln -sfn "$SRC/data/classbench" "$DIR/classbench"
gzip -dc "$SRC/data/snort-community/community.rules.gz" \
    > "$DIR/snort-community/community.rules.tmp"
mv "$DIR/snort-community/community.rules.tmp" \
    "$DIR/snort-community/community.rules"
