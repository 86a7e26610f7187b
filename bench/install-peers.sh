# Sourced by the benchmarks that compare with PostgreSQL (bench/tpcc/run.sh,
# bench/crescando/run.sh): installs what a run needs beyond the repository, from Debian's
# packages: PostgreSQL 15 (in $PGBIN) for the comparison and matplotlib for the report's plots.
# SKIP_INSTALL=1 installs nothing. Needs `log` and `PGBIN` from the script that sources it.
if [[ -z "${SKIP_INSTALL:-}" ]]; then
    if [[ ! -x $PGBIN/postgres ]]; then
        log "installing postgresql (Debian 12: 15)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
    if ! python3 -c 'import matplotlib' 2>/dev/null; then
        log "installing matplotlib"
        # Debian's package serves /usr/bin/python3; a `python3` earlier on PATH (pyenv) needs pip.
        apt-get install -y -qq python3-matplotlib >/dev/null 2>&1 || true
        python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install -q matplotlib
    fi
fi
