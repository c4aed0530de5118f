# Sourced by Scripts/install and Scripts/symbol-order, which build dirwatch as it is installed:
# sets the array `link` to the linker options of that build, given its scratch path ($1), and
# `lld` to 1 when they link with the toolchain's lld (else 0).
#
# - Relative relocations packed (DT_RELR, written by the toolchain's lld): the 600 KB of them the
#   binary's start reads become a few, and it runs 0.8 MB smaller (Docs/benchmarks.md). Only where
#   the C library reads them (glibc 2.36 and later); elsewhere linked as before.
# - libstdc++ linked in, where its archive is installed (the toolchain's own dependency): the
#   runtime uses a little of it, and the shared library's relocations and symbol tables kept
#   0.7 MB of it resident in every dirwatch. The runtime's link options name `-lstdc++`
#   themselves, so a linker script of that name, found first, stands for the archive.
static_link_options() {
    local scratch=$1 toolchain glibc archive
    link=()
    lld=0
    toolchain=$(dirname "$(readlink -f "$(command -v swift)")")
    glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
    if [ -n "$glibc" ] && printf '%s\n' 2.36 "$glibc" | sort -V -C && [ -x "$toolchain/ld.lld" ]; then
        link=(-Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs)
        lld=1
    fi
    archive=$("$toolchain/clang" -print-file-name=libstdc++.a 2>/dev/null || true)
    if [ "${archive#/}" != "$archive" ] && [ -f "$archive" ]; then
        mkdir -p "$scratch/libstdc++"
        echo "INPUT($archive)" >"$scratch/libstdc++/libstdc++.so"
        link+=(-Xlinker "-L$(cd "$scratch/libstdc++" && pwd)")
    fi
}
