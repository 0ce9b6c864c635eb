#!/bin/sh
# The gate of the prod tag: the app answers on port 8080 with its page
# (directly, not through a proxy the sandbox may set for outbound traffic),
# within 30 seconds of the sandbox's start.
python3 - <<'PY'
import sys, time, urllib.request
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for attempt in range(30):
    try:
        page = direct.open("http://127.0.0.1:8080/", timeout=5).read().decode()
        break
    except OSError as err:
        last = err
        time.sleep(1)
else:
    sys.exit(f"smoke test failed: the app does not answer on port 8080: {last}")
if "Hello from my-app" not in page:
    sys.exit("smoke test failed: the page lacks its greeting")
print("smoke test passed")
PY
