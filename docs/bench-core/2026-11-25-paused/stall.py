import subprocess, time, os, signal, sys
pid = int(sys.argv[1])
worst = 0; times = []
for i in range(30):
    if i == 8:
        os.kill(pid, signal.SIGSTOP)
    t = time.time()
    r = subprocess.run(["bin/nacre", "mkdir", f"/s{i}"], capture_output=True, text=True)
    d = time.time() - t
    times.append(d)
    if r.returncode != 0:
        print("fail", i, r.stderr.strip())
os.kill(pid, signal.SIGCONT)
print("per mkdir (s):", " ".join(f"{x:.2f}" for x in times))
print("max %.2f s, median %.2f s" % (max(times), sorted(times)[len(times)//2]))
