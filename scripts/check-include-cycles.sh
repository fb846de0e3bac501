#!/bin/sh
# No circles between the modules of ref/ (docs/architecture.md, "No circles").
#
# A module is a header and the source of the same name (ref/tool/emulate.h and
# ref/tool/emulate.c are the module ref/tool/emulate); module A uses module B
# when a file of A includes a file of B ("..." includes; the file's own header
# does not count).  The modules must form no circle, within a room or across
# rooms: then each can be read, tested and changed knowing only those below it.
# (Between rooms the rules of check-layering.sh already allow only one
# direction; this check also covers a circle that goes through headers.)
#
# usage: check-include-cycles.sh [ROOT]   (ROOT: the tree holding ref/, default .)
# Prints each circle as "ref/<room>: include circle: a -> b -> a" followed by
# the includes that close it ("  file:line includes target"), and exits 1 if
# there is any; exits 0 (silent) when there is none, 2 on a usage error.
set -u
root=${1:-.}
[ -d "$root/ref" ] || { echo "check-include-cycles: no ref/ under '$root'" >&2; exit 2; }
cd "$root" || exit 2

edges="${TMPDIR:-/tmp}/include-cycles.$$"
trap 'rm -f "$edges"' EXIT
: > "$edges"
# one line per include: "from-module to-module file:line target"
for f in $(find ref -name '*.[ch]' | LC_ALL=C sort); do
    dir=$(dirname "$f")
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
        sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/' |
        while read -r line target; do
            resolved=$(realpath -m --relative-to=. "$dir/$target")
            case $resolved in ref/*) ;; *) continue ;; esac
            echo "${f%.*} ${resolved%.*} $f:$line $target"
        done >> "$edges"
done

# Tarjan's strongly connected components over the module graph; each
# component of two or more modules holds a circle, printed as the shortest
# circle through its first module (in sorted order).
awk '
$1 != $2 {
    if (!(($1, $2) in seen)) {
        seen[$1, $2] = $3 " includes " $4
        adj[$1, ++deg[$1]] = $2
    }
    node[$1] = node[$2] = 1
}
function connect(v,    i, w) {
    index_of[v] = low[v] = ++counter
    stack[++top] = v; on_stack[v] = 1
    for (i = 1; i <= deg[v]; i++) {
        w = adj[v, i]
        if (!(w in index_of)) {
            connect(w)
            if (low[w] < low[v]) low[v] = low[w]
        } else if (on_stack[w] && index_of[w] < low[v]) {
            low[v] = index_of[w]
        }
    }
    if (low[v] == index_of[v]) {
        n_comp++; size = 0
        do { w = stack[top--]; on_stack[w] = 0; comp[w] = n_comp; size++ } while (w != v)
        comp_size[n_comp] = size
    }
}
# the shortest circle from s back to s inside its component, by breadth-first search
function circle(s,    head, tail, q, i, v, w, path, at, sep) {
    split("", prev); head = 1; tail = 0
    for (i = 1; i <= deg[s]; i++) {
        w = adj[s, i]
        if (comp[w] == comp[s] && !(w in prev)) { prev[w] = s; q[++tail] = w }
    }
    while (head <= tail && !(s in prev)) {
        v = q[head++]
        for (i = 1; i <= deg[v]; i++) {
            w = adj[v, i]
            if (comp[w] == comp[s] && !(w in prev)) { prev[w] = v; q[++tail] = w }
        }
    }
    path = s; at = s
    do { at = prev[at]; path = at " -> " path } while (at != s)
    return path
}
END {
    n = 0
    for (v in node) sorted[++n] = v
    for (i = 2; i <= n; i++) {  # insertion sort: awk has no portable sort
        v = sorted[i]
        for (j = i - 1; j >= 1 && sorted[j] > v; j--) sorted[j + 1] = sorted[j]
        sorted[j + 1] = v
    }
    for (i = 1; i <= n; i++) if (!(sorted[i] in index_of)) connect(sorted[i])
    found = 0
    for (i = 1; i <= n; i++) {
        v = sorted[i]; c = comp[v]
        if (comp_size[c] < 2 || (c in reported)) continue
        reported[c] = 1; found++
        p = circle(v)
        k = split(p, hop, " -> ")
        room = v; sub(/\/[^\/]*$/, "", room)
        shown = p; gsub(room "/", "", shown)
        print room ": include circle: " shown
        for (j = 1; j < k; j++) print "  " seen[hop[j], hop[j + 1]]
    }
    if (found) {
        print "check-include-cycles: " found " circle(s) between the modules of ref/ (docs/architecture.md, \"No circles\")"
        exit 1
    }
}' "$edges"
