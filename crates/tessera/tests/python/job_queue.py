"""A job queue over psycopg2: workers take jobs with SELECT … FOR UPDATE SKIP LOCKED.
(Named job_queue.py, not queue.py: this directory is first on sys.path when a script here
runs, and a queue.py would shadow the standard library module psycopg imports.)

Usage: job_queue.py HOST PORTS USER JOBS WORKERS

PORTS is one port or several, comma-separated: worker i connects to PORTS[i % n]. The table
`jobs (id BIGINT PRIMARY KEY, done BOOLEAN, worker INT)` is created with JOBS undone jobs,
spread over every partition. Each worker loops, in one transaction per job:

    BEGIN;
    SELECT id FROM jobs WHERE NOT done ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED;
    (hold the lock a little, as a job's work would)
    UPDATE jobs SET done = true, worker = <me> WHERE id = <id>;
    COMMIT;

until the query finds nothing. Checked, printing one line per finding and exiting 1 on any:
every job is done exactly once (no two workers were handed the same job while it was locked:
each worker records what it committed, and the lists must be disjoint and cover every job),
and the table agrees with what the workers committed. Also counted: `overlaps`, the times a
worker was handed a job another worker held at that moment (SKIP LOCKED's whole point: must
be 0), and `retries` (40001 / 55P03, retried).

The last line is `ok jobs=N workers=W busy_workers=B retries=R overlaps=0` when nothing was found.
"""

import sys
import threading
import time

import psycopg2
import psycopg2.errors

host, ports, user, jobs, workers = sys.argv[1:6]
ports = [int(port) for port in ports.split(",")]
jobs, workers = int(jobs), int(workers)

findings = []
lock = threading.Lock()
held = {}  # job id -> worker holding it now
committed = {}  # worker -> [job ids]
stats = {"retries": 0, "overlaps": 0}


def connect(index):
    connection = psycopg2.connect(
        host=host, port=ports[index % len(ports)], user=user, dbname="tessera"
    )
    return connection


setup = connect(0)
setup.autocommit = True
with setup.cursor() as cursor:
    cursor.execute("DROP TABLE IF EXISTS jobs")
    cursor.execute(
        "CREATE TABLE jobs (id BIGINT PRIMARY KEY, done BOOLEAN NOT NULL, worker INT)"
    )
    values = ", ".join(f"({i}, false, NULL)" for i in range(1, jobs + 1))
    cursor.execute(f"INSERT INTO jobs VALUES {values}")


def worker(me):
    connection = connect(me)
    mine = []
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT id FROM jobs WHERE NOT done ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
                )
                row = cursor.fetchone()
                if row is None:
                    connection.rollback()
                    break
                job = row[0]
                with lock:
                    if job in held:
                        stats["overlaps"] += 1
                        findings.append(
                            f"job {job} handed to worker {me} while worker {held[job]} held it"
                        )
                    held[job] = me
                time.sleep(0.005)
                cursor.execute(
                    "UPDATE jobs SET done = true, worker = %s WHERE id = %s", (me, job)
                )
                with lock:
                    del held[job]
                connection.commit()
                mine.append(job)
        except (
            psycopg2.errors.SerializationFailure,
            psycopg2.errors.LockNotAvailable,
        ):
            with lock:
                stats["retries"] += 1
                for job, holder in list(held.items()):
                    if holder == me:
                        del held[job]
            connection.rollback()
    else:
        findings.append(f"worker {me} did not finish within 120 s")
    with lock:
        committed[me] = mine
    connection.close()


threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()

seen = {}
for me, done in committed.items():
    for job in done:
        if job in seen:
            findings.append(f"job {job} committed by workers {seen[job]} and {me}")
        seen[job] = me
missing = set(range(1, jobs + 1)) - set(seen)
if missing:
    findings.append(f"jobs never done: {sorted(missing)[:20]}")
with setup.cursor() as cursor:
    cursor.execute("SELECT id, done, worker FROM jobs ORDER BY id")
    for job, done, by in cursor.fetchall():
        if not done or seen.get(job) != by:
            findings.append(
                f"job {job}: table says done={done} worker={by}, workers committed it by {seen.get(job)}"
            )
busy = sum(1 for done in committed.values() if done)
for finding in findings:
    print(finding)
if findings:
    sys.exit(1)
print(
    f"ok jobs={jobs} workers={workers} busy_workers={busy} retries={stats['retries']} overlaps={stats['overlaps']}"
)
