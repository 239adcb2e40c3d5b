#!/bin/sh
# A handler in POSIX shell with sed and wc only. The stdin document is one line of compact JSON;
# a real script would use jq, sed is enough for a string and an integer here.
set -eu
line=$(head -n 1)
doc=${line%%\"checkpoint\"*}   # the fields before the checkpoint (it may repeat their names)
saved=${line#*\"checkpoint\":}   # the checkpoint an earlier attempt left, or null
string_field() { printf '%s' "$doc" | sed -n "s/.*\"$1\":\"\(\([^\"\\\\]\|\\\\.\)*\)\".*/\1/p"; }
int_field() { printf '%s' "$doc" | sed -n "s/.*\"$1\":\(-\{0,1\}[0-9]\{1,\}\).*/\1/p"; }
text=$(string_field text)
fail_with=$(int_field fail_with)
attempt=$(int_field attempt)
case $saved in
    null*) previous=null ;;
    *) previous=$(printf '%s' "$saved" | sed -n 's/.*"attempt": *\([0-9]\{1,\}\).*/\1/p') ;;
esac
echo "PROGRESS:0.1 counting" >&2
words=$(printf '%s' "$text" | wc -w | tr -d ' ')
echo "CHECKPOINT:{\"words\": $words, \"attempt\": $attempt}" >&2
echo "PROGRESS:1 done" >&2
if [ "${fail_with:-0}" -ne 0 ]; then
    echo "failing on purpose with exit code $fail_with (previous attempt: ${previous:-null})" >&2
    exit "$fail_with"
fi
printf '{"words": %s, "attempt": %s, "previous_attempt": %s}\n' "$words" "$attempt" "${previous:-null}"
