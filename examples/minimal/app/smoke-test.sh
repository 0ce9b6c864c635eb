#!/bin/sh
# The gate of the prod tag: the app answers on port 8080 with its page
# (directly, not through a proxy the sandbox may set for outbound traffic).
python3 - <<'PY'
import sys, urllib.request
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
page = direct.open("http://127.0.0.1:8080/", timeout=10).read().decode()
if "Hello from my-app" not in page:
    sys.exit("smoke test failed: the page lacks its greeting")
print("smoke test passed")
PY
