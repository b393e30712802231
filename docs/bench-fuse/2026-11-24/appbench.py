import os, sys, time
p = sys.argv[1]; n = int(sys.argv[2])
fd = os.open(p, os.O_WRONLY|os.O_APPEND|os.O_CREAT, 0o644)
rec = b"x"*63 + b"\n"
t = time.time()
for i in range(n):
    os.write(fd, rec)
os.close(fd)
print("%.0f appends/s" % (n/(time.time()-t)))
