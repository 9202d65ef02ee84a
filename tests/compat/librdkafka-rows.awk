# Turns one librdkafka test-runner log (colours stripped) into result rows,
# "name<TAB>STATE<TAB>seconds<TAB>reason", one per test. Used by scripts/compat-librdkafka.
#
# Variables (-v): rc (the runner's exit status), elapsed (wall seconds of the process),
# timeout (the outer limit, for the message), catalog (name<TAB>kind<TAB>scenario file).
#
# The runner's SUMMARY table is used when it got to print it. A runner that aborted (a failed
# assertion in a test thread aborts the whole process) or was killed has none; then the
# progress lines ("Running test X", "Test X PASSED", "### Test "X" failed at FILE:LINE ###"
# followed by the reason) tell what happened. The <MAIN> row is the harness itself and is left
# out, and so are local tests, which -L filters.

BEGIN {
    FS = "\n"
    while ((getline line < catalog) > 0) {
        split(line, f, "\t")
        kind[f[1]] = f[2]
    }
}

function timed_out(reason) { return reason ~ /timed out \(timeout set to/ }

# "[0011_produce_batch          /  1.260s] ..." -> 1.260
function stamp(line) {
    sub(/^[^\/]*\/ */, "", line)
    sub(/s\].*/, "", line)
    return line + 0
}

/^\| *[0-9][0-9][0-9][0-9]_[^ |]* *\| *[A-Z_]+ *\| *[0-9.]+s *\|/ {
    split($0, c, "|")
    name = c[2]; gsub(/ /, "", name)
    st = c[3]; gsub(/ /, "", st)
    sec = c[4]; gsub(/[ s]/, "", sec)
    reason = $0
    sub(/^\|[^|]*\|[^|]*\|[^|]*\| */, "", reason)
    sub(/ *$/, "", reason)
    if (st == "FAILED" && timed_out(reason)) st = "TIMEOUT"
    # A silent skip (another scenario's test, or one not in TESTS) has no reason; the runner
    # still lists it when TESTS is a prefix of its name. Its row comes from the job that ran it.
    if (st == "SKIPPED" && reason == "") next
    if (reason == "Filtered due to negative test flags") {
        if (kind[name] == "local") next
        reason = "marked as a known issue in librdkafka's own suite (TEST_F_KNOWN_ISSUE): not run"
    }
    if (!(name in srow)) sorder[++ns] = name
    srow[name] = st "\t" sec "\t" reason
    next
}

/================= Running test [0-9]/ {
    name = $0; sub(/.*Running test /, "", name); sub(/ .*/, "", name)
    if (!(name in state)) { order[++n] = name; state[name] = "" }
    started[name] = stamp($0)
    next
}

/================= Test [0-9].* (PASSED|FAILED|SKIPPED) =/ {
    name = $0; sub(/.*================= Test /, "", name); sub(/ .*/, "", name)
    st = $0; sub(/ =+ *$/, "", st); sub(/.* /, "", st)
    state[name] = st
    secs[name] = sprintf("%.3f", stamp($0) - started[name])
    next
}

/^### Test "/ {
    name = $0; sub(/^### Test "/, "", name); sub(/[ "].*/, "", name)
    where = $0; sub(/.* failed at /, "", where); sub(/:[^:]*\(\) at .*/, "", where)
    reason = ""
    if ((getline reason) > 0) sub(/ *$/, "", reason)
    if (name == "<MAIN>") { mainfail = reason; next }
    if (!(name in fail)) fail[name] = where ": " reason
    next
}

END {
    if (ns > 0) {
        for (i = 1; i <= ns; i++) {
            name = sorder[i]
            split(srow[name], f, "\t")
            # The summary gives only the assertion; say where it failed too.
            if (f[1] != "PASSED" && f[1] != "SKIPPED" && (name in fail)) f[3] = fail[name]
            printf "%s\t%s\t%s\t%s\n", name, f[1], f[2], f[3]
        }
        exit
    }
    for (i = 1; i <= n; i++) {
        name = order[i]; st = state[name]; reason = ""
        if (name in fail) { reason = fail[name]; if (st == "") st = "FAILED" }
        if (st == "FAILED" && timed_out(reason)) st = "TIMEOUT"
        if (st == "" && (rc == 124 || rc == 137)) {
            st = "TIMEOUT"; reason = "killed by the outer timeout (" timeout " s)"
        }
        if (st == "") {
            st = "FAILED"; reason = "runner exited " rc (mainfail != "" ? ": " mainfail : "")
        }
        if (st == "PASSED" && mainfail != "") {
            st = "FAILED"; reason = "passed, then the harness failed: " mainfail
        }
        printf "%s\t%s\t%s\t%s\n", name, st, (name in secs) ? secs[name] : elapsed, reason
    }
}
