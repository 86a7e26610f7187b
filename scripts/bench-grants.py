# The grants-read benchmark of docs/bench/security.md: run against a `tessera dev` started
# with --pg-port 32801 --data-dir /tmp/sec2-bench (reads its admin-password file).
import sys, time, psycopg
pw=open('/tmp/sec2-bench/admin-password').read().split()[0]
def conn(user, password):
    return psycopg.connect(host='127.0.0.1', port=32801, user=user, password=password, dbname='tessera', autocommit=True)
a=conn('admin',pw)
for sql in ["CREATE ROLE guest LOGIN PASSWORD 'gpw'","CREATE TABLE b (id BIGINT PRIMARY KEY, v BIGINT)","INSERT INTO b VALUES (1, 1)","GRANT SELECT ON b TO guest"]:
    try: a.execute(sql)
    except Exception as e: print(sql, e)
g=conn('guest','gpw')
N=2000
for rnd in range(2):
    for name,c in [('admin (superuser, no grants read)',a),('guest (one grants read per statement)',g)]:
        lat=[]
        for i in range(N):
            t=time.perf_counter(); c.execute("SELECT v FROM b WHERE id = 1").fetchall(); lat.append(time.perf_counter()-t)
        lat.sort()
        print(f"round {rnd} {name}: mean {sum(lat)/N*1e6:.0f} us, p50 {lat[N//2]*1e6:.0f} us, p99 {lat[int(N*0.99)]*1e6:.0f} us")
