#!/bin/sh
# Functions at kernel size (docs/architecture.md, "Functions at kernel size"):
# every function defined in ref/ (.c and .h) is at most 60 lines long, counted
# from the first line of its definition to its closing brace, both included.
# A function that must be longer is named, with the reason, in
# scripts/function-size-allowlist.txt, one per line:
#
#   ref/dir/file.c function_name  the reason it is longer
#
# (blank lines and lines starting with # are comments).  An entry without a
# reason, or naming a function that is not over the limit (split since, or
# gone), is itself an error, so the list stays true.
#
# The definitions are found by the layout every file of ref/ has: the
# signature starts at column 0 and its last line ends with ')', the body
# opens with "{" alone at column 0 and closes with "}" alone at column 0.
#
# usage: check-function-size.sh [ROOT]   (ROOT: the tree holding ref/, default .)
# Prints one line per violation, "file:line: ...", and exits 1 if there is
# any; exits 0 (silent) when every function is within the limit, 2 on a usage
# error.
set -u
root=${1:-.}
[ -d "$root/ref" ] || { echo "check-function-size: no ref/ under '$root'" >&2; exit 2; }
cd "$root" || exit 2
allow=scripts/function-size-allowlist.txt
[ -f "$allow" ] || allow=/dev/null

# one awk over every file: the allowlist is checked once, at the end
awk -v limit=60 -v allow="$allow" '
BEGIN {
    while ((getline l < allow) > 0) {
        n_line++
        if (l ~ /^[[:space:]]*(#|$)/) continue
        k = split(l, w, /[[:space:]]+/)
        key = w[1] " " w[2]
        if (k < 3) { print allow ":" n_line ": " key ": no reason given"; bad++ }
        allowed[key] = allow ":" n_line
    }
}
FNR == 1 { start = 0; in_body = 0; prev = "" }
{
    if (in_body) {
        if ($0 == "}") {
            in_body = 0
            n = FNR - start + 1
            key = FILENAME " " name
            if (key in allowed) {
                if (n > limit) used[key] = 1
            } else if (n > limit) {
                print FILENAME ":" start ": " name " is " n " lines, over the limit of " limit \
                      " (split it, or give the reason in scripts/function-size-allowlist.txt)"
                bad++
            }
        }
        next
    }
    if ($0 == "{" && start > 0 && prev ~ /\)[[:space:]]*$/) {
        in_body = 1
        next
    }
    if ($0 ~ /^[A-Za-z_]/ && $0 ~ /\(/ && $0 !~ /;[[:space:]]*$/) {
        start = FNR
        name = $0
        sub(/\(.*/, "", name)
        sub(/.*[[:space:]*]/, "", name)
    } else if ($0 !~ /^[[:space:]]/ || $0 ~ /^[[:space:]]*$/) {
        start = 0
    }
    if ($0 !~ /^[[:space:]]*$/) prev = $0
}
END {
    for (key in allowed)
        if (!(key in used)) {
            print allowed[key] ": " key " is listed but not over " limit " lines: remove the entry"
            bad++
        }
    if (bad) {
        print "check-function-size: " bad " violation(s) of the limit of " limit " lines (docs/architecture.md)"
        exit 1
    }
}' $(find ref -name '*.[ch]' | LC_ALL=C sort)
