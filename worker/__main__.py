"""`python -m worker [--shard K ...]`: the standalone ARQ worker (server profile); see worker/standalone.py."""

import sys

from worker.standalone import main

if __name__ == "__main__":
    sys.exit(main())
