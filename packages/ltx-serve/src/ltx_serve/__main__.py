import sys

from ltx_serve.server import main

if __name__ == "__main__":
    sys.exit(main())
